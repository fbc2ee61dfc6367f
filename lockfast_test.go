package simba_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// openCounter is a connection to a simbatest server that counts the session opens its client
// attempts, refused ones included (Backend.Calls counts only calls that reach the server).
type openCounter struct {
	*simbatest.Backend
	opens atomic.Int64
}

func (b *openCounter) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	b.opens.Add(1)
	return b.Backend.OpenSession(ctx, owner, ttl)
}

// TestLockAfterRefusedOpenFailsAtOnce: a Lock on a client whose session open was refused for
// good (refused credentials, a missing schema) returns the refusal at once, as TryLock does,
// before the client's next open: the backend saw exactly one OpenSession when Lock returned.
// It waited for the next open (BackoffMax/2 to BackoffMax later: up to 5 s at the default
// TTL; the simba lock CLI with a wrong password hung that long) and returned that one's
// refusal, with two opens made. Once the cause is fixed, the client's background retry opens
// the session and a Lock takes the lock.
func TestLockAfterRefusedOpenFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refusal error
		want    error
	}{
		{"access denied", fmt.Errorf("%w: password authentication failed for user \"simba\" (PostgreSQL at 127.0.0.1:5432)", spi.ErrAccessDenied), simba.ErrAccessDenied},
		{"schema missing", fmt.Errorf("%w: relation simba_session does not exist (apply 0001_init.sql)", spi.ErrSchemaMissing), simba.ErrSchemaMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			b := &openCounter{Backend: w.srv.Backend()}
			b.FailOp("OpenSession", tc.refusal)
			c := w.clientOn(b, "a")
			w.until(5*time.Second, "the open to be refused", func() bool { return c.Err() != nil })
			if n := b.opens.Load(); n != 1 {
				t.Fatalf("%d opens before the Lock, want 1", n)
			}
			ctx := context.Background()
			// Each call runs while the virtual clock stands still: the next open (BackoffMax/2
			// away at least) is not sent meanwhile. Should the call wait for it anyway, the
			// clock moves on after 5 s so that the test ends, and the opens it waited for
			// are counted.
			refused := func(what string, f func() error) {
				t.Helper()
				type result struct {
					err   error
					opens int64
				}
				done := make(chan result, 1)
				go func() {
					err := f()
					done <- result{err, b.opens.Load()}
				}()
				var r result
				select {
				case r = <-done:
				case <-time.After(5 * time.Second):
					w.until(30*time.Second, what+" to return", func() bool {
						select {
						case r = <-done:
							return true
						default:
							return false
						}
					})
				}
				if !errors.Is(r.err, tc.want) || !simba.IsPermanent(r.err) || errors.Is(r.err, simba.ErrUnavailable) {
					t.Errorf("%s = %v, want the refusal as itself (%v, permanent, not ErrUnavailable)", what, r.err, tc.want)
				}
				if r.opens != 1 {
					t.Errorf("%s returned after %d session opens, want 1: it waited for the next open to be refused", what, r.opens)
					b.opens.Store(1) // count the next call's opens afresh
				}
			}
			unlockIfHeld := func(h *simba.Held, err error) error {
				if err == nil {
					_ = h.Unlock(ctx)
				}
				return err
			}
			refused("Lock", func() error { return unlockIfHeld(c.Lock(ctx, "l")) })
			refused("WithLock", func() error {
				return c.WithLock(ctx, "w", func(context.Context, simba.Term) error { return nil })
			})
			refused("TryLock", func() error { return unlockIfHeld(c.TryLock(ctx, "t")) })

			// The cause is fixed: the next open, in the background, succeeds, and so does a
			// Lock.
			b.FailOp("OpenSession", nil)
			w.until(5*time.Second, "the session to open", func() bool { return c.Session() != "" })
			if err := c.Err(); err != nil {
				t.Errorf("client Err after the open = %v, want nil", err)
			}
			w.async(func() error {
				h, err := c.Lock(ctx, "l")
				if err != nil {
					return fmt.Errorf("Lock after the fix: %w", err)
				}
				if !h.IsValid() || h.Token() < 1 {
					return fmt.Errorf("Lock after the fix: term %v", h.Term)
				}
				return h.Unlock(ctx)
			})
			t.Logf("%d session opens in all", b.opens.Load())
		})
	}
}

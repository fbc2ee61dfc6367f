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

// acquireCounter is a connection to a simbatest server that counts the acquires its client
// sends, refused ones included (Backend.Calls counts only calls that reach the server).
type acquireCounter struct {
	*simbatest.Backend
	acquires atomic.Int64
}

func (b *acquireCounter) Acquire(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	b.acquires.Add(1)
	return b.Backend.Acquire(ctx, session, name)
}

func (b *acquireCounter) AcquireQueued(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	b.acquires.Add(1)
	return b.Backend.AcquireQueued(ctx, session, name)
}

// TestLockAfterRefusedKeepAliveFailsAtOnce: once the session's keep-alive was refused for good
// (the credentials revoked: the server refuses every call of the client) and the next
// keep-alive waits for its retry, a Lock, WithLock or TryLock returns the refusal at once, as
// itself, without sending an acquire: the backend saw 0 acquires. They each sent one (1
// acquire per call, refused the same way), as a Lock after a refused open no longer does.
// Once the cause is fixed, the client's background keep-alive renews the session, Err clears
// and a Lock takes the lock.
func TestLockAfterRefusedKeepAliveFailsAtOnce(t *testing.T) {
	w := newWorld(t)
	b := &acquireCounter{Backend: w.srv.Backend()}
	c := w.clientOn(b, "a")
	w.until(5*time.Second, "the session to open", func() bool { return c.Session() != "" })
	refusal := fmt.Errorf("%w: permission denied for user \"simba\" (PostgreSQL at 127.0.0.1:5432)", spi.ErrAccessDenied)
	b.FailOp("KeepAlive", refusal)
	b.FailOp("Acquire", refusal)
	b.FailOp("AcquireQueued", refusal)
	w.until(5*time.Second, "the keep-alive to be refused", func() bool { return c.Err() != nil })
	if c.Session() == "" {
		t.Fatal("the session was lost before the Lock: the test checks a live session")
	}
	ctx := context.Background()
	unlockIfHeld := func(h *simba.Held, err error) error {
		if err == nil {
			_ = h.Unlock(ctx)
		}
		return err
	}
	for _, tc := range []struct {
		what string
		f    func() error
	}{
		{"Lock", func() error { return unlockIfHeld(c.Lock(ctx, "l")) }},
		{"WithLock", func() error {
			return c.WithLock(ctx, "w", func(context.Context, simba.Term) error { return nil })
		}},
		{"TryLock", func() error { return unlockIfHeld(c.TryLock(ctx, "t")) }},
	} {
		b.acquires.Store(0)
		// The clock stands still: the keep-alive's retry is not sent meanwhile. Should the
		// call wait anyway, the clock moves on after 5 s so that the test ends.
		done := make(chan error, 1)
		go func() { done <- tc.f() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			w.until(30*time.Second, tc.what+" to return", func() bool {
				select {
				case err = <-done:
					return true
				default:
					return false
				}
			})
		}
		if !errors.Is(err, simba.ErrAccessDenied) || !simba.IsPermanent(err) || errors.Is(err, simba.ErrUnavailable) {
			t.Errorf("%s = %v, want the refusal as itself (ErrAccessDenied, permanent, not ErrUnavailable)", tc.what, err)
		}
		if n := b.acquires.Load(); n != 0 {
			t.Errorf("%s sent %d acquires after the keep-alive was refused for good, want 0", tc.what, n)
		}
	}

	// The credentials are restored: the background keep-alive (or, should the session have
	// lapsed meanwhile, the next open) succeeds, Err clears, and a Lock takes the lock.
	b.FailOp("KeepAlive", nil)
	b.FailOp("Acquire", nil)
	b.FailOp("AcquireQueued", nil)
	w.until(5*time.Second, "the refusal to clear", func() bool { return c.Err() == nil && c.Session() != "" })
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
}

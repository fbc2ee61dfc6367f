package simba_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// hangLimit is how long (wall time) these tests wait for a call that must return while the
// backend's calls hang: the hanging calls end only when virtual time moves, which it does not
// meanwhile, so a call still waiting after this long waits for them.
const hangLimit = 20 * time.Second

// TestLockWhoseCtxEndsWhileTheBackendHangs: a Lock whose context ends while the network is
// stalled (calls hang, the session still valid) returns with ctx's error at once: it does not
// wait for its acquire, nor for the withdrawal of its place in the name's waiter queue, which
// hang until their own timeout (the virtual clock does not move meanwhile). A goroutine of the
// same client waiting behind it for the name gets its turn once that withdrawal is over, and
// then the lock, once the network heals.
func TestLockWhoseCtxEndsWhileTheBackendHangs(t *testing.T) {
	w := newWorld(t)
	b := &signalBackend{Backend: w.srv.Backend(), queued: make(chan struct{}, 1)}
	c := w.clientOn(b, "a")
	w.until(time.Second, "session open", func() bool { return c.Session() != "" })
	b.CutOff(simbatest.Hang)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		h, err := c.Lock(ctx, "job")
		if err == nil {
			err = errors.Join(errors.New("granted while the backend hangs"), h.Unlock(context.Background()))
		}
		first <- err
	}()
	<-b.queued // the Lock's acquire hangs
	second := make(chan *simba.Held, 1)
	secondErr := make(chan error, 1)
	go func() {
		h, err := c.Lock(context.Background(), "job")
		if err != nil {
			secondErr <- err
			return
		}
		second <- h
	}()
	cancel()
	select {
	case err := <-first:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock whose ctx was cancelled: %v; want context.Canceled", err)
		}
	case <-time.After(hangLimit):
		t.Fatalf("Lock still waiting %v after its ctx ended, while the backend hangs", hangLimit)
	}

	b.Restore()
	var h *simba.Held
	w.until(5*testTTL, "the second goroutine's Lock", func() bool {
		select {
		case h = <-second:
			return true
		case err := <-secondErr:
			t.Fatalf("second Lock: %v", err)
		default:
		}
		return false
	})
	if !h.IsValid() || h.Token() == 0 {
		t.Fatalf("second Lock: valid %v, token %d", h.IsValid(), h.Token())
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestTryLockWithoutSession: TryLock makes one attempt and never waits out an outage. With no
// live session (the network stalled until the session was lost; every open hangs until its
// timeout) it waits for the open in flight at most, and fails with a retryable error
// matching ErrUnavailable and wrapping the open's error; once the backend is back, TryLock
// takes the lock.
func TestTryLockWithoutSession(t *testing.T) {
	w := newWorld(t)
	c, b := w.client("a")
	w.until(time.Second, "session open", func() bool { return c.Session() != "" })
	b.CutOff(simbatest.Hang)
	w.until(2*testTTL, "session lost", func() bool { return c.Session() == "" })
	for i := range 3 {
		done := make(chan error, 1)
		go func() {
			h, err := c.TryLock(context.Background(), "job")
			if err == nil {
				err = errors.Join(errors.New("granted while the backend hangs"), h.Unlock(context.Background()))
			}
			done <- err
		}()
		var err error
		// An open in flight ends at its timeout (one renewal interval, testTTL/3).
		w.until(testTTL, "TryLock's return", func() bool {
			select {
			case err = <-done:
				return true
			default:
				return false
			}
		})
		if !errors.Is(err, simba.ErrUnavailable) || errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("TryLock %d with no session: %v; want ErrUnavailable", i, err)
		}
		if simba.IsPermanent(err) {
			t.Fatalf("TryLock %d: %v is permanent; want retryable", i, err)
		}
	}
	b.Restore()
	w.until(5*testTTL, "session open", func() bool { return c.Session() != "" })
	h, err := c.TryLock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// signalBackend is a simbatest backend that signals each queued acquire as it starts.
type signalBackend struct {
	*simbatest.Backend
	queued chan struct{}
}

func (b *signalBackend) AcquireQueued(ctx context.Context, sess simba.SessionID, name string) (spi.Acquire, error) {
	select {
	case b.queued <- struct{}{}:
	default:
	}
	return b.Backend.AcquireQueued(ctx, sess, name)
}

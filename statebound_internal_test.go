package simba

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// waitKeeper is a simbatest backend that keeps what a hinting backend keeps per wait (one
// entry per session and name whose acquire found the lease held, until a grant, a Withdraw,
// EndWait or the session's close), as the SQL, Redis, ZooKeeper and etcd backends do to hint
// a release, and implements spi.WaitEnder. Its other methods (Hints, Queuer, SessionQueue)
// are simbatest's.
type waitKeeper struct {
	*simbatest.Backend
	mu    sync.Mutex
	waits map[spi.SessionID]map[string]bool
	ended int // EndWait calls
}

func (w *waitKeeper) note(s spi.SessionID, name string, r spi.Acquire, err error) (spi.Acquire, error) {
	if err != nil {
		return r, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.Kind {
	case spi.HeldBy:
		if w.waits[s] == nil {
			w.waits[s] = map[string]bool{}
		}
		w.waits[s][name] = true
	case spi.Granted:
		w.end(s, name)
	case spi.SessionExpired:
		delete(w.waits, s)
	}
	return r, err
}

func (w *waitKeeper) end(s spi.SessionID, name string) {
	if m := w.waits[s]; m != nil {
		delete(m, name)
		if len(m) == 0 {
			delete(w.waits, s)
		}
	}
}

func (w *waitKeeper) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	r, err := w.Backend.Acquire(ctx, s, name)
	return w.note(s, name, r, err)
}

func (w *waitKeeper) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	r, err := w.Backend.AcquireQueued(ctx, s, name)
	return w.note(s, name, r, err)
}

func (w *waitKeeper) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	err := w.Backend.Withdraw(ctx, s, name)
	w.mu.Lock()
	w.end(s, name)
	w.mu.Unlock()
	return err
}

func (w *waitKeeper) CloseSession(ctx context.Context, s spi.SessionID) error {
	err := w.Backend.CloseSession(ctx, s)
	w.mu.Lock()
	delete(w.waits, s)
	w.mu.Unlock()
	return err
}

// EndWait implements spi.WaitEnder.
func (w *waitKeeper) EndWait(s spi.SessionID, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended++
	w.end(s, name)
}

// kept counts the waits the backend keeps.
func (w *waitKeeper) kept() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.waits {
		n += len(m)
	}
	return n
}

// TestManyNamesLeaveNoStateBehind drives a client through many distinct names in the patterns
// services have — TryLock of a held name given up, Lock whose context is cancelled while it
// waits, Lock and Unlock, an election's campaign then Stop, and Locks that wait out the expiry
// of another holder's session — and checks after each that the client's state (its maps, the
// engine's, its timers) is back to its size, and that the backend keeps no wait: the client
// tells a spi.WaitEnder backend when a TryLock that found the lease held gives up (it used to
// keep each TryLocked name's wait until it lapsed).
func TestManyNamesLeaveNoStateBehind(t *testing.T) {
	defer goleak.VerifyNone(t)
	const n = 100
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	hb := srv.Backend()
	wb := &waitKeeper{Backend: srv.Backend(), waits: map[spi.SessionID]map[string]bool{}}
	ctx := context.Background()
	holder, err := New(hb, WithOwner("holder"), WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	c, err := New(wb, WithOwner("waiter"), WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	warm, err := c.Lock(ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	before := c.footprint(t)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("order-%d", i)
		if _, err := holder.Lock(ctx, names[i]); err != nil {
			t.Fatal(err)
		}
	}
	settle := func(pattern string) {
		t.Helper()
		// Withdraws and releases may still be in flight when the calls return: wait for the
		// client's state to come back (a leak never does; the test's deadline ends it).
		deadline := time.Now().Add(30 * time.Second)
		for c.footprint(t) != before || wb.kept() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("after %s: client state %+v (before %+v), %d waits kept by the backend", pattern, c.footprint(t), before, wb.kept())
			}
			time.Sleep(time.Millisecond)
		}
	}

	for _, name := range names {
		if _, err := c.TryLock(ctx, name); !errors.Is(err, ErrLockHeld) {
			t.Fatalf("TryLock(%s) of a held name: %v", name, err)
		}
	}
	// Checked before any wait: a TryLock's wait ends before TryLock returns, so nothing here
	// can settle by waiting (a wait kept per TryLock would lapse only after two TTLs).
	if k := wb.kept(); k != 0 {
		t.Fatalf("after %d TryLocks of held names the backend keeps %d waits (EndWait called %d times), want 0", n, k, wb.ended)
	}
	settle("TryLocks of held names")

	for _, name := range names {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		if _, err := c.Lock(lctx, name); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock(%s) of a held name with a short context: %v", name, err)
		}
		cancel()
	}
	settle("Locks whose context ended while they waited")

	for _, name := range names[:20] {
		e, err := c.NewElection(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	settle("campaigns stopped")

	for i := range n {
		h, err := c.Lock(ctx, fmt.Sprintf("free-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	settle("Lock and Unlock")

	s, err := hb.OpenSession(ctx, "crashed", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		name := fmt.Sprintf("expiring-%d", i)
		if r, err := hb.Acquire(ctx, s.ID, name); err != nil || r.Kind != spi.Granted {
			t.Fatalf("Acquire(%s) by the crashing session: %v %v", name, r.Kind, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := c.Lock(ctx, name)
			if err == nil {
				err = h.Unlock(ctx)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	settle("Locks granted after the holder's expiry")
}

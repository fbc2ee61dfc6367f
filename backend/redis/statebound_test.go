package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// waitedNames counts the lease channels the backend keeps for a session's wait (a wait not
// over: a channel only lingering before its UNSUBSCRIBE is not counted, the linger being a
// bounded time, hintLinger, after the last wait).
func (b *Backend) waitedNames() int {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	now, n := time.Now(), 0
	for _, w := range b.hub.leases {
		for _, x := range w.who {
			if now.Before(x.until) {
				n++
				break
			}
		}
	}
	return n
}

// waits reports whether a session of the backend waits for name.
func (b *Backend) waits(name string) bool {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	w := b.hub.leases[name]
	if w == nil {
		return false
	}
	for _, x := range w.who {
		if time.Now().Before(x.until) {
			return true
		}
	}
	return false
}

// waitTracker is a backend (b's methods promoted: Hints, Queuer, WaitEnder) that follows the
// client's waits as the client sees them: a queued acquire found the name held and no Withdraw
// or grant came after it. A test waits until none is left and no such call is in flight
// before it counts what the backend keeps: a late queued acquire (sent before its Lock gave
// up, answered after its Withdraw) is followed by a second Withdraw, which this waits for.
type waitTracker struct {
	*Backend
	mu       sync.Mutex
	inflight int
	owed     map[string]bool
}

func (w *waitTracker) start() {
	w.mu.Lock()
	w.inflight++
	w.mu.Unlock()
}

func (w *waitTracker) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	w.start()
	r, err := w.Backend.AcquireQueued(ctx, s, name)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight--
	switch {
	case err == nil && r.Kind == spi.HeldBy:
		w.owed[name] = true
	case err == nil:
		delete(w.owed, name)
	}
	return r, err
}

func (w *waitTracker) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	w.start()
	err := w.Backend.Withdraw(ctx, s, name)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight--
	delete(w.owed, name)
	return err
}

// settled reports whether the client waits for nothing and has no queued acquire or Withdraw
// in flight.
func (w *waitTracker) settled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inflight == 0 && len(w.owed) == 0
}

// TestManyNamesLeaveNoWaitsBehind drives a client through many distinct names in the patterns
// services have (TryLock of a held name given up, Lock cancelled while it waits, Lock and
// Unlock, an election's campaign then Stop, Locks that wait out another holder's expiry) and
// counts, after each, the lease channels the backend keeps for a wait (each a pub/sub
// subscription): none. A TryLock's wait used to stay for up to the holder's time left plus a
// TTL (spi.WaitEnder ends it).
func TestManyNamesLeaveNoWaitsBehind(t *testing.T) {
	for _, mode := range []struct {
		name string
		b    func(t *testing.T) *Backend
	}{
		{"standalone", func(t *testing.T) *Backend { return newBackend(t, standaloneClient(t)) }},
		{"cluster", func(t *testing.T) *Backend { return newBackend(t, clusterClient(t), WithRouteBySlot(true)) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			testManyNamesLeaveNoWaitsBehind(t, mode.b(t), mode.b(t))
		})
	}
}

func testManyNamesLeaveNoWaitsBehind(t *testing.T, hb, raw *Backend) {
	const (
		n   = 40
		ttl = 10 * time.Second // a wait noted lasts two TTLs: longer than the test
	)
	ctx, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	wb := &waitTracker{Backend: raw, owed: map[string]bool{}}
	holder, err := simba.New(hb, simba.WithOwner("holder"), simba.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })
	waiter, err := simba.New(wb, simba.WithOwner("waiter"), simba.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Close(context.Background()) })
	prefix := fmt.Sprintf("sb-%d-", time.Now().UnixNano())
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", prefix, i)
		if _, err := holder.Lock(ctx, names[i]); err != nil {
			t.Fatal(err)
		}
	}
	check := func(pattern string) {
		t.Helper()
		for !wb.settled() {
			if ctx.Err() != nil {
				t.Fatalf("after %s: the client's waits never ended", pattern)
			}
			time.Sleep(time.Millisecond)
		}
		if w := wb.waitedNames(); w != 0 {
			t.Errorf("after %s: the backend keeps %d lease channels as waited for, want 0", pattern, w)
		}
	}

	// A Lock whose context is cancelled while it waits (first: it shows that waits are noted,
	// the hint listener or waker running).
	for _, name := range names {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(lctx, name)
			done <- err
		}()
		for !wb.waits(name) {
			if ctx.Err() != nil {
				t.Fatalf("the waiting Lock of %s was never noted as a wait", name)
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock(%s) with its context cancelled: %v", name, err)
		}
	}
	check("Locks cancelled while waiting")

	// TryLock of a held name, given up.
	for _, name := range names {
		if _, err := waiter.TryLock(ctx, name); !errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("TryLock(%s) of a held name: %v", name, err)
		}
	}
	check("TryLocks of held names")

	// An election's campaign for a held name, then Stop.
	for _, name := range names {
		e, err := waiter.NewElection(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for !wb.waits(name) {
			if ctx.Err() != nil {
				t.Fatalf("the candidacy for %s was never noted as a wait", name)
			}
			time.Sleep(time.Millisecond)
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("campaigns stopped")

	// Lock and Unlock of free names.
	for i := range n {
		h, err := waiter.Lock(ctx, fmt.Sprintf("%sfree-%d", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("Lock and Unlock")

	// Locks that wait out the expiry of another holder's session (one opened by hand, never
	// kept alive, holding names of its own; a crashed holder releases nothing, so no hint
	// comes: the waiters retry at its time left).
	s, err := hb.OpenSession(ctx, "crashed", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var held []string
	for i := range n {
		name := fmt.Sprintf("%sexpiring-%d", prefix, i)
		// The session lives while it acquires (a loaded machine may take longer than its TTL
		// for 40 acquires): it is kept alive before each, and "crashes" after the last.
		if ka, err := hb.KeepAlive(ctx, s.ID, held, nil); err != nil || ka.Expired {
			t.Fatalf("keep-alive of the session about to crash: %+v %v", ka, err)
		}
		held = append(held, name)
		if r, err := hb.Acquire(ctx, s.ID, name); err != nil || r.Kind != spi.Granted {
			t.Fatalf("Acquire(%s) by the crashing session: %v %v", name, r.Kind, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := waiter.Lock(ctx, name)
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
	check("Locks granted after the holder's expiry")
}

// Package waittest checks, from the tests of any backend, that what a backend keeps per name
// for its sessions' waits (a subscription, a LISTEN, a watch, a poll, a blocking named-lock
// wait) goes once nobody waits for the name: it drives a client through many distinct names in
// the patterns services have and counts, after each, the names the backend still keeps.
package waittest

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

// Owed follows a client's waits as the client sees them: a queued acquire found the name held
// and no Withdraw or grant came after it. A backend's test wraps its backend in a type of its
// own (embedding it, so that every optional interface is kept) whose AcquireQueued and
// Withdraw call Start and then Queued or Withdrew. The check waits until no wait is owed and
// no such call is in flight before it counts what the backend keeps: a late queued acquire
// (sent before its Lock gave up, answered after its Withdraw) is followed by a second
// Withdraw, which it waits for.
type Owed struct {
	mu       sync.Mutex
	inflight int
	owed     map[string]bool
}

// Start notes a queued acquire or a Withdraw sent.
func (o *Owed) Start() {
	o.mu.Lock()
	o.inflight++
	o.mu.Unlock()
}

// Queued notes the reply of a queued acquire of name.
func (o *Owed) Queued(name string, r spi.Acquire, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inflight--
	if o.owed == nil {
		o.owed = map[string]bool{}
	}
	switch {
	case err == nil && r.Kind == spi.HeldBy:
		o.owed[name] = true
	case err == nil:
		delete(o.owed, name)
	}
}

// Withdrew notes the end of a Withdraw of name.
func (o *Owed) Withdrew(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inflight--
	delete(o.owed, name)
}

// Settled reports whether the client waits for nothing and has no queued acquire or Withdraw
// in flight.
func (o *Owed) Settled() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.inflight == 0 && len(o.owed) == 0
}

// Setup is what ManyNamesLeaveNoWaitsBehind needs of a backend.
type Setup struct {
	// Holder is the backend of the client that holds the names waited for; Waiter that of the
	// client that waits (wrapped so that its queued acquires and Withdraws reach Owed).
	Holder, Waiter spi.Backend
	Owed           *Owed
	// Waits reports whether a session of Waiter waits for name; Waited counts the names Waiter
	// keeps as waited for, and (MySQL/MariaDB) its blocking waits still running.
	Waits  func(name string) bool
	Waited func() (names, blocking int)
	// Crashing opens the session that holds names and then stops (Holder when nil);
	// CrashTTL is its TTL. Expire, if set, ends that session at the server once it holds
	// them all; otherwise it lapses CrashTTL after its last keep-alive.
	Crashing spi.Backend
	CrashTTL time.Duration
	Expire   func(t *testing.T, id spi.SessionID)
	// Prefix starts every name the check uses (unique to the run).
	Prefix string
}

// ManyNamesLeaveNoWaitsBehind drives the waiting client through 40 distinct names in each of
// the patterns services have — a Lock whose context is cancelled while it waits, TryLock of a
// held name given up, an election's campaign then Stop, Lock and Unlock of free names, and
// Locks that wait out the expiry of another holder's session — and checks after each that the
// backend keeps no name as waited for and no blocking wait.
func ManyNamesLeaveNoWaitsBehind(t *testing.T, s Setup) {
	t.Helper()
	const (
		n   = 40
		ttl = 10 * time.Second // a wait noted lasts two TTLs or more: longer than the test
	)
	ctx, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	holder, err := simba.New(s.Holder, simba.WithOwner("holder"), simba.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })
	waiter, err := simba.New(s.Waiter, simba.WithOwner("waiter"), simba.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Close(context.Background()) })
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", s.Prefix, i)
		if _, err := holder.Lock(ctx, names[i]); err != nil {
			t.Fatal(err)
		}
	}
	check := func(pattern string) {
		t.Helper()
		for !s.Owed.Settled() {
			if ctx.Err() != nil {
				t.Fatalf("after %s: the client's waits never ended", pattern)
			}
			time.Sleep(time.Millisecond)
		}
		w, blocking := s.Waited()
		if w != 0 {
			t.Errorf("after %s: the backend keeps %d names as waited for, want 0", pattern, w)
		}
		// A blocking wait (MySQL/MariaDB) whose name is no longer waited for was cancelled;
		// its goroutine forgets it as it returns.
		for ; blocking != 0 && ctx.Err() == nil; _, blocking = s.Waited() {
			time.Sleep(time.Millisecond)
		}
		if blocking != 0 {
			t.Errorf("after %s: %d blocking waits never ended", pattern, blocking)
		}
	}
	waitNoted := func(what, name string) {
		t.Helper()
		for !s.Waits(name) {
			if ctx.Err() != nil {
				t.Fatalf("%s %s was never noted as a wait", what, name)
			}
			time.Sleep(time.Millisecond)
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
		waitNoted("the waiting Lock of", name)
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
		waitNoted("the candidacy for", name)
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("campaigns stopped")

	// Lock and Unlock of free names.
	for i := range n {
		h, err := waiter.Lock(ctx, fmt.Sprintf("%sfree-%d", s.Prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("Lock and Unlock")

	// Locks that wait out the expiry of another holder's session (one opened by hand, holding
	// names of its own; a crashed holder releases nothing, so no hint comes unless the backend
	// hints expiries: the waiters retry at its time left).
	cb := s.Crashing
	if cb == nil {
		cb = s.Holder
	}
	sess, err := cb.OpenSession(ctx, "crashed", s.CrashTTL)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var held []string
	for i := range n {
		name := fmt.Sprintf("%sexpiring-%d", s.Prefix, i)
		// The session lives while it acquires (a loaded machine may take longer than its TTL
		// for 40 acquires): it is kept alive before each, and "crashes" after the last.
		if ka, err := cb.KeepAlive(ctx, sess.ID, held, nil); err != nil || ka.Expired {
			t.Fatalf("keep-alive of the session about to crash: %+v %v", ka, err)
		}
		held = append(held, name)
		if r, err := cb.Acquire(ctx, sess.ID, name); err != nil || r.Kind != spi.Granted {
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
	if s.Expire != nil {
		s.Expire(t, sess.ID)
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

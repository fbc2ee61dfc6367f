package sql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/locktest"
	"github.com/simba-go/simba/spi"
)

// watchTTL is the sessions' TTL in the watch tests: a waiter's own retry comes only when the
// holder's lease would run out, a minute after the holder took it, so within watchWindow a
// waiter that gets its lock was woken by a hint.
const (
	watchTTL    = time.Minute
	watchWindow = 20 * time.Second
)

// waitUntil polls cond every 10 ms until it holds, and fails the test with what after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not reached in 10 s: %s", what)
		}
	}
}

// TestMySQLWakesBeyondBlockingPlaces: a process waits for 28 names that another holds, 8 of
// them first (they take the waker's mysqlMaxWaits blocking places and keep them: the holder
// never releases those), then 20 more. When the holder releases the 20, every one of their
// waiters gets its lock from a hint (the watch's), not from its retry a TTL later. It counts the
// waiters woken and the waker's statements; it also checks the watch's cost: no statement while
// only the 8 are waited for, and none once nobody waits. On the old code (no watch) 0 of the
// 20 waiters got the lock within the window: all 8 places stayed on the held names.
func TestMySQLWakesBeyondBlockingPlaces(t *testing.T) {
	const pinned, released = mysqlMaxWaits, 20
	dsn := myDSN(t)
	holder := migrated(t, dsn)
	waiterB := open(t, dsn)
	w := waiterB.waker.(*mysqlWaker)
	ctx := testCtx(t)
	// The holder's backend marks the leases it holds (named locks) while it has a Hints
	// subscriber.
	if _, err := holder.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	hs, err := holder.OpenSession(ctx, "holder", watchTTL)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "watch-" + unique(t) + "-"
	names := make([]string, pinned+released)
	tokens := make([]int64, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d", prefix, i)
		r, err := holder.Acquire(ctx, hs.ID, names[i])
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("holder's acquire of %s: %+v %v", names[i], r, err)
		}
		tokens[i] = r.Token
	}
	c := locktest.Clients(t, watchTTL, waiterB)[0]
	lctx, cancel := context.WithCancel(ctx)
	type got struct {
		i   int
		h   *simba.Held
		err error
	}
	results := make(chan got, len(names))
	lock := func(i int) {
		go func() {
			h, err := c.Lock(lctx, names[i])
			results <- got{i, h, err}
		}()
	}
	waiting := func(n int) func() bool {
		return func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.waiting.live(time.Now()) == n
		}
	}
	blocks := func(n int64) func() bool { return func() bool { return w.snapshot().blocks >= n } }
	for i := range pinned {
		lock(i)
	}
	waitUntil(t, "the pinned names waited for on named locks", func() bool { return waiting(pinned)() && blocks(pinned)() })
	time.Sleep(100 * time.Millisecond)
	if s := w.snapshot(); s.watches != 0 {
		t.Errorf("the waker watched while only %d names were waited for: %+v", pinned, s)
	}
	for i := pinned; i < len(names); i++ {
		lock(i)
	}
	waitUntil(t, "every name waited for", waiting(len(names)))
	before := w.snapshot()
	for i := pinned; i < len(names); i++ {
		if err := holder.Release(ctx, hs.ID, names[i], tokens[i]); err != nil {
			t.Fatal(err)
		}
	}
	woken := 0
	window := time.After(watchWindow)
	var held []*simba.Held
collect:
	for woken < released {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("Lock(%s): %v", names[r.i], r.err)
			}
			if r.i < pinned {
				t.Fatalf("the waiter got %s, which the holder never released", names[r.i])
			}
			held = append(held, r.h)
			woken++
		case <-window:
			break collect
		}
	}
	after := w.snapshot()
	t.Logf("%d of %d waiters beyond the %d blocking places woken by a hint (window %v, TTL %v); waker: %d watch statements, %d watch hints, %d hints in all",
		woken, released, pinned, watchWindow, watchTTL, after.watches-before.watches, after.watchHints-before.watchHints, after.hints-before.hints)
	if woken != released {
		t.Errorf("%d of %d waiters were woken by the release; the others wait for their retry, a TTL (%v) after the holder's acquire", woken, released, watchTTL)
	}
	for _, h := range held {
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	for range len(names) - woken {
		<-results
	}
	// Nobody waits any more: the watch ends and runs no statement.
	waitUntil(t, "the watch ended", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.watching
	})
	idle := w.snapshot().watches
	time.Sleep(200 * time.Millisecond)
	if n := w.snapshot().watches - idle; n != 0 {
		t.Errorf("the watch ran %d statements while nobody waited", n)
	}
}

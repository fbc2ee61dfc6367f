package sql

import (
	"context"
	"fmt"
	"slices"
	"sync"
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

// BenchmarkMySQLHandOverManyNames: one process holds n names (its backend marks them), another
// waits for all n at once (one client, a goroutine per name, TTL a minute); the holder then
// releases the n, one after another; in the +8held cases 8 more names, held for good, are
// waited for first and keep the blocking places. Each op is one such round. It reports the waiters'
// hand-overs (from the start of each one's release to its grant): the median, and the slowest
// also as a ratio to the 8-name rounds', measured in the same run (8: every name has a blocking
// place; past 8 the rest are watched); the fraction of waiters woken within the window (a
// third of the TTL: a retry comes only at the TTL), and what the waiting backend's waker cost
// while the n names stayed held for watchHold: its statements per second and the connections
// its pool held open.
func BenchmarkMySQLHandOverManyNames(b *testing.B) {
	const watchHold = time.Second
	dsn := myDSN(b)
	holder := migrated(b, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := holder.Hints(ctx); err != nil {
		b.Fatal(err)
	}
	hs, err := holder.OpenSession(ctx, "holder", watchTTL)
	if err != nil {
		b.Fatal(err)
	}
	var base time.Duration // the slowest hand-over of the 8-name rounds
	for _, bc := range []struct{ n, pinned int }{{mysqlMaxWaits, 0}, {20, 0}, {50, 0}, {20, mysqlMaxWaits}, {50, mysqlMaxWaits}} {
		n := bc.n
		name := fmt.Sprint(n)
		if bc.pinned > 0 {
			name = fmt.Sprintf("%d+%dheld", n, bc.pinned)
		}
		b.Run(name, func(b *testing.B) {
			waiterB := open(b, dsn)
			w := waiterB.waker.(*mysqlWaker)
			c := locktest.Clients(b, watchTTL, waiterB)[0]
			// pinned names: held for good and waited for first, they keep the blocking places.
			pctx, pcancel := context.WithCancel(ctx)
			var pinned sync.WaitGroup
			defer func() {
				pcancel()
				pinned.Wait()
			}()
			for i := range bc.pinned {
				name := fmt.Sprintf("pinned-%d-%d", n, i)
				if r, err := holder.Acquire(ctx, hs.ID, name); err != nil || r.Kind != spi.Granted {
					b.Fatalf("holder's acquire: %+v %v", r, err)
				}
				pinned.Add(1)
				go func() {
					defer pinned.Done()
					_, _ = c.Lock(pctx, name)
				}()
			}
			for end := time.Now().Add(10 * time.Second); w.snapshot().blocks < int64(bc.pinned); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(end) {
					b.Fatalf("the pinned names are not waited for on named locks: %+v", w.snapshot())
				}
			}
			var slowest time.Duration
			var all []time.Duration // every hand-over
			var woken, stmts, conns float64
			for round := range b.N {
				names := make([]string, n)
				tokens := make([]int64, n)
				for i := range names {
					names[i] = fmt.Sprintf("many-%d-%d-%d", n, round, i)
					r, err := holder.Acquire(ctx, hs.ID, names[i])
					if err != nil || r.Kind != spi.Granted {
						b.Fatalf("holder's acquire: %+v %v", r, err)
					}
					tokens[i] = r.Token
				}
				type grant struct {
					i  int
					at time.Time
				}
				got := make(chan grant, n)
				lctx, lcancel := context.WithCancel(ctx)
				for i, name := range names {
					go func() {
						h, err := c.Lock(lctx, name)
						if err != nil {
							got <- grant{i: i}
							return
						}
						at := time.Now()
						_ = h.Unlock(ctx)
						got <- grant{i, at}
					}()
				}
				for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					w.mu.Lock()
					live := w.waiting.live(time.Now())
					w.mu.Unlock()
					if live == n+bc.pinned {
						break
					}
					if time.Now().After(end) {
						b.Fatalf("%d of %d names waited for", live, n)
					}
				}
				s0 := w.snapshot()
				time.Sleep(watchHold)
				s1 := w.snapshot()
				stmts += float64(s1.watches+s1.probes+s1.reads+s1.blocks-s0.watches-s0.probes-s0.reads-s0.blocks) / watchHold.Seconds()
				conns += float64(w.db.Stats().OpenConnections)
				released := make([]time.Time, n) // when each release began
				for i, name := range names {
					released[i] = time.Now()
					if err := holder.Release(ctx, hs.ID, name, tokens[i]); err != nil {
						b.Fatal(err)
					}
				}
				window := time.After(watchTTL / 3)
				for range n {
					select {
					case g := <-got:
						if !g.at.IsZero() {
							woken++
							slowest = max(slowest, g.at.Sub(released[g.i]))
							all = append(all, g.at.Sub(released[g.i]))
						}
					case <-window:
						lcancel()
						<-got
					}
				}
				lcancel()
			}
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2])/float64(time.Millisecond), "median-handover-ms")
			}
			if n == mysqlMaxWaits && bc.pinned == 0 {
				base = slowest
			}
			b.ReportMetric(float64(slowest)/float64(time.Millisecond), "slowest-handover-ms")
			if base > 0 {
				b.ReportMetric(float64(slowest)/float64(base), "slowest/8-names")
			}
			b.ReportMetric(woken/float64(b.N*n), "woken-fraction")
			b.ReportMetric(stmts/float64(b.N), "waker-stmts/s")
			b.ReportMetric(conns/float64(b.N), "waker-conns")
		})
	}
}

package zookeeper

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestHintsOnlyForWaitedNames: the hint connection watches only the lease nodes the backend's
// sessions wait for. A backend whose session waited for a name and then got it hears no watch
// event for another client's locks and unlocks of other names (or of that one, once its wait
// ended), while a waiting session still gets its Released hint from the hint connection alone
// (the session's own watch is muted once the connection's watch is set and checked), well
// before the waiter's one-TTL retry: the TTL is a minute and the test's context ends after
// 30 s.
// The old code kept a persistent recursive watch on the leases node, so every create and
// delete under it, by anyone, was an event (and a Released hint) at every subscribed backend:
// the checks of the events and hints for "x" and "a" below failed.
func TestHintsOnlyForWaitedNames(t *testing.T) {
	dsn := serverDSN(t, "")
	idle, other := openBackend(t, dsn), openBackend(t, dsn)
	const ttl = time.Minute
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints, err := idle.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	phase := 1
	events := map[int]map[string]int{1: {}, 2: {}}
	hook := func(w *watcher, path string) {
		if w.b != idle {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if name, ok := idle.lay.leaseName(path); ok {
			events[phase][name]++
		}
	}
	testHookWatchEvent.Store(&hook)
	t.Cleanup(func() { testHookWatchEvent.Store(nil) })
	s, o := openSession(t, idle, ttl), openSession(t, other, ttl)

	heldBy := func(name string) {
		t.Helper()
		if r, err := idle.Acquire(ctx, s, name); err != nil || r.Kind != spi.HeldBy {
			t.Fatalf("Acquire(%q) = %+v, %v; want held", name, r, err)
		}
		waitFor(t, "the hint connection's watch on "+name, func() bool {
			idle.hmu.Lock()
			w := idle.watcher
			idle.hmu.Unlock()
			return w.covers(spi.Released, name)
		})
	}
	// released waits for the Released hint of name and fails on one of any name in not.
	released := func(name string, not ...string) {
		t.Helper()
		for {
			select {
			case h := <-hints:
				if h.Kind != spi.Released {
					continue
				}
				if h.Name == name {
					return
				}
				for _, n := range not {
					if h.Name == n {
						t.Errorf("a Released hint for %q, which no session of the backend waits for", n)
					}
				}
			case <-ctx.Done():
				t.Fatalf("no Released hint for %q before the test's context ended", name)
			}
		}
	}

	// The session waits for "a", hears its release and gets it.
	tok := mustGrant(t, other, o, "a")
	heldBy("a")
	if err := other.Release(ctx, o, "a", tok); err != nil {
		t.Fatal(err)
	}
	released("a")
	tok = mustGrant(t, idle, s, "a")
	if err := idle.Release(ctx, s, "a", tok); err != nil {
		t.Fatal(err)
	}

	// The session waits for "m". Its watch is set after the removal of a's (sent before it on
	// the same connection), so from here on an event for "a" is one the removal left behind.
	mtok := mustGrant(t, other, o, "m")
	heldBy("m")
	mu.Lock()
	phase = 2
	mu.Unlock()
	for range 5 {
		for _, name := range []string{"x", "a"} {
			tok := mustGrant(t, other, o, name)
			if err := other.Release(ctx, o, name, tok); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := other.Release(ctx, o, "m", mtok); err != nil {
		t.Fatal(err)
	}
	// The hint connection reads events in the server's order: those of the cycles above come
	// before m's deletion.
	released("m", "x", "a")
	mu.Lock()
	defer mu.Unlock()
	if n := events[2]["x"] + events[2]["a"]; n != 0 {
		t.Errorf("%d watch events for another client's 5 cycles of x and a, which no session waits for; want none", n)
	}
	if events[2]["m"] == 0 {
		t.Error("no watch event for the deletion of m, which the session waits for")
	}
	idle.hmu.Lock()
	w := idle.watcher
	idle.hmu.Unlock()
	if n := w.sessions.Load(); n != 1 {
		// A reconnect drops every watch, which would hide a removal that failed.
		t.Errorf("the hint connection got %d sessions; want 1", n)
	}
	if events[1]["a"] == 0 {
		t.Error("no watch event for the deletion of a while the session waited for it")
	}
}

// TestWaitsEnd: a wait ends with a grant, a withdrawal, a release, the session's close, or
// its linger; what remains is what the hint connection watches.
func TestWaitsEnd(t *testing.T) {
	b := openBackend(t, "zk://127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor("s1", "a", time.Hour, true)
	b.waitFor("s2", "a", time.Hour, false)
	b.waitFor("s1", "b", time.Hour, false)
	b.waitFor("s1", "c", time.Nanosecond, false)
	b.joining("s3", "g")
	b.joining("s3", "h")
	b.joinEnded("s3", "h", time.Nanosecond)
	b.groupRead("r", 3, time.Hour)
	b.groupRead("q", 3, time.Nanosecond)
	time.Sleep(time.Millisecond)
	want := map[string]watchKind{b.lay.lease("a"): leaseNodeWatch, b.lay.lease("b"): leaseWatch,
		b.lay.group("g"): groupWatch, b.lay.group("r"): groupWatch}
	if got := b.watchSet(time.Now()); !maps.Equal(got, want) {
		t.Fatalf("watchSet = %v; want %v (c, h and q lingered past their time)", got, want)
	}
	b.doneWaiting("s1", "a")
	b.sessionDone("s1")
	b.sessionDone("s3")
	// s2 still waits for a; the node flag was s1's and went with its wait.
	want = map[string]watchKind{b.lay.lease("a"): leaseWatch, b.lay.group("r"): groupWatch}
	if got := b.watchSet(time.Now()); !maps.Equal(got, want) {
		t.Fatalf("watchSet after s1's and s3's end = %v; want %v", got, want)
	}
	b.doneWaiting("s2", "a")
	if got := b.watchSet(time.Now()); len(got) != 1 {
		t.Fatalf("watchSet = %v; want the group r only", got)
	}
}

// TestHintConnectionOnlyWhileWaiting: a subscribed backend opens its hint connection only
// when a session waits for a name, and closes it about a TTL after the last wait ended (here
// with the grant). The old code kept it open, watching every lease node, from the first
// subscriber on.
func TestHintConnectionOnlyWhileWaiting(t *testing.T) {
	dsn := serverDSN(t, "")
	b, other := openBackend(t, dsn), openBackend(t, dsn)
	const ttl = 2 * time.Second
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints, err := b.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	s, o := openSession(t, b, ttl), openSession(t, other, ttl)
	b.hmu.Lock()
	w := b.watcher
	b.hmu.Unlock()
	// Another client's cycle, which no session of b waits for, opens nothing.
	tok := mustGrant(t, other, o, "n")
	if err := other.Release(ctx, o, "n", tok); err != nil {
		t.Fatal(err)
	}
	if n := w.sessions.Load(); n != 0 {
		t.Fatalf("the hint connection got %d sessions before any wait; want none", n)
	}
	tok = mustGrant(t, other, o, "n")
	if r, err := b.Acquire(ctx, s, "n"); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("Acquire = %+v, %v; want held", r, err)
	}
	waitFor(t, "the hint connection's watch on n", func() bool { return w.covers(spi.Released, "n") })
	if n := w.sessions.Load(); n != 1 {
		t.Fatalf("the hint connection got %d sessions by the first wait; want 1", n)
	}
	if err := other.Release(ctx, o, "n", tok); err != nil {
		t.Fatal(err)
	}
	for h := range hints {
		if h.Kind == spi.Released && h.Name == "n" {
			break
		}
	}
	mustGrant(t, b, s, "n")
	waitFor(t, "the hint connection to close with nothing to watch", func() bool { return !w.live.Load() })
	if n := w.sessions.Load(); n != 1 {
		t.Fatalf("the hint connection got %d sessions; want 1", n)
	}
}

// TestWaitOutlastsFallbackRetry: a session's wait for a name, from an acquire that found it
// held, lasts longer than the client's fallback retry, two TTLs after that reply
// (spi.SteadyHints), so no release in between goes unhinted. The DSN gives the server's
// tickTime, so the session asks for the TTL less one tick: the old wait, two session timeouts,
// ended 3.6 s after the reply at TTL 2 s, before the retry at 4 s.
func TestWaitOutlastsFallbackRetry(t *testing.T) {
	dsn := serverDSN(t, "tickTime=200ms")
	b := openBackend(t, dsn)
	if !spi.AreHintsSteady(b) {
		t.Fatal("the backend does not report steady hints")
	}
	const ttl = 2 * time.Second
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := b.Hints(hctx); err != nil {
		t.Fatal(err)
	}
	holder, waiter := openSession(t, b, ttl), openSession(t, b, ttl)
	mustGrant(t, b, holder, "n")
	if r, err := b.AcquireQueued(ctx, waiter, "n"); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("AcquireQueued = %+v, %v; want held", r, err)
	}
	replied := time.Now()
	b.hmu.Lock()
	m, ok := b.waits["n"][waiter]
	b.hmu.Unlock()
	if !ok {
		t.Fatal("no wait recorded for the waiting session")
	}
	if d := m.until.Sub(replied); d <= 2*ttl {
		t.Errorf("the wait ends %v after the reply; want more than two TTLs (%v), the fallback retry's time", d, 2*ttl)
	}
}

package zookeeper

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
	"github.com/simba-go/simba/spi"
)

// groupEvents counts, per phase and group, the watch events b's hint connection reads for a
// group's node or a member node under it.
type groupEvents struct {
	mu     sync.Mutex
	phase  int
	counts map[int]map[string]int
}

func countGroupEvents(t *testing.T, b *Backend) *groupEvents {
	e := &groupEvents{phase: 1, counts: map[int]map[string]int{}}
	hook := func(w *watcher, path string) {
		if w.b != b {
			return
		}
		g, ok := b.lay.groupName(path)
		if !ok {
			g, _, ok = b.lay.memberOf(path)
		}
		if !ok {
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.counts[e.phase] == nil {
			e.counts[e.phase] = map[string]int{}
		}
		e.counts[e.phase][g]++
	}
	testHookWatchEvent.Store(&hook)
	t.Cleanup(func() { testHookWatchEvent.Store(nil) })
	return e
}

func (e *groupEvents) next() {
	e.mu.Lock()
	e.phase++
	e.mu.Unlock()
}

func (e *groupEvents) count(phase int, g string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[phase][g]
}

// groupChanged waits for the GroupChanged hint of g and fails on one of any group in not.
func groupChanged(t *testing.T, ctx context.Context, hints <-chan spi.Hint, g string, not ...string) {
	t.Helper()
	for {
		select {
		case h := <-hints:
			if h.Kind != spi.GroupChanged {
				continue
			}
			if h.Name == g {
				return
			}
			for _, n := range not {
				if h.Name == n {
					t.Errorf("a GroupChanged hint for %q, which no session of the backend uses", n)
				}
			}
		case <-ctx.Done():
			t.Fatalf("no GroupChanged hint for %q before the test's context ended", g)
		}
	}
}

// hintWatcher returns b's watcher (Hints has made it).
func hintWatcher(b *Backend) *watcher {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	return b.watcher
}

// TestGroupHintsOnlyForUsedGroups: the hint connection watches only the nodes of the groups the
// backend's sessions use. A backend whose session joined "mine" hears no watch event, and gets
// no hint, for another client's joins and leaves of "theirs", while it hears that client's
// join and leave of "mine" by its own watch (the session never read "mine", so it has no watch
// of its own there), well before any keep-alive (the TTL is a minute).
// The old code kept a persistent recursive watch on the groups node once a session joined or
// read any group, so every member node's create and delete, by anyone, was an event (and a
// GroupChanged hint) at every such backend: the checks of the events and hints for "theirs"
// below failed.
func TestGroupHintsOnlyForUsedGroups(t *testing.T) {
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
	events := countGroupEvents(t, idle)
	s, o := openSession(t, idle, ttl), openSession(t, other, ttl)
	if st, err := idle.Join(ctx, s, "mine"); err != nil || st != spi.OK {
		t.Fatalf("Join = %v, %v", st, err)
	}
	w := hintWatcher(idle)
	waitFor(t, "the hint connection's watch on mine", func() bool { return w.covers(spi.GroupChanged, "mine") })
	events.next()
	for range 5 {
		if st, err := other.Join(ctx, o, "theirs"); err != nil || st != spi.OK {
			t.Fatalf("Join = %v, %v", st, err)
		}
		if st, err := other.Leave(ctx, o, "theirs"); err != nil || st != spi.OK {
			t.Fatalf("Leave = %v, %v", st, err)
		}
	}
	if _, err := other.Join(ctx, o, "mine"); err != nil {
		t.Fatal(err)
	}
	// The hint connection reads events in the server's order: those of the cycles above come
	// before mine's.
	groupChanged(t, ctx, hints, "mine", "theirs")
	if _, err := other.Leave(ctx, o, "mine"); err != nil {
		t.Fatal(err)
	}
	groupChanged(t, ctx, hints, "mine", "theirs")
	if n := events.count(2, "theirs"); n != 0 {
		t.Errorf("%d watch events for another client's 5 joins and leaves of theirs, which no session uses; want none", n)
	}
	// The session's own join may be among them, had the watch been checked before it.
	waitFor(t, "the watch events of a join and a leave of mine", func() bool { return events.count(2, "mine") >= 2 })
}

// drain takes the hints already delivered.
func drain(hints <-chan spi.Hint) {
	for len(hints) > 0 {
		<-hints
	}
}

// TestGroupInterestEnds: once no session uses a group (its member left, and the linger
// passed), the hint connection removes its watch: another client's joins and leaves of it are
// no longer events there.
func TestGroupInterestEnds(t *testing.T) {
	dsn := serverDSN(t, "")
	b, other := openBackend(t, dsn), openBackend(t, dsn)
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints, err := b.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	events := countGroupEvents(t, b)
	openSession(t, b, 2*time.Second) // paces the hint connection's sweeps (a second)
	o := openSession(t, other, time.Minute)
	w := hintWatcher(b)

	b.joining(testWaiter, "g")
	waitFor(t, "the hint connection's watch on g", func() bool { return w.covers(spi.GroupChanged, "g") })
	if _, err := other.Join(ctx, o, "g"); err != nil {
		t.Fatal(err)
	}
	groupChanged(t, ctx, hints, "g")
	if events.count(1, "g") == 0 {
		t.Fatal("no watch event for a join of g while a session was a member")
	}

	b.joinEnded(testWaiter, "g", time.Nanosecond)
	waitFor(t, "the removal of the watch on g", func() bool { return !w.covers(spi.GroupChanged, "g") })
	// h's watch is set after g's removal (sent before it on the same connection), so from here
	// on an event for g is one the removal left behind.
	b.joining(testWaiter, "h")
	waitFor(t, "the hint connection's watch on h", func() bool { return w.covers(spi.GroupChanged, "h") })
	// The hints of g's events, read before the replies that set h's watch, are in.
	drain(hints)
	events.next()
	for range 3 {
		if _, err := other.Leave(ctx, o, "g"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Join(ctx, o, "g"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Join(ctx, o, "h"); err != nil {
		t.Fatal(err)
	}
	groupChanged(t, ctx, hints, "h", "g")
	if n := events.count(2, "g"); n != 0 {
		t.Errorf("%d watch events for g after its interest ended; want none", n)
	}
	if n := w.sessions.Load(); n != 1 {
		// A reconnect drops every watch, which would hide a removal that failed.
		t.Errorf("the hint connection got %d sessions; want 1", n)
	}
}

// TestGroupHintsAfterReconnect: the hint connection sets its group watches again when it
// reconnects, and the check behind each finds a change made while it was down: a member
// hears a join made during an outage (after it read the members), and later changes again by
// the restored watch.
func TestGroupHintsAfterReconnect(t *testing.T) {
	direct := testenv.ZooKeeper(t)[0]
	chroot := zktest.New(t, []string{direct}, "simba-test").Path
	p := faultproxy.StartTest(t, direct)
	b := openBackend(t, "zk://"+p.Addr()+chroot+"?timeout=60s")
	other := openBackend(t, "zk://"+direct+chroot)
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints, err := b.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	events := countGroupEvents(t, b)
	s := openSession(t, b, 30*time.Second)
	o := openSession(t, other, time.Minute)
	if st, err := b.Join(ctx, s, "g"); err != nil || st != spi.OK {
		t.Fatalf("Join = %v, %v", st, err)
	}
	if _, err := b.Members(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	w := hintWatcher(b)
	waitFor(t, "the hint connection's watch on g", func() bool { return w.covers(spi.GroupChanged, "g") })

	p.Set(faultproxy.Fault{Cut: true})
	waitFor(t, "the hint connection to notice the cut", func() bool { return !w.covers(spi.GroupChanged, "g") })
	if _, err := other.Join(ctx, o, "g"); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	groupChanged(t, ctx, hints, "g")
	waitFor(t, "the hint connection's watch on g again", func() bool { return w.covers(spi.GroupChanged, "g") })
	if n := w.sessions.Load(); n < 2 {
		t.Fatalf("the hint connection got %d sessions; want a reconnect", n)
	}
	events.next()
	if _, err := other.Leave(ctx, o, "g"); err != nil {
		t.Fatal(err)
	}
	groupChanged(t, ctx, hints, "g")
	waitFor(t, "the restored watch's event for the leave", func() bool { return events.count(2, "g") > 0 })
}

// TestGroupChangeBeforeWatchIsHinted: a change of a group's members between a session's read
// of them and the moment the hint connection's watch on the group is set is hinted: the
// exists behind the watch finds the group node's cversion past the read's. A read that is
// current gets no hint.
func TestGroupChangeBeforeWatchIsHinted(t *testing.T) {
	dsn := serverDSN(t, "")
	b, other := openBackend(t, dsn), openBackend(t, dsn)
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints, err := b.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	o := openSession(t, other, time.Minute)
	for _, g := range []string{"changed", "same"} {
		if _, err := other.Join(ctx, o, g); err != nil {
			t.Fatal(err)
		}
	}
	// Both group nodes are at cversion 1 (their member's create). b's sessions read "same" as
	// it is, and "changed" before its member joined (cversion 0).
	b.groupRead("same", 1, time.Minute)
	b.groupRead("changed", 0, time.Minute)
	w := hintWatcher(b)
	waitFor(t, "the hint connection's watches", func() bool {
		return w.covers(spi.GroupChanged, "same") && w.covers(spi.GroupChanged, "changed")
	})
	// The check publishes before it marks the watch set: the hints are in by now.
	got := map[string]int{}
	for len(hints) > 0 {
		if h := <-hints; h.Kind == spi.GroupChanged {
			got[h.Name]++
		}
	}
	if got["changed"] == 0 {
		t.Error("no GroupChanged hint for a change between a read and the watch")
	}
	if got["same"] != 0 {
		t.Errorf("%d GroupChanged hints for a group whose read was current; want none", got["same"])
	}
}

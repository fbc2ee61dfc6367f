package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
	"github.com/simba-go/simba/spi"
)

// TestHintsAfterSilentOutage: a backend whose link to the server goes silent for a second (a
// blackhole: the open connections get no byte, close or reset, for good) hears releases again
// soon after the link heals. Its hint connection pings every sixth of the shortest TTL asked
// of it (500 ms at 3 s) and is given up after an interval and a reply's allowance (1 s,
// minttl.Reply) without a read, then dialled again.
// Before, the silent connection was kept until its read timeout (2/3 of the watcher's 30 s
// session), and muted the sessions' own watches meanwhile: every release in those 20 s went
// unheard, and a waiter learnt of each only at its one-TTL retry (seen in an outside trial:
// hand-overs of ~1 s at TTL 1 s, and Locks of 10 s failing for a waiter whose lock was free).
// Another backend, on a direct link, takes and releases a lease until the hint of a release
// arrives: within 10 s (about 1.5 s expected), where the old code heard nothing for 20 s.
func TestHintsAfterSilentOutage(t *testing.T) {
	direct := testenv.ZooKeeper(t)[0]
	chroot := zktest.New(t, []string{direct}, "simba-test").Path
	p := faultproxy.StartTest(t, direct)
	b := openBackend(t, "zk://"+p.Addr()+chroot+"?timeout=60s")
	other := openBackend(t, "zk://"+direct+chroot)
	const ttl = 3 * time.Second
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints, err := b.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	openSession(t, b, ttl) // sets the TTL the hint connection is paced by
	holder := openSession(t, other, ttl)
	// The hint connection watches only names b's sessions wait for.
	b.waitFor(testWaiter, "before", time.Hour, false)
	b.waitFor(testWaiter, "after", time.Hour, false)

	released := func(name string, within time.Duration) bool {
		t.Helper()
		return releasedHint(t, ctx, hints, other, holder, name, within)
	}
	if !released("before", 20*time.Second) {
		t.Fatal("no released hint before the outage")
	}
	p.Set(faultproxy.Fault{Blackhole: true})
	time.Sleep(time.Second)
	p.Heal()
	if !released("after", 10*time.Second) {
		t.Fatal("no released hint within 10 s after a silent outage of 1 s healed")
	}
}

// testWaiter is the session id the tests record a wait under (Backend.waitFor) when the hint
// connection is what they exercise, not a session's acquire.
const testWaiter spi.SessionID = "test-waiter"

// releasedHint takes and releases name with b's session sid every 200 ms until the hint of a
// release of it arrives on hints, for up to within; it reports whether one did.
func releasedHint(t *testing.T, ctx context.Context, hints <-chan spi.Hint, b *Backend, sid spi.SessionID, name string, within time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		tok := mustGrant(t, b, sid, name)
		if err := b.Release(ctx, sid, name, tok); err != nil {
			t.Fatal(err)
		}
		wait := time.After(200 * time.Millisecond)
		for waiting := true; waiting; {
			select {
			case h := <-hints:
				if h.Kind == spi.Released && h.Name == name {
					return true
				}
			case <-wait:
				waiting = false
			}
		}
	}
	return false
}

// TestHintsAfterBlackholedRedial: a hint connection dialled while the link is blackholed (its
// TCP connection taken and never answered, and silent for good after the heal) is given up
// within a bound paced by the TTL, not the backend's timeout, so hints come back about a TTL
// after the heal. The link is blackholed for 3 s at TTL 1 s: the connection gives up the
// silent link after ~0.3 s and redials into the blackhole. Before, that attempt waited for its
// connect response for the backend's whole timeout (Config.Timeout: 10 s by default, 60 s
// here), and no release was heard meanwhile; a release's hint must now arrive within 20 s of
// the heal (about 1-2 s expected).
func TestHintsAfterBlackholedRedial(t *testing.T) {
	direct := testenv.ZooKeeper(t)[0]
	chroot := zktest.New(t, []string{direct}, "simba-test").Path
	p := faultproxy.StartTest(t, direct)
	b := openBackend(t, "zk://"+p.Addr()+chroot+"?timeout=60s")
	other := openBackend(t, "zk://"+direct+chroot)
	const ttl = time.Second
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints, err := b.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	openSession(t, b, ttl) // sets the TTL the hint connection is paced by
	// The releases are made on the direct link by a session that outlives the test without
	// renewals.
	holder := openSession(t, other, time.Minute)
	// The hint connection watches only names b's sessions wait for.
	b.waitFor(testWaiter, "before", time.Hour, false)
	b.waitFor(testWaiter, "after", time.Hour, false)
	if !releasedHint(t, ctx, hints, other, holder, "before", 20*time.Second) {
		t.Fatal("no released hint before the outage")
	}
	p.Set(faultproxy.Fault{Blackhole: true})
	time.Sleep(3 * time.Second)
	p.Heal()
	healed := time.Now()
	if !releasedHint(t, ctx, hints, other, holder, "after", 20*time.Second) {
		t.Fatal("no released hint within 20 s after a silent outage of 3 s healed")
	}
	t.Logf("a released hint %v after the heal", time.Since(healed).Round(time.Millisecond))
}

// TestWatcherPacedByTTL: the hint connection's attempts and the waits between them are paced
// by the shortest TTL once one is known: an attempt is given up after a sixth of it, doubled
// after each attempt given up but never past the TTL, and the backoff never exceeds a sixth of
// it (at least 50 ms); before any session, Config.Timeout and the 5 s backoff apply.
func TestWatcherPacedByTTL(t *testing.T) {
	b := openBackend(t, "zk://127.0.0.1:1?timeout=10s")
	w := &watcher{b: b}
	if got := w.connectBound(); got != 10*time.Second {
		t.Errorf("connectBound with no TTL = %v, want the timeout, 10s", got)
	}
	if got := w.backoffCap(); got != watcherMaxBackoff {
		t.Errorf("backoffCap with no TTL = %v, want %v", got, watcherMaxBackoff)
	}
	b.minTTL.Note(time.Second)
	want := []time.Duration{166666666, 333333332, 666666664, time.Second, time.Second}
	for i, d := range want {
		if got := w.connectBound(); got != d {
			t.Errorf("connectBound after %d attempts given up = %v, want %v", i, got, d)
		}
		w.cut.Add(1)
	}
	if got := w.backoffCap(); got != 166666666 {
		t.Errorf("backoffCap at TTL 1s = %v, want 166.666666ms", got)
	}
	b.minTTL.Note(100 * time.Millisecond)
	if got := w.backoffCap(); got != watcherInitialBackoff {
		t.Errorf("backoffCap at TTL 100ms = %v, want %v", got, watcherInitialBackoff)
	}
}

// TestHintsRideOutStalls: a link that stalls for a few hundred milliseconds (a server busy
// with a snapshot, a loaded client; the bytes held, then delivered) is not taken for a silent
// one: the hint connection gives a ping at least minttl.MinReply (500 ms) for its reply. With
// the shortest TTL at 300 ms it pings every 50 ms, and gave up the connection after 100 ms
// without a read, so each stall of 300 ms cost a reconnect (and the watches set again); now
// five stalls cost none.
func TestHintsRideOutStalls(t *testing.T) {
	direct := testenv.ZooKeeper(t)[0]
	chroot := zktest.New(t, []string{direct}, "simba-test").Path
	openSession(t, openBackend(t, "zk://"+direct+chroot), time.Minute) // creates the roots watched
	p := faultproxy.StartTest(t, direct)
	b := openBackend(t, "zk://"+p.Addr()+chroot)
	// Only the hint connection goes through p: no session of b opens, and the TTL that paces
	// it is noted as OpenSession would.
	b.minTTL.Note(300 * time.Millisecond)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor(testWaiter, "stalled", time.Hour, false) // something to watch
	waitFor(t, "the hint connection's watches to be set", func() bool {
		b.hmu.Lock()
		defer b.hmu.Unlock()
		return b.watcher != nil && b.watcher.covers(spi.Released, "stalled")
	})
	if n := outagetest.Stalls(p, 5, 300*time.Millisecond); n != 0 {
		t.Fatalf("five stalls of 300 ms at TTL 300 ms: %d new connections, want none", n)
	}
}

package zookeeper

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestHintsAfterSilentOutage: a backend whose link to the server goes silent for a second (a
// blackhole: the open connections get no byte, close or reset, for good) hears releases again
// soon after the link heals. Its hint connection pings every sixth of the shortest TTL asked
// of it (500 ms at 3 s) and is given up after two silent intervals, then dialled again.
// Before, the silent connection was kept until its read timeout (2/3 of the watcher's 30 s
// session), and muted the sessions' own watches meanwhile: every release in those 20 s went
// unheard, and a waiter learnt of each only at its one-TTL retry (seen in an outside trial:
// hand-overs of ~1 s at TTL 1 s, and Locks of 10 s failing for a waiter whose lock was free).
// Another backend, on a direct link, takes and releases a lease until the hint of a release
// arrives: within 10 s (about 1.5 s expected), where the old code heard nothing for 20 s.
func TestHintsAfterSilentOutage(t *testing.T) {
	direct := testenv.ZooKeeper(t)[0]
	chroot := fmt.Sprintf("/simba-test-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeTree(t, []string{direct}, chroot) })
	p := faultproxy.StartTest(t, direct)
	b := openBackend(t, "zk://"+p.Addr()+chroot)
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

	// released takes and releases name on the direct link every 200 ms until the hint of a
	// release of it arrives, for up to within; it reports whether one did.
	released := func(name string, within time.Duration) bool {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			tok := mustGrant(t, other, holder, name)
			if err := other.Release(ctx, holder, name, tok); err != nil {
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

package outagetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/spi"
)

// GroupReopen checks that partitioned leadership comes back after an outage as fast as locks
// do (Reopen): a client joined to a group and leading its partitions before the outage, and
// joining a second group during it, is a member of both and leads every partition of both
// within the same bounds after the heal (1.5 s refused, 2 s blackholed, of the client's time).
// backend's connections to its server all go through p.
//
// The session lives through the outage (a Join is sent only while it does: one that a lost
// session's reopening sends goes at once): the outage begins just after a keep-alive succeeded
// and ends well inside the TTL of 60 s. The client runs on a virtual clock, as in Reopen.
// Where the Joins fail at once (refused connections on Redis and SQL), they fail over and over
// until their backoff has grown to its bound (a renewal interval, 20 s), and the heal comes
// just after the tenth failed: before, the Join was retried when that backoff ran out; now the
// probe that the failed Join starts gives the sign that retries it at once, as an acquire.
// Where they hang until their timeout (20 s: blackholed, or a client that waits for its
// connection, as ZooKeeper's and etcd's), the heal comes 30 s into the outage, while the
// second Join hangs: before, it failed only at its timeout, 10 s after the heal; now the probe
// that finds the backend answering cuts it short, as it does the session's calls, and it is
// retried at once.
//
// It returns how much client time passed from the heal to the last of the groups' partitions
// led again.
func GroupReopen(t testing.TB, backend spi.Backend, p *faultproxy.Proxy, prefix string, blackhole bool) time.Duration {
	t.Helper()
	const ttl = 60 * time.Second
	const partitions = 2
	fault, bound := faultproxy.Fault{Cut: true, Reset: true}, 1500*time.Millisecond
	if blackhole {
		fault, bound = faultproxy.Fault{Blackhole: true}, 2*time.Second
	}
	v := newVirtualClient(t, backend, ttl, "groupreopen")
	defer v.close()
	clock, ab, c, lost, healedAt, waitFor := v.clock, v.ab, v.c, &v.lost, &v.healedAt, v.waitFor
	waitFor("a session", func() bool { return c.Session() != "" }, time.Millisecond)
	self := c.Session()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// leads says that the client is a member of g and leads all its partitions.
	leads := func(g *simba.PartitionGroup) bool {
		return g != nil && slices.Contains(g.Members(), self) && len(g.Held()) == partitions
	}

	before, err := c.JoinGroup(ctx, prefix+"-before", partitions)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the first group's partitions led", func() bool { return leads(before) }, time.Millisecond)
	// The outage begins just after a keep-alive succeeded: the session has its whole TTL.
	n := ab.renewed.Load()
	waitFor("a keep-alive", func() bool { return ab.renewed.Load() > n }, 500*time.Millisecond)
	p.Set(fault)
	outage := clock.Now()
	during, err := c.JoinGroup(ctx, prefix+"-during", partitions)
	if err != nil {
		t.Fatal(err)
	}
	// Heal just after the tenth failed Join (their backoff has grown to its bound), or 30 s
	// into the outage if the Joins hang until their timeout (blackholed, or a backend whose
	// client waits for its connection: ZooKeeper, etcd), while the second hangs.
	waitFor("ten Joins failed or 30 s of outage", func() bool {
		return ab.joinFails.Load() >= 10 || clock.Now() >= outage+30*time.Second
	}, 50*time.Millisecond)
	if ab.joinFails.Load() < 1 {
		t.Fatalf("%v into the outage: %d Joins, none failed; want one failed at least", clock.Now()-outage, ab.joins.Load())
	}
	if c.Session() != self || lost.Load() {
		t.Fatalf("the session did not live through the outage (%v of it): the case needs it to", clock.Now()-outage)
	}
	p.Heal()
	healed := clock.Now()
	healedAt.Store(int64(healed) + 1)
	t.Logf("healed %v into the outage, after %d Joins of the second group (%d failed)", healed-outage, ab.joins.Load()-1, ab.joinFails.Load())
	var beforeAt, duringAt time.Duration = -1, -1
	waitFor("both groups' partitions led after the heal", func() bool {
		if beforeAt < 0 && leads(before) {
			beforeAt = clock.Now() - healed
		}
		if duringAt < 0 && leads(during) {
			duringAt = clock.Now() - healed
		}
		return beforeAt >= 0 && duringAt >= 0 || clock.Now() >= healed+3*bound
	}, 2*time.Millisecond)
	if lost.Load() || c.Session() != self {
		t.Fatalf("the session was lost after the heal")
	}
	if beforeAt < 0 || duringAt < 0 || beforeAt >= bound || duringAt >= bound {
		when := func(at time.Duration) string {
			if at < 0 {
				return "not yet"
			}
			return at.String() + " after it"
		}
		t.Fatalf("%v of the client's time after the heal, the group joined before the outage led again %s, the one joined during it %s (members %v, held %d of %d); want both within %v (before, the Join waited for its backoff, up to 20 s, or its timeout)",
			clock.Now()-healed, when(beforeAt), when(duringAt), during.Members(), len(during.Held()), partitions, bound)
	}
	t.Logf("after the heal (client time): the group joined before the outage led %v, the one joined during it %v", beforeAt, duringAt)
	return max(beforeAt, duringAt)
}

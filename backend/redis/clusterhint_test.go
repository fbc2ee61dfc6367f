package redis

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// subscribersByNode returns the number of subscribers of channel on each node of the Cluster
// (masters and replicas, by address; each node counts only its own connections).
func subscribersByNode(t testing.TB, cc *goredis.ClusterClient, channel string) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	by := map[string]int64{}
	err := cc.ForEachShard(context.Background(), func(ctx context.Context, node *goredis.Client) error {
		m, err := node.PubSubNumSub(ctx, channel).Result()
		mu.Lock()
		by[node.Options().Addr] = m[channel]
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return by
}

// awaitSubscribedOn waits until channel's one subscriber is a connection to the node at addr.
func awaitSubscribedOn(t testing.TB, cc *goredis.ClusterClient, channel, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		by := subscribersByNode(t, cc, channel)
		var total int64
		for _, n := range by {
			total += n
		}
		if total == 1 && by[addr] == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscribers of %s by node: %v, want one, on %s", channel, by, addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// masterAddr returns the address of the master that serves key.
func masterAddr(t testing.TB, cc *goredis.ClusterClient, key string) string {
	t.Helper()
	n, err := cc.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return n.Options().Addr
}

// onEveryMaster returns one name per master of the Cluster whose key (key(name)) that master
// serves.
func onEveryMaster(t testing.TB, cc *goredis.ClusterClient, prefix string, key func(string) string) map[string]string {
	t.Helper()
	var masters atomic.Int64
	if err := cc.ForEachMaster(context.Background(), func(context.Context, *goredis.Client) error {
		masters.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // master address → name
	for i := 0; int64(len(names)) < masters.Load(); i++ {
		if i > 10000 {
			t.Fatalf("no name on every master: %v", names)
		}
		name := uniq(t, prefix) + "." + strconv.Itoa(i)
		if a := masterAddr(t, cc, key(name)); names[a] == "" {
			names[a] = name
		}
	}
	return names
}

// TestClusterHintsSubscribeOnTheChannelsMaster: on a Cluster the backend SUBSCRIBEs to a
// waited-for lease's released channel (and a joined group's channel) on the master of its
// slot, the node whose scripts PUBLISH to it, for names on every master. Before this it
// subscribed to every channel on the one connection of the Cluster client's pub/sub, opened on
// the master of the ACL probe's slot, so a release on another master reached it over the
// cluster bus, whose links Redis opens without TCP_NODELAY: the hint was held up to ~40 ms
// (Nagle's algorithm waiting for the receiving node's delayed ACK), which was the Cluster's
// hand-over tail in bench-peers (p99 14-16 ms against 2-5 ms on a standalone server).
func TestClusterHintsSubscribeOnTheChannelsMaster(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // registered first: runs last
	ctx := context.Background()
	admin := clusterClient(t)
	b, hints := hinted(t, func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }, nil)
	other := newBackend(t, clusterClient(t))
	s, o := open(t, b, time.Minute), open(t, other, time.Minute)

	for addr, name := range onEveryMaster(t, admin, "onmaster", wire.LeaseKey) {
		r, err := other.Acquire(ctx, o, name)
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("acquire: %+v %v", r, err)
		}
		if w, err := b.AcquireQueued(ctx, s, name); err != nil || w.Kind != spi.HeldBy {
			t.Fatalf("waiter's acquire: %+v %v", w, err)
		}
		awaitSubscribedOn(t, admin, wire.ReleasedChannel(name), addr)
		if err := other.Release(ctx, o, name, r.Token); err != nil {
			t.Fatal(err)
		}
		awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: name})
	}

	for addr, group := range onEveryMaster(t, admin, "groupon", wire.GroupKey) {
		if st, err := b.Join(ctx, s, group); err != nil || st != spi.OK {
			t.Fatalf("join: %v %v", st, err)
		}
		awaitSubscribedOn(t, admin, wire.GroupChangedChannel(group), addr)
		awaitHint(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: group}) // the confirmation's
		if st, err := other.Join(ctx, o, group); err != nil || st != spi.OK {
			t.Fatalf("join: %v %v", st, err)
		}
		awaitHint(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: group})
	}
}

// TestClusterHintsFollowTheMaster: after a failover of the master of a waited-for lease's slot
// the subscription moves to the new master (once the backend's Cluster client knows of it),
// and the holder's release there is hinted.
func TestClusterHintsFollowTheMaster(t *testing.T) {
	pc := startPrivCluster(t)
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	ctx := context.Background()
	admin := pc.client()
	b, hints := hinted(t, func(testing.TB) goredis.UniversalClient { return pc.client() }, nil)
	other := newBackend(t, pc.client())
	s, o := open(t, b, time.Minute), open(t, other, time.Minute)
	name := uniq(t, "follow")
	ch := wire.ReleasedChannel(name)
	m := pc.masterOfKey(admin, wire.LeaseKey(name))
	r, err := other.Acquire(ctx, o, name)
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("acquire: %+v %v", r, err)
	}
	if w, err := b.AcquireQueued(ctx, s, name); err != nil || w.Kind != spi.HeldBy {
		t.Fatalf("waiter's acquire: %+v %v", w, err)
	}
	awaitSubscribedOn(t, admin, ch, net.JoinHostPort("127.0.0.1", strconv.Itoa(m)))

	// A graceful failover: the replica takes over the master's slots with its data.
	rep := pc.replicaOf(m)
	if err := pc.node(rep).Do(ctx, "cluster", "failover").Err(); err != nil {
		t.Fatal(err)
	}
	pc.waitPromoted(rep, 30*time.Second)
	// The Cluster clients learn of it from a reload (go-redis reloads on a redirection or a
	// connection error, else every minute); a reload may read a node that has not heard yet.
	promoted := net.JoinHostPort("127.0.0.1", strconv.Itoa(rep))
	await(t, 30*time.Second, "the clients to know the new master", func() bool {
		for _, c := range []*goredis.ClusterClient{admin, b.cc, other.cc} {
			if masterAddr(t, c, ch) != promoted {
				c.ReloadState(ctx)
				time.Sleep(300 * time.Millisecond) // past the reload's cool-down
				return false
			}
		}
		return true
	})
	awaitSubscribedOn(t, admin, ch, promoted)
	if err := other.Release(ctx, o, name, r.Token); err != nil {
		t.Fatal(err)
	}
	awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: name})
}

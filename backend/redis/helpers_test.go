package redis

import (
	"context"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// standaloneClient connects to the standalone test Redis (skipping or failing as testenv
// decides).
func standaloneClient(t testing.TB) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(t, "Redis", err.Error())
	}
	return c
}

// clusterClient connects to the shared Redis Cluster test servers.
func clusterClient(t testing.TB) *goredis.ClusterClient {
	t.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.RedisCluster(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(t, "Redis Cluster", err.Error())
	}
	return c
}

func newBackend(t testing.TB, c goredis.UniversalClient, opts ...Option) *Backend {
	t.Helper()
	b, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// expireScript makes a session's lease and membership look expired: the lease's expiry and the
// member's score become 1 (epoch ms), as if the session's TTL had run out.
var expireLease = goredis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[2]) == ARGV[1] then redis.call('HSET', KEYS[1], ARGV[3], '1') end
return 0`)

// expireSession ends sid at the server as if its TTL had run out: every lease it holds among
// names and every membership among groups gets an expiry in the past, and its keys are deleted.
// On a routeBySlot backend the client's copy of the session's expiry (which acquire_at and
// join_at send) moves into the past too, as it would have by the time the TTL ran out.
func expireSession(t testing.TB, c goredis.UniversalClient, sid spi.SessionID, names, groups []string, b *Backend) {
	t.Helper()
	ctx := context.Background()
	s := string(sid)
	for _, n := range names {
		if err := expireLease.Run(ctx, c, []string{wire.LeaseKey(n)}, s, wire.LeaseFieldSession, wire.LeaseFieldExpires).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range groups {
		if err := c.ZAddXX(ctx, wire.GroupKey(g), goredis.Z{Score: 1, Member: s}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{wire.SessionKey(s), wire.SessionLeasesKey(s), wire.SessionGroupsKey(s)} {
		if err := c.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if b != nil {
		b.mu.Lock()
		if st := b.sessions[sid]; st != nil {
			st.expires = 1
		}
		b.mu.Unlock()
	}
}

// tracked returns the names and groups of sid: from its sets (standalone) or from what the
// backend tracks (routeBySlot).
func tracked(t testing.TB, c goredis.UniversalClient, b *Backend, sid spi.SessionID) (names, groups []string) {
	t.Helper()
	if b == nil || !b.cluster {
		ctx := context.Background()
		l, err := c.SMembers(ctx, wire.SessionLeasesKey(string(sid))).Result()
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.SMembers(ctx, wire.SessionGroupsKey(string(sid))).Result()
		if err != nil {
			t.Fatal(err)
		}
		return nonEmpty(l), nonEmpty(g)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.sessions[sid]; st != nil {
		for n := range st.leases {
			names = append(names, n)
		}
		for g := range st.groups {
			groups = append(groups, g)
		}
	}
	return names, groups
}

// onMasters adds h to the client of each master of c and returns how many there are. The
// keep-alive's pipelined round runs on those clients, one pipeline per master (see round): a
// hook on c itself sees only the calls the Cluster client routes (the session's call).
func onMasters(t testing.TB, c *goredis.ClusterClient, h goredis.Hook) int {
	t.Helper()
	var mu sync.Mutex
	n := 0
	if err := c.ForEachMaster(context.Background(), func(_ context.Context, m *goredis.Client) error {
		m.AddHook(h)
		mu.Lock()
		n++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// mastersOf returns how many distinct masters of c serve keys.
func mastersOf(t testing.TB, c *goredis.ClusterClient, keys ...string) int {
	t.Helper()
	addrs := map[string]bool{}
	for _, k := range keys {
		m, err := c.MasterForKey(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		addrs[m.Options().Addr] = true
	}
	return len(addrs)
}

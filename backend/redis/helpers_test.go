package redis

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

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
		for n := range st.leases.gens {
			names = append(names, n)
		}
		for g := range st.groups.gens {
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

// uniq returns a fresh name, "rb.<prefix>.<base36 nanoseconds>", and deletes when t ends
// (dropKeys) the keys of the shared test servers named after it or after any name that begins
// with it (uniq(t, p)+".1"): a lease hash is never deleted by design, so each test name
// otherwise stays on the shared servers for good.
func uniq(t testing.TB, prefix string) string {
	t.Helper()
	name := "rb." + prefix + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
	dropKeys(t, name)
	return name
}

// dropKeys deletes, when t ends, every key of the shared test servers (the standalone server,
// and each master of the Cluster) whose hash tag begins with prefix, simba:<kind>:{prefix…}:
// the lease, waiter and group keys of the names and groups a test made from prefix. It
// touches no other key (never FLUSH). Sessions a test leaves open at that point find their
// leases gone and close without writing them again (close_session writes a lease only while
// the session holds it). A server that does not answer is left alone: the test could not
// have written there.
func dropKeys(t testing.TB, prefix string) {
	t.Helper()
	t.Cleanup(func() {
		if _, err := deleteTagged(prefix); err != nil {
			t.Errorf("deleting the test's keys simba:*:{%s…}: %v", prefix, err)
		}
	})
}

// sharedRedis are clients of the shared test servers for deleteTagged and countTagged (nil
// when a server does not answer), made once.
var sharedRedis = sync.OnceValues(newSharedRedis)

// newSharedRedis makes sharedRedis's clients. They are never closed (the first test to need
// them may be any test, and they serve the rest), so they start no goroutine that lives on:
// go-redis's maintenance notifications (on by default in "auto" mode with RESP3) start a
// circuit-breaker cleanup goroutine with every client, the Cluster's node clients included,
// that only Close or a failed handshake on a dialed connection stops, so the replicas' node
// clients, never dialed, kept theirs; a goleak check of whichever test made the clients (a
// hintModes subtest, in a dropKeys cleanup) reported them. These clients only SCAN and UNLINK.
func newSharedRedis() (*goredis.Client, *goredis.ClusterClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var s *goredis.Client
	var c *goredis.ClusterClient
	addr := "127.0.0.1:6379"
	if v := os.Getenv("SIMBA_TEST_REDIS"); v != "" {
		addr = v
	}
	s = goredis.NewClient(&goredis.Options{Addr: addr, MaintNotificationsConfig: noMaint()})
	if s.Ping(ctx).Err() != nil {
		s.Close()
		s = nil
	}
	addrs := "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	if v := os.Getenv("SIMBA_TEST_REDIS_CLUSTER"); v != "" {
		addrs = v
	}
	c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(addrs, ","), MaintNotificationsConfig: noMaint()})
	if c.Ping(ctx).Err() != nil {
		c.Close()
		c = nil
	}
	return s, c
}

// noMaint turns go-redis's maintenance notifications off (see newSharedRedis).
func noMaint() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// tagPattern is the SCAN pattern of the keys whose hash tag begins with prefix.
func tagPattern(prefix string) string {
	var b strings.Builder
	b.WriteString("simba:*{")
	for _, r := range prefix {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteString("*")
	return b.String()
}

// eachTagged calls fn with each server of the shared ones (a standalone server or a Cluster
// master) and the keys on it matching tagPattern(prefix).
func eachTagged(ctx context.Context, prefix string, fn func(c *goredis.Client, keys []string) error) error {
	s, cl := sharedRedis()
	scan := func(c *goredis.Client) error {
		var keys []string
		it := c.Scan(ctx, 0, tagPattern(prefix), 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		if err := it.Err(); err != nil {
			return err
		}
		return fn(c, keys)
	}
	var errs []error
	if s != nil {
		errs = append(errs, scan(s))
	}
	if cl != nil {
		var mu sync.Mutex
		var merrs []error
		err := cl.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
			err := scan(m)
			mu.Lock()
			defer mu.Unlock()
			merrs = append(merrs, err)
			return nil
		})
		errs = append(append(errs, err), merrs...)
	}
	return errors.Join(errs...)
}

// deleteTagged deletes the keys of the shared servers whose hash tag begins with prefix and
// returns how many it deleted.
func deleteTagged(prefix string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	n := 0
	err := eachTagged(ctx, prefix, func(c *goredis.Client, keys []string) error {
		for _, k := range keys { // one by one: on a Cluster master they span slots
			if err := c.Unlink(ctx, k).Err(); err != nil {
				return err
			}
		}
		mu.Lock()
		n += len(keys)
		mu.Unlock()
		return nil
	})
	return n, err
}

// countTagged counts the keys of the shared servers whose hash tag begins with prefix.
func countTagged(t testing.TB, prefix string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	n := 0
	if err := eachTagged(ctx, prefix, func(_ *goredis.Client, keys []string) error {
		mu.Lock()
		n += len(keys)
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

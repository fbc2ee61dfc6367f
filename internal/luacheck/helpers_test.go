package luacheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
)

// client connects to the standalone test Redis (skipping or failing as testenv decides).
func client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(t, "Redis", err.Error())
	}
	return c
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// newSID makes a session id the way the Redis backend does: 128 random bits as 32 lowercase hex.
func newSID() string { return randHex(16) }

// newName makes a unique lease or group name, so that tests never share keys.
func newName(prefix string) string { return "luacheck." + prefix + "." + randHex(6) }

func sessionKeys(sid string) (string, string, string) {
	return wire.SessionKey(sid), wire.SessionLeasesKey(sid), wire.SessionGroupsKey(sid)
}

// open opens a session with the given ttl and returns its id and reply.
func open(t testing.TB, c redis.Scripter, owner string, ttl time.Duration) (string, luascripts.OpenSessionReply) {
	t.Helper()
	sid := newSID()
	s, l, g := sessionKeys(sid)
	r, err := luascripts.OpenSession.Run(context.Background(), c,
		luascripts.OpenSessionKeys{Session: s, SessionLeases: l, SessionGroups: g},
		luascripts.OpenSessionArgs{Owner: owner, TTLMS: ttl.Milliseconds()})
	if err != nil {
		t.Fatalf("open_session: %v", err)
	}
	return sid, r
}

// acquire runs the standalone acquire script.
func acquire(t *testing.T, c redis.Scripter, sid, name string) luascripts.AcquireReply {
	t.Helper()
	r, err := luascripts.Acquire.Run(context.Background(), c,
		luascripts.AcquireKeys{Lease: wire.LeaseKey(name), Session: wire.SessionKey(sid), SessionLeases: wire.SessionLeasesKey(sid), Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)},
		luascripts.AcquireArgs{SessionID: sid, Name: name})
	if err != nil {
		t.Fatalf("acquire %s: %v", name, err)
	}
	return r
}

// release runs the standalone release script and reports whether it released.
func release(t *testing.T, c redis.Scripter, sid, name string, token int64) bool {
	t.Helper()
	r, err := luascripts.Release.Run(context.Background(), c,
		luascripts.ReleaseKeys{Lease: wire.LeaseKey(name), SessionLeases: wire.SessionLeasesKey(sid)},
		luascripts.ReleaseArgs{SessionID: sid, Name: name, Token: token})
	if err != nil {
		t.Fatalf("release %s: %v", name, err)
	}
	return r.Released == 1
}

// keepAlive runs the standalone keep_alive script for names and groups.
func keepAlive(t *testing.T, c redis.Scripter, sid string, names, groups []string) luascripts.KeepAliveReply {
	t.Helper()
	s, l, g := sessionKeys(sid)
	keys := luascripts.KeepAliveKeys{Session: s, SessionLeases: l, SessionGroups: g}
	for _, n := range names {
		keys.Leases = append(keys.Leases, wire.LeaseKey(n))
	}
	for _, n := range groups {
		keys.Groups = append(keys.Groups, wire.GroupKey(n))
	}
	r, err := luascripts.KeepAlive.Run(context.Background(), c, keys, luascripts.KeepAliveArgs{SessionID: sid, Names: names, GroupNames: groups})
	if err != nil {
		t.Fatalf("keep_alive: %v", err)
	}
	return r
}

// leaseField reads one field of a lease hash ("" when absent).
func leaseField(t *testing.T, c redis.Cmdable, name, field string) string {
	t.Helper()
	v, err := c.HGet(context.Background(), wire.LeaseKey(name), field).Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func atoi64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a decimal int64: %v", s, err)
	}
	return n
}

// redisNowMS reads Redis TIME in epoch ms.
func redisNowMS(t *testing.T, c redis.Cmdable) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// redisNowUS reads Redis TIME in microseconds since the epoch: the floor of a new tenure's
// token (DESIGN.md §5).
func redisNowUS(t *testing.T, c redis.Cmdable) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMicro()
}

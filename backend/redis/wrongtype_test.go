package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestKeysOfAnotherTypeFailNamed: a key under Simba's prefixes that holds another type than
// Simba keeps there (a string or a list where a lease hash, a session hash or a group's sorted
// set belongs, written by hand or by another program) makes the call that meets it fail with a
// permanent spi.ErrCorruptRecord (simba.ErrCorruptRecord) that names the key, what it holds and
// what Simba keeps there, on a standalone server and on a Cluster; and a Lock on such a lease
// returns it after one acquire, not retrying. Before (mends5), every such call failed with
// Redis's bare "WRONGTYPE Operation against a key holding the wrong kind of value", naming
// neither the key nor the type, and matching no Simba error. Private servers: the shared ones'
// Inspect must never meet the keys.
func TestKeysOfAnotherTypeFailNamed(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		c := goredis.NewClient(&goredis.Options{Addr: testenv.PrivateRedis(t)})
		t.Cleanup(func() { c.Close() })
		checkKeysOfAnotherType(t, c, "redis://"+c.Options().Addr)
	})
	t.Run("cluster", func(t *testing.T) {
		pc := startPrivCluster(t)
		var addrs []string
		for _, p := range pc.ports {
			addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
		}
		checkKeysOfAnotherType(t, pc.client(), "redis+cluster://"+strings.Join(addrs, ","))
	})
}

func checkKeysOfAnotherType(t *testing.T, c goredis.UniversalClient, dsn string) {
	ctx := context.Background()
	b := newBackend(t, c, WithLogger(discard))
	sid := open(t, b, privTestTTL)
	named := func(what string, err error, key, got, want string) {
		t.Helper()
		msg := `key "` + key + `" holds a ` + got + ` where Simba keeps a ` + want
		if !errors.Is(err, spi.ErrCorruptRecord) || !errors.Is(err, simba.ErrCorruptRecord) || spi.Classify(err) != spi.Permanent || !strings.Contains(fmtErr(err), msg) {
			t.Errorf("%s: %v; want a permanent ErrCorruptRecord naming %s", what, err, msg)
		}
	}
	set := func(key string) {
		t.Helper()
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, key, "hello", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// A lease key that is a string: acquire.
	set(wire.LeaseKey("stringly"))
	_, err := b.Acquire(ctx, sid, "stringly")
	named("acquire", err, wire.LeaseKey("stringly"), "string", "hash")

	// A held lease whose key became a list: release, and the keep-alive that names it.
	r, err := b.Acquire(ctx, sid, "listy")
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	if err := c.Del(ctx, wire.LeaseKey("listy")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.RPush(ctx, wire.LeaseKey("listy"), "x").Err(); err != nil {
		t.Fatal(err)
	}
	// The keep-alive renews the session and its other leases, leaving that one out of Held.
	if r, err := b.Acquire(ctx, sid, "sound"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	ka, err := b.KeepAlive(ctx, sid, []string{"listy", "sound"}, nil)
	if err != nil || ka.Expired || len(ka.Held) != 1 || ka.Held[0].Name != "sound" {
		t.Errorf("keep-alive = %+v, %v; want the session renewed, holding sound alone", ka, err)
	}
	err = b.Release(ctx, sid, "listy", r.Token)
	named("release", err, wire.LeaseKey("listy"), "list", "hash")

	// A group key that is a string: join and members.
	set(wire.GroupKey("stringly"))
	_, err = b.Join(ctx, sid, "stringly")
	named("join", err, wire.GroupKey("stringly"), "string", "zset")
	_, err = b.Members(ctx, "stringly")
	named("members", err, wire.GroupKey("stringly"), "string", "zset")

	// A session key that is a string (standalone: the acquire script reads it): the session's
	// own record is gone, so the session is (see TestSessionRecordOfAnotherTypeEndsSession).
	if _, ok := c.(*goredis.Client); ok {
		other := open(t, b, privTestTTL)
		set(wire.SessionKey(string(other)))
		if r, err := b.Acquire(ctx, other, "fine"); err != nil || r.Kind != spi.SessionExpired {
			t.Errorf("acquire of a session whose key is a string = %+v, %v; want SessionExpired", r, err)
		}
	}

	// Through the client: Lock returns the error after one acquire, not retrying it.
	be, err := Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	counted := &countAcquires{Backend: be}
	cl, err := simba.New(counted, simba.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl.Close(cctx)
	})
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = cl.Lock(lctx, "stringly")
	named("Lock", err, wire.LeaseKey("stringly"), "string", "hash")
	if !simba.IsPermanent(err) || counted.n.Load() != 1 {
		t.Errorf("Lock: %v after %d acquires; want a permanent error after one", err, counted.n.Load())
	}

	// A held lock whose key something writes over is lost alone: the client's other lock
	// keeps its term, renewed (on the old code every keep-alive failed, and both terms ended).
	lost, err := cl.Lock(lctx, "overwritten")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := cl.Lock(lctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, wire.LeaseKey("overwritten")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, wire.LeaseKey("overwritten"), "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost.Term.Context().Done():
	case <-lctx.Done():
		t.Fatal("the overwritten lock's term did not end within 30 s")
	}
	// Keep-alives go on succeeding, renewing the other lease, whose term stays valid.
	for ok := counted.kaOK.Load(); counted.kaOK.Load() < ok+2; {
		select {
		case <-lctx.Done():
			t.Fatalf("no two successful keep-alives within 30 s after the overwritten lock's term ended (%v)", context.Cause(lost.Term.Context()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !kept.Term.IsValid() {
		t.Errorf("the other lock's term ended too: %v", context.Cause(kept.Term.Context()))
	}
	// The lost term says what happened: its record was found corrupt, not taken over (on the
	// old code: "revoked: taken-over").
	var re *simba.RevokedError
	if cause := context.Cause(lost.Term.Context()); !errors.As(cause, &re) || re.Reason != simba.RevokedCorruptRecord || !errors.Is(cause, simba.ErrCorruptRecord) {
		t.Errorf("the overwritten lock's term ended with %v; want RevokedCorruptRecord, matching ErrCorruptRecord", cause)
	}
	if err := lost.Unlock(lctx); !errors.Is(err, simba.ErrCorruptRecord) || !errors.Is(err, simba.ErrNotHeld) || !strings.Contains(fmtErr(err), "corrupt-record") {
		t.Errorf("Unlock of the overwritten lock: %v; want a RevokedError saying corrupt-record", err)
	}
	if err := kept.Unlock(lctx); err != nil {
		t.Errorf("Unlock of the other lock: %v", err)
	}

	// A group whose key is a string: its join is refused for good (named), so it never landed
	// and Leave has nothing to undo: it returns nil at once, sending no leave (before permanent
	// refusals counted as "did not land", a refused join counted as of unknown outcome, and
	// Leave sent a leave that the same key refused). On older code still the leave was retried
	// about twice a second for the client's life and Leave returned only when its ctx ended
	// (trial21: a Leave without deadline hung for 9 minutes, until the process was killed).
	g, err := cl.JoinGroup(lctx, "stringly", 2)
	if err != nil {
		t.Fatal(err)
	}
	for g.Err() == nil {
		select {
		case <-lctx.Done():
			t.Fatal("the group's join reported no error within 30 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
	named("the group's join", g.Err(), wire.GroupKey("stringly"), "string", "zset")
	if err := g.Leave(lctx); err != nil {
		t.Errorf("Leave of a group whose join was refused for good: %v; want nil (the join never landed)", err)
	}
}

// fmtErr is err's text ("" for nil).
func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// countAcquires counts a backend's Acquire calls, and its successful keep-alives.
type countAcquires struct {
	spi.Backend
	n, kaOK atomic.Int64
}

func (c *countAcquires) KeepAlive(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	ka, err := c.Backend.KeepAlive(ctx, sid, names, groups)
	if err == nil && !ka.Expired {
		c.kaOK.Add(1)
	}
	return ka, err
}

func (c *countAcquires) Acquire(ctx context.Context, sid spi.SessionID, name string) (spi.Acquire, error) {
	c.n.Add(1)
	return c.Backend.Acquire(ctx, sid, name)
}

// TestSessionRecordOfAnotherTypeEndsSession: a session whose own record — its hash, or its
// lease or group set — someone wrote over with another type is ended cleanly: the keep-alive,
// an acquire, a join report it expired (not an error), a WARN line names the key, and
// CloseSession still closes it. Through a client, the lock's term is revoked as
// session-expired and the client goes on with a new session: a second Lock succeeds. On the
// old code the keep-alive failed with a permanent ErrCorruptRecord on every renewal (a string
// hash), or renewed the session (a string lease set, until the next acquire wrote its grant
// and then failed on the set), and the client's terms were lost to the failing keep-alives
// with no new session opened. A private server: the shared ones' Inspect must never meet the
// keys.
func TestSessionRecordOfAnotherTypeEndsSession(t *testing.T) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.PrivateRedis(t)})
	t.Cleanup(func() { c.Close() })
	var logs testenv.LogBuffer
	b := newBackend(t, c, WithLogger(logs.Logger()))
	overwrite := func(key string) {
		t.Helper()
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, key, "hello", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []struct {
		what string
		key  func(string) string
	}{
		{"hash", wire.SessionKey},
		{"lease set", wire.SessionLeasesKey},
		{"group set", wire.SessionGroupsKey},
	} {
		sid := open(t, b, privTestTTL)
		name := "sess-" + strings.ReplaceAll(k.what, " ", "-")
		if r, err := b.Acquire(ctx, sid, name); err != nil || r.Kind != spi.Granted {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		overwrite(k.key(string(sid)))
		ka, err := b.KeepAlive(ctx, sid, []string{name}, nil)
		if err != nil || !ka.Expired {
			t.Errorf("the session's %s a string: keep-alive = %+v, %v; want expired", k.what, ka, err)
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), k.key(string(sid))) {
			t.Errorf("the session's %s a string: no WARN line names the key %s:\n%s", k.what, k.key(string(sid)), logs.String())
		}
		if k.what != "group set" {
			if r, err := b.Acquire(ctx, sid, name+"-2"); err != nil || r.Kind != spi.SessionExpired {
				t.Errorf("the session's %s a string: acquire = %+v, %v; want SessionExpired", k.what, r, err)
			}
		} else if st, err := b.Join(ctx, sid, name); err != nil || st != spi.Expired {
			t.Errorf("the session's %s a string: join = %v, %v; want expired", k.what, st, err)
		}
		if err := b.CloseSession(ctx, sid); err != nil {
			t.Errorf("the session's %s a string: CloseSession: %v", k.what, err)
		}
	}

	// A group key of another type is left out of a keep-alive as a lease key is: the session
	// and its lease are renewed, the group's view is not given (the client keeps its own). On
	// the old code the keep-alive failed with ErrCorruptRecord.
	sid := open(t, b, privTestTTL)
	if r, err := b.Acquire(ctx, sid, "sess-g-lease"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	overwrite(wire.GroupKey("sess-g"))
	ka, err := b.KeepAlive(ctx, sid, []string{"sess-g-lease"}, []string{"sess-g"})
	if _, ok := ka.Members["sess-g"]; err != nil || ka.Expired || len(ka.Held) != 1 || ok {
		t.Errorf("keep-alive naming a group whose key is a string = %+v, %v; want the session and its lease renewed, the group left out", ka, err)
	}
	if err := b.CloseSession(ctx, sid); err != nil {
		t.Fatal(err)
	}

	// Through a client: the term ends as session-expired and the client goes on.
	cl, err := simba.New(b, simba.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl.Close(cctx)
	})
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	first, err := cl.Lock(lctx, "sess-client")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, wire.SessionKeyMatch).Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("session keys %q, %v; want the client's one", keys, err)
	}
	overwrite(keys[0])
	select {
	case <-first.Term.Context().Done():
	case <-lctx.Done():
		t.Fatal("the lock's term did not end within 30 s of its session's hash written over")
	}
	var re *simba.RevokedError
	if cause := context.Cause(first.Term.Context()); !errors.As(cause, &re) || re.Reason != simba.RevokedSessionExpired {
		t.Errorf("the term ended with %v; want RevokedSessionExpired", cause)
	}
	second, err := cl.Lock(lctx, "sess-client-2")
	if err != nil {
		t.Fatalf("Lock after the session's loss: %v; want a new session and the lock", err)
	}
	if err := second.Unlock(lctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// TestLostSessionRecordWarnedOnce: a session whose own record was written over is reported
// expired by every call of it that meets the record — the keep-alive, the acquires of its other
// elections, a join, all in flight together when it happens — and the WARN line saying why
// comes once for the session; the others log it at DEBUG. Each call logged the WARN, so one
// loss read as several (four here).
func TestLostSessionRecordWarnedOnce(t *testing.T) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.PrivateRedis(t)})
	t.Cleanup(func() { c.Close() })
	var logs testenv.LogBuffer
	b := newBackend(t, c, WithLogger(logs.Logger()))
	sid := open(t, b, privTestTTL)
	if r, err := b.Acquire(ctx, sid, "once-a"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	key := wire.SessionKey(string(sid))
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, key, "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ka, err := b.KeepAlive(ctx, sid, []string{"once-a"}, nil); err != nil || !ka.Expired {
		t.Errorf("keep-alive = %+v, %v; want expired", ka, err)
	}
	for _, name := range []string{"once-b", "once-c"} {
		if r, err := b.Acquire(ctx, sid, name); err != nil || r.Kind != spi.SessionExpired {
			t.Errorf("acquire %s = %+v, %v; want SessionExpired", name, r, err)
		}
	}
	if st, err := b.Join(ctx, sid, "once-g"); err != nil || st != spi.Expired {
		t.Errorf("join = %v, %v; want expired", st, err)
	}
	var warn, debug int
	for _, l := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(l, "the session's own record holds another type") || !strings.Contains(l, string(sid)) {
			continue
		}
		switch {
		case strings.Contains(l, "level=WARN"):
			warn++
		case strings.Contains(l, "level=DEBUG"):
			debug++
		}
	}
	if warn != 1 || debug != 3 {
		t.Errorf("%d WARN and %d DEBUG lines about the lost session's record, want 1 and 3:\n%s", warn, debug, logs.String())
	}
}

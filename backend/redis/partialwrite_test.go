package redis

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
)

// TestScriptsWriteNothingBeforeWrongType: a script that meets a key of another type than Simba
// keeps there (WRONGTYPE) stops with nothing written, since Lua scripts are not rolled back:
// each case puts such a key where the script's old order wrote something before it reached
// it, runs the script, and reads back the record the early write changed. On the old scripts
// each case found that write: a grant in the lease hash that the session's (string) lease set
// did not name, a lease's expiry moved by a keep-alive that failed on a group or on another
// lease, a lease freed by a release or a close that failed, a group joined or left by a call
// that failed on the session's set, a waiter dequeued by a failed withdraw, and a fence raised
// for a fenced HSET that never landed. (open_session deletes the session's hash before it
// writes it, so a string there no longer fails the open.) A private server: the shared ones'
// Inspect must never meet the keys.
func TestScriptsWriteNothingBeforeWrongType(t *testing.T) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.PrivateRedis(t)})
	t.Cleanup(func() { c.Close() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	wrongType := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("%s: %v; want WRONGTYPE", what, err)
		}
	}
	hget := func(key, field string) string {
		t.Helper()
		v, err := c.HGet(ctx, key, field).Result()
		if err != nil && err != goredis.Nil {
			t.Fatal(err)
		}
		return v
	}
	n := 0
	// session opens a session (its hash and sets) and returns its id.
	session := func() string {
		t.Helper()
		n++
		sid := strings.Repeat("0", 30) + string(rune('a'+n/16)) + string("0123456789abcdef"[n%16])
		_, err := luascripts.OpenSession.Run(ctx, c, luascripts.OpenSessionKeys{Session: wire.SessionKey(sid),
			SessionLeases: wire.SessionLeasesKey(sid), SessionGroups: wire.SessionGroupsKey(sid)},
			luascripts.OpenSessionArgs{Owner: "o", TTLMS: 60000})
		must(err)
		return sid
	}
	acquireKeys := func(sid, name string) luascripts.AcquireKeys {
		return luascripts.AcquireKeys{Lease: wire.LeaseKey(name), Session: wire.SessionKey(sid),
			SessionLeases: wire.SessionLeasesKey(sid), Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)}
	}
	// grant acquires name for sid and returns its token.
	grant := func(sid, name string) int64 {
		t.Helper()
		r, err := luascripts.Acquire.Run(ctx, c, acquireKeys(sid, name), luascripts.AcquireArgs{SessionID: sid, Name: name})
		must(err)
		if r.Status != luascripts.StatusOK {
			t.Fatalf("acquire %s: status %d", name, r.Status)
		}
		return r.Token
	}
	str := func(key string) { t.Helper(); must(c.Set(ctx, key, "hello", 0).Err()) }

	{ // acquire, the session's lease set a string
		sid := session()
		str(wire.SessionLeasesKey(sid))
		_, err := luascripts.Acquire.Run(ctx, c, acquireKeys(sid, "pw-acq"), luascripts.AcquireArgs{SessionID: sid, Name: "pw-acq"})
		wrongType("acquire", err)
		if h := hget(wire.LeaseKey("pw-acq"), wire.LeaseFieldSession); h != "" {
			t.Errorf("the lease hash names holder %q after the failed acquire; want no grant", h)
		}
	}

	// stale marks a held lease's expiry "1", so that a renewal would show.
	stale := func(name string) {
		t.Helper()
		must(c.HSet(ctx, wire.LeaseKey(name), wire.LeaseFieldExpires, "1").Err())
	}
	unmoved := func(what, name string) {
		t.Helper()
		if e := hget(wire.LeaseKey(name), wire.LeaseFieldExpires); e != "1" {
			t.Errorf("%s: lease %s's expires is %q after the failed call; want it unmoved (1)", what, name, e)
		}
	}
	kaKeys := func(sid string, names, groups []string) luascripts.KeepAliveKeys {
		k := luascripts.KeepAliveKeys{Session: wire.SessionKey(sid), SessionLeases: wire.SessionLeasesKey(sid), SessionGroups: wire.SessionGroupsKey(sid)}
		for _, n := range names {
			k.Leases = append(k.Leases, wire.LeaseKey(n))
		}
		for _, g := range groups {
			k.Groups = append(k.Groups, wire.GroupKey(g))
		}
		return k
	}

	{ // keep_alive, a group a string
		sid := session()
		grant(sid, "pw-ka")
		stale("pw-ka")
		str(wire.GroupKey("pw-ka-g"))
		_, err := luascripts.KeepAlive.Run(ctx, c, kaKeys(sid, []string{"pw-ka"}, []string{"pw-ka-g"}),
			luascripts.KeepAliveArgs{SessionID: sid, Names: []string{"pw-ka"}, GroupNames: []string{"pw-ka-g"}})
		wrongType("keep_alive", err)
		unmoved("keep_alive", "pw-ka")
	}

	{ // keep_alive, a later lease a string
		sid := session()
		grant(sid, "pw-ka2")
		stale("pw-ka2")
		str(wire.LeaseKey("pw-ka2-x"))
		names := []string{"pw-ka2", "pw-ka2-x"}
		_, err := luascripts.KeepAlive.Run(ctx, c, kaKeys(sid, names, nil), luascripts.KeepAliveArgs{SessionID: sid, Names: names})
		wrongType("keep_alive", err)
		unmoved("keep_alive", "pw-ka2")
	}

	{ // keep_alive_leases, a later lease a string
		sid := session()
		grant(sid, "pw-kal")
		stale("pw-kal")
		str(wire.LeaseKey("pw-kal-x"))
		exp, err := c.HGet(ctx, wire.SessionKey(sid), wire.SessionFieldExpires).Int64()
		must(err)
		_, err = luascripts.KeepAliveLeases.Run(ctx, c, luascripts.KeepAliveLeasesKeys{Leases: []string{wire.LeaseKey("pw-kal"), wire.LeaseKey("pw-kal-x")}},
			luascripts.KeepAliveLeasesArgs{SessionID: sid, ExpiresMS: exp, Names: []string{"pw-kal", "pw-kal-x"}})
		wrongType("keep_alive_leases", err)
		unmoved("keep_alive_leases", "pw-kal")
	}

	held := func(what, sid, name string) {
		t.Helper()
		if h := hget(wire.LeaseKey(name), wire.LeaseFieldSession); h != sid {
			t.Errorf("%s: lease %s's holder is %q after the failed call; want it still held", what, name, h)
		}
	}

	{ // release, the session's lease set a string
		sid := session()
		tok := grant(sid, "pw-rel")
		str(wire.SessionLeasesKey(sid))
		_, err := luascripts.Release.Run(ctx, c, luascripts.ReleaseKeys{Lease: wire.LeaseKey("pw-rel"), SessionLeases: wire.SessionLeasesKey(sid)},
			luascripts.ReleaseArgs{SessionID: sid, Name: "pw-rel", Token: tok})
		wrongType("release", err)
		held("release", sid, "pw-rel")
	}

	{ // release_leases, a later lease a string
		sid := session()
		tok := grant(sid, "pw-rl")
		str(wire.LeaseKey("pw-rl-x"))
		_, err := luascripts.ReleaseLeases.Run(ctx, c, luascripts.ReleaseLeasesKeys{Leases: []string{wire.LeaseKey("pw-rl"), wire.LeaseKey("pw-rl-x")}},
			luascripts.ReleaseLeasesArgs{SessionID: sid, Names: []string{"pw-rl", "pw-rl-x"}, Tokens: []int64{tok, 0}})
		wrongType("release_leases", err)
		held("release_leases", sid, "pw-rl")
	}

	{ // close_session, a later lease a string
		sid := session()
		grant(sid, "pw-cl")
		str(wire.LeaseKey("pw-cl-x"))
		names := []string{"pw-cl", "pw-cl-x"}
		k := kaKeys(sid, names, nil)
		_, err := luascripts.CloseSession.Run(ctx, c, luascripts.CloseSessionKeys{Session: k.Session, SessionLeases: k.SessionLeases,
			SessionGroups: k.SessionGroups, Leases: k.Leases}, luascripts.CloseSessionArgs{SessionID: sid, Names: names})
		wrongType("close_session", err)
		held("close_session", sid, "pw-cl")
	}

	member := func(group, sid string) bool {
		t.Helper()
		err := c.ZScore(ctx, wire.GroupKey(group), sid).Err()
		if err != nil && err != goredis.Nil {
			t.Fatal(err)
		}
		return err == nil
	}

	{ // join, the session's group set a string
		sid := session()
		str(wire.SessionGroupsKey(sid))
		_, err := luascripts.Join.Run(ctx, c, luascripts.JoinKeys{Session: wire.SessionKey(sid), SessionGroups: wire.SessionGroupsKey(sid), Group: wire.GroupKey("pw-join")},
			luascripts.JoinArgs{SessionID: sid, GroupName: "pw-join"})
		wrongType("join", err)
		if member("pw-join", sid) {
			t.Error("the failed join made the session a member")
		}
	}

	{ // leave, the session's group set a string
		sid := session()
		must(c.ZAdd(ctx, wire.GroupKey("pw-leave"), goredis.Z{Score: 9e12, Member: sid}).Err())
		str(wire.SessionGroupsKey(sid))
		_, err := luascripts.Leave.Run(ctx, c, luascripts.LeaveKeys{Session: wire.SessionKey(sid), SessionGroups: wire.SessionGroupsKey(sid), Group: wire.GroupKey("pw-leave")},
			luascripts.LeaveArgs{SessionID: sid, GroupName: "pw-leave"})
		wrongType("leave", err)
		if !member("pw-leave", sid) {
			t.Error("the failed leave removed the member")
		}
	}

	{ // withdraw, the waiting set a string
		must(c.ZAdd(ctx, wire.WaitersKey("pw-wd"), goredis.Z{Score: 1, Member: "w"}).Err())
		str(wire.WaitingKey("pw-wd"))
		_, err := luascripts.Withdraw.Run(ctx, c, luascripts.WithdrawKeys{Waiters: wire.WaitersKey("pw-wd"), Waiting: wire.WaitingKey("pw-wd")},
			luascripts.WithdrawArgs{SessionID: "w"})
		wrongType("withdraw", err)
		if err := c.ZScore(ctx, wire.WaitersKey("pw-wd"), "w").Err(); err != nil {
			t.Errorf("the failed withdraw dequeued the waiter: %v", err)
		}
	}

	{ // fence_hset, the target a string
		target := "pw-target:{pw-fence}"
		str(target)
		_, err := luascripts.FenceHset.Run(ctx, c, luascripts.FenceHsetKeys{Fence: wire.FenceKey("pw-fence"), Target: target},
			luascripts.FenceHsetArgs{Token: 7, Field: "f", Value: "v"})
		wrongType("fence_hset", err)
		if v, err := c.Get(ctx, wire.FenceKey("pw-fence")).Result(); err != goredis.Nil {
			t.Errorf("the fence holds %q (%v) after a fenced HSET that failed; want it untouched (absent)", v, err)
		}
	}

	{ // open_session, the session's hash a string
		sid := strings.Repeat("f", 32)
		str(wire.SessionKey(sid))
		_, err := luascripts.OpenSession.Run(ctx, c, luascripts.OpenSessionKeys{Session: wire.SessionKey(sid),
			SessionLeases: wire.SessionLeasesKey(sid), SessionGroups: wire.SessionGroupsKey(sid)},
			luascripts.OpenSessionArgs{Owner: "o", TTLMS: 60000})
		if err != nil || hget(wire.SessionKey(sid), wire.SessionFieldOwner) != "o" {
			t.Errorf("open_session over a string session key: %v; want the session opened", err)
		}
	}
}

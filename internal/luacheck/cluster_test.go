package luacheck

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
)

// clusterClient connects to the Redis Cluster test servers (skipping or failing as testenv
// decides).
func clusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.RedisCluster(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(t, "Redis Cluster", err.Error())
	}
	return c
}

// TestClusterScriptsStandalone runs the routeBySlot script set against standalone Redis, where it
// must behave the same.
func TestClusterScriptsStandalone(t *testing.T) { clusterFlow(t, client(t)) }

// TestClusterScriptsCluster runs the routeBySlot script set against a real Redis Cluster, with
// lease keys grouped by slot and the per-slot calls pipelined (go-redis sends each master its
// part of the pipeline).
func TestClusterScriptsCluster(t *testing.T) {
	c := clusterClient(t)
	if err := luascripts.LoadAll(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	clusterFlow(t, c)
}

// TestCombinedScriptsCrossSlotOnCluster: the standalone acquire spans two slots, which a Cluster
// refuses; that is why routeBySlot uses acquire_at.
func TestCombinedScriptsCrossSlotOnCluster(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	sid, _ := open(t, c, "cross", ttl)
	name := newName("cross")
	for c.ClusterKeySlot(ctx, wire.LeaseKey(name)).Val() == c.ClusterKeySlot(ctx, wire.SessionKey(sid)).Val() {
		name = newName("cross")
	}
	_, err := luascripts.Acquire.Run(ctx, c,
		luascripts.AcquireKeys{Lease: wire.LeaseKey(name), Session: wire.SessionKey(sid), SessionLeases: wire.SessionLeasesKey(sid), Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)},
		luascripts.AcquireArgs{SessionID: sid, Name: name})
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") && !strings.Contains(err.Error(), "slot") {
		t.Fatalf("standalone acquire across slots on a Cluster: %v, want a cross-slot error", err)
	}
}

type universal interface {
	redis.Cmdable
	redis.Scripter
}

func clusterFlow(t *testing.T, c universal) {
	ctx := context.Background()
	sid, _ := open(t, c, "routed", ttl)
	other, _ := open(t, c, "routed-other", ttl)
	s, l, g := sessionKeys(sid)

	// The session part of a keep-alive: keep_alive with no leases and no groups.
	ka, err := luascripts.KeepAlive.Run(ctx, c, luascripts.KeepAliveKeys{Session: s, SessionLeases: l, SessionGroups: g}, luascripts.KeepAliveArgs{SessionID: sid})
	if err != nil || ka.Status != luascripts.StatusOK {
		t.Fatalf("session keep-alive: %+v %v", ka, err)
	}
	kaOther := keepAlive(t, c, other, nil, nil)

	acquireAt := func(sid, owner, name string, expires int64) luascripts.AcquireAtReply {
		t.Helper()
		r, err := luascripts.AcquireAt.Run(ctx, c, luascripts.AcquireAtKeys{Lease: wire.LeaseKey(name), Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)}, luascripts.AcquireAtArgs{SessionID: sid, Owner: owner, ExpiresMS: expires})
		if err != nil {
			t.Fatalf("acquire_at %s: %v", name, err)
		}
		return r
	}

	// An expiry already past is refused and leaves the lease untouched.
	past := newName("past")
	if r := acquireAt(sid, "routed", past, redisNowMS(t, c)-1); r.Status != luascripts.StatusExpired {
		t.Fatalf("acquire_at with a past expiry: %+v, want expired", r)
	}
	if n, _ := c.Exists(ctx, wire.LeaseKey(past)).Result(); n != 0 {
		t.Fatal("a refused acquire_at created the lease")
	}

	names := make([]string, 8)
	tokens := map[string]int64{}
	for i := range names {
		names[i] = newName("routed")
		floor := redisNowUS(t, c)
		r := acquireAt(sid, "routed", names[i], ka.ExpiresMS)
		if r.Status != luascripts.StatusOK || r.Token < floor || r.Token >= 1<<53 || r.RemainingMS <= 0 || r.RemainingMS > ttl.Milliseconds() {
			t.Fatalf("acquire_at %s: %+v, want granted with a token in [%d, 2^53)", names[i], r, floor)
		}
		tokens[names[i]] = r.Token
		if e := atoi64(t, leaseField(t, c, names[i], wire.LeaseFieldExpires)); e != ka.ExpiresMS {
			t.Fatalf("lease expires %d, want the client's %d", e, ka.ExpiresMS)
		}
	}
	if r := acquireAt(sid, "routed", names[0], ka.ExpiresMS); r.Status != luascripts.StatusOK || r.Token != tokens[names[0]] {
		t.Fatalf("re-acquire_at by the holder: %+v, want the same token", r)
	}
	h := acquireAt(other, "routed-other", names[0], kaOther.ExpiresMS)
	if h.Status != luascripts.StatusHeldBy || h.Holder != sid || h.Owner != "routed" || h.RemainingMS <= 0 || h.RemainingMS > ttl.Milliseconds() {
		t.Fatalf("acquire_at by another session: %+v, want held by %s", h, sid)
	}

	// The lease part of a keep-alive: one keep_alive_leases call per slot, pipelined.
	time.Sleep(20 * time.Millisecond)
	ka2, err := luascripts.KeepAlive.Run(ctx, c, luascripts.KeepAliveKeys{Session: s, SessionLeases: l, SessionGroups: g}, luascripts.KeepAliveArgs{SessionID: sid})
	if err != nil || ka2.Status != luascripts.StatusOK || ka2.ExpiresMS <= ka.ExpiresMS {
		t.Fatalf("second session keep-alive: %+v %v", ka2, err)
	}
	asked := append(slices.Clone(names), newName("not-held"))
	bySlot := map[int64][]string{}
	for _, n := range asked {
		slot, err := c.ClusterKeySlot(ctx, wire.LeaseKey(n)).Result()
		if err != nil {
			// Standalone Redis without cluster support: one slot is as good as any.
			slot = 0
		}
		bySlot[slot] = append(bySlot[slot], n)
	}
	// As a backend would: make sure the scripts are cached, pipeline EVALSHA, and resend any call
	// that still met NOSCRIPT (a failover or flush in between) with EVAL.
	if err := luascripts.LoadAll(ctx, c); err != nil {
		t.Fatal(err)
	}
	pipe := c.Pipeline()
	var cmds []*redis.Cmd
	var calls []luascripts.KeepAliveLeasesKeys
	var args []luascripts.KeepAliveLeasesArgs
	for _, group := range bySlot {
		keys := luascripts.KeepAliveLeasesKeys{}
		for _, n := range group {
			keys.Leases = append(keys.Leases, wire.LeaseKey(n))
		}
		a := luascripts.KeepAliveLeasesArgs{SessionID: sid, ExpiresMS: ka2.ExpiresMS, Names: group}
		calls, args = append(calls, keys), append(args, a)
		cmds = append(cmds, luascripts.KeepAliveLeases.EvalSha(ctx, pipe, keys, a))
	}
	if _, err := pipe.Exec(ctx); err != nil && !luascripts.IsNoScript(err) {
		t.Fatalf("pipelined keep_alive_leases: %v", err)
	}
	var held []luascripts.Held
	for i, cmd := range cmds {
		if luascripts.IsNoScript(cmd.Err()) {
			cmd = luascripts.KeepAliveLeases.Eval(ctx, c, calls[i], args[i])
		}
		if cmd.Err() != nil {
			t.Fatalf("keep_alive_leases: %v", cmd.Err())
		}
		r, err := luascripts.KeepAliveLeases.Decode(cmd.Val())
		if err != nil || r.Status != luascripts.StatusOK {
			t.Fatalf("keep_alive_leases: %+v %v", r, err)
		}
		held = append(held, r.Held...)
	}
	if len(held) != len(names) {
		t.Fatalf("held %d leases, want %d", len(held), len(names))
	}
	for _, hl := range held {
		if tokens[hl.Name] != hl.Token {
			t.Errorf("held %+v, want token %d", hl, tokens[hl.Name])
		}
		if e := atoi64(t, leaseField(t, c, hl.Name, wire.LeaseFieldExpires)); e != ka2.ExpiresMS {
			t.Errorf("%s expires %d, want %d", hl.Name, e, ka2.ExpiresMS)
		}
	}
	// A late call carrying the older expiry never moves a lease's expiry back.
	if r := acquireAt(sid, "routed", names[1], ka.ExpiresMS); r.Status != luascripts.StatusOK || r.Token != tokens[names[1]] {
		t.Fatalf("re-acquire_at with an older expiry: %+v", r)
	}
	if r, err := luascripts.KeepAliveLeases.Run(ctx, c, luascripts.KeepAliveLeasesKeys{Leases: []string{wire.LeaseKey(names[2])}}, luascripts.KeepAliveLeasesArgs{SessionID: sid, ExpiresMS: ka.ExpiresMS, Names: names[2:3]}); err != nil || r.Status != luascripts.StatusOK || len(r.Held) != 1 {
		t.Fatalf("keep_alive_leases with an older expiry: %+v %v", r, err)
	}
	for _, n := range names[1:3] {
		if e := atoi64(t, leaseField(t, c, n, wire.LeaseFieldExpires)); e != ka2.ExpiresMS {
			t.Fatalf("%s expires moved back to %d, want %d", n, e, ka2.ExpiresMS)
		}
	}
	if r, err := luascripts.KeepAliveLeases.Run(ctx, c, luascripts.KeepAliveLeasesKeys{Leases: []string{wire.LeaseKey(names[0])}}, luascripts.KeepAliveLeasesArgs{SessionID: sid, ExpiresMS: redisNowMS(t, c) - 1, Names: names[:1]}); err != nil || r.Status != luascripts.StatusExpired {
		t.Fatalf("keep_alive_leases with a past expiry: %+v %v, want expired", r, err)
	}

	// Release: release_leases with one key and the token; a wrong token changes nothing.
	releaseLeases := func(sid string, names []string, tokens []int64) int64 {
		t.Helper()
		keys := luascripts.ReleaseLeasesKeys{}
		for _, n := range names {
			keys.Leases = append(keys.Leases, wire.LeaseKey(n))
		}
		r, err := luascripts.ReleaseLeases.Run(ctx, c, keys, luascripts.ReleaseLeasesArgs{SessionID: sid, Names: names, Tokens: tokens})
		if err != nil {
			t.Fatalf("release_leases: %v", err)
		}
		return r.Released
	}
	if n := releaseLeases(sid, names[:1], []int64{tokens[names[0]] + 1}); n != 0 {
		t.Fatal("release_leases with the wrong token released")
	}
	if n := releaseLeases(other, names[:1], []int64{0}); n != 0 {
		t.Fatal("release_leases by another session released")
	}
	if n := releaseLeases(sid, names[:1], []int64{tokens[names[0]]}); n != 1 {
		t.Fatal("release_leases with the right token did not release")
	}
	if r := acquireAt(other, "routed-other", names[0], kaOther.ExpiresMS); r.Status != luascripts.StatusOK || r.Token <= tokens[names[0]] {
		t.Fatalf("acquire_at after release: %+v, want a token > %d", r, tokens[names[0]])
	}

	// Groups: join_at (also the group part of a keep-alive), members, leave_at.
	grp := newName("routed-group")
	joinAt := func(sid string, expires int64) luascripts.JoinAtReply {
		t.Helper()
		r, err := luascripts.JoinAt.Run(ctx, c, luascripts.JoinAtKeys{Group: wire.GroupKey(grp)}, luascripts.JoinAtArgs{SessionID: sid, ExpiresMS: expires, GroupName: grp})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	joinAt(other, kaOther.ExpiresMS)
	j := joinAt(sid, ka2.ExpiresMS)
	want := []string{sid, other}
	slices.Sort(want)
	slices.Sort(j.Members)
	if j.Status != luascripts.StatusOK || !slices.Equal(j.Members, want) {
		t.Fatalf("join_at: %+v, want members %v", j, want)
	}
	if j := joinAt(other, redisNowMS(t, c)-1); j.Status != luascripts.StatusExpired {
		t.Fatalf("join_at with a past expiry: %+v, want expired", j)
	}
	m, err := luascripts.Members.Run(ctx, c, luascripts.MembersKeys{Group: wire.GroupKey(grp)}, luascripts.MembersArgs{GroupName: grp})
	if err != nil || !slices.Equal(m.Members, []string{sid}) {
		t.Fatalf("members after the other's expired join: %+v %v", m, err)
	}
	lv, err := luascripts.LeaveAt.Run(ctx, c, luascripts.LeaveAtKeys{Group: wire.GroupKey(grp)}, luascripts.LeaveAtArgs{SessionID: sid, ExpiresMS: ka2.ExpiresMS, GroupName: grp})
	if err != nil || lv.Status != luascripts.StatusOK {
		t.Fatalf("leave_at: %+v %v", lv, err)
	}
	if n, _ := c.ZCard(ctx, wire.GroupKey(grp)).Result(); n != 0 {
		t.Fatalf("%d members after leave_at", n)
	}

	// Close: release_leases per slot with token 0, then close_session with the session's keys only.
	rest := names[1:]
	total := int64(0)
	for _, group := range bySlot {
		var mine []string
		for _, n := range group {
			if slices.Contains(rest, n) {
				mine = append(mine, n)
			}
		}
		if len(mine) > 0 {
			total += releaseLeases(sid, mine, make([]int64, len(mine)))
		}
	}
	if total != int64(len(rest)) {
		t.Fatalf("close released %d leases, want %d", total, len(rest))
	}
	cr, err := luascripts.CloseSession.Run(ctx, c, luascripts.CloseSessionKeys{Session: s, SessionLeases: l, SessionGroups: g}, luascripts.CloseSessionArgs{SessionID: sid})
	if err != nil || cr.Released != 0 {
		t.Fatalf("close_session: %+v %v", cr, err)
	}
	if n, _ := c.Exists(ctx, s).Result(); n != 0 {
		t.Fatal("the session key remains after close")
	}
	for _, n := range rest {
		if got := leaseField(t, c, n, wire.LeaseFieldSession); got != "" {
			t.Fatalf("%s still held by %q after close", n, got)
		}
	}
}

package luacheck

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"

	"github.com/simba-go/simba/internal/testenv"
)

const ttl = 10 * time.Second

func TestOpenSession(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	before := redisNowMS(t, c)
	sid, r := open(t, c, "host:1", ttl)
	after := redisNowMS(t, c)
	if r.RemainingMS != ttl.Milliseconds() {
		t.Errorf("remaining %d, want %d", r.RemainingMS, ttl.Milliseconds())
	}
	if r.ExpiresMS < before+ttl.Milliseconds() || r.ExpiresMS > after+ttl.Milliseconds() {
		t.Errorf("expires %d outside [%d, %d] + ttl", r.ExpiresMS, before, after)
	}
	h, err := c.HGetAll(ctx, wire.SessionKey(sid)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if h[wire.SessionFieldOwner] != "host:1" || atoi64(t, h[wire.SessionFieldTTL]) != ttl.Milliseconds() || atoi64(t, h[wire.SessionFieldExpires]) != r.ExpiresMS {
		t.Errorf("session hash %v", h)
	}
	pexp, err := c.PExpireTime(ctx, wire.SessionKey(sid)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pexp.Milliseconds() != r.ExpiresMS {
		t.Errorf("PEXPIRETIME %d, want the expiry %d", pexp.Milliseconds(), r.ExpiresMS)
	}
	for _, k := range []string{wire.SessionLeasesKey(sid), wire.SessionGroupsKey(sid)} {
		members, err := c.SMembers(ctx, k).Result()
		if err != nil || !slices.Equal(members, []string{""}) {
			t.Errorf("%s holds %q (%v), want only the empty sentinel", k, members, err)
		}
		if p, _ := c.PExpireTime(ctx, k).Result(); p.Milliseconds() != r.ExpiresMS {
			t.Errorf("%s PEXPIRETIME %d, want the session's expiry %d", k, p.Milliseconds(), r.ExpiresMS)
		}
	}
	s, l, g := sessionKeys(newSID())
	_, err = luascripts.OpenSession.Run(ctx, c, luascripts.OpenSessionKeys{Session: s, SessionLeases: l, SessionGroups: g}, luascripts.OpenSessionArgs{Owner: "x", TTLMS: 0})
	if err == nil {
		t.Fatal("open_session accepted ttl_ms 0")
	}
}

// TestAcquireGrantHeldByIdempotent: a grant gives a token at least Redis TIME in µs (the clock
// floor), another session sees HeldBy with the holder, its owner, its token and its remaining
// time, and the holder's re-acquire returns the same token.
func TestAcquireGrantHeldByIdempotent(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	s1, _ := open(t, c, "owner-one", ttl)
	s2, _ := open(t, c, "owner-two", ttl)
	name := newName("grant")

	floor := redisNowUS(t, c)
	r := acquire(t, c, s1, name)
	if r.Status != luascripts.StatusOK || r.Token < floor || r.Token >= 1<<53 {
		t.Fatalf("first acquire: %+v, want granted with a token in [%d, 2^53)", r, floor)
	}
	if r.RemainingMS <= 0 || r.RemainingMS > ttl.Milliseconds() {
		t.Fatalf("granted remaining %d outside (0, %d]", r.RemainingMS, ttl.Milliseconds())
	}
	h := acquire(t, c, s2, name)
	if h.Status != luascripts.StatusHeldBy || h.Holder != s1 || h.Owner != "owner-one" || h.Token != r.Token {
		t.Fatalf("acquire by another session: %+v, want held by %s (owner-one)", h, s1)
	}
	if h.RemainingMS <= 0 || h.RemainingMS > ttl.Milliseconds() {
		t.Fatalf("held-by remaining %d outside (0, %d]", h.RemainingMS, ttl.Milliseconds())
	}
	again := acquire(t, c, s1, name)
	if again.Status != luascripts.StatusOK || again.Token != r.Token {
		t.Fatalf("re-acquire by the holder: %+v, want granted with the same token %d", again, r.Token)
	}
	if ok, _ := c.SIsMember(ctx, wire.SessionLeasesKey(s1), name).Result(); !ok {
		t.Error("the lease is not in the session's leases set")
	}
	if d, _ := c.PTTL(ctx, wire.LeaseKey(name)).Result(); d != -1*time.Nanosecond && d != -1*time.Millisecond {
		t.Errorf("the lease hash has a TTL (%v); it must never expire", d)
	}
	if got := leaseField(t, c, name, wire.LeaseFieldSession); got != s1 {
		t.Errorf("lease session field %q, want %q", got, s1)
	}
}

// TestAcquireBySessionThatDoesNotExist: an unknown or expired session gets SessionExpired.
func TestAcquireBySessionThatDoesNotExist(t *testing.T) {
	c := client(t)
	name := newName("nosession")
	if r := acquire(t, c, newSID(), name); r.Status != luascripts.StatusExpired {
		t.Fatalf("acquire by a session never opened: %+v, want expired", r)
	}
	if got := leaseField(t, c, name, wire.LeaseFieldToken); got != "" {
		t.Fatalf("a refused acquire touched the lease (token %q)", got)
	}
}

// TestReleaseNeedsSessionAndToken: a release with the wrong token or by another session changes
// nothing; the right one frees the lease and the next grant has a greater token.
func TestReleaseNeedsSessionAndToken(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	s1, _ := open(t, c, "one", ttl)
	s2, _ := open(t, c, "two", ttl)
	name := newName("release")
	tok := acquire(t, c, s1, name).Token
	before, err := c.HGetAll(ctx, wire.LeaseKey(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if release(t, c, s1, name, tok+1) {
		t.Fatal("release with the wrong token released")
	}
	if release(t, c, s2, name, tok) {
		t.Fatal("release by another session released")
	}
	after, _ := c.HGetAll(ctx, wire.LeaseKey(name)).Result()
	if !mapsEqual(before, after) {
		t.Fatalf("a refused release changed the lease: %v -> %v", before, after)
	}
	if r := acquire(t, c, s2, name); r.Status != luascripts.StatusHeldBy {
		t.Fatalf("after refused releases: %+v, want held by", r)
	}
	if !release(t, c, s1, name, tok) {
		t.Fatal("release by the holder with its token did not release")
	}
	if ok, _ := c.SIsMember(ctx, wire.SessionLeasesKey(s1), name).Result(); ok {
		t.Error("a released lease stays in the session's leases set")
	}
	if got := leaseField(t, c, name, wire.LeaseFieldToken); atoi64(t, got) != tok {
		t.Errorf("release changed the token to %s", got)
	}
	r := acquire(t, c, s2, name)
	if r.Status != luascripts.StatusOK || r.Token <= tok {
		t.Fatalf("acquire after release: %+v, want granted with a token > %d", r, tok)
	}
	if release(t, c, s1, name, tok) {
		t.Fatal("a stale release by the former holder released the new holder's lease")
	}
}

// TestReleasePublishes: a release publishes the lease name on the lease key's channel, which the
// PSUBSCRIBE pattern also matches.
func TestReleasePublishes(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	s1, _ := open(t, c, "one", ttl)
	name := newName("publish")
	sub := c.Subscribe(ctx, wire.ReleasedChannel(name))
	defer sub.Close()
	psub := c.PSubscribe(ctx, wire.ReleasedChannelMatch)
	defer psub.Close()
	for _, s := range []*redis.PubSub{sub, psub} {
		if _, err := s.Receive(ctx); err != nil { // the subscription confirmation
			t.Fatal(err)
		}
	}
	tok := acquire(t, c, s1, name).Token
	release(t, c, s1, name, tok+1) // refused: publishes nothing
	if !release(t, c, s1, name, tok) {
		t.Fatal("release failed")
	}
	msg := receive(t, sub)
	if msg.Channel != wire.LeaseKey(name) || msg.Payload != name {
		t.Fatalf("message %q on %q, want %q on %q", msg.Payload, msg.Channel, name, wire.LeaseKey(name))
	}
	// The pattern subscription sees every release; find ours among other tests' messages.
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := receive(t, psub)
		if m.Payload == name {
			if m.Pattern != wire.ReleasedChannelMatch || m.Channel != wire.ReleasedChannel(name) {
				t.Fatalf("pattern message %+v", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no release on the pattern subscription")
		}
	}
}

func receive(t *testing.T, s *redis.PubSub) *redis.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := s.Receive(ctx)
	if err != nil {
		t.Fatalf("no message: %v", err)
	}
	m, ok := v.(*redis.Message)
	if !ok {
		t.Fatalf("got %T, want a message", v)
	}
	return m
}

// TestTakeoverAfterExpiry: once the holder's session expires, another session takes the lease
// with a greater token, and the expired session's keep-alive and acquire report it expired.
func TestTakeoverAfterExpiry(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	s1, _ := open(t, c, "short", 150*time.Millisecond)
	s2, _ := open(t, c, "long", ttl)
	name := newName("takeover")
	first := acquire(t, c, s1, name)
	if first.Status != luascripts.StatusOK {
		t.Fatalf("%+v", first)
	}
	if r := acquire(t, c, s2, name); r.Status != luascripts.StatusHeldBy || r.RemainingMS > 150 {
		t.Fatalf("before expiry: %+v, want held by with remaining <= 150ms", r)
	}
	time.Sleep(250 * time.Millisecond)
	r := acquire(t, c, s2, name)
	if r.Status != luascripts.StatusOK || r.Token <= first.Token {
		t.Fatalf("after the holder expired: %+v, want granted with a token > %d", r, first.Token)
	}
	ka := keepAlive(t, c, s1, []string{name}, nil)
	if ka.Status != luascripts.StatusExpired || len(ka.Held) != 0 {
		t.Fatalf("keep-alive of the expired session: %+v, want expired", ka)
	}
	if n, _ := c.Exists(ctx, sessionKeysList(s1)...).Result(); n != 0 {
		t.Fatalf("%d keys of the expired session remain", n)
	}
	if r := acquire(t, c, s1, name); r.Status != luascripts.StatusExpired {
		t.Fatalf("acquire by the expired session: %+v, want expired", r)
	}
	// Tokens keep increasing through a release and further takeovers after expiry.
	if !release(t, c, s2, name, r.Token) {
		t.Fatal("release by the holder failed")
	}
	last := r.Token
	for i := 0; i < 3; i++ {
		sid, _ := open(t, c, "next", 100*time.Millisecond)
		g := acquire(t, c, sid, name)
		if g.Status != luascripts.StatusOK || g.Token <= last || g.Token != leaseToken(t, c, name) {
			t.Fatalf("round %d: %+v, want a token > %d", i, g, last)
		}
		last = g.Token
		time.Sleep(150 * time.Millisecond) // the holder expires; the next round takes over
	}
}

func leaseToken(t *testing.T, c redis.Cmdable, name string) int64 {
	t.Helper()
	return atoi64(t, leaseField(t, c, name, wire.LeaseFieldToken))
}

func sessionKeysList(sid string) []string {
	s, l, g := sessionKeys(sid)
	return []string{s, l, g}
}

// TestKeepAliveMovesLeaseExpiry: keep-alive renews the session, reports exactly the asked leases
// it holds, and moves each one's expires field to the session's new expiry.
func TestKeepAliveMovesLeaseExpiry(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	sid, opened := open(t, c, "ka", 2*time.Second)
	other, _ := open(t, c, "other", ttl)
	a, b, foreign, free := newName("ka-a"), newName("ka-b"), newName("ka-foreign"), newName("ka-free")
	ta, tb := acquire(t, c, sid, a).Token, acquire(t, c, sid, b).Token
	acquire(t, c, other, foreign)
	if e := atoi64(t, leaseField(t, c, a, wire.LeaseFieldExpires)); e != opened.ExpiresMS {
		t.Fatalf("lease expires %d, want the session's expiry %d", e, opened.ExpiresMS)
	}
	time.Sleep(30 * time.Millisecond)
	r := keepAlive(t, c, sid, []string{a, foreign, b, free}, nil)
	if r.Status != luascripts.StatusOK || r.RemainingMS != 2000 {
		t.Fatalf("keep-alive: %+v", r)
	}
	if r.ExpiresMS <= opened.ExpiresMS {
		t.Fatalf("keep-alive did not move the session's expiry: %d <= %d", r.ExpiresMS, opened.ExpiresMS)
	}
	want := []luascripts.Held{{Name: a, Token: ta}, {Name: b, Token: tb}}
	if !slices.Equal(r.Held, want) {
		t.Fatalf("held %+v, want %+v", r.Held, want)
	}
	for _, n := range []string{a, b} {
		if e := atoi64(t, leaseField(t, c, n, wire.LeaseFieldExpires)); e != r.ExpiresMS {
			t.Errorf("%s expires %d, want the new session expiry %d", n, e, r.ExpiresMS)
		}
	}
	if e := atoi64(t, leaseField(t, c, foreign, wire.LeaseFieldExpires)); e == r.ExpiresMS {
		t.Error("keep-alive moved another session's lease")
	}
	if h, _ := c.HGet(ctx, wire.SessionKey(sid), wire.SessionFieldExpires).Result(); atoi64(t, h) != r.ExpiresMS {
		t.Errorf("session hash expires %s, want %d", h, r.ExpiresMS)
	}
	for _, k := range sessionKeysList(sid) {
		if p, _ := c.PExpireTime(ctx, k).Result(); p.Milliseconds() != r.ExpiresMS {
			t.Errorf("%s PEXPIRETIME %d, want %d", k, p.Milliseconds(), r.ExpiresMS)
		}
	}
	// A session kept alive past its first TTL keeps its leases against other sessions.
	for i := 0; i < 3; i++ {
		time.Sleep(900 * time.Millisecond)
		if k := keepAlive(t, c, sid, []string{a, b}, nil); k.Status != luascripts.StatusOK || len(k.Held) != 2 {
			t.Fatalf("keep-alive %d: %+v", i, k)
		}
	}
	if h := acquire(t, c, other, a); h.Status != luascripts.StatusHeldBy || h.Holder != sid {
		t.Fatalf("after keep-alives past the first TTL: %+v, want held by %s", h, sid)
	}
}

// TestKeepAliveTenThousandLeasesInOneCall: one keep_alive call renews 10,000 held leases.
func TestKeepAliveTenThousandLeasesInOneCall(t *testing.T) {
	testenv.Short(t, "the 10,000-lease keep-alive")
	c := client(t)
	ctx := context.Background()
	sid, _ := open(t, c, "bulk", 30*time.Second)
	prefix := newName("bulk")
	names := make([]string, 10000)
	pipe := c.Pipeline()
	for i := range names {
		names[i] = prefix + "." + itoa(i)
		luascripts.Acquire.EvalSha(ctx, pipe, luascripts.AcquireKeys{Lease: wire.LeaseKey(names[i]), Session: wire.SessionKey(sid), SessionLeases: wire.SessionLeasesKey(sid), Waiters: wire.WaitersKey(names[i]), Waiting: wire.WaitingKey(names[i])}, luascripts.AcquireArgs{SessionID: sid, Name: names[i]})
	}
	if err := luascripts.LoadAll(ctx, c); err != nil {
		t.Fatal(err)
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		r, err := luascripts.Acquire.Decode(cmd.(*redis.Cmd).Val())
		if err != nil || r.Status != luascripts.StatusOK {
			t.Fatalf("pipelined acquire: %+v %v", r, err)
		}
	}
	r := keepAlive(t, c, sid, names, nil)
	if r.Status != luascripts.StatusOK || len(r.Held) != len(names) {
		t.Fatalf("keep-alive of 10,000 leases: status %d, %d held", r.Status, len(r.Held))
	}
	if e := atoi64(t, leaseField(t, c, names[9999], wire.LeaseFieldExpires)); e != r.ExpiresMS {
		t.Fatalf("last lease expires %d, want %d", e, r.ExpiresMS)
	}
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// TestGroupsExpireByScore: members are scored by their session's expiry; a member whose session
// expired drops out, keep-alive refreshes membership and returns the live members.
func TestGroupsExpireByScore(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	long, _ := open(t, c, "long", ttl)
	short, _ := open(t, c, "short", 150*time.Millisecond)
	g := newName("group")
	join := func(sid string) int64 {
		r, err := luascripts.Join.Run(ctx, c, luascripts.JoinKeys{Session: wire.SessionKey(sid), SessionGroups: wire.SessionGroupsKey(sid), Group: wire.GroupKey(g)}, luascripts.JoinArgs{SessionID: sid, GroupName: g})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	members := func() []string {
		r, err := luascripts.Members.Run(ctx, c, luascripts.MembersKeys{Group: wire.GroupKey(g)}, luascripts.MembersArgs{GroupName: g})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(r.Members)
		return r.Members
	}
	sub := c.Subscribe(ctx, wire.GroupChangedChannel(g))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if s := join(long); s != luascripts.StatusOK {
		t.Fatalf("join: %d", s)
	}
	if m := receive(t, sub); m.Payload != g {
		t.Fatalf("join published %q, want %q", m.Payload, g)
	}
	if s := join(short); s != luascripts.StatusOK {
		t.Fatalf("join: %d", s)
	}
	receive(t, sub)
	want := []string{long, short}
	slices.Sort(want)
	if m := members(); !slices.Equal(m, want) {
		t.Fatalf("members %v, want %v", m, want)
	}
	if ok, _ := c.SIsMember(ctx, wire.SessionGroupsKey(long), g).Result(); !ok {
		t.Error("the group is not in the session's groups set")
	}
	time.Sleep(250 * time.Millisecond)
	if m := members(); !slices.Equal(m, []string{long}) {
		t.Fatalf("members after the short session expired: %v, want [%s]", m, long)
	}
	if m := receive(t, sub); m.Payload != g {
		t.Fatalf("expiry removal published %q", m.Payload)
	}
	if s := join(short); s != luascripts.StatusExpired {
		t.Fatalf("join by an expired session: %d, want expired", s)
	}
	ka := keepAlive(t, c, long, nil, []string{g})
	if ka.Status != luascripts.StatusOK || len(ka.Members) != 1 || !slices.Equal(ka.Members[0], []string{long}) {
		t.Fatalf("keep-alive with the group: %+v", ka)
	}
	if score, _ := c.ZScore(ctx, wire.GroupKey(g), long).Result(); int64(score) != ka.ExpiresMS {
		t.Errorf("member score %v, want the session's expiry %d", score, ka.ExpiresMS)
	}
	lr, err := luascripts.Leave.Run(ctx, c, luascripts.LeaveKeys{Session: wire.SessionKey(long), SessionGroups: wire.SessionGroupsKey(long), Group: wire.GroupKey(g)}, luascripts.LeaveArgs{SessionID: long, GroupName: g})
	if err != nil || lr.Status != luascripts.StatusOK {
		t.Fatalf("leave: %+v %v", lr, err)
	}
	if m := members(); len(m) != 0 {
		t.Fatalf("members after leave: %v", m)
	}
	if ok, _ := c.SIsMember(ctx, wire.SessionGroupsKey(long), g).Result(); ok {
		t.Error("the group stays in the session's groups set after leave")
	}
	lr, err = luascripts.Leave.Run(ctx, c, luascripts.LeaveKeys{Session: wire.SessionKey(short), SessionGroups: wire.SessionGroupsKey(short), Group: wire.GroupKey(g)}, luascripts.LeaveArgs{SessionID: short, GroupName: g})
	if err != nil || lr.Status != luascripts.StatusExpired {
		t.Fatalf("leave by an expired session: %+v %v, want expired", lr, err)
	}
}

// TestCloseSession: close releases the given leases the session holds (publishing each), leaves
// its groups and deletes the session; tokens survive for the next grant.
func TestCloseSession(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	sid, _ := open(t, c, "closing", ttl)
	other, _ := open(t, c, "other", ttl)
	a, b, foreign, g := newName("close-a"), newName("close-b"), newName("close-foreign"), newName("close-g")
	ta := acquire(t, c, sid, a).Token
	acquire(t, c, sid, b)
	acquire(t, c, other, foreign)
	if r, err := luascripts.Join.Run(ctx, c, luascripts.JoinKeys{Session: wire.SessionKey(sid), SessionGroups: wire.SessionGroupsKey(sid), Group: wire.GroupKey(g)}, luascripts.JoinArgs{SessionID: sid, GroupName: g}); err != nil || r.Status != luascripts.StatusOK {
		t.Fatalf("join: %+v %v", r, err)
	}
	sub := c.Subscribe(ctx, wire.ReleasedChannel(a))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	// The backend reads the session's sets to know the keys (every key passed in KEYS).
	held, err := c.SMembers(ctx, wire.SessionLeasesKey(sid)).Result()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := c.SMembers(ctx, wire.SessionGroupsKey(sid)).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The sets hold the empty string as a sentinel (never a name): readers skip it.
	held = slices.DeleteFunc(held, func(n string) bool { return n == "" })
	groups = slices.DeleteFunc(groups, func(n string) bool { return n == "" })
	if len(held) != 2 || len(groups) != 1 {
		t.Fatalf("session sets hold %q and %q", held, groups)
	}
	held = append(held, foreign) // not held by sid: must stay untouched
	s, l, gk := sessionKeys(sid)
	keys := luascripts.CloseSessionKeys{Session: s, SessionLeases: l, SessionGroups: gk}
	for _, n := range held {
		keys.Leases = append(keys.Leases, wire.LeaseKey(n))
	}
	for _, n := range groups {
		keys.Groups = append(keys.Groups, wire.GroupKey(n))
	}
	r, err := luascripts.CloseSession.Run(ctx, c, keys, luascripts.CloseSessionArgs{SessionID: sid, Names: held, GroupNames: groups})
	if err != nil {
		t.Fatal(err)
	}
	if r.Released != 2 {
		t.Fatalf("released %d, want 2", r.Released)
	}
	if m := receive(t, sub); m.Payload != a {
		t.Fatalf("close published %q, want %q", m.Payload, a)
	}
	if n, _ := c.Exists(ctx, sessionKeysList(sid)...).Result(); n != 0 {
		t.Fatalf("%d session keys remain after close", n)
	}
	if n, _ := c.ZCard(ctx, wire.GroupKey(g)).Result(); n != 0 {
		t.Fatalf("%d members remain after close", n)
	}
	if got := leaseField(t, c, foreign, wire.LeaseFieldSession); got != other {
		t.Fatalf("close touched another session's lease: session %q", got)
	}
	if got := acquire(t, c, other, a); got.Status != luascripts.StatusOK || got.Token <= ta {
		t.Fatalf("acquire after close: %+v, want a token > %d", got, ta)
	}
	if ka := keepAlive(t, c, sid, nil, nil); ka.Status != luascripts.StatusExpired {
		t.Fatalf("keep-alive after close: %+v, want expired", ka)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

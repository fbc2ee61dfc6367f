package simbatest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

const ttl = 3 * time.Second

func open(t *testing.T, m *Model, now time.Duration, owner string) spi.SessionID {
	t.Helper()
	s, err := m.OpenSession(now, owner, ttl)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	if s.Remaining != ttl {
		t.Fatalf("OpenSession remaining = %v, want %v", s.Remaining, ttl)
	}
	return s.ID
}

func acquire(t *testing.T, m *Model, now time.Duration, id spi.SessionID, name string) spi.Acquire {
	t.Helper()
	r, err := m.Acquire(now, id, name)
	if err != nil {
		t.Fatalf("Acquire(%s, %s): %v", id, name, err)
	}
	return r
}

func TestModelSessionIDs(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	a, b := NewModel(WithSeed(7)), NewModel(WithSeed(7))
	seen := map[spi.SessionID]bool{}
	for i := range 100 {
		x, y := open(t, a, 0, "o"), open(t, b, 0, "o")
		if x != y {
			t.Fatalf("session %d: seeded models disagree: %s vs %s", i, x, y)
		}
		if !hex32.MatchString(string(x)) {
			t.Fatalf("session id %q is not 32 lowercase hex", x)
		}
		if seen[x] {
			t.Fatalf("session id %s repeated", x)
		}
		seen[x] = true
	}
	if open(t, NewModel(WithSeed(8)), 0, "o") == open(t, NewModel(WithSeed(7)), 0, "o") {
		t.Fatal("different seeds gave the same first id")
	}
	n := 0
	m := NewModel(WithIDs(func() spi.SessionID { n++; return spi.SessionID(fmt.Sprintf("s%d", n)) }))
	if id := open(t, m, 0, "o"); id != "s1" {
		t.Fatalf("WithIDs: got %s, want s1", id)
	}
	dup := NewModel(WithIDs(func() spi.SessionID { return "same" }))
	open(t, dup, 0, "o")
	if _, err := dup.OpenSession(0, "o", ttl); err == nil {
		t.Fatal("a repeated id from WithIDs was accepted")
	}
}

func TestModelOpenSessionRejectsBadInput(t *testing.T) {
	m := NewModel()
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := m.OpenSession(0, "o", d); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("TTL %v: err = %v, want ErrInvalidOption", d, err)
		}
	}
	if _, err := m.OpenSession(0, strings.Repeat("o", MaxOwnerLen+1), ttl); !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("long owner: err = %v, want ErrInvalidOption", err)
	}
	if _, err := m.OpenSession(0, strings.Repeat("o", MaxOwnerLen), ttl); err != nil {
		t.Errorf("owner of %d bytes: %v", MaxOwnerLen, err)
	}
	if snap := m.Inspect(0); len(snap.Sessions) != 1 {
		t.Errorf("sessions after bad input = %d, want 1", len(snap.Sessions))
	}
}

func TestModelExpiryBoundaryAndKeepAlive(t *testing.T) {
	m := NewModel()
	s := open(t, m, 10*time.Second, "o")
	// Live until just before open+ttl.
	ka, _ := m.KeepAlive(10*time.Second+ttl-1, s, nil, nil)
	if ka.Expired || ka.Remaining != ttl {
		t.Fatalf("keep-alive 1ns before expiry = %+v, want live with remaining %v", ka, ttl)
	}
	// The keep-alive moved the expiry to (10s+ttl-1)+ttl.
	at := 10*time.Second + 2*ttl - 2
	if info, ok := m.Session(at, s); !ok || info.Remaining != 1 {
		t.Fatalf("session 1ns before renewed expiry = %+v %v, want remaining 1ns", info, ok)
	}
	if _, ok := m.Session(at+1, s); ok {
		t.Fatal("session is live at its expiry instant")
	}
	// An expired session never comes back.
	for _, now := range []time.Duration{at + 1, at + time.Hour} {
		if ka, _ := m.KeepAlive(now, s, nil, nil); !ka.Expired || ka.Remaining != 0 || ka.Held != nil {
			t.Fatalf("keep-alive of expired session = %+v, want Expired only", ka)
		}
		if r := acquire(t, m, now, s, "x"); r.Kind != spi.SessionExpired {
			t.Fatalf("acquire by expired session = %v", r.Kind)
		}
		if st, _ := m.Join(now, s, "g"); st != spi.Expired {
			t.Fatalf("join by expired session = %v", st)
		}
		if st, _ := m.Leave(now, s, "g"); st != spi.Expired {
			t.Fatalf("leave by expired session = %v", st)
		}
	}
}

func TestModelBackendTimeNeverGoesBack(t *testing.T) {
	m := NewModel()
	s := open(t, m, 5*time.Second, "o")
	if m.Now() != 5*time.Second {
		t.Fatalf("Now = %v", m.Now())
	}
	// An earlier now is read as the latest: remaining does not grow.
	r := acquire(t, m, 0, s, "x")
	if r.Kind != spi.Granted || r.Remaining != ttl {
		t.Fatalf("acquire at an earlier now = %+v, want granted with remaining %v", r, ttl)
	}
	if m.Now() != 5*time.Second {
		t.Fatalf("Now went back to %v", m.Now())
	}
}

func TestModelAcquireRelease(t *testing.T) {
	m := NewModel()
	a, b := open(t, m, 0, "alice"), open(t, m, 0, "bob")

	g := acquire(t, m, time.Second, a, "x")
	if g.Kind != spi.Granted || g.Token != 1 || g.Remaining != ttl-time.Second {
		t.Fatalf("first acquire = %+v, want granted token 1 remaining %v", g, ttl-time.Second)
	}
	if again := acquire(t, m, 2*time.Second, a, "x"); again.Kind != spi.Granted || again.Token != 1 || again.Remaining != ttl-2*time.Second {
		t.Fatalf("re-acquire = %+v, want same token 1", again)
	}
	h := acquire(t, m, 2*time.Second, b, "x")
	want := spi.Acquire{Kind: spi.HeldBy, Holder: a, HolderOwner: "alice", Remaining: ttl - 2*time.Second}
	if h != want {
		t.Fatalf("acquire of held lease = %+v, want %+v", h, want)
	}
	// Wrong token, wrong session: nothing changes, no hint.
	m.TakeHints()
	if err := m.Release(2*time.Second, a, "x", 2); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(2*time.Second, b, "x", 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(2*time.Second, a, "never-acquired", 1); err != nil {
		t.Fatal(err)
	}
	if info, _ := m.Lease(2*time.Second, "x"); info.Holder != a || info.Token != 1 {
		t.Fatalf("after bad releases lease = %+v, want held by a with token 1", info)
	}
	if h := m.TakeHints(); len(h) != 0 {
		t.Fatalf("bad releases queued hints %v", h)
	}
	// The right release frees the lease with a hint; the next grant has the next token.
	if err := m.Release(2*time.Second, a, "x", 1); err != nil {
		t.Fatal(err)
	}
	if h := m.TakeHints(); !reflect.DeepEqual(h, []spi.Hint{{Kind: spi.Released, Name: "x"}}) {
		t.Fatalf("hints after release = %v", h)
	}
	if g := acquire(t, m, 2*time.Second, b, "x"); g.Kind != spi.Granted || g.Token != 2 {
		t.Fatalf("acquire after release = %+v, want token 2", g)
	}
	// A re-acquire by the first session after it lost the lease is not idempotent any more.
	if h := acquire(t, m, 2*time.Second, a, "x"); h.Kind != spi.HeldBy || h.Holder != b {
		t.Fatalf("old holder's acquire = %+v, want held by b", h)
	}
}

func TestModelTakeoverAfterExpiry(t *testing.T) {
	m := NewModel()
	a := open(t, m, 0, "a")
	acquire(t, m, 0, a, "x")
	b := open(t, m, time.Second, "b")
	if r := acquire(t, m, ttl-1, b, "x"); r.Kind != spi.HeldBy || r.Remaining != 1 {
		t.Fatalf("acquire 1ns before holder's expiry = %+v, want held-by with 1ns", r)
	}
	m.TakeHints()
	if r := acquire(t, m, ttl, b, "x"); r.Kind != spi.Granted || r.Token != 2 {
		t.Fatalf("takeover at holder's expiry = %+v, want granted token 2", r)
	}
	if h := m.TakeHints(); !reflect.DeepEqual(h, []spi.Hint{{Kind: spi.Released, Name: "x"}}) {
		t.Fatalf("expiry hints = %v, want released x", h)
	}
	// The expired holder's release with its old token changes nothing.
	if err := m.Release(ttl, a, "x", 1); err != nil {
		t.Fatal(err)
	}
	if info, _ := m.Lease(ttl, "x"); info.Holder != b || info.Token != 2 {
		t.Fatalf("lease = %+v, want b with token 2", info)
	}
}

func TestModelExpiryHintsOption(t *testing.T) {
	m := NewModel(WithoutExpiryHints())
	a := open(t, m, 0, "a")
	acquire(t, m, 0, a, "x")
	m.Join(0, a, "g")
	m.TakeHints()
	m.Tick(ttl)
	if h := m.TakeHints(); len(h) != 0 {
		t.Fatalf("WithoutExpiryHints queued %v", h)
	}
	if info, _ := m.Lease(ttl, "x"); info.Holder != "" {
		t.Fatalf("expired holder still holds: %+v", info)
	}
}

func TestModelKeepAliveReportsHeldAndMembers(t *testing.T) {
	m := NewModel()
	a, b := open(t, m, 0, "a"), open(t, m, 0, "b")
	acquire(t, m, 0, a, "x")
	acquire(t, m, 0, a, "y")
	acquire(t, m, 0, b, "z")
	m.Join(0, a, "g")
	m.Join(0, b, "g")
	ka, err := m.KeepAlive(time.Second, a, []string{"z", "y", "w", "y"}, []string{"g", "h"})
	if err != nil {
		t.Fatal(err)
	}
	if ka.Expired || ka.Remaining != ttl {
		t.Fatalf("keep-alive = %+v", ka)
	}
	if want := []spi.Held{{Name: "y", Token: 1}}; !reflect.DeepEqual(ka.Held, want) {
		t.Fatalf("held = %v, want %v (only asked names it holds)", ka.Held, want)
	}
	members := []spi.SessionID{a, b}
	if b < a {
		members = []spi.SessionID{b, a}
	}
	if want := map[string][]spi.SessionID{"g": members, "h": {}}; !reflect.DeepEqual(ka.Members, want) {
		t.Fatalf("members = %v, want %v", ka.Members, want)
	}
	// b, opened at 0, expires at ttl: the least time left among a's fellow members of g; h has
	// no other member.
	if want := map[string]time.Duration{"g": ttl - time.Second}; !reflect.DeepEqual(ka.MembersRemaining, want) {
		t.Fatalf("members remaining = %v, want %v", ka.MembersRemaining, want)
	}
	// The renewal moved a's expiry: at ttl, b is gone (with its lease and membership), a is not.
	ka, _ = m.KeepAlive(ttl, a, nil, []string{"g"})
	if ka.Expired || !reflect.DeepEqual(ka.Members["g"], []spi.SessionID{a}) {
		t.Fatalf("keep-alive after b expired = %+v, want a alone in g", ka)
	}
	if _, err := m.KeepAlive(ttl, a, nil, []string{"bad/group"}); !errors.Is(err, spi.ErrInvalidName) {
		t.Fatalf("invalid group: err = %v", err)
	}

	all := NewModel(WithReportAllHeld())
	c := open(t, all, 0, "c")
	acquire(t, all, 0, c, "y")
	acquire(t, all, 0, c, "x")
	ka, _ = all.KeepAlive(0, c, nil, nil)
	if want := []spi.Held{{Name: "x", Token: 1}, {Name: "y", Token: 1}}; !reflect.DeepEqual(ka.Held, want) {
		t.Fatalf("WithReportAllHeld held = %v, want %v", ka.Held, want)
	}
}

func TestModelCloseSession(t *testing.T) {
	m := NewModel()
	a, b := open(t, m, 0, "a"), open(t, m, 0, "b")
	acquire(t, m, 0, a, "y")
	acquire(t, m, 0, a, "x")
	m.Join(0, a, "g")
	m.Join(0, b, "g")
	m.TakeHints()
	if err := m.CloseSession(time.Second, a); err != nil {
		t.Fatal(err)
	}
	want := []spi.Hint{{Kind: spi.Released, Name: "x"}, {Kind: spi.Released, Name: "y"}, {Kind: spi.GroupChanged, Name: "g"}}
	if h := m.TakeHints(); !reflect.DeepEqual(h, want) {
		t.Fatalf("close hints = %v, want %v", h, want)
	}
	if r := acquire(t, m, time.Second, b, "x"); r.Kind != spi.Granted || r.Token != 2 {
		t.Fatalf("acquire after close = %+v, want token 2", r)
	}
	if ms, _ := m.Members(time.Second, "g"); !reflect.DeepEqual(ms, []spi.SessionID{b}) {
		t.Fatalf("members after close = %v", ms)
	}
	if ka, _ := m.KeepAlive(time.Second, a, nil, nil); !ka.Expired {
		t.Fatal("closed session kept alive")
	}
	if err := m.CloseSession(time.Second, a); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if h := m.TakeHints(); len(h) != 0 {
		t.Fatalf("second close queued %v", h)
	}
}

func TestModelGroups(t *testing.T) {
	m := NewModel()
	a, b := open(t, m, 0, "a"), open(t, m, 0, "b")
	for _, id := range []spi.SessionID{a, a, b} {
		if st, err := m.Join(0, id, "g"); err != nil || st != spi.OK {
			t.Fatalf("join: %v %v", st, err)
		}
	}
	if h := m.TakeHints(); len(h) != 2 {
		t.Fatalf("joins queued %v, want one hint per new member", h)
	}
	if ms, _ := m.Members(0, "g"); len(ms) != 2 || ms[0] > ms[1] {
		t.Fatalf("members = %v, want both sorted", ms)
	}
	if st, _ := m.Leave(0, a, "g"); st != spi.OK {
		t.Fatalf("leave = %v", st)
	}
	if st, _ := m.Leave(0, a, "g"); st != spi.OK {
		t.Fatalf("second leave = %v", st)
	}
	if h := m.TakeHints(); !reflect.DeepEqual(h, []spi.Hint{{Kind: spi.GroupChanged, Name: "g"}}) {
		t.Fatalf("leave hints = %v", h)
	}
	m.KeepAlive(ttl-1, a, nil, nil)
	if ms, _ := m.Members(ttl, "g"); len(ms) != 0 {
		t.Fatalf("members after b expired = %v, want none", ms)
	}
	if h := m.TakeHints(); !reflect.DeepEqual(h, []spi.Hint{{Kind: spi.GroupChanged, Name: "g"}}) {
		t.Fatalf("expiry hints = %v", h)
	}
	if snap := m.Inspect(ttl); len(snap.Groups) != 0 {
		t.Fatalf("empty group listed: %v", snap.Groups)
	}
	for _, bad := range []string{"", ".", "..", "a/b", strings.Repeat("g", 129)} {
		if _, err := m.Join(ttl, a, bad); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Join(%q): err = %v", bad, err)
		}
		if _, err := m.Leave(ttl, a, bad); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Leave(%q): err = %v", bad, err)
		}
		if _, err := m.Members(ttl, bad); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Members(%q): err = %v", bad, err)
		}
	}
}

func TestModelInvalidLeaseNames(t *testing.T) {
	m := NewModel()
	a := open(t, m, 0, "a")
	for _, bad := range []string{"", ".", "..", "a b", "é", "a/b", strings.Repeat("n", 129)} {
		if _, err := m.Acquire(0, a, bad); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Acquire(%q): err = %v", bad, err)
		}
		if err := m.Release(0, a, bad, 1); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Release(%q): err = %v", bad, err)
		}
	}
	if snap := m.Inspect(0); len(snap.Leases) != 0 {
		t.Fatalf("invalid names created rows: %v", snap.Leases)
	}
	for _, good := range []string{"a", "A", strings.Repeat("n", 128), "._:-", "...", "g.7"} {
		if r := acquire(t, m, 0, a, good); r.Kind != spi.Granted {
			t.Errorf("Acquire(%q) = %v", good, r.Kind)
		}
	}
	if info, _ := m.Lease(0, "a"); info.Token != 1 {
		t.Fatalf("a: %+v", info)
	}
	if info, _ := m.Lease(0, "A"); info.Token != 1 {
		t.Fatalf("case-sensitivity: A shares a row with a: %+v", info)
	}
}

func TestModelExpireSessionAndRestart(t *testing.T) {
	m := NewModel()
	a := open(t, m, 0, "a")
	acquire(t, m, 0, a, "x")
	if !m.ExpireSession(time.Second, a) {
		t.Fatal("ExpireSession of a live session reported false")
	}
	if m.ExpireSession(time.Second, a) {
		t.Fatal("ExpireSession of an expired session reported true")
	}
	if ka, _ := m.KeepAlive(time.Second, a, nil, nil); !ka.Expired {
		t.Fatal("forced expiry did not expire the session")
	}
	b := open(t, m, time.Second, "b")
	if r := acquire(t, m, time.Second, b, "x"); r.Token != 2 {
		t.Fatalf("takeover after forced expiry = %+v", r)
	}
	m.Join(time.Second, b, "g")
	m.TakeHints()
	m.Restart(2 * time.Second)
	if h := m.TakeHints(); len(h) != 0 {
		t.Fatalf("restart queued hints %v", h)
	}
	snap := m.Inspect(2 * time.Second)
	if len(snap.Sessions) != 0 || len(snap.Groups) != 0 {
		t.Fatalf("restart kept sessions or groups: %+v", snap)
	}
	c := open(t, m, 2*time.Second, "c")
	if r := acquire(t, m, 2*time.Second, c, "x"); r.Token != 3 {
		t.Fatalf("token after restart = %+v, want 3 (rows survive restarts)", r)
	}
}

func TestModelInspect(t *testing.T) {
	m := NewModel()
	a := open(t, m, 0, "alice")
	acquire(t, m, 0, a, "y")
	acquire(t, m, 0, a, "x")
	m.Release(0, a, "y", 1)
	m.Join(0, a, "g")
	snap := m.Inspect(time.Second)
	want := spi.Snapshot{
		Leases: []spi.LeaseInfo{
			{Name: "x", Holder: a, Owner: "alice", Token: 1, Remaining: ttl - time.Second},
			{Name: "y", Token: 1},
		},
		Sessions: []spi.SessionInfo{{ID: a, Owner: "alice", Remaining: ttl - time.Second}},
		Groups:   map[string][]spi.SessionID{"g": {a}},
	}
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("Inspect = %+v\nwant %+v", snap, want)
	}
	if _, ok := m.Lease(0, "never"); ok {
		t.Fatal("Lease of a never-acquired name reported ok")
	}
	if next, ok := m.NextExpiry(); !ok || next != ttl {
		t.Fatalf("NextExpiry = %v %v", next, ok)
	}
	if _, ok := NewModel().NextExpiry(); ok {
		t.Fatal("empty model has a next expiry")
	}
}

func TestModelHintQueueIsBounded(t *testing.T) {
	m := NewModel()
	a := open(t, m, 0, "a")
	for i := range maxQueuedHints + 10 {
		r := acquire(t, m, 0, a, "x")
		m.Release(0, a, "x", r.Token)
		_ = i
	}
	if h := m.TakeHints(); len(h) != maxQueuedHints {
		t.Fatalf("queue holds %d hints, want %d", len(h), maxQueuedHints)
	}
}

// TestModelRandomOperations drives the model with random operations and checks its invariants
// after each one; running the same seed twice must give identical transcripts.
func TestModelRandomOperations(t *testing.T) {
	for _, v := range []struct {
		name string
		opts []ModelOption
	}{
		{"default", nil},
		{"lease-expiry", []ModelOption{WithLeaseExpiry()}},
		{"lease-expiry-report-all", []ModelOption{WithLeaseExpiry(), WithReportAllHeld()}},
	} {
		t.Run(v.name, func(t *testing.T) {
			for seed := range uint64(50) {
				first := randomRun(t, seed, v.opts...)
				if second := randomRun(t, seed, v.opts...); first != second {
					t.Fatalf("seed %d: runs differ; the model is not deterministic", seed)
				}
			}
		})
	}
}

func randomRun(t *testing.T, seed uint64, opts ...ModelOption) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	m := NewModel(append([]ModelOption{WithSeed(seed)}, opts...)...)
	names := []string{"a", "b", "c"}
	groups := []string{"g", "h"}
	var sessions []spi.SessionID
	lastToken := map[string]int64{}
	var out strings.Builder
	now := time.Duration(0)
	pick := func() spi.SessionID {
		if len(sessions) == 0 {
			return "none"
		}
		return sessions[rng.IntN(len(sessions))]
	}
	for step := range 400 {
		now += time.Duration(rng.IntN(1500)) * time.Millisecond
		name, group := names[rng.IntN(len(names))], groups[rng.IntN(len(groups))]
		var res any
		var err error
		switch op := rng.IntN(9); op {
		case 0:
			var s spi.Session
			s, err = m.OpenSession(now, "o", time.Duration(1+rng.IntN(4))*time.Second)
			sessions = append(sessions, s.ID)
			res = s
		case 1:
			// Some keep-alives name no lease: with WithLeaseExpiry they leave the leases'
			// expiries behind the session's.
			asked := names
			if rng.IntN(3) == 0 {
				asked = nil
			}
			res, err = m.KeepAlive(now, pick(), asked, groups)
		case 2:
			var r spi.Acquire
			id := pick()
			before, _ := m.Lease(now, name)
			r, err = m.Acquire(now, id, name)
			if r.Kind == spi.Granted {
				if fresh := before.Holder != id; (fresh && r.Token <= lastToken[name]) || (!fresh && r.Token != before.Token) {
					t.Fatalf("seed %d step %d: token of %s went from %d to %d", seed, step, name, lastToken[name], r.Token)
				}
				lastToken[name] = r.Token
			}
			res = r
		case 3:
			id := pick()
			tok := lastToken[name] - int64(rng.IntN(2))
			err = m.Release(now, id, name, tok)
			res = tok
		case 4:
			res, err = m.Join(now, pick(), group)
		case 5:
			res, err = m.Leave(now, pick(), group)
		case 6:
			err = m.CloseSession(now, pick())
		case 7:
			res = m.ExpireSession(now, pick())
		case 8:
			res, err = m.Members(now, group)
		}
		if err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
		fmt.Fprintf(&out, "%v %v %v\n", now, res, m.TakeHints())
		checkInvariants(t, m, now)
	}
	return out.String()
}

func checkInvariants(t *testing.T, m *Model, now time.Duration) {
	t.Helper()
	snap := m.Inspect(now)
	live := map[spi.SessionID]bool{}
	for _, s := range snap.Sessions {
		if s.Remaining <= 0 {
			t.Fatalf("session %s listed with remaining %v", s.ID, s.Remaining)
		}
		live[s.ID] = true
	}
	remaining := map[spi.SessionID]time.Duration{}
	for _, s := range snap.Sessions {
		remaining[s.ID] = s.Remaining
	}
	for _, l := range snap.Leases {
		if l.Holder != "" && !live[l.Holder] {
			t.Fatalf("lease %s held by dead session %s", l.Name, l.Holder)
		}
		// A lease never outlives its holder's session (with WithLeaseExpiry its own expiry
		// is a copy of an earlier session expiry).
		if l.Holder != "" && (l.Remaining <= 0 || l.Remaining > remaining[l.Holder]) {
			t.Fatalf("lease %s listed with remaining %v, its holder's session %v", l.Name, l.Remaining, remaining[l.Holder])
		}
	}
	for g, ms := range snap.Groups {
		for _, id := range ms {
			if !live[id] {
				t.Fatalf("group %s lists dead session %s", g, id)
			}
		}
	}
}

// BenchmarkModelRound is one renewal round of a simulator seed: 5 sessions each keeping alive
// with 3 names and a group and acquiring one name.
func BenchmarkModelRound(b *testing.B) {
	m := NewModel()
	var ids []spi.SessionID
	for range 5 {
		s, _ := m.OpenSession(0, "o", 3*time.Second)
		ids = append(ids, s.ID)
	}
	names := []string{"e0", "e1", "e2"}
	groups := []string{"g"}
	now := time.Duration(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now += time.Second
		for j, id := range ids {
			m.KeepAlive(now, id, names, groups)
			m.Acquire(now, id, names[(i+j)%3])
		}
		m.TakeHints()
	}
}

// TestTokenOverflow: a name whose last token is the int64 maximum has no next tenure: Acquire
// fails with a permanent ErrTokenOverflow and changes nothing (the model's counter cannot get
// there by itself; the test sets it).
func TestTokenOverflow(t *testing.T) {
	m := NewModel(WithSeed(1))
	a := open(t, m, 0, "a")
	m.leases["x"] = &lease{token: math.MaxInt64}
	r, err := m.Acquire(0, a, "x")
	if !errors.Is(err, spi.ErrTokenOverflow) || spi.Classify(err) != spi.Permanent {
		t.Fatalf("Acquire = %+v, %v; want a permanent ErrTokenOverflow", r, err)
	}
	if info, _ := m.Lease(0, "x"); info.Holder != "" || info.Token != math.MaxInt64 {
		t.Fatalf("the refused acquire changed the lease: %+v", info)
	}
}

// TestModelLeaseExpiry: with WithLeaseExpiry a lease's liveness is its own expiry, copied from
// the session at the grant and moved only by keep-alives that report it held (Redis's acquire
// and keep_alive scripts), so a keep-alive that ran after the grant without naming the lease
// leaves the lease to lapse before the session does.
func TestModelLeaseExpiry(t *testing.T) {
	ka := func(t *testing.T, m *Model, now time.Duration, id spi.SessionID, names ...string) spi.KeepAlive {
		t.Helper()
		r, err := m.KeepAlive(now, id, names, nil)
		if err != nil || r.Expired {
			t.Fatalf("KeepAlive(%s, %v) at %v = %+v, %v", id, names, now, r, err)
		}
		return r
	}
	s := time.Second

	t.Run("keep-alive-after-grant-not-naming-it", func(t *testing.T) {
		for _, leaseExpiry := range []bool{false, true} {
			var opts []ModelOption
			if leaseExpiry {
				opts = append(opts, WithLeaseExpiry())
			}
			m := NewModel(opts...)
			a, b := open(t, m, 0, "a"), open(t, m, 0, "b")
			if g := acquire(t, m, s, a, "x"); g.Kind != spi.Granted || g.Token != 1 || g.Remaining != 2*s {
				t.Fatalf("grant = %+v, want token 1 with the session's 2s left", g)
			}
			// A keep-alive sent before the grant (so it names no lease) runs after it: the
			// session lives until 4.2s, the lease's copy says 3s.
			ka(t, m, 1200*time.Millisecond, a)
			ka(t, m, 1200*time.Millisecond, b)
			wantLease, wantHeldBy := 4200*time.Millisecond, spi.HeldBy
			if leaseExpiry {
				wantLease, wantHeldBy = 3*s, spi.Granted
			}
			if info, _ := m.Lease(2*s, "x"); info.Holder != a || info.Remaining != wantLease-2*s {
				t.Fatalf("lease-expiry=%v: Lease at 2s = %+v, want held by a with %v left", leaseExpiry, info, wantLease-2*s)
			}
			if h := acquire(t, m, 2*s, b, "x"); h.Kind != spi.HeldBy || h.Holder != a || h.Remaining != wantLease-2*s {
				t.Fatalf("lease-expiry=%v: b's acquire at 2s = %+v, want held by a with %v left", leaseExpiry, h, wantLease-2*s)
			}
			m.TakeHints()
			// At 3.5s a's session lives (until 4.2s), but with WithLeaseExpiry the lease lapsed.
			if info, ok := m.Session(3500*time.Millisecond, a); !ok || info.Remaining != 700*time.Millisecond {
				t.Fatalf("lease-expiry=%v: a's session at 3.5s = %+v, %v", leaseExpiry, info, ok)
			}
			r := acquire(t, m, 3500*time.Millisecond, b, "x")
			if r.Kind != wantHeldBy {
				t.Fatalf("lease-expiry=%v: b's acquire at 3.5s = %+v, want %v", leaseExpiry, r, wantHeldBy)
			}
			if !leaseExpiry {
				continue
			}
			if r.Token != 2 || r.Remaining != 700*time.Millisecond {
				t.Fatalf("takeover of the lapsed lease = %+v, want token 2 with b's 0.7s left", r)
			}
			if h := m.TakeHints(); len(h) != 0 {
				t.Fatalf("a lease lapsing on its own queued hints %v", h)
			}
			// The old holder's keep-alive naming it, release and close do nothing to it.
			at := 3600 * time.Millisecond
			if got := ka(t, m, at, a, "x"); len(got.Held) != 0 {
				t.Fatalf("old holder's keep-alive reports %v held", got.Held)
			}
			if err := m.Release(at, a, "x", 1); err != nil {
				t.Fatal(err)
			}
			if err := m.CloseSession(at, a); err != nil {
				t.Fatal(err)
			}
			if info, _ := m.Lease(at, "x"); info.Holder != b || info.Token != 2 || info.Remaining != 600*time.Millisecond {
				t.Fatalf("after the old holder's calls Lease = %+v, want b's token 2 with 0.6s left", info)
			}
		}
	})

	t.Run("keep-alive-naming-it-moves-it", func(t *testing.T) {
		m := NewModel(WithLeaseExpiry())
		a, b := open(t, m, 0, "a"), open(t, m, 0, "b")
		acquire(t, m, s, a, "x")
		acquire(t, m, s, a, "y")
		ka(t, m, 1200*time.Millisecond, a) // neither
		if got := ka(t, m, 2*s, a, "x", "z"); !reflect.DeepEqual(got.Held, []spi.Held{{Name: "x", Token: 1}}) {
			t.Fatalf("keep-alive naming x and z: held %v", got.Held)
		}
		ka(t, m, 2*s, b)
		if h := acquire(t, m, 4500*time.Millisecond, b, "x"); h.Kind != spi.HeldBy || h.Remaining != 500*time.Millisecond {
			t.Fatalf("acquire of x, renewed to 5s, at 4.5s = %+v, want held by a with 0.5s left", h)
		}
		if g := acquire(t, m, 4500*time.Millisecond, b, "y"); g.Kind != spi.Granted || g.Token != 2 {
			t.Fatalf("acquire of y, lapsed at 3s, at 4.5s = %+v, want granted token 2", g)
		}
	})

	t.Run("lapsed-but-not-taken-stays-the-holders", func(t *testing.T) {
		m := NewModel(WithLeaseExpiry())
		a := open(t, m, 0, "a")
		acquire(t, m, s, a, "x")
		acquire(t, m, s, a, "y")
		ka(t, m, 1200*time.Millisecond, a)
		ka(t, m, 3500*time.Millisecond, a) // session until 6.5s; x and y lapsed at 3s
		if info, _ := m.Lease(4*s, "x"); info.Holder != "" || info.Token != 1 {
			t.Fatalf("Lease of the lapsed x = %+v, want free with token 1", info)
		}
		snap := m.Inspect(4 * s)
		if len(snap.Leases) != 2 || snap.Leases[0].Holder != "" || snap.Leases[1].Holder != "" || len(snap.Sessions) != 1 {
			t.Fatalf("Inspect with both leases lapsed = %+v", snap)
		}
		// keep_alive.lua renews a lease whose holder field is still the session; acquire.lua
		// re-grants it with the same token and copies the session's expiry.
		if got := ka(t, m, 4500*time.Millisecond, a, "x"); !reflect.DeepEqual(got.Held, []spi.Held{{Name: "x", Token: 1}}) {
			t.Fatalf("keep-alive naming the lapsed x: held %v", got.Held)
		}
		if info, _ := m.Lease(4500*time.Millisecond, "x"); info.Holder != a || info.Remaining != ttl {
			t.Fatalf("x after the keep-alive = %+v, want a's with %v left", info, ttl)
		}
		if g := acquire(t, m, 5*s, a, "y"); g.Kind != spi.Granted || g.Token != 1 || g.Remaining != 2500*time.Millisecond {
			t.Fatalf("re-acquire of the lapsed y = %+v, want token 1 with 2.5s left", g)
		}
		if info, _ := m.Lease(5*s, "y"); info.Holder != a || info.Remaining != 2500*time.Millisecond {
			t.Fatalf("y after the re-acquire = %+v, want a's with 2.5s left", info)
		}
		// Release frees a lease by holder and token, lapsed or not, with a hint.
		ka(t, m, 6*s, a)
		m.TakeHints()
		if err := m.Release(7*s, a, "x", 1); err != nil {
			t.Fatal(err)
		}
		if h := m.TakeHints(); !reflect.DeepEqual(h, []spi.Hint{{Kind: spi.Released, Name: "x"}}) {
			t.Fatalf("release of the lapsed x: hints %v", h)
		}
	})

	t.Run("report-all-held-renews-all", func(t *testing.T) {
		m := NewModel(WithLeaseExpiry(), WithReportAllHeld())
		a, b := open(t, m, 0, "a"), open(t, m, 0, "b")
		acquire(t, m, s, a, "x")
		if got := ka(t, m, 1200*time.Millisecond, a); !reflect.DeepEqual(got.Held, []spi.Held{{Name: "x", Token: 1}}) {
			t.Fatalf("keep-alive: held %v", got.Held)
		}
		ka(t, m, 2*s, b)
		if h := acquire(t, m, 4*s, b, "x"); h.Kind != spi.HeldBy || h.Remaining != 200*time.Millisecond {
			t.Fatalf("acquire at 4s = %+v: a lease reported held must have been renewed", h)
		}
	})
}

// TestModelSessionWaiters: by default a waiter's entry lapses with its session's expiry as of
// its latest AcquireQueued, though keep-alives keep the session alive; with
// WithSessionWaiters it lives as long as the session, keeping its place, and HeldBy naming it
// reports its session's time left.
func TestModelSessionWaiters(t *testing.T) {
	s := time.Second
	for _, sessionWaiters := range []bool{false, true} {
		var opts []ModelOption
		if sessionWaiters {
			opts = append(opts, WithSessionWaiters())
		}
		m := NewModel(opts...)
		if m.SessionWaiters() != sessionWaiters {
			t.Fatalf("SessionWaiters() = %v, want %v", m.SessionWaiters(), sessionWaiters)
		}
		h, w, c := open(t, m, 0, "h"), open(t, m, 0, "w"), open(t, m, 0, "c")
		if g := acquire(t, m, 0, h, "x"); g.Kind != spi.Granted {
			t.Fatalf("grant = %+v", g)
		}
		if r, err := m.AcquireQueued(0, w, "x"); err != nil || r.Kind != spi.HeldBy || r.Holder != h {
			t.Fatalf("w's AcquireQueued = %+v, %v; want held by h", r, err)
		}
		// Everyone is kept alive for two TTLs; w never attempts again.
		for now := s; now <= 6*s; now += s {
			for _, id := range []spi.SessionID{h, w, c} {
				if ka, err := m.KeepAlive(now, id, nil, nil); err != nil || ka.Expired {
					t.Fatalf("KeepAlive(%s) at %v = %+v, %v", id, now, ka, err)
				}
			}
		}
		at := 6500 * time.Millisecond
		if err := m.Release(at, h, "x", 1); err != nil {
			t.Fatal(err)
		}
		r := acquire(t, m, at, c, "x")
		switch {
		case !sessionWaiters && r.Kind != spi.Granted:
			t.Fatalf("lapsing entries: c's acquire after w's entry lapsed = %+v, want granted", r)
		case sessionWaiters && (r.Kind != spi.HeldBy || r.Holder != w || r.Remaining != 2500*time.Millisecond):
			t.Fatalf("session waiters: c's acquire = %+v, want held by w with its session's 2.5s left", r)
		}
		if !sessionWaiters {
			continue
		}
		if r, err := m.AcquireQueued(at, w, "x"); err != nil || r.Kind != spi.Granted || r.Token != 2 {
			t.Fatalf("w's AcquireQueued after the release = %+v, %v; want granted token 2", r, err)
		}
		// A waiter's entry goes with its session.
		if r, err := m.AcquireQueued(at, c, "x"); err != nil || r.Kind != spi.HeldBy || r.Holder != w {
			t.Fatalf("c's AcquireQueued = %+v, %v; want held by w", r, err)
		}
		if err := m.Release(at, w, "x", 2); err != nil {
			t.Fatal(err)
		}
		if !m.ExpireSession(at, c) {
			t.Fatal("c was not live")
		}
		if g := acquire(t, m, at, h, "x"); g.Kind != spi.Granted || g.Token != 3 {
			t.Fatalf("h's acquire after the waiter's session ended = %+v, want granted token 3", g)
		}
	}
}

// TestUnknownRemaining: with WithUnknownRemaining, HeldBy (naming the holder or the waiter the
// lease is reserved for) leaves the time left unknown, and the end of a waiter entry by a
// Withdraw or with its session's close is a Released hint, as ZooKeeper's and etcd's watches
// on waiter nodes and keys make it; the waiters behind may now have the lease.
func TestUnknownRemaining(t *testing.T) {
	m := NewModel(WithSessionWaiters(), WithUnknownRemaining())
	h, w1, w2 := open(t, m, 0, "h"), open(t, m, 0, "w1"), open(t, m, 0, "w2")
	if r, err := m.Acquire(0, h, "n"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("holder's Acquire = %+v, %v", r, err)
	}
	for _, w := range []spi.SessionID{w1, w2} {
		if r, err := m.AcquireQueued(0, w, "n"); err != nil || r.Kind != spi.HeldBy || !r.RemainingUnknown || r.Remaining != 0 || r.Holder != h {
			t.Fatalf("AcquireQueued(%s) = %+v, %v; want HeldBy h, remaining unknown", w, r, err)
		}
	}
	m.TakeHints()
	if err := m.Release(0, h, "n", 1); err != nil {
		t.Fatal(err)
	}
	m.TakeHints()
	if r, err := m.AcquireQueued(0, w2, "n"); err != nil || r.Kind != spi.HeldBy || !r.RemainingUnknown || r.Holder != w1 {
		t.Fatalf("AcquireQueued(w2) = %+v, %v; want HeldBy w1 (reserved), remaining unknown", r, err)
	}
	if err := m.CloseSession(0, w1); err != nil {
		t.Fatal(err)
	}
	if got := m.TakeHints(); !reflect.DeepEqual(got, []spi.Hint{{Kind: spi.Released, Name: "n"}}) {
		t.Fatalf("hints after the first waiter's close = %v; want one Released n", got)
	}
	if err := m.Withdraw(0, w2, "n"); err != nil {
		t.Fatal(err)
	}
	if got := m.TakeHints(); !reflect.DeepEqual(got, []spi.Hint{{Kind: spi.Released, Name: "n"}}) {
		t.Fatalf("hints after the Withdraw = %v; want one Released n", got)
	}
	if err := m.Withdraw(0, w2, "n"); err != nil {
		t.Fatal(err)
	}
	if got := m.TakeHints(); len(got) != 0 {
		t.Fatalf("hints after a Withdraw without an entry = %v; want none", got)
	}
}

package sqlcheck

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	longTTL  = 10_000 // ms
	shortTTL = 300    // ms
)

// behave checks the semantics of the statements of one dialect through o.
func behave(t *testing.T, o ops) {
	ctx := testCtx(t)
	p := unique(t)
	sid := func(s string) string { return p + s }
	name := func(s string) string { return "sqlcheck-" + p + "." + s }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	acq := func(s, n string) acquireReply {
		t.Helper()
		r, err := o.acquire(ctx, s, n)
		must(err)
		return r
	}
	wantGranted := func(r acquireReply, token int64, ttl int64) {
		t.Helper()
		if r.Kind != "granted" || r.Token != token || r.Remaining <= 0 || r.Remaining > ttl {
			t.Fatalf("got %+v, want granted with token %d and remaining in (0, %d]", r, token, ttl)
		}
	}
	// newTerm acquires n for s and wants a new tenure: granted with a token greater than after
	// and at least the database clock in µs as read before the call (tokens are max(last + 1,
	// now_us), DESIGN.md §5; the ms clock read here rounds, hence the 1 ms of slack).
	newTerm := func(s, n string, after, ttl int64) int64 {
		t.Helper()
		nowMs, err := o.now(ctx)
		must(err)
		r := acq(s, n)
		if r.Kind != "granted" || r.Token <= after || r.Token < (nowMs-1)*1000 || r.Remaining <= 0 || r.Remaining > ttl {
			t.Fatalf("got %+v, want granted with a token > %d and >= the clock floor %d µs, remaining in (0, %d]", r, after, (nowMs-1)*1000, ttl)
		}
		return r.Token
	}
	wantHeld := func(r acquireReply, holder, owner string, ttl int64) {
		t.Helper()
		if r.Kind != "held" || r.Holder != holder || r.Owner != owner || r.Remaining <= 0 || r.Remaining > ttl {
			t.Fatalf("got %+v, want held by %s (%s) with remaining in (0, %d]", r, holder, owner, ttl)
		}
	}

	a, b, c, d, e := sid("a"), sid("b"), sid("c"), sid("d"), sid("e")
	for _, s := range []string{a, b} {
		must(o.open(ctx, s, "owner-"+s, longTTL))
	}
	v, err := o.schemaVersion(ctx)
	must(err)
	if v < 1 {
		t.Fatalf("schema version %d", v)
	}

	// Grant, contention, idempotent re-acquire.
	n1 := name("one")
	t1 := newTerm(a, n1, 0, longTTL)
	wantHeld(acq(b, n1), a, "owner-"+a, longTTL)
	wantGranted(acq(a, n1), t1, longTTL)

	// Releases that do not match change nothing.
	must(o.release(ctx, b, n1, t1))   // wrong session
	must(o.release(ctx, a, n1, t1+1)) // wrong token
	wantHeld(acq(b, n1), a, "owner-"+a, longTTL)

	// Keep-alive lists the lease; release then takeover gives a greater token.
	ka, err := o.keepAlive(ctx, a, nil)
	must(err)
	if ka.Expired || ka.Remaining <= longTTL-2000 || ka.Remaining > longTTL || ka.Held[n1] != t1 {
		t.Fatalf("keep-alive of a: %+v", ka)
	}
	must(o.release(ctx, a, n1, t1))
	t2 := newTerm(b, n1, t1, longTTL)
	ka, err = o.keepAlive(ctx, a, nil)
	must(err)
	if _, ok := ka.Held[n1]; ok || ka.Expired {
		t.Fatalf("keep-alive of a after losing %s: %+v", n1, ka)
	}

	// Expiry: a session with a tiny TTL loses its lease to a takeover with a greater token.
	n2 := name("two")
	must(o.open(ctx, c, "owner-"+c, shortTTL))
	c1 := newTerm(c, n2, 0, shortTTL)
	wantHeld(acq(b, n2), c, "owner-"+c, shortTTL)
	time.Sleep(2 * shortTTL * time.Millisecond)
	c2 := newTerm(b, n2, c1, longTTL)
	ka, err = o.keepAlive(ctx, c, nil)
	must(err)
	if !ka.Expired {
		t.Fatalf("keep-alive of an expired session: %+v", ka)
	}
	if r := acq(c, name("three")); r.Kind != "expired" {
		t.Fatalf("acquire by an expired session: %+v", r)
	}
	if live, err := o.join(ctx, c, name("g")); err != nil || live {
		t.Fatalf("join by an expired session: live %v, %v", live, err)
	}
	// The expired session's release of its old token changes nothing.
	must(o.release(ctx, c, n2, c1))
	wantHeld(acq(a, n2), b, "owner-"+b, longTTL)

	// Members: only live sessions, sorted; leave removes.
	g := name("g")
	must(o.open(ctx, d, "owner-"+d, shortTTL))
	for _, s := range []string{b, d, a} {
		live, err := o.join(ctx, s, g)
		must(err)
		if !live {
			t.Fatalf("join by live session %s reported expired", s)
		}
	}
	if live, err := o.join(ctx, a, g); err != nil || !live { // idempotent
		t.Fatalf("second join: %v, %v", live, err)
	}
	ms, err := o.members(ctx, g)
	must(err)
	if want := byID(o, a, b, d); !slices.Equal(ms, want) {
		t.Fatalf("members %q, want %q", ms, want)
	}
	time.Sleep(2 * shortTTL * time.Millisecond)
	ms, err = o.members(ctx, g)
	must(err)
	if want := byID(o, a, b); !slices.Equal(ms, want) {
		t.Fatalf("members after d expired: %q, want %q", ms, want)
	}
	ka, err = o.keepAlive(ctx, a, []string{g, name("empty")})
	must(err)
	if want := byID(o, a, b); !slices.Equal(ka.Members[g], want) || len(ka.Members[name("empty")]) != 0 {
		t.Fatalf("keep-alive members %v, want %q", ka.Members, want)
	}
	if live, err := o.leave(ctx, b, g); err != nil || !live {
		t.Fatalf("leave: %v, %v", live, err)
	}
	ms, err = o.members(ctx, g)
	must(err)
	if want := []string{a}; !slices.Equal(ms, want) {
		t.Fatalf("members after leave %q, want %q", ms, want)
	}
	if live, err := o.leave(ctx, d, g); err != nil || live {
		t.Fatalf("leave by an expired session: live %v, %v", live, err)
	}

	// Housekeeping: an expired session holding a lease keeps its row (and its lease stays
	// takeable); expired sessions holding nothing go; lease rows stay.
	n4 := name("four")
	must(o.open(ctx, e, "owner-"+e, shortTTL))
	e1 := newTerm(e, n4, 0, shortTTL)
	time.Sleep(2 * shortTTL * time.Millisecond)
	must(o.housekeeping(ctx))
	for s, want := range map[string]int{c: 0, d: 0, e: 1, a: 1} {
		n, err := o.sessionRows(ctx, s)
		must(err)
		if n != want {
			t.Fatalf("after housekeeping, %d rows for session %s, want %d", n, s, want)
		}
	}
	leases, err := o.leases(ctx)
	must(err)
	if l := leases[n4]; l.Holder != "" || l.Token != e1 || l.Remaining > 0 {
		t.Fatalf("lease of an expired holder after housekeeping: %+v, want shown free with token %d", l, e1)
	}
	if held, err := o.leaseRowHeldBy(ctx, n4, e, e1); err != nil || !held {
		t.Fatalf("after housekeeping the lease row of %s no longer names its expired holder: %v, %v", n4, held, err)
	}
	e2 := newTerm(a, n4, e1, longTTL)

	// Close releases everything the session holds and ends it.
	must(o.closeSession(ctx, b))
	t3 := newTerm(a, n1, t2, longTTL)
	c3 := newTerm(a, n2, c2, longTTL)
	ka, err = o.keepAlive(ctx, b, nil)
	must(err)
	if !ka.Expired {
		t.Fatalf("keep-alive of a closed session: %+v", ka)
	}

	// Inspection and the never-deleted lease rows.
	leases, err = o.leases(ctx)
	must(err)
	for n, want := range map[string]int64{n1: t3, n2: c3, n4: e2} {
		l, ok := leases[n]
		if !ok || l.Holder != a || l.Owner != "owner-"+a || l.Token != want || l.Remaining <= 0 {
			t.Fatalf("inspect %s: %+v (present %v), want held by %s with token %d", n, l, ok, a, want)
		}
	}
	sessions, err := o.liveSessions(ctx)
	must(err)
	if r, ok := sessions[a]; !ok || r <= 0 || r > longTTL {
		t.Fatalf("inspect sessions: a missing or wrong (%v, %d)", ok, r)
	}
	if _, ok := sessions[b]; ok {
		t.Fatal("inspect sessions lists a closed session")
	}
	ka, err = o.keepAlive(ctx, a, nil)
	must(err)
	for _, n := range []string{n1, n2, n4} {
		if _, ok := ka.Held[n]; !ok {
			t.Fatalf("keep-alive of a misses %s: %+v", n, ka)
		}
	}
}

// checkClock compares the database clock with the test's own clock (same host).
func checkClock(t *testing.T, ctx context.Context, o ops) {
	t.Helper()
	before := time.Now().UnixMilli()
	now, err := o.now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	if now < before-2000 || now > after+2000 {
		t.Fatalf("database clock %d ms is not UTC epoch ms near [%d, %d]", now, before, after)
	}
}

// byID sorts session labels as the backend lists members: by session id, bytewise.
func byID(o ops, labels ...string) []string {
	out := slices.Clone(labels)
	slices.SortFunc(out, func(x, y string) int { return strings.Compare(o.sessionID(x), o.sessionID(y)) })
	return out
}

package tck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// LeaseBackendSpec checks the SPI semantics of sessions, leases, names, groups, hints and time
// (the contract package spi documents) against the backend f describes.
func LeaseBackendSpec(t *testing.T, f Factory) {
	h := newHarness(t, f)
	t.Run("Sessions", func(t *testing.T) {
		t.Run("OpenReturnsDistinctIDsAndRemaining", h.sessionOpen)
		t.Run("InvalidTTLIsRejected", h.sessionInvalidTTL)
		t.Run("InvalidOwnerIsRejected", h.sessionInvalidOwner)
		t.Run("CheckTTLAgreesWithOpenSession", h.sessionCheckTTL)
		t.Run("KeepAliveReturnsRemainingAndHeldLeases", h.sessionKeepAliveHeld)
		t.Run("ExpiresAfterTTLWithoutKeepAlive", h.sessionExpiresAfterTTL)
		t.Run("KeepAliveExtendsExpiry", h.sessionKeepAliveExtends)
		t.Run("ExpiredCannotKeepAliveAcquireOrJoin", h.sessionExpiredIsDead)
		t.Run("CloseReleasesEverything", h.sessionCloseReleasesAll)
		t.Run("OwnerIsReportedToOthers", h.sessionOwner)
	})
	t.Run("Leases", func(t *testing.T) {
		t.Run("FreeIsGranted", h.leaseFreeGranted)
		t.Run("HeldIsHeldByWithHolderRemaining", h.leaseHeldBy)
		t.Run("ReacquireByHolderIsIdempotent", h.leaseReacquire)
		t.Run("ReleaseWithWrongTokenOrSessionChangesNothing", h.leaseBadRelease)
		t.Run("ReleaseFreesForOthers", h.leaseRelease)
		t.Run("StaleReleaseLeavesTheNextTerm", h.leaseStaleRelease)
		t.Run("TakeoverAfterHolderExpiryHasGreaterToken", h.leaseTakeover)
	})
	t.Run("Names", func(t *testing.T) {
		t.Run("OneCharacter", h.nameOneChar)
		t.Run("MaxLength", h.nameMaxLen)
		t.Run("Punctuation", h.namePunctuation)
		t.Run("CaseSensitive", h.nameCase)
		t.Run("PartitionNamesAreLeases", h.namePartition)
		t.Run("InvalidNamesAreRejected", h.nameInvalid)
	})
	t.Run("Groups", func(t *testing.T) {
		t.Run("JoinAndMembers", h.groupJoin)
		t.Run("Leave", h.groupLeave)
		t.Run("ExpiryRemovesMember", h.groupExpiry)
		t.Run("KeepAliveKeepsMembershipPastTTL", h.groupKeepAlive)
		t.Run("EmptyGroupHasNoMembers", h.groupEmpty)
		t.Run("KeepAliveRacesJoinAndLeave", h.keepAliveGroupRaces)
	})
	if f.Hints {
		t.Run("Hints", func(t *testing.T) {
			t.Run("SubscriberSeesRelease", h.hintRelease)
			t.Run("ChannelClosesWithContext", h.hintClose)
			if f.GroupHints {
				t.Run("GroupChangedOnJoinAndLeave", h.hintGroup)
			} else {
				t.Log("tck: Factory.GroupHints is false: GroupChanged hints are not checked")
			}
			if f.NewCuttableBackend != nil {
				t.Run("SurvivesReconnect", h.hintSteady)
			} else {
				t.Log("tck: Factory.NewCuttableBackend is nil: spi.SteadyHints is not checked")
			}
		})
	} else {
		t.Log("tck: Factory.Hints is false: the hint suite does not apply")
	}
	t.Run("Inspect", h.inspectSpec)
	if f.RoundTrips != nil {
		t.Run("Bounded", func(t *testing.T) {
			t.Run("KeepAliveAndCloseDoNotGrow", h.boundedCalls)
		})
	} else {
		t.Log("tck: Factory.RoundTrips is nil: bounded round trips are not checked")
	}
	t.Run("Closed", func(t *testing.T) {
		t.Run("CallsFailWithErrBackendClosed", h.closedCallsFail)
	})
	t.Run("Time", func(t *testing.T) {
		t.Run("ClientClockJumpsChangeNothing", h.timeClientJumps)
		t.Run("RemainingIsBackendTime", h.timeRemainingShrinks)
		t.Run("TTLBounds", h.timeTTLBounds)
	})
}

// --- sessions ---

func (h *harness) sessionOpen(t *testing.T) {
	b := h.backend(t)
	seen := map[spi.SessionID]bool{}
	for range 5 {
		s := h.open(t, b, h.long)
		if seen[s] {
			t.Fatalf("OpenSession returned the id %s twice", s)
		}
		seen[s] = true
	}
	// A second client of the same server gets distinct ids too.
	if s := h.open(t, h.backend(t), h.long); seen[s] {
		t.Fatalf("a second client got the id %s again", s)
	}
}

func (h *harness) sessionInvalidTTL(t *testing.T) {
	b := h.backend(t)
	for _, ttl := range []time.Duration{0, -time.Second} {
		s, err := b.OpenSession(ctx(t), h.owner(), ttl)
		if !errors.Is(err, spi.ErrInvalidOption) {
			if err == nil {
				b.CloseSession(ctx(t), s.ID)
			}
			t.Errorf("OpenSession with TTL %v: err = %v, want spi.ErrInvalidOption", ttl, err)
		}
	}
}

// sessionCheckTTL checks spi.TTLChecker (spi.CheckTTL, nil for a backend without it): the
// TTLs of a default client and of the suites are accepted, and of a few short TTLs, those
// CheckTTL refuses (with spi.ErrInvalidOption) are exactly those OpenSession refuses with
// spi.ErrInvalidOption — simba.New refuses a TTL by CheckTTL, so a TTL it lets through that
// every open refuses would be retried for as long as the client runs.
func (h *harness) sessionCheckTTL(t *testing.T) {
	b := h.backend(t)
	serves := []time.Duration{simba.DefaultTTL, h.short, h.long, h.f.MinTTL, h.f.MinTTL + 1500*time.Microsecond}
	if h.f.MaxTTL > 0 {
		serves = append(serves, h.f.MaxTTL)
	}
	for _, ttl := range serves {
		if err := spi.CheckTTL(b.Backend, ttl); err != nil {
			t.Errorf("CheckTTL(%v) = %v, want nil: a TTL the suites (or a default client) use", ttl, err)
		}
	}
	for _, ttl := range []time.Duration{time.Nanosecond, 999 * time.Microsecond, time.Millisecond, 999 * time.Millisecond, time.Second} {
		if h.f.MaxTTL > 0 && ttl > h.f.MaxTTL {
			continue // the server's bound, which only an open learns
		}
		checked := spi.CheckTTL(b.Backend, ttl)
		if checked != nil && !errors.Is(checked, spi.ErrInvalidOption) {
			t.Errorf("CheckTTL(%v) = %v, want nil or an error matching spi.ErrInvalidOption", ttl, checked)
		}
		s, err := b.OpenSession(ctx(t), h.owner(), ttl)
		if err == nil {
			b.CloseSession(ctx(t), s.ID)
		}
		switch opened := !errors.Is(err, spi.ErrInvalidOption); {
		case checked != nil && opened:
			t.Errorf("CheckTTL(%v) = %v, but OpenSession(%v) does not refuse it (err = %v)", ttl, checked, ttl, err)
		case checked == nil && !opened:
			t.Errorf("CheckTTL(%v) = nil, but OpenSession(%v) = %v: simba.New would accept a TTL every open refuses", ttl, ttl, err)
		}
	}
}

func (h *harness) sessionKeepAliveHeld(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	n1, n2, n3, n4 := h.name("held1"), h.name("held2"), h.name("others"), h.name("free")
	t1, t2 := h.grant(t, b, s, n1), h.grant(t, b, s, n2)
	h.grant(t, other, o, n3)
	h.live(t, b, s, h.long)
	ka := h.keepAlive(t, b, s, []string{n1, n2, n3, n4}, nil)
	if ka.Expired || ka.Remaining <= 0 || ka.Remaining > h.long {
		t.Fatalf("KeepAlive = %+v, want live with remaining in (0, %v]", ka, h.long)
	}
	want := map[string]int64{n1: t1, n2: t2}
	for _, held := range ka.Held {
		switch held.Name {
		case n3:
			t.Errorf("KeepAlive reports %q, which another session holds", n3)
		case n4:
			t.Errorf("KeepAlive reports %q, which nobody holds", n4)
		}
		if tok, ok := want[held.Name]; ok {
			if held.Token != tok {
				t.Errorf("KeepAlive reports %q with token %d, want %d", held.Name, held.Token, tok)
			}
			delete(want, held.Name)
		}
	}
	for name := range want {
		t.Errorf("KeepAlive does not report %q, which the session holds (reply %+v)", name, ka.Held)
	}
	if len(ka.Members) != 0 {
		t.Errorf("KeepAlive without groups returned members %v", ka.Members)
	}
}

func (h *harness) sessionExpiresAfterTTL(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.short)
	h.wait(t, h.expiryWait(h.short))
	if ka := h.keepAlive(t, b, s, nil, nil); !ka.Expired {
		t.Fatalf("KeepAlive %v after opening with TTL %v = %+v, want expired", h.expiryWait(h.short), h.short, ka)
	}
}

// sessionKeepAliveExtends: renewing at 0.6 TTL keeps the session live at 1.2 TTL after it was
// opened. On real time (no Factory.Wait) a keep-alive whose reply came back a TTL or more after
// the previous call (the open, or the keep-alive before) was sent proves nothing — a loaded
// machine may have delivered it after the session had expired — so that round is tried again
// with a new session, up to keepAliveRounds times; a keep-alive answered within the TTL of
// the previous call must find the session live.
func (h *harness) sessionKeepAliveExtends(t *testing.T) {
	b := h.backend(t)
	for round := 1; ; round++ {
		late := h.keepAliveRound(t, b)
		if late == "" {
			return
		}
		if round == keepAliveRounds {
			t.Fatalf("%d rounds were too slow to tell (last: %s)", round, late)
		}
		t.Logf("round %d inconclusive: %s", round, late)
	}
}

// keepAliveRounds bounds the rounds sessionKeepAliveExtends tries.
const keepAliveRounds = 5

// keepAliveRound opens a session with the short TTL and renews it twice, 0.6 TTL apart. It
// fails t if a keep-alive finds the session expired although its reply came within the TTL of
// the previous call's sending; it returns what was too slow (a keep-alive found the session
// expired, its reply later than that), or "" if both found it live.
func (h *harness) keepAliveRound(t *testing.T, b spi.Backend) (late string) {
	t.Helper()
	prev := time.Now() // the previous call's sending: the session lives a TTL from no earlier
	s := h.open(t, b, h.short)
	for i := range 2 {
		h.wait(t, h.short*6/10)
		sent := time.Now()
		ka := h.keepAlive(t, b, s, nil, nil)
		took := time.Since(prev)
		if ka.Expired && h.f.Wait == nil && took >= h.short {
			return fmt.Sprintf("keep-alive #%d answered %v after the call before it was sent (TTL %v)", i+1, took.Round(time.Millisecond), h.short)
		}
		if ka.Expired {
			t.Fatalf("KeepAlive #%d, 0.6 TTL after the call before it, = expired, want live (answered %v of real time after that call was sent; TTL %v)",
				i+1, took.Round(time.Millisecond), h.short)
		}
		if ka.Remaining <= 0 || ka.Remaining > h.short {
			t.Fatalf("KeepAlive #%d remaining = %v, want in (0, %v]", i+1, ka.Remaining, h.short)
		}
		prev = sent
	}
	return ""
}

func (h *harness) sessionExpiredIsDead(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s := h.open(t, b, h.short)
	name, fresh, group := h.name("lease"), h.name("fresh"), h.name("group")
	h.grant(t, b, s, name)
	o := h.open(t, other, h.long)
	h.expire(t, s)
	for i := range 2 { // an expired session never comes back
		if ka := h.keepAlive(t, b, s, []string{name}, nil); !ka.Expired {
			t.Fatalf("KeepAlive #%d of an expired session = %+v, want expired", i+1, ka)
		}
	}
	for _, n := range []string{name, fresh} {
		if r := h.acquire(t, b, s, n); r.Kind != spi.SessionExpired {
			t.Fatalf("Acquire(%q) by an expired session = %s, want session-expired", n, r.Kind)
		}
	}
	st, err := b.Join(ctx(t), s, group)
	if err != nil || st != spi.Expired {
		t.Fatalf("Join by an expired session = %s, %v; want session-expired", st, err)
	}
	if ms := h.members(t, other, group); slices.Contains(ms, s) {
		t.Fatalf("members of %q = %v, include the expired session", group, ms)
	}
	h.grant(t, other, o, name)
}

func (h *harness) sessionCloseReleasesAll(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	n1, n2, group := h.name("a"), h.name("b"), h.name("group")
	t1, t2 := h.grant(t, b, s, n1), h.grant(t, b, s, n2)
	h.join(t, b, s, group)
	h.join(t, other, o, group)
	if err := b.CloseSession(ctx(t), s); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	if tok := h.grant(t, other, o, n1); tok <= t1 {
		t.Errorf("token after close = %d, want > %d", tok, t1)
	}
	if tok := h.grant(t, other, o, n2); tok <= t2 {
		t.Errorf("token after close = %d, want > %d", tok, t2)
	}
	if ms := h.members(t, other, group); !slices.Equal(ms, []spi.SessionID{o}) {
		t.Errorf("members after close = %v, want [%s]", ms, o)
	}
	if ka := h.keepAlive(t, b, s, nil, nil); !ka.Expired {
		t.Errorf("KeepAlive of a closed session = %+v, want expired", ka)
	}
	if err := b.CloseSession(ctx(t), s); err != nil {
		t.Errorf("closing a closed session: %v", err)
	}
}

func (h *harness) sessionOwner(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	owner := strings.Repeat("o", 255-len(h.prefix)-1) + ":" + h.prefix // the longest owner
	s := h.openOwner(t, b, h.long, owner)
	o := h.open(t, other, h.long)
	name := h.name("owned")
	h.grant(t, b, s, name)
	if r := h.heldBy(t, other, o, name, s); r.HolderOwner != owner {
		t.Fatalf("HeldBy owner = %q, want %q", r.HolderOwner, owner)
	}
}

// --- leases ---

func (h *harness) leaseFreeGranted(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.long)
	r := h.acquire(t, b, s, h.name("free"))
	if r.Kind != spi.Granted || r.Token <= 0 {
		t.Fatalf("Acquire of a free lease = %+v, want granted with a positive token", r)
	}
	if r.Remaining <= 0 || r.Remaining > h.long {
		t.Fatalf("Granted remaining = %v, want in (0, %v]", r.Remaining, h.long)
	}
}

func (h *harness) leaseHeldBy(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	holderTTL := h.long / 2 // shorter than the asker's: HeldBy reports the holder's time
	s, o := h.open(t, b, holderTTL), h.open(t, other, h.long)
	name := h.name("held")
	h.grant(t, b, s, name)
	r := h.heldBy(t, other, o, name, s)
	if r.HolderOwner != h.owner() {
		t.Errorf("HeldBy owner = %q, want %q", r.HolderOwner, h.owner())
	}
	switch {
	case r.RemainingUnknown && !h.f.Hints:
		t.Errorf("HeldBy remaining unknown from a backend without hints")
	case !r.RemainingUnknown && (r.Remaining <= 0 || r.Remaining > holderTTL):
		t.Errorf("HeldBy remaining = %v, want in (0, %v] (the holder's TTL)", r.Remaining, holderTTL)
	}
}

func (h *harness) leaseReacquire(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.long)
	name := h.name("again")
	tok := h.grant(t, b, s, name)
	for i := range 3 {
		if again := h.grant(t, b, s, name); again != tok {
			t.Fatalf("re-acquire #%d token = %d, want the same %d", i+1, again, tok)
		}
	}
	ka := h.keepAlive(t, b, s, []string{name}, nil)
	if !slices.Contains(ka.Held, spi.Held{Name: name, Token: tok}) {
		t.Fatalf("KeepAlive held = %v, want %s with token %d", ka.Held, name, tok)
	}
}

func (h *harness) leaseBadRelease(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	name := h.name("kept")
	tok := h.grant(t, b, s, name)
	h.release(t, b, s, name, tok+1)
	h.release(t, b, s, name, tok-1)
	h.release(t, other, o, name, tok) // right token, wrong session
	h.heldBy(t, other, o, name, s)
	if again := h.grant(t, b, s, name); again != tok {
		t.Fatalf("after bad releases the holder's token = %d, want %d", again, tok)
	}
	ka := h.keepAlive(t, b, s, []string{name}, nil)
	if !slices.Contains(ka.Held, spi.Held{Name: name, Token: tok}) {
		t.Fatalf("after bad releases KeepAlive held = %v, want %s with token %d", ka.Held, name, tok)
	}
	// Releasing a lease nobody ever acquired is not an error either.
	h.release(t, b, s, h.name("never"), 1)
}

func (h *harness) leaseRelease(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	name := h.name("freed")
	tok := h.grant(t, b, s, name)
	h.release(t, b, s, name, tok)
	if ka := h.keepAlive(t, b, s, []string{name}, nil); slices.ContainsFunc(ka.Held, func(x spi.Held) bool { return x.Name == name }) {
		t.Fatalf("KeepAlive after release still reports %q: %v", name, ka.Held)
	}
	if next := h.grant(t, other, o, name); next <= tok {
		t.Fatalf("token after release = %d, want > %d", next, tok)
	}
	h.heldBy(t, b, s, name, o)
}

// leaseStaleRelease: a release of an old token that arrives after the same session's next
// acquire of the name was granted (a release retried, or one that timed out and landed late)
// frees nothing: the new term stays held, by the session's own record and for others. On a
// backend whose release cannot be conditioned on the token itself (ZooKeeper's delete checks
// a data version, 0 for every new node) this is where a stale release would delete the new
// term.
func (h *harness) leaseStaleRelease(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	name := h.name("stale")
	tok1 := h.grant(t, b, s, name)
	h.release(t, b, s, name, tok1)
	tok2 := h.grant(t, b, s, name)
	if tok2 <= tok1 {
		t.Fatalf("the next term's token = %d, want > %d", tok2, tok1)
	}
	for range 2 { // the release again, and once more
		h.release(t, b, s, name, tok1)
	}
	h.heldBy(t, other, o, name, s)
	ka := h.keepAlive(t, b, s, []string{name}, nil)
	if !slices.Contains(ka.Held, spi.Held{Name: name, Token: tok2}) {
		t.Fatalf("after stale releases of token %d KeepAlive held = %v, want %s with token %d", tok1, ka.Held, name, tok2)
	}
	if again := h.grant(t, b, s, name); again != tok2 {
		t.Fatalf("after stale releases the holder's token = %d, want %d", again, tok2)
	}
	h.release(t, b, s, name, tok2)
}

func (h *harness) leaseTakeover(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s := h.open(t, b, h.short)
	name := h.name("taken")
	tok := h.grant(t, b, s, name)
	o := h.open(t, other, h.long)
	h.expire(t, s)
	if next := h.grant(t, other, o, name); next <= tok {
		t.Fatalf("takeover token = %d, want > %d", next, tok)
	}
	if r := h.acquire(t, b, s, name); r.Kind != spi.SessionExpired {
		t.Fatalf("old holder's acquire = %s, want session-expired", r.Kind)
	}
	h.release(t, b, s, name, tok) // the expired holder's release changes nothing
	h.heldBy(t, b, h.open(t, b, h.long), name, o)
}

// --- names ---

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// grantFree acquires the first of candidates that no foreign session holds (names this short
// cannot be unique per run, so another run may hold one), returning it and its session.
func (h *harness) grantFree(t *testing.T, b spi.Backend, candidates []string) (string, spi.SessionID) {
	t.Helper()
	for _, name := range candidates {
		s := h.open(t, b, h.long)
		switch r := h.acquire(t, b, s, name); r.Kind {
		case spi.Granted:
			return name, s
		case spi.HeldBy:
			continue
		default:
			t.Fatalf("Acquire(%q) = %s", name, r.Kind)
		}
	}
	t.Fatalf("every candidate name is held by another session: %v", candidates)
	return "", ""
}

func (h *harness) nameOneChar(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	var cands []string
	for _, i := range rand.Perm(len(alnum))[:10] {
		cands = append(cands, alnum[i:i+1])
	}
	name, s := h.grantFree(t, b, cands)
	h.heldBy(t, other, h.open(t, other, h.long), name, s)
}

func (h *harness) nameMaxLen(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	base := h.name("max")
	long := base + strings.Repeat("x", 128-len(base))
	s := h.open(t, b, h.long)
	h.grant(t, b, s, long)
	o := h.open(t, other, h.long)
	h.heldBy(t, other, o, long, s)
	// A name one character shorter is another lease.
	h.grant(t, other, o, long[:127])
}

func (h *harness) namePunctuation(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	base := h.name("p")
	var names []string
	for _, p := range []string{".", "_", ":", "-"} {
		names = append(names, base+p+"x", p+base, base+p)
	}
	names = append(names, "..."+base, base+"._:-", "-._:"+base)
	for _, n := range names {
		h.grant(t, b, s, n)
	}
	// Each is its own lease, held by s.
	for _, n := range names {
		h.heldBy(t, other, o, n, s)
	}
}

func (h *harness) nameCase(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	lower := h.name("case-x")
	upper := strings.ToUpper(lower)
	h.grant(t, b, s, lower)
	if r := h.acquire(t, other, o, upper); r.Kind != spi.Granted {
		t.Fatalf("Acquire(%q) while %q is held = %s (holder %s); names must be case-sensitive", upper, lower, r.Kind, r.Holder)
	}
	// The one-character pair a/A: pick a letter whose lower- and upper-case forms are free.
	letters := rand.Perm(26)
	for _, i := range letters[:8] {
		lo, up := alnum[i:i+1], strings.ToUpper(alnum[i:i+1])
		sl := h.open(t, b, h.long)
		if r := h.acquire(t, b, sl, lo); r.Kind != spi.Granted {
			continue // held by another run
		}
		su := h.open(t, other, h.long)
		r := h.acquire(t, other, su, up)
		if r.Kind == spi.HeldBy && r.Holder == sl {
			t.Fatalf("Acquire(%q) is held by the holder of %q; names must be case-sensitive", up, lo)
		}
		if r.Kind == spi.Granted {
			return
		}
	}
	t.Fatal("no free one-letter pair found to check case-sensitivity")
}

func (h *harness) namePartition(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	group := h.name("orders")
	for _, p := range []string{"0", "7", "65535"} {
		h.grant(t, b, s, group+"."+p)
		h.heldBy(t, other, o, group+"."+p, s)
	}
	h.grant(t, other, o, group) // the group name itself is a separate lease
}

func (h *harness) nameInvalid(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.long)
	bad := []string{"", ".", "..", strings.Repeat("n", 129), "a/b", "a b", "a\x00b", "é", "a*", "{a}"}
	for _, name := range bad {
		if r, err := b.Acquire(ctx(t), s, name); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Acquire(%q) = %s, %v; want spi.ErrInvalidName", name, r.Kind, err)
		}
		if err := b.Release(ctx(t), s, name, 1); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Release(%q) = %v; want spi.ErrInvalidName", name, err)
		}
		if st, err := b.Join(ctx(t), s, name); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Join(%q) = %s, %v; want spi.ErrInvalidName", name, st, err)
		}
	}
	h.live(t, b, s, h.long)
}

// --- groups ---

func sorted(ids ...spi.SessionID) []spi.SessionID {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func (h *harness) join(t testing.TB, b spi.Backend, s spi.SessionID, group string) {
	t.Helper()
	if st, err := b.Join(ctx(t), s, group); err != nil || st != spi.OK {
		t.Fatalf("Join(%s, %q) = %s, %v; want ok", s, group, st, err)
	}
}

func (h *harness) groupJoin(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	group := h.name("g")
	h.join(t, b, s, group)
	h.join(t, other, o, group)
	h.join(t, b, s, group) // joining twice is one membership
	want := sorted(s, o)
	if ms := h.members(t, b, group); !slices.Equal(ms, want) {
		t.Fatalf("Members = %v, want %v (sorted, once each)", ms, want)
	}
	ka := h.keepAlive(t, b, s, nil, []string{group})
	if ka.Expired || !slices.Equal(ka.Members[group], want) {
		t.Fatalf("KeepAlive members = %v, want %s: %v", ka.Members, group, want)
	}
	checkMembersRemaining(t, ka, group, true, h.long)
}

// checkMembersRemaining checks the optional KeepAlive.MembersRemaining for group: only groups
// of Members, and for group (if the backend reports it) a time left in (0, maxTTL] when others
// are members, none when the caller is alone.
func checkMembersRemaining(t testing.TB, ka spi.KeepAlive, group string, others bool, maxTTL time.Duration) {
	t.Helper()
	for g := range ka.MembersRemaining {
		if _, ok := ka.Members[g]; !ok {
			t.Errorf("KeepAlive.MembersRemaining names %q, not a group of Members", g)
		}
	}
	r, ok := ka.MembersRemaining[group]
	switch {
	case ok && !others:
		t.Errorf("KeepAlive.MembersRemaining[%q] = %v with no other member", group, r)
	case ok && (r <= 0 || r > maxTTL):
		t.Errorf("KeepAlive.MembersRemaining[%q] = %v, want in (0, %v]", group, r, maxTTL)
	}
}

func (h *harness) groupLeave(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	group := h.name("g")
	h.join(t, b, s, group)
	h.join(t, other, o, group)
	for i := range 2 {
		if st, err := b.Leave(ctx(t), s, group); err != nil || st != spi.OK {
			t.Fatalf("Leave #%d = %s, %v; want ok", i+1, st, err)
		}
	}
	if ms := h.members(t, other, group); !slices.Equal(ms, []spi.SessionID{o}) {
		t.Fatalf("Members after leave = %v, want [%s]", ms, o)
	}
	ka := h.keepAlive(t, other, o, nil, []string{group})
	if !slices.Equal(ka.Members[group], []spi.SessionID{o}) {
		t.Fatalf("KeepAlive members after leave = %v", ka.Members)
	}
	checkMembersRemaining(t, ka, group, false, h.long)
}

func (h *harness) groupExpiry(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s := h.open(t, b, h.short)
	o := h.open(t, other, h.long)
	group := h.name("g")
	h.join(t, b, s, group)
	h.join(t, other, o, group)
	h.expire(t, s)
	if ms := h.members(t, other, group); !slices.Equal(ms, []spi.SessionID{o}) {
		t.Fatalf("Members after %s expired = %v, want [%s]", s, ms, o)
	}
	if ka := h.keepAlive(t, other, o, nil, []string{group}); !slices.Equal(ka.Members[group], []spi.SessionID{o}) {
		t.Fatalf("KeepAlive members after expiry = %v", ka.Members)
	}
	for _, op := range []struct {
		name string
		f    func(context.Context, spi.SessionID, string) (spi.Status, error)
	}{{"Join", b.Join}, {"Leave", b.Leave}} {
		if st, err := op.f(ctx(t), s, group); err != nil || st != spi.Expired {
			t.Fatalf("%s by an expired session = %s, %v; want session-expired", op.name, st, err)
		}
	}
	if ms := h.members(t, other, group); !slices.Equal(ms, []spi.SessionID{o}) {
		t.Fatalf("Members after the expired session's join = %v, want [%s]", ms, o)
	}
}

func (h *harness) groupKeepAlive(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s := h.open(t, b, h.short)
	group := h.name("g")
	h.join(t, b, s, group)
	// Renewing (with the group, as clients do) every quarter TTL keeps the membership for
	// longer than a TTL; the slack of three quarters of a TTL absorbs a slow machine.
	for range 10 {
		h.wait(t, h.short/4)
		ka := h.keepAlive(t, b, s, nil, []string{group})
		if ka.Expired || !slices.Equal(ka.Members[group], []spi.SessionID{s}) {
			t.Fatalf("KeepAlive = %+v, want live and the only member of %s", ka, group)
		}
	}
	if ms := h.members(t, other, group); !slices.Equal(ms, []spi.SessionID{s}) {
		t.Fatalf("Members after %v of keep-alives = %v, want [%s]", 10*h.short/4, ms, s)
	}
}

func (h *harness) groupEmpty(t *testing.T) {
	b := h.backend(t)
	group := h.name("nobody")
	if ms := h.members(t, b, group); len(ms) != 0 {
		t.Fatalf("Members of a group nobody joined = %v", ms)
	}
	s := h.open(t, b, h.long)
	ka := h.keepAlive(t, b, s, nil, []string{group})
	if ka.Expired || len(ka.Members[group]) != 0 {
		t.Fatalf("KeepAlive = %+v, want %s with no members", ka, group)
	}
}

// --- hints ---

// hinter returns a new client and its spi.Hinter.
func (h *harness) hinter(t *testing.T) (*client, spi.Hinter) {
	t.Helper()
	c := h.backend(t)
	hb, ok := c.Backend.(spi.Hinter)
	if !ok {
		t.Fatal("Factory.Hints is set but the backend does not implement spi.Hinter")
	}
	return c, hb
}

// subscribe returns a new client and the hints of its subscription, which ends with the test.
func (h *harness) subscribe(t *testing.T) (*client, <-chan spi.Hint) {
	t.Helper()
	sub, hb := h.hinter(t)
	subCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hints, err := hb.Hints(subCtx)
	if err != nil {
		t.Fatalf("Hints: %v", err)
	}
	return sub, hints
}

func (h *harness) hintRelease(t *testing.T) {
	sub, hints := h.subscribe(t)
	b := h.backend(t)
	s, waiter := h.open(t, b, h.long), h.open(t, sub, h.long)
	name := h.name("hinted")
	// The subscriber shows interest the way a candidate does, by finding the lease held (a
	// ZooKeeper backend sets its watch then). Hints may be lost, e.g. while the subscription is
	// being set up, so the holder releases a few times.
	deadline := time.Now().Add(callTimeout)
	for time.Now().Before(deadline) {
		tok := h.grant(t, b, s, name)
		h.heldBy(t, sub, waiter, name, s)
		h.release(t, b, s, name, tok)
		wait := time.After(time.Second)
		for waiting := true; waiting; {
			select {
			case hint, ok := <-hints:
				if !ok {
					t.Fatal("hint channel closed while its context is live")
				}
				if hint.Kind == spi.Released && hint.Name == name {
					return
				}
			case <-wait:
				waiting = false
			}
		}
	}
	t.Fatalf("no released hint for %q within %v", name, callTimeout)
}

// hintSteady checks spi.SteadyHints: a subscriber whose link to the server is cut while it
// waits for a lease (for a quarter of the shortest TTL), and the lease released meanwhile,
// gets the Released hint once the link heals, from that one release (a backend whose watch
// ends with its connection, or that sets it again without looking at what changed meanwhile,
// never sends it).
func (h *harness) hintSteady(t *testing.T) {
	raw, cut := h.f.NewCuttableBackend(t, BackendConfig{Clock: newJumpClock(), Prefix: h.prefix})
	if raw == nil || cut == nil {
		t.Fatal("tck: Factory.NewCuttableBackend returned a nil backend or cut")
	}
	t.Cleanup(func() { raw.Close() })
	hb, ok := raw.(spi.Hinter)
	if !ok || !spi.AreHintsSteady(raw) {
		t.Fatal("tck: Factory.NewCuttableBackend is set but its backend does not report spi.SteadyHints")
	}
	subCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hints, err := hb.Hints(subCtx)
	if err != nil {
		t.Fatalf("Hints: %v", err)
	}
	b := h.backend(t)
	s, waiter := h.open(t, b, h.long), h.open(t, raw, h.long)
	// awaitHint waits for a Released hint of name, for up to within.
	awaitHint := func(name string, within time.Duration) bool {
		timeout := time.After(within)
		for {
			select {
			case hint, ok := <-hints:
				if !ok {
					t.Fatal("hint channel closed while its context is live")
				}
				if hint.Kind == spi.Released && hint.Name == name {
					return true
				}
			case <-timeout:
				return false
			}
		}
	}
	// First the subscription is shown to work (hints may be lost while it is being set up,
	// so the holder releases a few times), on a name of its own.
	warm := h.name("steady-warm")
	for deadline := time.Now().Add(callTimeout); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no released hint for %q within %v", warm, callTimeout)
		}
		tok := h.grant(t, b, s, warm)
		h.heldBy(t, raw, waiter, warm, s)
		h.release(t, b, s, warm, tok)
		if awaitHint(warm, time.Second) {
			break
		}
	}
	// The waiter finds the lease held (the watch is set), its link is cut, the holder
	// releases, the link heals: the hint of that one release must come.
	name := h.name("steady")
	tok := h.grant(t, b, s, name)
	h.heldBy(t, raw, waiter, name, s)
	heal := cut()
	h.release(t, b, s, name, tok)
	// The outage lasts a quarter of the shortest TTL (wall time: it is the link's), so that
	// the subscriber is away when the release's change reaches it, yet its session lives.
	time.Sleep(h.short / 4)
	heal()
	if !awaitHint(name, callTimeout) {
		t.Fatalf("no released hint for %q within %v of the link's heal: the release made while it was cut was lost", name, callTimeout)
	}
	// The session lived through it.
	h.live(t, raw, waiter, h.long)
}

// hintGroup checks Factory.GroupHints: a subscriber one of whose sessions is a member of a
// group gets a GroupChanged hint for it when another client's session joins the group, and
// another when it leaves, each before the wait ends (a second; the join and leave are made
// again, up to callTimeout, since hints may be lost while a subscription is being set up, as
// on Redis, where the subscriber's own join subscribes to the group's channel). A hint
// that comes late for one change may stand for the next: the check asks for a hint after each
// of a join and the leave that follows, in one round, not which change each hint is for.
func (h *harness) hintGroup(t *testing.T) {
	sub, hints := h.subscribe(t)
	b := h.backend(t)
	member, s := h.open(t, sub, h.long), h.open(t, b, h.long)
	group := h.name("hintedg")
	// The subscriber takes part in the group, as a PartitionGroup's member does: a backend may
	// narrow its GroupChanged hints to its own sessions' groups.
	h.join(t, sub, member, group)
	await := func() bool {
		wait := time.After(time.Second)
		for {
			select {
			case hint, ok := <-hints:
				if !ok {
					t.Fatal("hint channel closed while its context is live")
				}
				if hint.Kind == spi.GroupChanged && hint.Name == group {
					return true
				}
			case <-wait:
				return false
			}
		}
	}
	var joins, leaves int
	deadline := time.Now().Add(callTimeout)
	for time.Now().Before(deadline) {
		h.join(t, b, s, group)
		joined := await()
		if st, err := b.Leave(ctx(t), s, group); err != nil || st != spi.OK {
			t.Fatalf("Leave(%s, %q) = %s, %v; want ok", s, group, st, err)
		}
		left := await()
		if joined && left {
			return
		}
		if joined {
			joins++
		}
		if left {
			leaves++
		}
	}
	t.Fatalf("no round of another session's join and leave of %q brought a GroupChanged hint after each within %v (hints after %d joins, %d leaves)", group, callTimeout, joins, leaves)
}

func (h *harness) hintClose(t *testing.T) {
	_, hb := h.hinter(t)
	c, cancel := context.WithCancel(context.Background())
	hints, err := hb.Hints(c)
	if err != nil {
		cancel()
		t.Fatalf("Hints: %v", err)
	}
	cancel()
	timeout := time.After(callTimeout)
	for {
		select {
		case _, ok := <-hints:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("hint channel still open %v after its context ended", callTimeout)
		}
	}
}

// --- time ---

func (h *harness) timeClientJumps(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	name := h.name("jump")
	tok := h.grant(t, b, s, name)
	for _, jump := range []time.Duration{time.Hour, -2 * time.Hour} { // +1 h, then -1 h from the start
		b.clock.Jump(jump)
		other.clock.Jump(jump)
		ka := h.live(t, b, s, h.long)
		if ka.Remaining < h.long/2 {
			t.Fatalf("after a client clock jump of %v KeepAlive remaining = %v, want close to %v", jump, ka.Remaining, h.long)
		}
		if again := h.grant(t, b, s, name); again != tok {
			t.Fatalf("after a client clock jump of %v the holder's token = %d, want %d", jump, again, tok)
		}
		r := h.heldBy(t, other, o, name, s)
		if !r.RemainingUnknown && (r.Remaining < h.long/2 || r.Remaining > h.long) {
			t.Fatalf("after a client clock jump of %v HeldBy remaining = %v, want close to %v", jump, r.Remaining, h.long)
		}
		fresh := h.open(t, other, h.long)
		h.live(t, other, fresh, h.long)
	}
}

func (h *harness) timeRemainingShrinks(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	ttl := 4 * h.short
	s, o := h.open(t, b, ttl), h.open(t, other, h.long)
	name := h.name("shrink")
	h.grant(t, b, s, name)
	// Keep alive at a known point, then let server time pass: the holder's remaining time, as
	// the backend reports it, shrinks by (at least about) that much.
	h.live(t, b, s, ttl)
	d := h.short
	h.wait(t, d)
	slack := h.short/10 + 10*time.Millisecond // clock granularity and rate
	r := h.heldBy(t, other, o, name, s)
	if !r.RemainingUnknown && (r.Remaining > ttl-d+slack || r.Remaining <= 0) {
		t.Fatalf("HeldBy remaining %v after a keep-alive and %v of server time = %v, want ≤ %v", ttl, d, r.Remaining, ttl-d)
	}
	g := h.acquire(t, b, s, name)
	if g.Kind != spi.Granted || g.Remaining > ttl-d+slack || g.Remaining <= 0 {
		t.Fatalf("holder's re-acquire after %v = %+v, want remaining ≤ %v", d, g, ttl-d)
	}
	ka := h.live(t, b, s, ttl)
	if ka.Remaining < ttl-slack {
		t.Fatalf("KeepAlive remaining = %v, want about %v again", ka.Remaining, ttl)
	}
}

func (h *harness) timeTTLBounds(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.f.MinTTL)
	h.live(t, b, s, h.f.MinTTL)
	if h.f.MaxTTL > 0 {
		s := h.open(t, b, h.f.MaxTTL)
		h.live(t, b, s, h.f.MaxTTL)
	}
	// A TTL that is not a whole number of milliseconds is accepted (backends may round it).
	odd := h.f.MinTTL + 1500*time.Microsecond
	if h.f.MaxTTL == 0 || odd <= h.f.MaxTTL {
		s, err := b.OpenSession(ctx(t), h.owner(), odd)
		if err != nil {
			t.Fatalf("OpenSession(%v): %v", odd, err)
		}
		defer b.CloseSession(ctx(t), s.ID)
		if s.Remaining <= 0 || s.Remaining > odd+time.Millisecond {
			t.Fatalf("OpenSession(%v) remaining = %v", odd, s.Remaining)
		}
	}
}

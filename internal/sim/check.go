package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/spi"
)

// The names of the invariant checks, as violations report them.
const (
	// CheckOneValid: at no instant of backend time do two clients hold a term they believe
	// valid for one name (partitions included).
	CheckOneValid = "one-valid-term"
	// CheckTokens: tokens strictly increase per name across every Elected of every client
	// (except terms of sessions the backend expired by force: a late grant of such a session
	// may arrive after the next holder's).
	CheckTokens = "tokens-increase"
	// CheckAdoptDeadline: no term is adopted at or after its session's local deadline.
	CheckAdoptDeadline = "adopt-before-deadline"
	// CheckRevokeRelease: a Release of (name, token) is never issued while that client's term
	// (name, token) is not yet revoked (rule 2).
	CheckRevokeRelease = "revoke-before-release"
	// CheckTermPairs: every Elected is followed by exactly one Revoked (or the end of the
	// run), and a client never holds two terms of one name.
	CheckTermPairs = "elected-revoked-pairs"
	// CheckRevived: a term whose local deadline passed never becomes valid again.
	CheckRevived = "no-revival"
	// CheckExpired: once the backend told a client its session expired, no term of that
	// session stays valid (rule 4).
	CheckExpired = "expired-session-revoked"
	// CheckHandover: a new holder's term never starts while the previous holder's work runs
	// under a term it may still believe valid (rule 5).
	CheckHandover = "handover"
	// CheckUnwanted: a lease that no election of its live holder wants is released within
	// one renewal interval plus a round trip (rule 3).
	CheckUnwanted = "unwanted-lease-released"
	// CheckTermLease: a term its client believes valid has its lease held at the backend by
	// the term's session with the term's token, polled every 100 ms at the model (terms of
	// sessions expired by force exempt). one-valid-term needs a second client to be granted
	// the lease in the window; this sees the window itself, such as a term that outlives its
	// lease's own expiry (simbatest.WithLeaseExpiry, Redis).
	CheckTermLease = "valid-term-holds-lease"
	// CheckFutures: every future completes exactly once, by the end of the run.
	CheckFutures = "futures-complete"
	// CheckJoin: a Join made after the group's Leave completed is taken, never refused.
	CheckJoin = "join-after-leave"
	// CheckFair: a new tenure never goes to a session while a live waiter registered before
	// it (or any live waiter, if the grantee never registered) waits: the waiter queue of
	// spi.Queuer, checked against the simulator's own record of queued acquires.
	CheckFair = "fair-queue"
	// CheckLiveness: after healing, every wanted lease has a leader and every partition its
	// rendezvous owner within the liveness bound; every running client has a live session.
	CheckLiveness = "liveness"
)

// forced reports whether session id was expired by force at the backend (its terms are then
// exempt from the one-valid check: the backend broke the promise the engine relies on).
func (s *Sim) forced(id spi.SessionID) bool { return s.sess[id].forced }

// believedValid reports whether t's client believes t valid now: not revoked, and its clock
// is before the deadline it last published.
func (s *Sim) believedValid(t *term) bool {
	return !t.revoked && s.clients[t.client].clock(s.now) < t.validUntil()
}

// validUntil is the client time the term's validity ends at as its client last published it:
// its session's deadline or its own bound (rule 6), whichever is first.
func (t *term) validUntil() time.Duration { return min(t.deadline, t.until) }

func (s *Sim) onDeadline(c *client, ef *engine.Effect, now time.Duration) {
	if ef.Name != "" { // a keep-alive confirmed the term's grant (rule 6): its bound is lifted
		ti, ok := c.open[ef.Name]
		if !ok || s.terms[ti].token != ef.Token {
			s.fail(CheckTermPairs, "c%d: confirmed %s#%d, which it does not hold", c.idx, ef.Name, ef.Token)
			return
		}
		t := &s.terms[ti]
		if now >= t.validUntil() && t.deadline > now {
			s.fail(CheckRevived, "c%d: term %s#%d lapsed at its own bound %v (client time) but was confirmed at %v: the term is valid again until %v",
				c.idx, t.name, t.token, t.until, now, t.deadline)
			return
		}
		t.until = math.MaxInt64
		return
	}
	for _, ti := range c.open {
		t := &s.terms[ti]
		if t.session != ef.Session {
			continue
		}
		if now >= t.validUntil() && min(ef.At, t.until) > now {
			s.fail(CheckRevived, "c%d: term %s#%d lapsed at its deadline %v (client time) but the session's deadline moved to %v at %v: the term is valid again",
				c.idx, t.name, t.token, t.validUntil(), ef.At, now)
			return
		}
		t.deadline = ef.At
	}
}

func (s *Sim) onElected(c *client, ef *engine.Effect, now time.Duration) {
	s.stats.Elected++
	ni, ok := s.nameIdx[ef.Name]
	if !ok {
		s.fail(CheckTermPairs, "c%d: elected for %q, a name nobody asked for", c.idx, ef.Name)
		return
	}
	ns := &s.byName[ni]
	if ef.At <= now {
		s.fail(CheckAdoptDeadline, "c%d: adopted %s#%d at client time %v, at or after its deadline %v",
			c.idx, ef.Name, ef.Token, now, ef.At)
		return
	}
	if ef.Token <= ns.lastToken && !s.forced(ef.Session) {
		prev := &s.terms[ns.lastTerm]
		s.fail(CheckTokens, "c%d: elected %s#%d, but c%d was elected with token %d at %v",
			c.idx, ef.Name, ef.Token, prev.client, prev.token, prev.startB)
		return
	}
	if ti, ok := c.open[ef.Name]; ok {
		t := &s.terms[ti]
		s.fail(CheckTermPairs, "c%d: elected %s#%d while its term %s#%d (elected at %v) was never revoked",
			c.idx, ef.Name, ef.Token, t.name, t.token, t.startB)
		return
	}
	if !s.forced(ef.Session) {
		for _, oi := range ns.open {
			o := &s.terms[oi]
			if o.client != c.idx && !s.forced(o.session) && s.believedValid(o) {
				oc := &s.clients[o.client]
				s.fail(CheckOneValid, "c%d elected %s#%d at backend time %v while c%d still believes %s#%d valid (its clock %v < its deadline %v, i.e. until backend time %v; elected at %v)",
					c.idx, ef.Name, ef.Token, s.now, o.client, o.name, o.token, oc.clock(s.now), o.validUntil(), oc.backendAt(o.validUntil()), o.startB)
				return
			}
		}
		for _, wi := range ns.work {
			w := &s.terms[wi]
			if w.client == c.idx || !w.revoked || s.forced(w.session) {
				continue
			}
			wc := &s.clients[w.client]
			if wc.clock(s.now) < w.coverW {
				s.fail(CheckHandover, "c%d elected %s#%d at backend time %v while the work of c%d's term %s#%d still runs (revoked %v at %v) and may believe it valid until client time %v (backend %v)",
					c.idx, ef.Name, ef.Token, s.now, w.client, w.name, w.token, w.reason, w.revokedB, w.coverW, wc.backendAt(w.coverW))
				return
			}
		}
	}
	ti := s.newTerm(c, ef)
	if ef.Token > ns.lastToken {
		ns.lastToken, ns.lastTerm = ef.Token, ti
	}
	ns.open = append(ns.open, ti)
	c.open[ef.Name] = ti
	if c.hasWork(s, ef) {
		s.startWork(ti)
	}
}

func (s *Sim) onRevoked(c *client, ef *engine.Effect, now time.Duration) {
	s.stats.Revoked++
	ti, ok := c.open[ef.Name]
	if !ok || s.terms[ti].token != ef.Token {
		s.fail(CheckTermPairs, "c%d: revoked %s#%d, which it does not hold (a second Revoked, or one without Elected)", c.idx, ef.Name, ef.Token)
		return
	}
	t := &s.terms[ti]
	t.revoked, t.reason, t.revokedB = true, ef.Reason, s.now
	delete(c.open, ef.Name)
	ns := &s.byName[t.ni]
	ns.open = removeIdx(ns.open, ti)
	if t.work {
		switch ef.Reason {
		case engine.ReasonStopped, engine.ReasonSteppedDown, engine.ReasonClosed:
			// Handover: the lease is kept while the work runs, up to the deadline as of now.
			t.coverW = t.validUntil()
		default:
			t.coverW = min(now, t.validUntil())
		}
		s.stopWork(ti)
	}
}

// checkRule2: a release of (name, token) while the term is not yet revoked.
func (s *Sim) checkRule2(c *client, ef *engine.Effect) {
	if ti, ok := c.open[ef.Name]; ok && s.terms[ti].token == ef.Token {
		s.fail(CheckRevokeRelease, "c%d released %s#%d while its term %s#%d was not revoked", c.idx, ef.Name, ef.Token, ef.Name, ef.Token)
	}
}

// checkRule4: after a step that delivered "session expired" for sid, no term of sid may be
// left unrevoked.
func (s *Sim) checkRule4(c *client, sid spi.SessionID) {
	for _, ti := range c.open {
		if t := &s.terms[ti]; t.session == sid {
			s.fail(CheckExpired, "c%d: the backend replied that session %s expired, but its term %s#%d was not revoked",
				c.idx, sid, t.name, t.token)
			return
		}
	}
}

// checkTermLease polls the model: every term its client believes valid must have its lease
// held at the backend by its session with its token.
func (s *Sim) checkTermLease() {
	for ni, name := range s.names {
		ns := &s.byName[ni]
		if len(ns.open) == 0 {
			continue
		}
		info, _ := s.model.Lease(s.now, name)
		for _, ti := range ns.open {
			t := &s.terms[ti]
			if s.forced(t.session) || !s.believedValid(t) || (info.Holder == t.session && info.Token == t.token) {
				continue
			}
			c := &s.clients[t.client]
			held := "free"
			if info.Holder != "" {
				held = fmt.Sprintf("held by session %s with token %d", info.Holder, info.Token)
			}
			s.fail(CheckTermLease, "c%d believes %s#%d valid (its clock %v < its deadline %v, i.e. until backend time %v; elected at %v, session %s), but the lease is %s at the backend",
				t.client, t.name, t.token, c.clock(s.now), t.validUntil(), c.backendAt(t.validUntil()), t.startB, t.session, held)
			return
		}
	}
}

// checkRule3 polls the model: a lease held by the live, current session of a running client
// that no election of that client wants (no candidate, leader, handover or acquire in flight)
// must be released within one renewal interval plus a round trip, counted from the later of
// when it became unwanted and the last fault that touched the client.
func (s *Sim) checkRule3() {
	f := &s.cfg.Faults
	for ni, name := range s.names {
		ns := &s.byName[ni]
		info, _ := s.model.Lease(s.now, name)
		if info.Holder == "" || info.Holder != ns.r3Holder {
			ns.r3Holder, ns.r3Since = info.Holder, 0
		}
		if info.Holder == "" {
			continue
		}
		rec, ok := s.sess[info.Holder]
		if !ok || rec.forced {
			ns.r3Since = 0
			continue
		}
		c := &s.clients[rec.client]
		if c.inc != rec.inc || c.eng == nil || c.paused || c.eng.SessionState() != engine.SessionLive || c.eng.SessionID() != info.Holder {
			ns.r3Since = 0
			continue
		}
		if e, ok := c.eng.Election(name); ok && (e.State == engine.Candidate || e.State == engine.Leader || e.State == engine.Handover || e.AcquireInFlight) {
			ns.r3Since = 0
			continue
		}
		if ns.r3Since == 0 {
			ns.r3Since = s.now
		}
		from := max(ns.r3Since, c.disturbed)
		bound := c.renewB + 3*f.LatencyMax + checkEvery
		if s.now-from > bound {
			s.fail(CheckUnwanted, "c%d's session %s has held %s#%d since backend time %v though no election of c%d wants it (bound %v)",
				c.idx, info.Holder, name, info.Token, ns.r3Since, c.idx, bound)
			s.sendHints()
			return
		}
	}
	s.sendHints() // Lease observed expiries
}

// checkSettled checks liveness after healing: every running client has a live session, every
// election somebody wants has exactly one leader whose session holds the lease, the group's
// members are the running clients that joined it and each partition is held by its rendezvous
// owner. At the end of the run (final) it also checks that every future completed.
func (s *Sim) checkSettled(final bool) {
	defer s.sendHints()
	var joined []string
	for i := range s.clients {
		c := &s.clients[i]
		if c.eng == nil || c.eng.Closed() {
			continue
		}
		if final && len(c.futures) > 0 {
			for id, f := range c.futures {
				s.fail(CheckFutures, "c%d: future f%d (%s %s, asked at %v) never completed", c.idx, id, f.op, f.name, f.at)
				return
			}
		}
		if c.closing {
			continue
		}
		if c.eng.SessionState() != engine.SessionLive {
			s.fail(CheckLiveness, "c%d: session %v, not live, %v after healing", c.idx, c.eng.SessionState(), s.now-s.shape.Heal())
			return
		}
		if g, ok := c.eng.Group(groupName); ok && g.Joined {
			joined = append(joined, string(c.eng.SessionID()))
		}
	}
	if final {
		for i := range s.clients {
			c := &s.clients[i]
			if c.eng != nil && c.eng.Closed() && len(c.futures) > 0 {
				for id, f := range c.futures {
					s.fail(CheckFutures, "c%d (closed): future f%d (%s %s, asked at %v) never completed", c.idx, id, f.op, f.name, f.at)
					return
				}
			}
		}
	}
	// Elections.
	for ni := 0; ni < s.shape.Elections; ni++ {
		name := s.names[ni]
		wanted := false
		for i := range s.clients {
			c := &s.clients[i]
			if c.eng == nil || c.closing || c.eng.Closed() {
				continue
			}
			if e, ok := c.eng.Election(name); ok && (e.State == engine.Candidate || e.State == engine.Leader) {
				wanted = true
			}
		}
		if wanted && !s.heldBy(name, "") {
			return
		}
	}
	// The group.
	members, _ := s.model.Members(s.now, groupName)
	view := make([]string, len(members))
	for i, m := range members {
		view[i] = string(m)
	}
	slices.Sort(joined)
	if !slices.Equal(view, joined) {
		s.fail(CheckLiveness, "group %s has members %v at the backend, but the running clients that joined it are %v", groupName, view, joined)
		return
	}
	for p := 0; p < s.shape.Partitions; p++ {
		if owner := wire.Owner(p, view); owner != "" && !s.heldBy(wire.PartitionName(groupName, p), spi.SessionID(owner)) {
			return
		}
	}
}

// heldBy checks that name has a leader: a running client that believes its term valid and
// whose session holds the lease at the backend (session owner, if not empty).
func (s *Sim) heldBy(name string, owner spi.SessionID) bool {
	info, _ := s.model.Lease(s.now, name)
	ns := &s.byName[s.nameIdx[name]]
	for _, ti := range ns.open {
		t := &s.terms[ti]
		if s.believedValid(t) && t.session == info.Holder && (owner == "" || owner == info.Holder) {
			return true
		}
	}
	who := "nobody"
	if rec, ok := s.sess[info.Holder]; ok {
		who = "c" + strconv.Itoa(int(rec.client))
	}
	if owner != "" {
		s.fail(CheckLiveness, "%v after healing, %s is held at the backend by %s (session %q, token %d), not by a valid term of its rendezvous owner %s",
			s.now-s.shape.Heal(), name, who, info.Holder, info.Token, owner)
	} else {
		s.fail(CheckLiveness, "%v after healing, %s is wanted but has no leader (held at the backend by %s, session %q, token %d)",
			s.now-s.shape.Heal(), name, who, info.Holder, info.Token)
	}
	return false
}

// shadowWaiter is the fair-queue check's record of one waiter: a session whose queued acquire
// of the name was answered HeldBy, live while the session is and expiry (the session's expiry
// as of its latest queued acquire) has not passed — or, when entries live with their session
// (Faults.SessionWaiters), while the session is.
type shadowWaiter struct {
	id     spi.SessionID
	expiry time.Duration
}

// checkFair checks one acquire the model answered (before: the lease just before): a new
// tenure goes to the first live waiter of the check's own queue, or to anyone when no waiter
// is live; then it updates the queue as spi.Queuer describes. A grant with the lease's latest
// token is the holder's re-acquire, not a new tenure — also when, with
// simbatest.WithLeaseExpiry, the lease had lapsed but nobody took it (acquire.lua re-grants it
// to its holder with the same token, waiters or not).
func (s *Sim) checkFair(client int32, ef *engine.Effect, before spi.LeaseInfo, a spi.Acquire) {
	q := s.fairQ[ef.Name]
	// Entries that live with their session (Faults.SessionWaiters) are live while it is.
	withSession := s.entriesLiveWithSession()
	live := func(w shadowWaiter) bool {
		_, ok := s.model.Session(s.now, w.id)
		return ok && (withSession || w.expiry > s.now)
	}
	switch a.Kind {
	case spi.Granted:
		if a.Token != before.Token {
			for _, w := range q {
				if w.id == ef.Session {
					break
				}
				if live(w) {
					entry := "entry until " + w.expiry.String()
					if withSession {
						entry = "entry living with its session"
					}
					s.fail(CheckFair, "%s granted to c%d (session %s, queued=%v) while waiter %s (%s) waits ahead of it",
						ef.Name, client, ef.Session, ef.Queue, w.id, entry)
					return
				}
			}
		}
		q = slices.DeleteFunc(q, func(w shadowWaiter) bool { return w.id == ef.Session })
	case spi.HeldBy:
		info, ok := s.model.Session(s.now, ef.Session)
		if !ef.Queue || !ok {
			break
		}
		i := slices.IndexFunc(q, func(w shadowWaiter) bool { return w.id == ef.Session })
		if i >= 0 && !withSession && q[i].expiry <= s.now { // a lapsed entry is gone: the waiter queues anew
			q = slices.Delete(q, i, i+1)
			i = -1
		}
		if i < 0 {
			q = append(q, shadowWaiter{id: ef.Session})
			i = len(q) - 1
		}
		q[i].expiry = s.now + info.Remaining
	}
	s.fairQ[ef.Name] = q
}

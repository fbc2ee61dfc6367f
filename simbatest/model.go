package simbatest

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// MaxOwnerLen is the longest owner string a session may carry, in bytes (wire.MaxOwnerLen, as
// on every backend).
const MaxOwnerLen = wire.MaxOwnerLen

// maxQueuedHints bounds the hint queue of a Model nobody drains; the oldest hints are dropped
// first (hints may be lost: they only speed clients up).
const maxQueuedHints = 4096

// Model is the in-memory model of Simba's wire semantics (the contract package spi documents):
// sessions with a TTL, leases whose fencing token per name only grows, and groups of live
// sessions. It is the one model both Server (for tests on real goroutines) and the
// deterministic simulator (on virtual time) drive.
//
// A Model is pure and deterministic: it reads no clock, starts no goroutine, takes no lock and
// uses no randomness beyond its seeded session id source. Every operation takes the backend's
// current time now explicitly, as a duration since an arbitrary origin; the same sequence of
// calls always gives the same replies. Backend time never goes backwards: a now earlier than the
// latest one seen is treated as the latest. A Model is not safe for concurrent use (Server adds
// the lock).
//
// Semantics, all measured on the backend's time:
//   - A session opened or kept alive at now expires at now + ttl and is live while time is before
//     that. An expired session never comes back: every later operation on it replies
//     Expired / SessionExpired, and it releases its leases and leaves its groups (with hints) as
//     soon as the model observes the expiry (at the next operation or Tick).
//   - Leases are rows keyed by name that are never deleted, so the token of a name only grows.
//     Acquire grants a free lease (or one whose holder's session expired) with the previous token
//     plus one; a re-acquire by the holder is idempotent and returns the same token.
//   - Release changes nothing unless the session holds the name with that token.
//   - With WithLeaseExpiry a lease has an expiry of its own, as on Redis (see there); by
//     default a lease lives exactly as long as its holder's session.
//   - Invalid names and groups are rejected with an error matching spi.ErrInvalidName, and
//     invalid TTLs or owners with one matching spi.ErrInvalidOption, before any state changes.
type Model struct {
	now      time.Duration
	ids      func() spi.SessionID
	sessions map[spi.SessionID]*session
	leases   map[string]*lease
	groups   map[string]map[spi.SessionID]struct{}
	hints    []spi.Hint

	// earliest is a lower bound of every live session's expiry; observe skips its scan before it.
	earliest time.Duration

	// waiters is each name's waiter queue (spi.Queuer), oldest first; entries are pruned
	// lazily, when the name is next acquired.
	waiters map[string][]waiter
	unfair  bool
	// sessionWaiters: an entry lives as long as its session (WithSessionWaiters).
	sessionWaiters bool
	// unknownRemaining: HeldBy leaves the time left unknown (WithUnknownRemaining).
	unknownRemaining bool

	reportAllHeld bool
	expiryHints   bool
	leaseExpiry   bool
}

// waiter is one entry of a waiter queue: live while its session is and expiry has not passed
// (with WithSessionWaiters, while its session is).
type waiter struct {
	id     spi.SessionID
	expiry time.Duration
}

type session struct {
	id     spi.SessionID
	owner  string
	ttl    time.Duration
	expiry time.Duration
	leases map[string]struct{}
	groups map[string]struct{}
}

type lease struct {
	holder spi.SessionID // empty when free
	token  int64
	// expiry is the lease's own expiry (WithLeaseExpiry only): a copy of the holder's session
	// expiry made by the grant and moved by keep-alives that report the lease held.
	expiry time.Duration
}

// ModelOption configures a Model.
type ModelOption func(*Model)

// WithSeed makes the model's session ids come from a deterministic source seeded with seed: each
// id is 32 lowercase hex characters (128 bits, the SQL and Redis format) and no id repeats within
// one model. The default seed is 0, so two models built alike hand out the same ids.
func WithSeed(seed uint64) ModelOption {
	return func(m *Model) { m.ids = seededIDs(seed) }
}

// WithIDs makes the model take its session ids from next, which must be deterministic (for the
// simulator) and never return an id twice. OpenSession fails if next returns the id of a live
// session.
func WithIDs(next func() spi.SessionID) ModelOption {
	return func(m *Model) { m.ids = next }
}

// WithReportAllHeld makes KeepAlive list every lease the session holds, not only those it asked
// about: the SPI allows a backend to report more (Redis reads the session's whole lease set), and
// clients must cope with it.
func WithReportAllHeld() ModelOption {
	return func(m *Model) { m.reportAllHeld = true }
}

// WithoutExpiryHints makes the model release an expired session's leases and memberships
// silently, as SQL and Redis backends do; by default it queues Released and GroupChanged hints
// for them, as ZooKeeper's watches do. Hints only speed clients up, so both must be correct.
func WithoutExpiryHints() ModelOption {
	return func(m *Model) { m.expiryHints = false }
}

// WithoutFairness makes the model ignore its waiter queues: a free lease goes to whoever asks
// first, and AcquireQueued registers nobody — the semantics of a backend without spi.Queuer.
// The simulator's mutation test uses it to show that its fairness check catches a backend that
// passes waiters over.
func WithoutFairness() ModelOption {
	return func(m *Model) { m.unfair = true }
}

// WithSessionWaiters makes a waiter entry live exactly as long as its session, as ZooKeeper's
// ephemeral waiter nodes and etcd's waiter keys on the session's lease do, rather than until
// the session's expiry as of the entry's latest AcquireQueued (the SQL and Redis backends, and
// the default): while the session is kept alive its entry keeps its place, however long ago its
// last AcquireQueued was, and HeldBy naming a waiter the lease is reserved for reports that
// waiter's session's time left. A Backend of a Server whose model has it implements
// spi.SessionQueue with true.
func WithSessionWaiters() ModelOption {
	return func(m *Model) { m.sessionWaiters = true }
}

// SessionWaiters reports whether the model's waiter entries live as long as their session
// (WithSessionWaiters).
func (m *Model) SessionWaiters() bool { return m.sessionWaiters }

// WithUnknownRemaining makes HeldBy leave the holder's (or the reserved-for waiter's) time
// left unknown (spi.Acquire.RemainingUnknown), as ZooKeeper and etcd do, and queues a Released
// hint for a name whenever a waiter entry of it goes by a Withdraw or with its session (when
// that session's end is hinted: a close, or an expiry unless WithoutExpiryHints), as those
// backends' watches on waiter nodes and keys hint it: the waiters behind it may now have the
// lease. A Backend of a Server whose model has it implements spi.SteadyHints with true, as
// those backends do: the hints it drops (while its client is cut off, or for a subscriber
// 1024 hints behind) stand for the hints a real backend loses anyway, which the client's
// fallback retry covers.
func WithUnknownRemaining() ModelOption {
	return func(m *Model) { m.unknownRemaining = true }
}

// UnknownRemaining reports whether the model's HeldBy leaves the time left unknown
// (WithUnknownRemaining).
func (m *Model) UnknownRemaining() bool { return m.unknownRemaining }

// heldBy is the HeldBy reply naming session h, whose time left (or its entry's) is rem.
func (m *Model) heldBy(h *session, rem time.Duration) spi.Acquire {
	if m.unknownRemaining {
		return spi.Acquire{Kind: spi.HeldBy, Holder: h.id, HolderOwner: h.owner, RemainingUnknown: true}
	}
	return spi.Acquire{Kind: spi.HeldBy, Holder: h.id, HolderOwner: h.owner, Remaining: rem}
}

// WithLeaseExpiry gives every lease an expiry of its own, as Redis does (the lease hash's
// expires field, spec/lua/acquire.lua and keep_alive.lua); by default a lease lives exactly as
// long as its holder's session, as on the SQL backends, ZooKeeper and etcd. With it:
//   - a grant, and a re-acquire by the holder, copies the session's expiry into the lease;
//   - a keep-alive moves the expiry of each lease it reports held (the asked leases the
//     session holds; every lease it holds with WithReportAllHeld) to the session's new expiry,
//     and only those: a keep-alive that does not name a lease leaves its expiry behind the
//     session's;
//   - a lease whose own expiry has passed is free for another session's acquire even while its
//     holder's session lives (and the new grant takes it from that session); until then it
//     stays the holder's, so a keep-alive naming it or a re-acquire renews it with the same
//     token, and Release and CloseSession free it as usual;
//   - HeldBy's Remaining, and Lease's and Inspect's, is the lease's own time left, and Lease
//     and Inspect report a lapsed lease free.
//
// A lease that lapses on its own queues no hint (Redis has no expiry hints); the waiters
// retry when HeldBy's Remaining has passed. The simulator uses it to catch a client that
// believes a term valid past its lease's own expiry.
func WithLeaseExpiry() ModelOption {
	return func(m *Model) { m.leaseExpiry = true }
}

// NewModel returns an empty model at backend time 0.
func NewModel(opts ...ModelOption) *Model {
	m := &Model{
		ids:         seededIDs(0),
		sessions:    make(map[spi.SessionID]*session),
		leases:      make(map[string]*lease),
		groups:      make(map[string]map[spi.SessionID]struct{}),
		waiters:     make(map[string][]waiter),
		expiryHints: true,
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// seededIDs returns a source of distinct 128-bit ids: splitmix64 is a bijection of uint64, so the
// first half of the ids of distinct counters already differ.
func seededIDs(seed uint64) func() spi.SessionID {
	var n uint64
	return func() spi.SessionID {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], splitmix64(seed+2*n))
		binary.BigEndian.PutUint64(b[8:], splitmix64(seed+2*n+1))
		n++
		return spi.SessionID(hex.EncodeToString(b[:]))
	}
}

func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// Now returns the latest backend time the model has seen.
func (m *Model) Now() time.Duration { return m.now }

// Tick moves the model to now and observes every expiry due by then (releasing the expired
// sessions' leases and memberships, with hints). Every operation does this first; a driver calls
// Tick at NextExpiry to have expiry hints on time.
func (m *Model) Tick(now time.Duration) {
	if now > m.now {
		m.now = now
	}
	if len(m.sessions) == 0 || m.now < m.earliest {
		return
	}
	var due []*session
	next := time.Duration(0)
	first := true
	for _, s := range m.sessions {
		if s.expiry <= m.now {
			due = append(due, s)
		} else if first || s.expiry < next {
			next, first = s.expiry, false
		}
	}
	m.earliest = next
	slices.SortFunc(due, func(a, b *session) int {
		if a.expiry != b.expiry {
			return cmp.Compare(a.expiry, b.expiry)
		}
		return cmp.Compare(string(a.id), string(b.id))
	})
	for _, s := range due {
		m.drop(s, m.expiryHints)
	}
}

// NextExpiry returns the earliest expiry of a live session, if any.
func (m *Model) NextExpiry() (time.Duration, bool) {
	var next time.Duration
	ok := false
	for _, s := range m.sessions {
		if !ok || s.expiry < next {
			next, ok = s.expiry, true
		}
	}
	return next, ok
}

// drop removes s: it releases its leases and leaves its groups, queueing hints if hints is set.
func (m *Model) drop(s *session, hints bool) {
	delete(m.sessions, s.id)
	for _, name := range sortedKeys(s.leases) {
		if l := m.leases[name]; l != nil && l.holder == s.id {
			l.holder = ""
			if hints {
				m.hint(spi.Released, name)
			}
		}
	}
	for _, g := range sortedKeys(s.groups) {
		m.removeMember(g, s.id, hints)
	}
	if hints && m.unknownRemaining {
		// Its waiter entries go with it (pruned lazily): hinted, as ZooKeeper's watch on a
		// waiter node and etcd's on the waiter keys hint it (WithUnknownRemaining).
		for _, name := range sortedKeys(m.waiters) {
			if slices.ContainsFunc(m.waiters[name], func(w waiter) bool { return w.id == s.id }) {
				m.hint(spi.Released, name)
			}
		}
	}
}

func (m *Model) removeMember(g string, id spi.SessionID, hints bool) bool {
	members := m.groups[g]
	if _, ok := members[id]; !ok {
		return false
	}
	delete(members, id)
	if len(members) == 0 {
		delete(m.groups, g)
	}
	if s := m.sessions[id]; s != nil {
		delete(s.groups, g)
	}
	if hints {
		m.hint(spi.GroupChanged, g)
	}
	return true
}

func (m *Model) hint(kind spi.HintKind, name string) {
	if len(m.hints) >= maxQueuedHints {
		m.hints = m.hints[1:]
	}
	m.hints = append(m.hints, spi.Hint{Kind: kind, Name: name})
}

// TakeHints returns the hints queued since the last call, in the order the model produced them,
// and empties the queue. A driver that does not deliver hints may ignore them: the queue keeps
// only the latest few thousand.
func (m *Model) TakeHints() []spi.Hint {
	h := m.hints
	m.hints = nil
	return h
}

// live returns the session id at now, or nil if it does not exist or has expired.
func (m *Model) live(now time.Duration, id spi.SessionID) *session {
	m.Tick(now)
	return m.sessions[id]
}

// OpenSession opens a session for owner that expires ttl after now (and after each keep-alive).
// The reply's Remaining is ttl.
func (m *Model) OpenSession(now time.Duration, owner string, ttl time.Duration) (spi.Session, error) {
	if ttl <= 0 {
		return spi.Session{}, fmt.Errorf("%w: session TTL %v is not positive", spi.ErrInvalidOption, ttl)
	}
	if err := spi.ValidateOwner(owner); err != nil {
		return spi.Session{}, err
	}
	m.Tick(now)
	id := m.ids()
	if _, dup := m.sessions[id]; dup || id == "" {
		return spi.Session{}, fmt.Errorf("simbatest: session id source returned %q, empty or in use", id)
	}
	s := &session{
		id:     id,
		owner:  owner,
		ttl:    ttl,
		expiry: m.now + ttl,
		leases: make(map[string]struct{}),
		groups: make(map[string]struct{}),
	}
	m.sessions[id] = s
	if len(m.sessions) == 1 || s.expiry < m.earliest {
		m.earliest = s.expiry
	}
	return spi.Session{ID: id, Remaining: ttl}, nil
}

// KeepAlive renews session to expire ttl after now and reports the leases among names that it
// holds (every lease it holds with WithReportAllHeld), sorted by name, and the live members of
// each group in groups, sorted ascending, with the least time left among the other members
// (MembersRemaining). An expired or unknown session gets Expired. With WithLeaseExpiry the
// leases reported held, and only those, move to the session's new expiry.
func (m *Model) KeepAlive(now time.Duration, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	for _, g := range groups {
		if err := wire.ValidateName(g); err != nil {
			return spi.KeepAlive{}, err
		}
	}
	s := m.live(now, id)
	if s == nil {
		return spi.KeepAlive{Expired: true}, nil
	}
	s.expiry = m.now + s.ttl
	reply := spi.KeepAlive{Remaining: s.ttl}
	if m.reportAllHeld {
		for _, name := range sortedKeys(s.leases) {
			reply.Held = append(reply.Held, spi.Held{Name: name, Token: m.leases[name].token})
		}
	} else {
		for _, name := range names {
			if _, ok := s.leases[name]; ok {
				reply.Held = append(reply.Held, spi.Held{Name: name, Token: m.leases[name].token})
			}
		}
		slices.SortFunc(reply.Held, func(a, b spi.Held) int { return cmp.Compare(a.Name, b.Name) })
		reply.Held = slices.CompactFunc(reply.Held, func(a, b spi.Held) bool { return a.Name == b.Name })
	}
	if m.leaseExpiry { // keep_alive.lua: each lease reported held moves to the session's expiry
		for _, h := range reply.Held {
			m.leases[h.Name].expiry = s.expiry
		}
	}
	if len(groups) > 0 {
		reply.Members = make(map[string][]spi.SessionID, len(groups))
		for _, g := range groups {
			reply.Members[g] = m.members(g)
			for _, o := range reply.Members[g] {
				if o == id || m.sessions[o] == nil {
					continue
				}
				reply.NoteMemberRemaining(g, m.sessions[o].expiry-m.now)
			}
		}
	}
	return reply, nil
}

// CloseSession ends the session and releases everything it holds, queueing a Released hint per
// lease and a GroupChanged hint per group it was in. Closing an expired or unknown session does
// nothing.
func (m *Model) CloseSession(now time.Duration, id spi.SessionID) error {
	if s := m.live(now, id); s != nil {
		m.drop(s, true)
	}
	return nil
}

// Acquire takes name for the session if it is free or its holder's session has expired (or,
// with WithLeaseExpiry, the lease's own expiry has passed), with a token one greater than the
// name's last (ErrTokenOverflow when the last is the int64 maximum), unless the name has live
// waiters (see AcquireQueued): a free lease is then reserved for the first of them, and the
// reply is HeldBy naming it. A re-acquire by the holder returns the same token. The reply's
// Remaining is the acquiring session's time left for Granted, the lease's (its holder's
// session's, or its own with WithLeaseExpiry) or the first waiter entry's for HeldBy. Acquire
// never registers a waiter.
func (m *Model) Acquire(now time.Duration, id spi.SessionID, name string) (spi.Acquire, error) {
	return m.acquire(now, id, name, false)
}

// AcquireQueued is Acquire for a session that waits (spi.Queuer): when the reply is HeldBy,
// the session is appended to name's waiter queue, or keeps its place there, with its entry's
// expiry set to the session's current expiry. A free lease goes to the first live entry of the
// queue (an entry is live while its session is and its expiry has not passed; with
// WithSessionWaiters, while its session is); a grant removes the grantee's entry.
func (m *Model) AcquireQueued(now time.Duration, id spi.SessionID, name string) (spi.Acquire, error) {
	return m.acquire(now, id, name, true)
}

func (m *Model) acquire(now time.Duration, id spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	if err := wire.ValidateName(name); err != nil {
		return spi.Acquire{}, err
	}
	s := m.live(now, id)
	if s == nil {
		return spi.Acquire{Kind: spi.SessionExpired}, nil
	}
	l := m.leases[name]
	if l == nil {
		l = &lease{}
		m.leases[name] = l
	}
	switch {
	case l.holder == id:
		if m.leaseExpiry { // acquire.lua copies the session's expiry on a re-acquire too
			l.expiry = s.expiry
		}
	case m.held(l):
		// Holders are live: the model drops an expired session's leases when it observes the
		// expiry, which live() above just did.
		h := m.sessions[l.holder]
		m.wait(name, s, queued)
		return m.heldBy(h, m.leaseExpiryOf(l)-m.now), nil
	default:
		if first, ok := m.firstWaiter(name); ok && first.id != id {
			m.wait(name, s, queued)
			w := m.sessions[first.id]
			return m.heldBy(w, m.waiterExpiry(first)-m.now), nil
		}
		if l.token == math.MaxInt64 { // no successor: a permanent, named error, nothing changed
			return spi.Acquire{}, spi.AsPermanent(fmt.Errorf("%w: simbatest: lease %q holds token %d", spi.ErrTokenOverflow, name, l.token))
		}
		if l.holder != "" { // a lapsed lease (WithLeaseExpiry): the grant takes it from its holder
			delete(m.sessions[l.holder].leases, name)
		}
		l.holder = id
		l.token++
		l.expiry = s.expiry
		s.leases[name] = struct{}{}
		m.unwait(name, id)
	}
	return spi.Acquire{Kind: spi.Granted, Token: l.token, Remaining: s.expiry - m.now}, nil
}

// held reports whether l is held at m.now: it has a holder (whose session is live, as the model
// drops an expired session's leases when it observes the expiry) and, with WithLeaseExpiry, its
// own expiry has not passed.
func (m *Model) held(l *lease) bool {
	return l.holder != "" && (!m.leaseExpiry || l.expiry > m.now)
}

// leaseExpiryOf is the expiry of the held lease l: its own with WithLeaseExpiry, its holder's
// session's otherwise.
func (m *Model) leaseExpiryOf(l *lease) time.Duration {
	if m.leaseExpiry {
		return l.expiry
	}
	return m.sessions[l.holder].expiry
}

// Withdraw removes the session's entry from name's waiter queue, if any (spi.Queuer).
func (m *Model) Withdraw(now time.Duration, id spi.SessionID, name string) error {
	if err := wire.ValidateName(name); err != nil {
		return err
	}
	m.Tick(now)
	if m.unwait(name, id) && m.unknownRemaining {
		m.hint(spi.Released, name)
	}
	return nil
}

// firstWaiter prunes name's queue of dead entries and returns the first live one.
func (m *Model) firstWaiter(name string) (waiter, bool) {
	q := m.waiters[name]
	if m.unfair || len(q) == 0 {
		return waiter{}, false
	}
	q = slices.DeleteFunc(q, func(w waiter) bool { return m.sessions[w.id] == nil || m.waiterExpiry(w) <= m.now })
	if len(q) == 0 {
		delete(m.waiters, name)
		return waiter{}, false
	}
	m.waiters[name] = q
	return q[0], true
}

// wait appends s to name's queue, or refreshes its entry, when queued is set.
func (m *Model) wait(name string, s *session, queued bool) {
	if !queued || m.unfair {
		return
	}
	q := m.waiters[name]
	for i := range q {
		if q[i].id == s.id {
			if m.waiterExpiry(q[i]) > m.now { // live: it keeps its place
				q[i].expiry = s.expiry
				return
			}
			q = slices.Delete(q, i, i+1) // lapsed: it queues anew, at the end
			break
		}
	}
	m.waiters[name] = append(q, waiter{id: s.id, expiry: s.expiry})
}

// waiterExpiry is the expiry of the entry w of a live session: its own, or its session's with
// WithSessionWaiters.
func (m *Model) waiterExpiry(w waiter) time.Duration {
	if m.sessionWaiters {
		return m.sessions[w.id].expiry
	}
	return w.expiry
}

// unwait removes id's entry from name's queue and reports whether there was one.
func (m *Model) unwait(name string, id spi.SessionID) bool {
	q := m.waiters[name]
	n := len(q)
	if n == 0 {
		return false
	}
	q = slices.DeleteFunc(q, func(w waiter) bool { return w.id == id })
	if len(q) == 0 {
		delete(m.waiters, name)
	} else {
		m.waiters[name] = q
	}
	return len(q) < n
}

// Release frees name if the session holds it with token, queueing a Released hint; otherwise it
// changes nothing.
func (m *Model) Release(now time.Duration, id spi.SessionID, name string, token int64) error {
	if err := wire.ValidateName(name); err != nil {
		return err
	}
	s := m.live(now, id)
	l := m.leases[name]
	if s == nil || l == nil || l.holder != id || l.token != token {
		return nil
	}
	l.holder = ""
	delete(s.leases, name)
	m.hint(spi.Released, name)
	return nil
}

// Join makes the session a member of group until it leaves, closes or expires, queueing a
// GroupChanged hint if it was not a member yet.
func (m *Model) Join(now time.Duration, id spi.SessionID, group string) (spi.Status, error) {
	if err := wire.ValidateName(group); err != nil {
		return 0, err
	}
	s := m.live(now, id)
	if s == nil {
		return spi.Expired, nil
	}
	members := m.groups[group]
	if members == nil {
		members = make(map[spi.SessionID]struct{})
		m.groups[group] = members
	}
	if _, ok := members[id]; !ok {
		members[id] = struct{}{}
		s.groups[group] = struct{}{}
		m.hint(spi.GroupChanged, group)
	}
	return spi.OK, nil
}

// Leave removes the session from group, queueing a GroupChanged hint if it was a member.
func (m *Model) Leave(now time.Duration, id spi.SessionID, group string) (spi.Status, error) {
	if err := wire.ValidateName(group); err != nil {
		return 0, err
	}
	if m.live(now, id) == nil {
		return spi.Expired, nil
	}
	m.removeMember(group, id, true)
	return spi.OK, nil
}

// Members lists the live members of group, sorted ascending.
func (m *Model) Members(now time.Duration, group string) ([]spi.SessionID, error) {
	if err := wire.ValidateName(group); err != nil {
		return nil, err
	}
	m.Tick(now)
	return m.members(group), nil
}

func (m *Model) members(g string) []spi.SessionID {
	out := make([]spi.SessionID, 0, len(m.groups[g]))
	for id := range m.groups[g] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// ExpireSession makes the session expire at now, as if its TTL had run out, and reports whether
// it was live. Its leases and memberships are released as for any expiry.
func (m *Model) ExpireSession(now time.Duration, id spi.SessionID) bool {
	s := m.live(now, id)
	if s == nil {
		return false
	}
	s.expiry = m.now
	m.earliest = m.now
	m.Tick(m.now)
	return true
}

// Restart models a server restart that keeps the lease rows (so tokens keep growing) but loses
// every session and membership, silently: clients find their sessions expired.
func (m *Model) Restart(now time.Duration) {
	m.Tick(now)
	for _, id := range sortedKeys(m.sessions) {
		m.drop(m.sessions[id], false)
	}
}

// Lease returns the state of name at now: its holder (empty when free), the holder's owner and
// the lease's time left (its holder's session's, or the lease's own with WithLeaseExpiry), and
// the name's latest token. It reports false for a name never acquired.
func (m *Model) Lease(now time.Duration, name string) (spi.LeaseInfo, bool) {
	m.Tick(now)
	l := m.leases[name]
	if l == nil {
		return spi.LeaseInfo{}, false
	}
	info := spi.LeaseInfo{Name: name, Token: l.token}
	if h := m.sessions[l.holder]; h != nil && m.held(l) {
		info.Holder, info.Owner, info.Remaining = h.id, h.owner, m.leaseExpiryOf(l)-m.now
	}
	return info, true
}

// Session returns the live session id at now, with its owner and time left.
func (m *Model) Session(now time.Duration, id spi.SessionID) (spi.SessionInfo, bool) {
	s := m.live(now, id)
	if s == nil {
		return spi.SessionInfo{}, false
	}
	return spi.SessionInfo{ID: s.id, Owner: s.owner, Remaining: s.expiry - m.now}, true
}

// Inspect returns the model's state at now: every lease row sorted by name (free ones with an
// empty holder and their latest token), the live sessions sorted by id and the non-empty groups.
func (m *Model) Inspect(now time.Duration) spi.Snapshot {
	m.Tick(now)
	snap := spi.Snapshot{Groups: make(map[string][]spi.SessionID, len(m.groups))}
	for _, name := range sortedKeys(m.leases) {
		info, _ := m.Lease(m.now, name)
		snap.Leases = append(snap.Leases, info)
	}
	for _, id := range sortedKeys(m.sessions) {
		s := m.sessions[id]
		snap.Sessions = append(snap.Sessions, spi.SessionInfo{ID: id, Owner: s.owner, Remaining: s.expiry - m.now})
	}
	for g := range m.groups {
		snap.Groups[g] = m.members(g)
	}
	return snap
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

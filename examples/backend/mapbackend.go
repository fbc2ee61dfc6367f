// Package mapbackend is a complete Simba backend in one file: an in-memory server (a mutex and
// a few maps) written outside the Simba module against the public SPI only
// (github.com/simba-go/simba/spi), and checked by the public conformance suites
// (github.com/simba-go/simba/tck). It is meant to be read and copied: every rule a backend must
// keep is stated where the code keeps it.
//
// A Server plays the database: one shared state that many clients reach. Each client gets its
// own connection (Connect), as each process would open its own connection pool to a real server:
//
//	srv := mapbackend.NewServer(spi.SystemClock())
//	client, err := simba.New(srv.Connect(), simba.WithOwner("worker-1"))
//
// What the server keeps, all on its own clock (never the client's):
//
//   - Sessions: an owner, a TTL and an expiry. OpenSession and KeepAlive set the expiry to the
//     server's time plus the TTL; a session is live while the server's time is before its
//     expiry. An expired session never comes back: every later call on it replies Expired /
//     SessionExpired.
//   - Leases: rows keyed by name that are never deleted, each with its holder (empty when free)
//     and the token of its latest grant, so a name's fencing token only grows. A new grant's
//     token is the row's plus one; a re-acquire by the holder returns the same token.
//   - Groups: sets of live member sessions.
//   - Waiter queues (spi.Queuer): per lease row, the sessions waiting for it in arrival order,
//     each entry with an expiry (its session's expiry as of its latest AcquireQueued). A free
//     lease goes only to the first live entry's session, or to anyone when no entry is live.
//
// Expiry is lazy: every call first drops the sessions whose expiry has passed, releasing their
// leases and group memberships (with hints), exactly as if a reaper had run at that instant.
// Every call takes the one mutex, so each is atomic, and makes no "round trip" at all: a real
// backend must likewise make a fixed number of round trips per call, whatever the number of
// leases a session holds.
//
// Tokens here are a plain counter that starts again at 1 with the process, acceptable only
// because this server lives and dies inside its clients' process. A backend whose records can
// be lost while the resources it fences remember old tokens (a Redis key evicted, a row deleted
// by hand, a server restarted without its data) must also keep every new token above a floor
// derived from the server's clock, so that the sequence never restarts: Simba's SQL and Redis
// backends grant max(last + 1, the server's time in microseconds since the epoch).
//
// The tests (example_test.go) are the other half of a backend: a tck.Factory that describes it
// and the four conformance suites run against it.
package mapbackend

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/simba-go/simba/spi"
)

// MaxTTL is the longest session TTL the server accepts. Bounding it keeps "now + TTL" far from
// overflowing; OpenSession rejects a longer one with spi.ErrInvalidOption.
const MaxTTL = 24 * time.Hour

// hintBuffer is how many hints a subscriber may fall behind before hints for it are dropped.
// Hints only speed clients up, so dropping them costs latency, never safety.
const hintBuffer = 256

// Server is the shared state every connection reaches: sessions, lease rows and groups, guarded
// by one mutex. It is safe for concurrent use.
type Server struct {
	clock spi.Clock

	mu       sync.Mutex
	sessions map[spi.SessionID]*session
	leases   map[string]*lease
	groups   map[string]map[spi.SessionID]struct{}
	subs     map[*subscriber]struct{}
}

// session is one live session.
type session struct {
	owner   string
	ttl     time.Duration
	expiry  time.Duration       // on the server's clock
	leases  map[string]struct{} // names it holds
	groups  map[string]struct{} // groups it is a member of
	waiting map[string]struct{} // names it has a waiter entry for
}

// lease is one lease row. Rows are never deleted.
type lease struct {
	holder  spi.SessionID // empty when free
	token   int64         // the token of the latest grant
	waiters []waiter      // the waiter queue, in arrival order (spi.Queuer)
}

// waiter is one entry of a lease's waiter queue. It is live while its expiry has not passed and
// its session is live; a lapsed entry is skipped and removed when the queue is next read.
type waiter struct {
	id     spi.SessionID
	expiry time.Duration // on the server's clock
}

// firstWaiter prunes the entries of name's queue (l) that are no longer live and returns the
// first live one, or nil. The caller holds s.mu and has called expire.
func (s *Server) firstWaiter(name string, l *lease, now time.Duration) *waiter {
	live := l.waiters[:0]
	for _, w := range l.waiters {
		sess := s.sessions[w.id]
		switch {
		case sess != nil && w.expiry > now:
			live = append(live, w)
		case sess != nil: // lapsed: the waiter stopped attempting without withdrawing
			delete(sess.waiting, name)
		}
	}
	clear(l.waiters[len(live):])
	l.waiters = live
	if len(live) == 0 {
		return nil
	}
	return &l.waiters[0]
}

// enqueue appends id to the queue of name (l), or keeps its place and refreshes its expiry.
func (s *Server) enqueue(name string, l *lease, id spi.SessionID, sess *session) {
	sess.waiting[name] = struct{}{}
	for i := range l.waiters {
		if l.waiters[i].id == id {
			l.waiters[i].expiry = sess.expiry
			return
		}
	}
	l.waiters = append(l.waiters, waiter{id: id, expiry: sess.expiry})
}

// dequeue removes id's entry from the queue of name (l) and reports whether it was the first
// entry: the next waiter may then take a free lease, so the caller sends a Released hint.
func (s *Server) dequeue(name string, l *lease, id spi.SessionID) (wasFirst bool) {
	if sess := s.sessions[id]; sess != nil {
		delete(sess.waiting, name)
	}
	for i, w := range l.waiters {
		if w.id == id {
			l.waiters = slices.Delete(l.waiters, i, i+1)
			return i == 0
		}
	}
	return false
}

// subscriber is one Hints channel.
type subscriber struct {
	conn *Backend
	ch   chan spi.Hint
	stop chan struct{} // closed when the channel is closed by Backend.Close
}

// NewServer returns an empty server that measures time on clock (spi.SystemClock when nil).
// The server's clock decides every expiry; the clocks of the clients never do.
func NewServer(clock spi.Clock) *Server {
	if clock == nil {
		clock = spi.SystemClock()
	}
	return &Server{
		clock:    clock,
		sessions: make(map[spi.SessionID]*session),
		leases:   make(map[string]*lease),
		groups:   make(map[string]map[spi.SessionID]struct{}),
		subs:     make(map[*subscriber]struct{}),
	}
}

// Connect returns a new client connection to the server: what a process would hand to
// simba.New. Each connection is closed on its own.
func (s *Server) Connect() *Backend { return &Backend{srv: s} }

// ExpireSession makes the session expire now, as if its TTL had run out, and reports whether it
// was live. Tests use it to force a failover without waiting out a TTL (tck.Factory.ExpireSession);
// a SQL backend's test would set the session row's expiry to the database's clock instead.
func (s *Server) ExpireSession(id spi.SessionID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.clock.Now())
	sess := s.sessions[id]
	if sess == nil {
		return false
	}
	s.drop(id, sess)
	return true
}

// expire drops every session whose expiry has passed. The caller holds s.mu. It scans all
// sessions, which is plenty for a reference; a real store would index sessions by expiry.
func (s *Server) expire(now time.Duration) {
	for id, sess := range s.sessions {
		if sess.expiry <= now {
			s.drop(id, sess)
		}
	}
}

// live returns the session id if it exists and has not expired. The caller holds s.mu and has
// called expire.
func (s *Server) live(id spi.SessionID) *session { return s.sessions[id] }

// drop removes a session: it frees the leases it holds and leaves its groups, with hints.
func (s *Server) drop(id spi.SessionID, sess *session) {
	delete(s.sessions, id)
	for name := range sess.leases {
		if l := s.leases[name]; l.holder == id {
			l.holder = ""
			s.hint(spi.Released, name)
		}
	}
	for g := range sess.groups {
		s.leave(g, id)
	}
	for name := range sess.waiting {
		if l := s.leases[name]; l != nil && s.dequeue(name, l, id) && l.holder == "" {
			s.hint(spi.Released, name) // the next waiter may take it now
		}
	}
}

// leave removes id from group g and reports whether it was a member. Empty groups are deleted:
// unlike lease rows they carry nothing that must survive.
func (s *Server) leave(g string, id spi.SessionID) bool {
	members := s.groups[g]
	if _, ok := members[id]; !ok {
		return false
	}
	delete(members, id)
	if len(members) == 0 {
		delete(s.groups, g)
	}
	if sess := s.sessions[id]; sess != nil {
		delete(sess.groups, g)
	}
	s.hint(spi.GroupChanged, g)
	return true
}

// members returns the live members of g, sorted ascending as the SPI requires.
func (s *Server) members(g string) []spi.SessionID {
	out := make([]spi.SessionID, 0, len(s.groups[g]))
	for id := range s.groups[g] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// hint sends a hint to every subscriber that has room for it. The caller holds s.mu, which is
// also what a subscriber's channel is closed under, so a send never meets a closed channel.
func (s *Server) hint(kind spi.HintKind, name string) {
	for sub := range s.subs {
		select {
		case sub.ch <- spi.Hint{Kind: kind, Name: name}:
		default: // the subscriber is behind: the hint is lost, which only costs it latency
		}
	}
}

// Backend is one client's connection to a Server. It implements spi.Backend and the optional
// capabilities spi.Hinter, spi.Queuer, spi.Inspector, spi.LeaseInspector, spi.TTLChecker and
// spi.CutSafe, and is safe for concurrent use.
type Backend struct {
	srv    *Server
	closed bool // guarded by srv.mu
}

// The compiler checks that Backend implements the SPI and its optional capabilities.
var (
	_ spi.Backend        = (*Backend)(nil)
	_ spi.Hinter         = (*Backend)(nil)
	_ spi.Inspector      = (*Backend)(nil)
	_ spi.LeaseInspector = (*Backend)(nil)
	_ spi.TTLChecker     = (*Backend)(nil)
	_ spi.Queuer         = (*Backend)(nil)
	_ spi.CutSafe        = (*Backend)(nil)
)

// begin starts a call: it fails if ctx is done or the connection is closed, and otherwise locks
// the server, drops the sessions that expired and returns the server's time. The caller unlocks.
// A real backend would pass ctx to its driver instead; either way a call whose ctx is done before
// it takes effect has no effect.
func (b *Backend) begin(ctx context.Context, op string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("mapbackend: %s: %w", op, err)
	}
	b.srv.mu.Lock()
	if b.closed {
		b.srv.mu.Unlock()
		return 0, fmt.Errorf("mapbackend: %s: %w", op, spi.ErrBackendClosed)
	}
	now := b.srv.clock.Now()
	b.srv.expire(now)
	return now, nil
}

// validName checks a lease or group name against the wire grammar before any work is done. The
// error matches spi.ErrInvalidName (Classify: permanent).
func validName(op, name string) error {
	if err := spi.ValidateName(name); err != nil {
		return fmt.Errorf("mapbackend: %s: %w", op, err)
	}
	return nil
}

// newSessionID returns 128 random bits as 32 lowercase hex characters, the id format of the SQL
// and Redis backends. crypto/rand.Read never returns an error (it crashes the program instead).
func newSessionID() spi.SessionID {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return spi.SessionID(hex.EncodeToString(b[:]))
}

// CheckTTL implements spi.TTLChecker: a TTL that is not positive or exceeds MaxTTL is
// refused, with an error matching spi.ErrInvalidOption, as OpenSession refuses it before
// touching any state, so that simba.New refuses it up front rather than every session open.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxTTL {
		return fmt.Errorf("mapbackend: %w: TTL %v is not in (0, %v]", spi.ErrInvalidOption, ttl, MaxTTL)
	}
	return nil
}

// OpenSession implements spi.Backend. It checks ttl and owner before touching any state: a TTL
// that is not positive or exceeds MaxTTL, and an owner that breaks the wire rule, fail with an
// error matching spi.ErrInvalidOption.
func (b *Backend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	if err := b.CheckTTL(ttl); err != nil {
		return spi.Session{}, err
	}
	if err := spi.ValidateOwner(owner); err != nil {
		return spi.Session{}, fmt.Errorf("mapbackend: OpenSession: %w", err)
	}
	now, err := b.begin(ctx, "OpenSession")
	if err != nil {
		return spi.Session{}, err
	}
	defer b.srv.mu.Unlock()
	id := newSessionID()
	b.srv.sessions[id] = &session{
		owner:   owner,
		ttl:     ttl,
		expiry:  now + ttl,
		leases:  make(map[string]struct{}),
		groups:  make(map[string]struct{}),
		waiting: make(map[string]struct{}),
	}
	return spi.Session{ID: id, Remaining: ttl}, nil
}

// KeepAlive implements spi.Backend: in one atomic step it renews the session, reports which of
// names it holds (with their tokens) and returns the live members of each of groups. The
// session's memberships need no refresh here, since they live exactly as long as the session;
// a backend that stores memberships with their own expiry renews them in this call. An expired
// or unknown session is the reply Expired, not an error.
func (b *Backend) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	for _, g := range groups {
		if err := validName("KeepAlive", g); err != nil {
			return spi.KeepAlive{}, err
		}
	}
	now, err := b.begin(ctx, "KeepAlive")
	if err != nil {
		return spi.KeepAlive{}, err
	}
	defer b.srv.mu.Unlock()
	sess := b.srv.live(id)
	if sess == nil {
		return spi.KeepAlive{Expired: true}, nil
	}
	sess.expiry = now + sess.ttl
	reply := spi.KeepAlive{Remaining: sess.ttl}
	for _, name := range names {
		if _, ok := sess.leases[name]; ok && !slices.ContainsFunc(reply.Held, func(h spi.Held) bool { return h.Name == name }) {
			reply.Held = append(reply.Held, spi.Held{Name: name, Token: b.srv.leases[name].token})
		}
	}
	slices.SortFunc(reply.Held, func(x, y spi.Held) int { return cmp.Compare(x.Name, y.Name) })
	if len(groups) > 0 {
		reply.Members = make(map[string][]spi.SessionID, len(groups))
		for _, g := range groups {
			reply.Members[g] = b.srv.members(g)
		}
	}
	return reply, nil
}

// CloseSession implements spi.Backend: it ends the session, releasing its leases and leaving its
// groups with hints. Closing a session that expired or was closed already is not an error.
func (b *Backend) CloseSession(ctx context.Context, id spi.SessionID) error {
	if _, err := b.begin(ctx, "CloseSession"); err != nil {
		return err
	}
	defer b.srv.mu.Unlock()
	if sess := b.srv.live(id); sess != nil {
		b.srv.drop(id, sess)
	}
	return nil
}

// Acquire implements spi.Backend. The lease is granted when it is free (its holder released it
// or expired: every call drops the expired sessions first) and no other session waits for it
// (spi.Queuer) with the row's token plus one; a holder's re-acquire is granted again with the
// same token; otherwise the reply is HeldBy with the holder's (or the first waiter's) id, owner
// and time left. Each reply's Remaining is measured on the server's clock. Acquire never
// queues: a TryLock must not wait.
func (b *Backend) Acquire(ctx context.Context, id spi.SessionID, name string) (spi.Acquire, error) {
	return b.acquire(ctx, "Acquire", id, name, false)
}

// CutSafe implements spi.CutSafe: every call runs under the backend's mutex, whole or not at
// all, so a caller's context may cut an acquire short at any point.
func (b *Backend) CutSafe() bool { return true }

// AcquireQueued implements spi.Queuer: Acquire for a session that waits for name. Unless the
// reply is Granted or SessionExpired, the session has an entry in name's waiter queue when it
// returns: a new one at the end, or its old one (its place) with its expiry refreshed to the
// session's. A grant removes the grantee's entry.
func (b *Backend) AcquireQueued(ctx context.Context, id spi.SessionID, name string) (spi.Acquire, error) {
	return b.acquire(ctx, "AcquireQueued", id, name, true)
}

// Withdraw implements spi.Queuer: it removes the session's entry from name's queue, if any.
// When the entry was first and the lease is free, the next waiter may take it now: Released
// hint.
func (b *Backend) Withdraw(ctx context.Context, id spi.SessionID, name string) error {
	if err := validName("Withdraw", name); err != nil {
		return err
	}
	if _, err := b.begin(ctx, "Withdraw"); err != nil {
		return err
	}
	defer b.srv.mu.Unlock()
	if l := b.srv.leases[name]; l != nil && b.srv.dequeue(name, l, id) && l.holder == "" {
		b.srv.hint(spi.Released, name)
	}
	return nil
}

// acquire is Acquire, and AcquireQueued when queued.
func (b *Backend) acquire(ctx context.Context, op string, id spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	if err := validName(op, name); err != nil {
		return spi.Acquire{}, err
	}
	now, err := b.begin(ctx, op)
	if err != nil {
		return spi.Acquire{}, err
	}
	defer b.srv.mu.Unlock()
	sess := b.srv.live(id)
	if sess == nil {
		return spi.Acquire{Kind: spi.SessionExpired}, nil
	}
	l := b.srv.leases[name]
	if l == nil {
		l = &lease{}
		b.srv.leases[name] = l
	}
	heldBy := func(holder spi.SessionID, remaining time.Duration) (spi.Acquire, error) {
		if queued {
			b.srv.enqueue(name, l, id, sess)
		}
		return spi.Acquire{Kind: spi.HeldBy, Holder: holder, HolderOwner: b.srv.sessions[holder].owner, Remaining: remaining}, nil
	}
	switch w := b.srv.firstWaiter(name, l, now); {
	case l.holder == id: // re-acquire: idempotent, same token, whatever the queue holds
	case l.holder != "":
		return heldBy(l.holder, b.srv.sessions[l.holder].expiry-now)
	case w != nil && w.id != id:
		// Free, but reserved for the longest-waiting live waiter.
		return heldBy(w.id, w.expiry-now)
	case l.token == math.MaxInt64:
		// No successor: a permanent error that changes nothing, never a wrapped-around token.
		return spi.Acquire{}, fmt.Errorf("mapbackend: Acquire %q: %w", name, spi.ErrTokenOverflow)
	default:
		l.holder = id
		l.token++
		sess.leases[name] = struct{}{}
		b.srv.dequeue(name, l, id)
	}
	return spi.Acquire{Kind: spi.Granted, Token: l.token, Remaining: sess.expiry - now}, nil
}

// Release implements spi.Backend: it frees name, with a Released hint, only if the session holds
// it with exactly that token; any other release (a wrong token, another session, an expired
// session, a name never acquired) changes nothing and is not an error. The row stays, with its
// token, so the next grant's token is greater.
func (b *Backend) Release(ctx context.Context, id spi.SessionID, name string, token int64) error {
	if err := validName("Release", name); err != nil {
		return err
	}
	if _, err := b.begin(ctx, "Release"); err != nil {
		return err
	}
	defer b.srv.mu.Unlock()
	sess, l := b.srv.live(id), b.srv.leases[name]
	if sess == nil || l == nil || l.holder != id || l.token != token {
		return nil
	}
	l.holder = ""
	delete(sess.leases, name)
	b.srv.hint(spi.Released, name)
	return nil
}

// Join implements spi.Backend: the session becomes a member of group (once, however often it
// joins) until it leaves, closes or expires.
func (b *Backend) Join(ctx context.Context, id spi.SessionID, group string) (spi.Status, error) {
	if err := validName("Join", group); err != nil {
		return 0, err
	}
	if _, err := b.begin(ctx, "Join"); err != nil {
		return 0, err
	}
	defer b.srv.mu.Unlock()
	sess := b.srv.live(id)
	if sess == nil {
		return spi.Expired, nil
	}
	members := b.srv.groups[group]
	if members == nil {
		members = make(map[spi.SessionID]struct{})
		b.srv.groups[group] = members
	}
	if _, ok := members[id]; !ok {
		members[id] = struct{}{}
		sess.groups[group] = struct{}{}
		b.srv.hint(spi.GroupChanged, group)
	}
	return spi.OK, nil
}

// Leave implements spi.Backend: the session stops being a member of group. Leaving a group it is
// not a member of is OK too.
func (b *Backend) Leave(ctx context.Context, id spi.SessionID, group string) (spi.Status, error) {
	if err := validName("Leave", group); err != nil {
		return 0, err
	}
	if _, err := b.begin(ctx, "Leave"); err != nil {
		return 0, err
	}
	defer b.srv.mu.Unlock()
	if b.srv.live(id) == nil {
		return spi.Expired, nil
	}
	b.srv.leave(group, id)
	return spi.OK, nil
}

// Members implements spi.Backend: the live members of group, sorted ascending.
func (b *Backend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	if err := validName("Members", group); err != nil {
		return nil, err
	}
	if _, err := b.begin(ctx, "Members"); err != nil {
		return nil, err
	}
	defer b.srv.mu.Unlock()
	return b.srv.members(group), nil
}

// Hints implements spi.Hinter: the returned channel receives a Released hint for every lease
// released (by Release, CloseSession or expiry) and a GroupChanged hint for every membership
// change, until ctx is done or the connection is closed; then it is closed. A subscriber that
// falls behind loses hints, which the SPI allows.
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	if _, err := b.begin(ctx, "Hints"); err != nil {
		return nil, err
	}
	sub := &subscriber{conn: b, ch: make(chan spi.Hint, hintBuffer), stop: make(chan struct{})}
	b.srv.subs[sub] = struct{}{}
	b.srv.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-sub.stop: // Close closed the channel already
			return
		}
		b.srv.mu.Lock()
		defer b.srv.mu.Unlock()
		if _, ok := b.srv.subs[sub]; ok {
			delete(b.srv.subs, sub)
			close(sub.ch)
		}
	}()
	return sub.ch, nil
}

// Inspect implements spi.Inspector: every lease row sorted by name (free ones with an empty
// holder and their latest token), the live sessions sorted by id, and the non-empty groups.
func (b *Backend) Inspect(ctx context.Context) (spi.Snapshot, error) {
	now, err := b.begin(ctx, "Inspect")
	if err != nil {
		return spi.Snapshot{}, err
	}
	defer b.srv.mu.Unlock()
	snap := spi.Snapshot{Groups: make(map[string][]spi.SessionID, len(b.srv.groups))}
	for name, l := range b.srv.leases {
		snap.Leases = append(snap.Leases, b.srv.leaseInfo(name, l, now))
	}
	slices.SortFunc(snap.Leases, func(x, y spi.LeaseInfo) int { return cmp.Compare(x.Name, y.Name) })
	for id, sess := range b.srv.sessions {
		snap.Sessions = append(snap.Sessions, spi.SessionInfo{ID: id, Owner: sess.owner, Remaining: sess.expiry - now})
	}
	slices.SortFunc(snap.Sessions, func(x, y spi.SessionInfo) int { return cmp.Compare(x.ID, y.ID) })
	for g := range b.srv.groups {
		snap.Groups[g] = b.srv.members(g)
	}
	return snap, nil
}

// InspectLease implements spi.LeaseInspector: the lease's row as Inspect lists it, read alone
// (a fencing token's check reads this instead of the whole snapshot). A name never acquired is
// not found.
func (b *Backend) InspectLease(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	if err := validName("InspectLease", name); err != nil {
		return spi.LeaseInfo{}, false, err
	}
	now, err := b.begin(ctx, "InspectLease")
	if err != nil {
		return spi.LeaseInfo{}, false, err
	}
	defer b.srv.mu.Unlock()
	l := b.srv.leases[name]
	if l == nil {
		return spi.LeaseInfo{}, false, nil
	}
	return b.srv.leaseInfo(name, l, now), true, nil
}

// leaseInfo is lease row l of name as Inspect and InspectLease show it at now: a holder whose
// session is gone (expired or closed) is shown free. The caller holds s.mu.
func (s *Server) leaseInfo(name string, l *lease, now time.Duration) spi.LeaseInfo {
	info := spi.LeaseInfo{Name: name, Token: l.token}
	if holder := s.sessions[l.holder]; l.holder != "" && holder != nil {
		info.Holder, info.Owner, info.Remaining = l.holder, holder.owner, holder.expiry-now
	}
	return info
}

// Close implements spi.Backend: later calls on this connection fail with spi.ErrBackendClosed
// (which matches spi.ErrClosed too, and says that the backend, not a client, was closed) and
// its hint channels are closed. Like a real connection's Close, it leaves the sessions opened
// through it to expire at the server (a client that wants them gone calls CloseSession first).
// Closing twice is not an error.
func (b *Backend) Close() error {
	b.srv.mu.Lock()
	defer b.srv.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for sub := range b.srv.subs {
		if sub.conn == b {
			delete(b.srv.subs, sub)
			close(sub.ch)
			close(sub.stop)
		}
	}
	return nil
}

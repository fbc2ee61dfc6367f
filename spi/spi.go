// Package spi is Simba's backend service-provider interface, public the way database/sql/driver
// is: what a backend implements (Backend, and optionally Hinter, Inspector, LeaseInspector,
// Queuer, SessionQueue, SteadyHints, CutSafe, TTLChecker and RenewalChecker), the plain-value replies it
// returns, the errors it wraps and how they are classified (Classify, AsPermanent,
// Unavailable, Contended), and the monotonic Clock a client runs on (with Settler, the capability of a
// test's virtual clock to wait for the clients on it). Package simba (the client), package tck
// (the conformance suites every backend passes) and package simbatest (the in-memory backend)
// are written against it, and so is every backend under backend/ — a third-party backend
// imports only this package and, for its tests, tck.
//
// Replies are values, not errors: an expired session is a reply (Expired / SessionExpired). An
// error means the outcome of a call is unknown or the backend is unusable; see Classify.
//
// A backend is handed to simba.New; the client runs at most one call per lease at a time, each
// with a context that times out after one renewal interval, and never shares a session between
// backends (see Backend for the contract of each method). The spi package is a leaf: it imports
// only the generated wire rules, so the pure engine and the model backend share its types.
//
// # Writing a backend
//
// Implement Backend (and Hinter if the server can push notifications, Queuer if it can keep
// waiters in arrival order, Inspector if it can list its state, LeaseInspector if it can read
// one lease of it, CutSafe if a call cut short at any point costs the server nothing,
// TTLChecker if it cannot serve every TTL a client may ask for, RenewalChecker if its
// configuration bounds the renewal interval, LoggerAdopter if it logs warnings of its own) on
// a server that decides by its own clock; check names with ValidateName and owners with
// ValidateOwner before any I/O; return expected outcomes as replies and classify failures
// (Unavailable, AsPermanent, the sentinels). Without Queuer a backend still works, without the
// ordering guarantee (see Queuer), and tck.FairnessSpec does not apply to it. Then run the
// conformance suites of package tck — LeaseBackendSpec, FencingSpec, ClientSpec and, for a
// Queuer, FairnessSpec — from the backend's tests with a tck.Factory that opens a new client
// of a shared server. Tell the Factory what the backend offers, or the checks of it are left
// out: Hints for a Hinter, GroupHints if its hints include GroupChanged for every join and
// leave, and RoundTrips if the tests can count the backend's round trips to its server (a
// hook on its driver), for the bounded-round-trips rule. The suites also call every method
// after Close (each must fail with an error matching ErrBackendClosed, which a bare ErrClosed
// does not, before its context ends) and race a session's keep-alive with its own acquires and
// releases; what they still cannot check is listed in package tck. The directory
// examples/backend of the Simba repository is a complete in-memory backend in its own module,
// written this way and passing the four suites: a starting point to copy.
//
// A store without multi-record transactions, only compare-and-set on one record at a revision
// (a key-value store such as NATS JetStream KV or Consul), can still make each call atomic in
// effect: read the records the call decides on, then write the one it changes on the revision
// it read, and start again when that write loses. Two races need care there. An acquire that
// finds the holder's session expired must read the server's time after the lease record and
// before the holder's session record, so that a keep-alive that renewed the session in time is
// seen. And a keep-alive that lands after its session's expiry must not revive the session
// (reply Expired, and remove it): an acquire may have taken its leases meanwhile. The suites
// catch the second (a late keep-alive), not the first (see package tck). Wire names may hold
// characters such a store refuses in keys (":", ".." or a trailing "." in a NATS subject):
// escape them, since tck's Names suite uses them all.
package spi

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// SessionID identifies a backend session. SQL and Redis backends use 128 random bits as 32
// lowercase hex characters made by the client; ZooKeeper uses its session id as 16 lowercase hex.
type SessionID string

// Session is the reply of OpenSession: the new session's id and the time it has left, measured
// by the backend's clock from when the backend handled the request.
type Session struct {
	// ID identifies the session in every later call.
	ID SessionID
	// Remaining is the session's time left, in (0, ttl].
	Remaining time.Duration
}

// Held is one lease a session holds, with the fencing token of its current tenure.
type Held struct {
	// Name is the lease's name.
	Name string
	// Token is the fencing token the lease was granted with.
	Token int64
}

// KeepAlive is the reply of a keep-alive.
type KeepAlive struct {
	// Expired reports that the session no longer exists at the backend; the other fields are
	// then empty.
	Expired bool
	// Remaining is the session's time left after the renewal, by the backend's clock.
	Remaining time.Duration
	// Held lists the leases the session holds among those it asked about (it may list more).
	// A backend that renews leases apart from the session (Redis Cluster, where they live on
	// other masters) may leave out one whose renewal failed while the session's succeeded: the
	// client then revokes its term at once, which is safe, since the lease was not renewed.
	Held []Held
	// Unrenewed is optional: the names asked about that Held leaves out because their renewal
	// failed (Redis Cluster: their master did not answer), not because another session holds
	// them. The client revokes such a term all the same, but as not renewed (its deadline
	// reason) rather than taken over. A backend that renews every lease with the session leaves
	// it nil.
	Unrenewed []string
	// Corrupt is optional: the names asked about that Held leaves out because their record is
	// not one the backend writes, so no session can hold them (Redis: the lease key holds
	// another type than a hash, written over by something else; see ErrCorruptRecord; SQL: the
	// session's lease row holds a token no tenure has, below 1 or not an integer). The
	// client revokes such a term all the same, but as corrupt-record rather than taken over:
	// nobody took it, its record needs an operator.
	Corrupt []string
	// Members maps each group named in the request to its live members, sorted ascending. A
	// backend that could not read a group while it renewed the session (Redis Cluster, the
	// group's master down) may leave the group out: the client keeps the view it has.
	Members map[string][]SessionID
	// MembersRemaining is optional: for each group of Members with members other than the
	// caller, the least time left among those members' sessions, by the backend's clock — when
	// the view will drop one of them unless it renews. A backend that cannot tell leaves it nil
	// (or a group out); one that notifies expiries with GroupChanged hints need not fill it.
	// The client reads the group's members again once that time has passed instead of waiting
	// for its next keep-alive, so a member that stopped renewing loses its partitions as soon
	// as its session expires. It only schedules a read: a wrong value costs latency or a read,
	// never safety.
	MembersRemaining map[string]time.Duration
}

// NoteMemberRemaining records r as group's MembersRemaining if it is less than what ka holds
// for group so far (or there is nothing yet): a backend calls it for each other member it
// reads, or once per group with the least.
func (ka *KeepAlive) NoteMemberRemaining(group string, r time.Duration) {
	if cur, ok := ka.MembersRemaining[group]; ok && cur <= r {
		return
	}
	if ka.MembersRemaining == nil {
		ka.MembersRemaining = make(map[string]time.Duration)
	}
	ka.MembersRemaining[group] = r
}

// AcquireKind says which of the three replies of Acquire an Acquire value is.
type AcquireKind uint8

const (
	// Granted: the session holds the lease with Token.
	Granted AcquireKind = iota + 1
	// HeldBy: another live session holds the lease.
	HeldBy
	// SessionExpired: the acquiring session no longer exists.
	SessionExpired
)

// String names the kind as transcripts print it.
func (k AcquireKind) String() string {
	switch k {
	case Granted:
		return "granted"
	case HeldBy:
		return "held-by"
	case SessionExpired:
		return "session-expired"
	}
	return "invalid"
}

// Acquire is the reply of Acquire.
type Acquire struct {
	// Kind says which reply this is; the other fields are set as documented for each kind.
	Kind AcquireKind
	// Token is the fencing token of the grant (Granted only). A re-acquire by the holder returns
	// the same token.
	Token int64
	// Remaining is, for Granted, the acquiring session's time left, which the lease lives
	// at least as long as (the client bounds the new term by it until a keep-alive lists the
	// lease held); for HeldBy, the holder's time left (unless RemainingUnknown).
	Remaining time.Duration
	// RemainingUnknown is set on HeldBy by backends with hints (ZooKeeper, etcd) that cannot
	// tell the holder's time left; the engine then waits for a released hint, and tries again
	// one TTL after the reply should it be lost (two TTLs on a backend with SteadyHints).
	RemainingUnknown bool
	// Holder and HolderOwner identify the current holder (HeldBy only). HolderOwner may be
	// empty where a backend cannot read it in the call: the SQL and Redis backends name a
	// waiter a free lease is reserved for (Queuer) by its session alone. The client names the
	// owner once a later HeldBy carries it.
	Holder      SessionID
	HolderOwner string
}

// Status is the reply of Join and Leave.
type Status uint8

const (
	// OK means the call took effect.
	OK Status = iota + 1
	// Expired means the session no longer exists.
	Expired
)

// String names the status as transcripts print it.
func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Expired:
		return "session-expired"
	}
	return "invalid"
}

// Backend is the SPI every Simba backend implements. The client (package simba) calls it; a
// backend author implements it and checks the result with the suites of package tck.
//
// Rules for every method:
//
//   - Atomic. Each call takes effect at the server entirely or not at all, as one step that no
//     other call interleaves with (one transaction, one Lua script, one multi-op): two sessions
//     racing for a free lease must never both be granted it.
//   - Bounded round trips. Each method makes a number of round trips to the server that does not
//     grow with the number of leases or groups the session has (KeepAlive on a partitioned
//     Redis Cluster is bounded by the number of masters).
//   - Arguments first. Arguments are checked before any I/O: a lease or group name outside the
//     wire grammar (wire.ValidateName) fails with an error matching ErrInvalidName; a TTL ≤ 0 or
//     beyond what the backend supports, and an owner that fails ValidateOwner, fail with one
//     matching ErrInvalidOption. Nothing is sent and nothing changes.
//   - Replies are values. An outcome the protocol expects — a lease held by another session,
//     a session that has expired, a release that matched nothing — is a reply (HeldBy,
//     SessionExpired, Expired, a nil error), never an error. An error means the outcome is
//     unknown (the request may or may not have taken effect) or the backend is unusable, and
//     the reply beside it is ignored.
//   - Classified errors. Wrap a transient failure (timeout, connection lost, server busy,
//     failover) with Unavailable, and a call that gave up after losing its race with other
//     clients' concurrent changes too many times (the server answering) with Contended, so
//     that the client does not take contention for an outage; make a failure that will not
//     heal by retrying permanent, by
//     wrapping a sentinel (ErrSchemaMissing, ErrSchemaDrift, ErrInvalidOption, ErrClosed,
//     ErrTokenOverflow, ErrCorruptToken, ErrTLS, ErrAccessDenied: wrap refused credentials
//     or privileges with AccessDenied) or with AsPermanent (a misrouted or misconfigured
//     server). Classify is how the client tells them apart; see it
//     for the default of an unmarked error (retryable).
//   - Contexts. A call returns promptly once ctx is done, with an error that wraps ctx.Err()
//     where the driver allows; its outcome is then unknown. The client bounds each call with a
//     timeout of one renewal interval.
//   - Backend time. Every remaining time is measured on the backend's clock (the database's,
//     Redis TIME, ZooKeeper's session timeout from the request's send time), never the
//     caller's; convert server milliseconds with Millis.
//   - Sessions stay with their backend. A session id is only ever used with the backend value
//     that opened it (on ZooKeeper a session is a connection).
//
// Methods are safe for concurrent use. After Close, every method fails with an error matching
// ErrBackendClosed (which matches ErrClosed too).
type Backend interface {
	// OpenSession opens a new session for owner that expires ttl after it is opened and after
	// each keep-alive, and returns its id and its time left (in (0, ttl], by the backend's clock
	// from when the backend handled the request; a backend may round ttl to its precision).
	// Ids are never reused. A ttl ≤ 0 (or above the backend's maximum) fails with
	// ErrInvalidOption and an owner that breaks ValidateOwner with its error, before any I/O.
	OpenSession(ctx context.Context, owner string, ttl time.Duration) (Session, error)

	// KeepAlive renews session, atomically with two reports: which of names the session holds,
	// with the token of its current tenure (it may list more of the leases it holds, never one
	// it does not hold; every lease it lists lives at least as long as the renewed session,
	// since the client then gives the lease's term the session's deadline; a backend that keeps
	// a lease's expiry apart from its session's, as Redis does, renews each listed lease with
	// the session), and, for each of groups, the group's live members sorted ascending
	// (refreshing the session's own memberships where the backend stores them with an
	// expiry). A session that has expired, was closed or is unknown is the reply
	// KeepAlive{Expired: true}, nil. A group name outside the wire grammar fails with
	// ErrInvalidName before any I/O.
	KeepAlive(ctx context.Context, session SessionID, names []string, groups []string) (KeepAlive, error)

	// CloseSession ends session: it releases every lease the session holds and removes it from
	// every group, with Released and GroupChanged hints, so others can take over at once.
	// Later calls on the session reply as for an expired one. Closing an expired, closed or
	// unknown session is not an error.
	CloseSession(ctx context.Context, session SessionID) error

	// Acquire takes the lease name for session, in one atomic check-and-set:
	//   - Granted, with a Token greater than every token name was ever granted with (across
	//     holders, releases, expiries and client restarts, and server restarts where the backend
	//     persists tokens), when the lease is free or its holder's session has expired; a
	//     re-acquire by the holder is Granted with the same token and changes nothing;
	//   - HeldBy, with the holder's id, owner and time left, when another live session holds it;
	//   - SessionExpired when session itself is no longer live.
	// A name outside the wire grammar fails with ErrInvalidName before any I/O. A token with no
	// successor fails with ErrTokenOverflow, a stored token that is not a non-negative integer
	// with ErrCorruptToken; both change nothing.
	Acquire(ctx context.Context, session SessionID, name string) (Acquire, error)

	// Release frees name, atomically, if and only if session holds it with token; the lease
	// keeps its token (lease records are never deleted, so tokens only grow) and subscribers get
	// a Released hint. Any other release — a wrong token, another session, an expired session,
	// a free lease or a name never acquired — changes nothing and returns nil. A name outside
	// the wire grammar fails with ErrInvalidName before any I/O.
	Release(ctx context.Context, session SessionID, name string, token int64) error

	// Join makes session a member of group until it leaves, closes or expires, and replies OK;
	// joining twice is one membership. A session that is no longer live gets Expired and joins
	// nothing. A group name outside the wire grammar fails with ErrInvalidName before any I/O.
	Join(ctx context.Context, session SessionID, group string) (Status, error)

	// Leave removes session from group and replies OK, also when it was not a member; a session
	// that is no longer live gets Expired. A group name outside the wire grammar fails with
	// ErrInvalidName before any I/O.
	Leave(ctx context.Context, session SessionID, group string) (Status, error)

	// Members lists the live members of group (never an expired session), sorted ascending;
	// a group nobody joined has none. A group name outside the wire grammar fails with
	// ErrInvalidName before any I/O.
	Members(ctx context.Context, group string) ([]SessionID, error)

	// Close releases the backend's own resources (the connections it opened; it does not close
	// pools the user passed in) and makes later calls fail with ErrBackendClosed. It leaves sessions to
	// expire at the server, except where a session is the connection (ZooKeeper). The client
	// does not call it (simba.Client.Close leaves the backend open): whoever opened the backend
	// closes it. Closing twice is not an error.
	Close() error
}

// HintKind says what a Hint reports.
type HintKind uint8

const (
	// Released: the lease Name was released (or its holder's node vanished).
	Released HintKind = iota + 1
	// GroupChanged: the membership of group Name changed.
	GroupChanged
)

// String names the kind as transcripts print it.
func (k HintKind) String() string {
	switch k {
	case Released:
		return "released"
	case GroupChanged:
		return "group-changed"
	}
	return "invalid"
}

// Hint is a push notification from a backend. Hints only speed things up: a lost hint costs
// latency, never safety.
type Hint struct {
	// Kind is what happened.
	Kind HintKind
	// Name is the released lease (Released) or the group whose membership changed
	// (GroupChanged).
	Name string
}

// Hinter is the optional capability of backends that push hints (PostgreSQL NOTIFY, Redis
// pub/sub, ZooKeeper watches). simba.New subscribes once if its backend implements it; the
// client then retries a held lease as soon as it is released and reads a group's members as
// soon as they change, instead of at the holder's remaining time or the next keep-alive.
type Hinter interface {
	// Hints delivers hints on the returned channel until ctx is done or the backend is closed,
	// then closes the channel; the channel is never closed earlier. A backend that pushes
	// delivers, from every client of the server, a Released hint for each lease freed by
	// Release or CloseSession and a GroupChanged hint for each join or leave (hints for
	// expiries are welcome, not required). It may narrow that to what its own sessions wait
	// for: Released hints only for the leases one of its own acquires recently found held by
	// another session (while that session still waits: until it is granted the lease,
	// withdraws, ends its wait (WaitEnder), closes, or stops acquiring it), and GroupChanged hints only for the groups one
	// of its sessions joined (until it leaves or closes) — the Redis and PostgreSQL backends
	// subscribe to those channels alone, so that a client does not receive every release and
	// membership change of a deployment.
	// Such a backend must not lose a release that lands between the acquire that found the
	// lease held and the moment it starts listening (nor a change between the join and that
	// moment): the Redis backend reads the lease once its subscription is confirmed and hints
	// if the holder the acquire saw no longer holds it. A backend whose server pushes nothing
	// may deliver Released hints only for the leases one of its own acquires recently found
	// held (the SQL backend on MySQL/MariaDB and SQLite: a waker that blocks on the holder's
	// named lock, or watches the database file), and no GroupChanged hints; one with nothing to
	// deliver at all returns a channel that only closes. A false Released hint for a name the
	// client waits for costs it an acquire, and false hints in a row make it ignore that
	// name's hints for a moment, which can delay a genuine release: hint only releases.
	// Delivery must never block the backend's calls: a slow reader may lose hints. The
	// implementation reconnects by itself; hints lost meanwhile are simply lost. An error
	// means no subscription could be made at all (the backend is closed, ctx is done, the
	// server refuses the subscription) and fails simba.New: a server that is briefly
	// unreachable is a reason to reconnect, not to fail. simba.New calls Hints on its caller's
	// goroutine with a context that ends only with the client, so Hints should not wait long
	// for a server that does not answer (the Redis backend waits at most its read timeout):
	// it is unreachable too.
	Hints(ctx context.Context) (<-chan Hint, error)
}

// LeaseInfo describes one lease in a Snapshot.
type LeaseInfo struct {
	// Name is the lease's name.
	Name string
	// Holder is the session holding the lease; empty when the lease is free.
	Holder SessionID
	// Owner is the holder's owner string (empty when free).
	Owner string
	// Token is the token of the current tenure, or of the latest one when the lease is free
	// (zero where the backend keeps no record of free leases, as on ZooKeeper).
	Token int64
	// Remaining is the holder's time left, by the backend's clock (zero when free, or when
	// RemainingUnknown).
	Remaining time.Duration
	// RemainingUnknown is set on a held lease when the backend cannot tell its holder's time
	// left: ZooKeeper tells a client nothing of another client's sessions, which live as long
	// as their connection to the ensemble does (plus the session timeout once it is cut).
	RemainingUnknown bool
	// Unreadable says why the lease's record is not one Simba could have written (a forged or
	// damaged record: on Redis a token that is not a plain decimal or is at or above 2^53, a
	// holder that is not a client session id or has no readable expiry, an expiry beyond any
	// session's TTL; on SQL a negative token, a holder that is not a client session id or whose
	// session expires beyond any TTL), empty for a sound record. Such a lease is never free to a status tool,
	// whatever Holder says: it shows "unreadable record: <why>". Holder, Owner and Token are
	// what could be read of the record (Token 0 when it could not), and RemainingUnknown is
	// set. What an acquire does with it is the backend's to document.
	Unreadable string
}

// SessionInfo describes one live session in a Snapshot.
type SessionInfo struct {
	// ID is the session's id.
	ID SessionID
	// Owner is the owner string the session was opened with.
	Owner string
	// Remaining is the session's time left, by the backend's clock (zero when
	// RemainingUnknown).
	Remaining time.Duration
	// RemainingUnknown is set when the backend cannot tell the session's time left (ZooKeeper,
	// for a session of another client: see LeaseInfo.RemainingUnknown).
	RemainingUnknown bool
	// Unreadable says why the session's record is not one Simba could have written (a forged
	// or damaged one: an expiry beyond any session's TTL, MaxSessionTTL; see BoundSession),
	// empty for a sound record. A status tool shows "unreadable record: <why>" instead of its
	// time left; Remaining is then zero and RemainingUnknown set.
	Unreadable string
}

// BoundSession returns s, marked Unreadable (its time left unknown) if its Remaining lies
// beyond MaxSessionTTL, the longest TTL a client opens a session with: no client wrote such a
// record, and a status tool would otherwise show a forged session's figure of years as if it
// were one. Backends call it on each session their Inspect lists.
func BoundSession(s SessionInfo) SessionInfo {
	if s.Unreadable == "" && !s.RemainingUnknown && s.Remaining > MaxSessionTTL {
		s.Unreadable = fmt.Sprintf("expiry %v away, beyond the longest session TTL (%v)", s.Remaining.Round(time.Second), MaxSessionTTL)
		s.Remaining, s.RemainingUnknown = 0, true
	}
	return s
}

// Snapshot is what Inspect returns: the backend's view for status tools.
type Snapshot struct {
	// Leases lists the leases the backend knows, sorted by name.
	Leases []LeaseInfo
	// Sessions lists the live sessions, sorted by id.
	Sessions []SessionInfo
	// Groups maps each group with live members to its members, sorted ascending; a group
	// without live members (its record or node outlives them on some backends) is not listed.
	Groups map[string][]SessionID
}

// Inspector is the optional capability of backends that can list their state for `simba status`
// and the HTTP status page.
type Inspector interface {
	// Inspect returns the backend's current state. It only reads: it changes nothing, and
	// expired sessions (and the leases only they held) show as gone. It is meant for people
	// and tools, not for decisions: the snapshot may be stale by the time it is read, and on a
	// large backend it may take many round trips.
	Inspect(ctx context.Context) (Snapshot, error)
}

// LeaseInspector is the optional capability of backends that can read one lease as Inspect
// shows it, without reading the rest: what a check made per request needs (fence.LeaseVerifier
// asks it to confirm a fencing token), where a whole snapshot would cost a scan of every lease.
// Every backend Simba ships implements it, beside Inspector.
type LeaseInspector interface {
	// InspectLease returns the lease called name exactly as Inspect would list it (the same
	// holder, owner, token and RemainingUnknown; Remaining read at its own moment), and true;
	// or false when Inspect would not list it (a name never acquired, and on a backend that
	// keeps no record of free leases, as ZooKeeper and etcd, a free one). Like Inspect it only
	// reads, and a lease whose holder's session expired or was closed shows as free (or, where
	// free leases are not listed, not at all). A name outside the wire grammar is refused
	// before any I/O with an error matching ErrInvalidName (ValidateName).
	InspectLease(ctx context.Context, name string) (LeaseInfo, bool, error)
}

// Queuer is the optional capability of backends that serve waiters in arrival order: a session that waits for a held lease registers as a waiter, and
// a free lease goes to the longest-waiting live waiter before anyone else. simba.New uses it
// when its backend implements it: Lock, an election's campaign and a partition's candidacy
// wait through AcquireQueued; TryLock keeps using Acquire, which never waits and never queues.
// A backend without Queuer still works, without the ordering guarantee (a holder that
// re-acquires in a loop can then keep a waiter out indefinitely).
//
// The waiter queue of a name is a list of entries (session, arrival order, expiry). An entry
// is live while its expiry has not passed (and, where the backend can tell in the same atomic
// step, its session is live); its expiry is the session's expiry as of the entry's latest
// AcquireQueued (the client re-attempts before that, see below) — or, on a backend whose
// entries live with their session (SessionQueue), the session's expiry itself, however much
// later that is. A waiter that crashed thus drops out no later than its session expires, and
// one that gave up withdraws (Withdraw) or drops out at most one TTL after its last attempt
// (with SessionQueue only when its session ends, so such a backend retries a Withdraw that
// failed, see there). Once a backend implements Queuer, both acquires obey the queue:
//
//   - A free lease (or one whose holder's session expired) is Granted only to the session of
//     the first live entry, or to anyone when there is no live entry. Otherwise the reply is
//     HeldBy naming the first live waiter (Holder, and HolderOwner where the backend can
//     read it) with Remaining the time left to its entry: the lease is reserved for it.
//   - A grant removes the grantee's entry; a re-acquire by the holder is Granted with the same
//     token, whatever the queue holds.
//   - AcquireQueued that is not Granted (HeldBy) appends the session's entry at the end of the
//     queue, or keeps its place if it has one (a live one: a lapsed entry is gone), and
//     refreshes its expiry. Acquire never adds an entry.
//   - Withdraw removes the session's entry: a waiter that stopped waiting (a Lock whose
//     context ended, an election stopped while a candidate) no longer holds the lease back.
//
// An AcquireQueued still in flight when its waiter stops waiting may be applied at the server
// after the client's Withdraw: the two may travel on different connections, and a call cut
// short with its caller, or one that timed out, may still be applied after the client heard
// of its failure. The client keeps such a late entry from outliving the waiter's decision by
// more than one call timeout, whatever the backend: it withdraws again when the attempt comes
// back HeldBy or failed (unless refused for good: a refusal applied nothing), and once more
// when the keep-alive sent a call timeout (one renewal interval) after the failure settles the
// attempt's outcome, by which time the request has landed. Left alone, such an entry would
// hold a free lease back for a session that no longer waits: until it lapsed (up to a TTL) on
// a backend whose entries lapse, as long as the session lives on a SessionQueue backend. A
// late attempt that comes back Granted is released at once; one that failed and was granted
// all the same is released by that keep-alive, which asks about the name (the client asks
// about every name whose acquire has an unknown outcome). A backend needs no more for this
// than Withdraw as specified (idempotent, nil without an entry).
//
// The guarantee, as long as every waiter re-attempts before its entry expires (the client
// does: it retries a queued wait at the earlier of the holder's remaining time and its own
// session's local deadline as of the attempt, and at once on a released hint; on a
// SessionQueue backend, whose entries do not expire while the session lives, at the holder's
// remaining time, or one TTL when that is unknown (two with SteadyHints), and at once on a
// released hint): a waiter is granted the lease after at most as many tenures as there were
// live waiters ahead of it when it registered — no tenure goes to a session behind it or
// outside the queue, in particular not to a holder that releases and re-acquires in a loop.
//
// The guarantee lasts only while the entry does, and a server outage can end it. An entry that
// lapses with the expiry as of the latest attempt (the Redis backend) is renewed only by a re-attempt, which the client sends just before that expiry: an outage that spans the
// re-attempt and the expiry (anything from a few hundred milliseconds to one TTL, depending on
// when the waiter last attempted) drops the entry while the session may live on. An entry that
// lives with its session (SessionQueue: ZooKeeper, etcd, the SQL backends) survives any outage its
// session survives. None survives its session, and the client gives a session up (and never revives
// it) when an outage outlasts its local deadline. After the outage the waiters register again,
// in the order they come back, and the bound counts from then; a holder whose session lived
// can meanwhile take the lease again ahead of them.
type Queuer interface {
	// AcquireQueued is Acquire for a session that waits for name: the same replies and
	// errors, and, unless Granted or SessionExpired, the session is (or stays) a waiter for
	// name as described on Queuer, in the same atomic step.
	AcquireQueued(ctx context.Context, session SessionID, name string) (Acquire, error)

	// Withdraw removes session's entry from name's waiter queue, if it has one; it changes
	// nothing else (a lease the session holds stays held) and returns nil also when there was
	// no entry or the session is no longer live. A name outside the wire grammar fails with
	// ErrInvalidName before any I/O.
	Withdraw(ctx context.Context, session SessionID, name string) error
}

// SessionQueue is implemented by a Queuer whose waiter entries live exactly as long as their
// session, not until the session's expiry as of the entry's latest AcquireQueued: an entry
// stays live, keeping its place, while the session's keep-alives keep the session alive,
// however long ago its last AcquireQueued was, and goes when it is granted, withdrawn
// (Withdraw) or its session ends — ZooKeeper's ephemeral waiter nodes, etcd's waiter keys on
// the session's lease, the SQL backends' waiter rows (PostgreSQL, MySQL/MariaDB, SQLite), whose
// expiry the session's keep-alive moves to the session's renewed one. Then a waiting client need not re-attempt before its session's
// expiry as of its previous attempt to keep its place: it re-attempts only at the holder's
// remaining time (one TTL when that is unknown, two with SteadyHints) or on a released hint,
// which saves the call the re-attempt costs (up to one per waiter per TTL while a holder lives
// on).
//
// The client withdraws once when it stops waiting and does not retry a Withdraw that failed
// (an entry that lapses needs no retry): a SessionQueue backend must run such a withdrawal
// again itself, as the ZooKeeper, etcd and SQL backends do with the session's next KeepAlive
// (unless the session waits for the name again first), or the entry would hold a free lease
// back for as long as the session lives.
//
// simba.New reads it once, when its backend also implements Queuer; a backend whose entries
// lapse with the expiry as of an attempt (the Redis backend) must not report true: its waiters would lose their place while they wait (tck.FairnessSpec
// checks the claim, see Queue/WaiterKeepsPlaceWithSession). It is a method rather than a marker interface so that
// a decorator can forward the answer of the backend it wraps; one that does not forward
// SessionQueue gets the re-attempts, the safe default.
type SessionQueue interface {
	// QueueEntriesLiveWithSession reports whether the backend's waiter entries live with
	// their session as described above.
	QueueEntriesLiveWithSession() bool
}

// EntriesLiveWithSession reports whether b implements SessionQueue and says its waiter
// entries live with their session: what the client, and a wrapper forwarding the capability,
// ask of a backend.
func EntriesLiveWithSession(b Backend) bool {
	sq, ok := b.(SessionQueue)
	return ok && sq.QueueEntriesLiveWithSession()
}

// WaitEnder is implemented by a Hinter that keeps state per name for its sessions' waits (what
// it subscribes to, LISTENs on, watches or polls so as to hint a release to a session whose
// acquire found the lease held): the client tells it when a session stops waiting without a
// Withdraw, so that the state goes at once instead of when the wait lapses. A service that
// calls TryLock on many distinct held names (one per order, per tenant) would otherwise keep,
// per name, a subscription, a LISTEN, a watch or a blocking named-lock wait for up to a few
// TTLs after each attempt, though nobody waits for the name any more.
//
// The client calls EndWait after the one Acquire of a TryLock that found the lease held (a
// TryLock never waits, and never queues: it sends Acquire, not AcquireQueued, so there is no
// entry to withdraw). A waiting acquire's wait ends as before: with a grant, a Withdraw, the
// session's close or its lapse. The client never has a TryLock and a waiting acquire of one name
// in flight in one session at once, so EndWait never ends a wait that someone still has.
type WaitEnder interface {
	// EndWait notes that session no longer waits for name: the backend drops what it keeps for
	// that wait (a name no other of its sessions waits for is no longer hinted, and its
	// subscription, LISTEN or watch goes as a Withdraw's would). It makes no call to the server,
	// must not block on one, changes nothing when the session does not wait for name, and
	// ignores a name outside the wire grammar.
	EndWait(session SessionID, name string)
}

// SteadyHints is implemented by a Hinter whose Released hints for a name one of its sessions
// waits for are not lost while that session lives: a reconnect of the backend to its server
// (or to another member of the cluster) neither drops the hint of a release made while it was
// away nor stops the watch, which resumes or is set again and checked at once. ZooKeeper's
// session watches are sent again with the session's last zxid on every reconnect
// (go-zookeeper's setWatches), and the server fires those whose node changed meanwhile; the
// ZooKeeper backend's own watch connection sets its watches again after a reconnect and reads
// each node behind them, hinting a node found gone. etcd's watches resume from the revision
// after the last one they reported (a compacted one is hinted at once). A hint is still lost
// to a reader too slow for the channel's buffer, or by a bug: so it is not a promise the
// client's liveness rests on, only a reason to fall back later.
//
// A waiting client that finds a lease held with the holder's time left unknown
// (Acquire.RemainingUnknown) waits for the hint, and tries again in any case, should the hint
// be lost, one TTL after the reply; with SteadyHints true it tries again two TTLs after the
// reply instead. A crashed holder's lease goes within a TTL of the crash, so the waiter's
// fallback attempt, one TTL after an attempt that may come just before the crash, mostly
// landed before the release and cost the failover a second acquire; two TTLs after it, an
// attempt made less than a TTL before the crash no longer does. A SteadyHints backend must
// keep watching a name for a session for more than two of its TTLs after the session's
// latest acquire of it found it held (the ZooKeeper and etcd backends keep a wait for three),
// or the waiter would hear of no release between the wait's end and its fallback attempt.
//
// simba.New reads it once, when its backend also implements Hinter. It is a method rather
// than a marker interface so that a decorator can forward the answer of the backend it wraps
// (see AreHintsSteady); one that does not forward SteadyHints gets the one-TTL fallback, the
// safe default.
type SteadyHints interface {
	// HintsSteady reports whether the backend's hints survive its reconnects as described
	// above.
	HintsSteady() bool
}

// AreHintsSteady reports whether b implements Hinter and SteadyHints and says its hints
// survive its reconnects: what the client, and a wrapper forwarding the capability, ask of a
// backend.
func AreHintsSteady(b Backend) bool {
	if _, ok := b.(Hinter); !ok {
		return false
	}
	sh, ok := b.(SteadyHints)
	return ok && sh.HintsSteady()
}

// CutSafe is implemented by a backend whose Acquire, AcquireQueued and Release may be cut
// short by their context at any point without costing anyone else: each server-side step of
// those calls is one atomic request (a script, a multi-op, a transaction in one request), so a
// cancelled call leaves that step's whole effect or none, nothing at the server waits on the
// client meanwhile, and the connection stays usable. A backend whose acquire holds
// server-side locks between round trips (a SQL transaction of several statements) is not:
// cancelled mid-way, it keeps those locks until the server notices, and every other session's
// acquire of the name waits for them; cancelling a SQL statement also costs its pooled
// connection.
//
// The client runs the acquire or release of a Lock, TryLock or Unlock on the caller's own
// goroutine, cut short if the caller's context ends, when CutSafe reports true; the call's
// context then has the caller's deadline when that comes before the call's own timeout, so a
// backend that heeds a context's deadline but cannot watch its cancellation (a go-redis
// client reads with the deadline) still ends the call, and the caller's wait, at it. Otherwise it
// does so only when the caller's context cannot end before the call's own timeout (no
// deadline, or one after it: then only a cancellation, which is rare, can cut the call), and a
// call that the caller's deadline may fall in runs on a call worker to its end while the caller
// stops waiting for it. A decorator that does not forward CutSafe gets the latter, the safe
// default.
//
// A call on the goroutine of a caller whose context has no deadline (only a cancellation can
// end it: an HTTP request's context, signal.NotifyContext's) is marked (CallerCancels), and a
// backend that heeds deadlines but cannot watch a cancellation must still return at the
// cancellation (the Redis backend then runs the call on a goroutine of its own); otherwise a
// Lock whose context is cancelled while its acquire waits for a server that does not answer
// waits out the call's timeout, one renewal interval. A caller whose context has a deadline is
// not marked, so that its calls keep the cheaper path: on such a backend a cancellation before
// that deadline ends the call at the earlier of the deadline and the call's timeout.
type CutSafe interface {
	// CutSafe reports whether the backend's acquires and releases are cut-safe as described
	// above.
	CutSafe() bool
}

type callerCancelsKey struct{}

// WithCallerCancels returns a copy of ctx marked as the context of a call that its caller's
// cancellation may end before ctx's deadline (see CutSafe): what a client passes to a call it
// runs on the goroutine of a caller whose context has no deadline.
func WithCallerCancels(ctx context.Context) context.Context {
	return context.WithValue(ctx, callerCancelsKey{}, true)
}

// CallerCancels reports whether ctx was marked by WithCallerCancels: a cancellation, not only
// the deadline, may end it early, so a backend that watches only deadlines must not block on
// the call until then.
func CallerCancels(ctx context.Context) bool {
	return ctx.Value(callerCancelsKey{}) != nil
}

// IsCutSafe reports whether b implements CutSafe and says its calls are cut-safe: what the
// client, and a wrapper forwarding the capability, ask of a backend.
func IsCutSafe(b Backend) bool {
	cs, ok := b.(CutSafe)
	return ok && cs.CutSafe()
}

// TTLChecker is implemented by a backend that knows, without any I/O, session TTLs it can
// never serve: a bound of its own (etcd leases count whole seconds, so at least one; the SQL
// backend and ZooKeeper count milliseconds) or one its configuration sets (a ZooKeeper DSN's
// tickTime must be less than half the TTL). OpenSession refuses such a TTL with
// ErrInvalidOption on every attempt, and the client would retry it for as long as it runs,
// so simba.New asks CheckTTL first and fails at once with the backend's error instead.
//
// CheckTTL must agree with OpenSession: a TTL it refuses, OpenSession refuses too, before any
// I/O, with an error matching ErrInvalidOption; a TTL it accepts, OpenSession refuses only for
// what the server answers (ZooKeeper's maxSessionTimeout, say). Its error matches
// ErrInvalidOption and names the constraint and how to meet it (which DSN parameter or option
// to change). A backend without constraints beyond the client's own (a TTL in (0,
// MaxSessionTTL]) need not implement it. A decorator forwards it with CheckTTL (the function),
// which answers nil for a backend without it.
type TTLChecker interface {
	// CheckTTL returns nil if OpenSession can serve sessions of ttl as far as the backend
	// knows without I/O, and otherwise an error matching ErrInvalidOption. It makes no call
	// to the server, does not block, and may be called on a closed backend.
	CheckTTL(ttl time.Duration) error
}

// CheckTTL returns b's answer for ttl if b implements TTLChecker, and nil otherwise: what the
// client, and a wrapper forwarding the capability, ask of a backend.
func CheckTTL(b Backend, ttl time.Duration) error {
	if c, ok := b.(TTLChecker); ok {
		return c.CheckTTL(ttl)
	}
	return nil
}

// RenewalChecker is implemented by a backend whose configuration bounds the renewal interval
// a client may use with it, the interval being each backend call's timeout (a Redis WAIT
// timeout must be below it). simba.New asks CheckRenewal with the client's TTL and resolved
// renewal interval, after CheckTTL, and fails at once with the backend's error, which matches
// ErrInvalidOption and names the constraint and how to meet it. Like CheckTTL it makes no call
// to the server, does not block, and may be called on a closed backend. OpenSession does not
// see the renewal interval, so it cannot refuse the same. A decorator forwards it with
// CheckRenewal (the function), which answers nil for a backend without it.
type RenewalChecker interface {
	// CheckRenewal returns nil if the backend can serve a client of ttl renewing every
	// every, and otherwise an error matching ErrInvalidOption.
	CheckRenewal(ttl, every time.Duration) error
}

// CheckRenewal returns b's answer for ttl and every if b implements RenewalChecker, and nil
// otherwise: what the client, and a wrapper forwarding the capability, ask of a backend.
func CheckRenewal(b Backend, ttl, every time.Duration) error {
	if c, ok := b.(RenewalChecker); ok {
		return c.CheckRenewal(ttl, every)
	}
	return nil
}

// LoggerAdopter is an optional interface of a backend that logs warnings of its own (foreign
// records, a server's risky configuration) and was made without a logger for them: simba.New
// with simba.WithLogger calls AdoptLogger with the client's logger, so that a backend opened
// on its own (open.Open without open.WithLogger) and given to the client logs where the
// client does, not to slog.Default(). A backend given a logger of its own (its WithLogger or
// WithSlog option, open.WithLogger) keeps it and ignores the call. AdoptLogger must be safe
// to call while the backend is in use, and does nothing with a nil l. A decorator forwards it
// with AdoptLogger (the function).
type LoggerAdopter interface {
	AdoptLogger(l *slog.Logger)
}

// AdoptLogger hands l to b if b implements LoggerAdopter (see there), and does nothing
// otherwise: what the client, and a wrapper forwarding the capability, call.
func AdoptLogger(b Backend, l *slog.Logger) {
	if a, ok := b.(LoggerAdopter); ok && l != nil {
		a.AdoptLogger(l)
	}
}

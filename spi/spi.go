// Package spi is Simba's backend service-provider interface, public the way database/sql/driver
// is: what a backend implements (Backend, and optionally Hinter and Inspector), the plain-value
// replies it returns, the errors it wraps and how they are classified (Classify, AsPermanent,
// Unavailable), and the monotonic Clock a client runs on (with Settler, the capability of a
// test's virtual clock to wait for the clients on it). Package simba (the client), package
// tck (the conformance suites every backend passes) and package simbatest (the in-memory
// backend) are written against it, and so is every backend under backend/ — a third-party
// backend imports only this package and, for its tests, tck.
//
// Replies are values, not errors: an expired session is a reply (Expired / SessionExpired). An
// error means the outcome of a call is unknown or the backend is unusable; see Classify.
//
// A backend is handed to simba.New; the client runs at most one call per lease at a time, each
// with a context that times out after one renewal interval, and never shares a session between
// backends (see Backend for the contract of each method). The spi package is a leaf: it imports
// only the generated wire rules, so the pure engine and the model backend share its types.
package spi

import (
	"context"
	"time"
)

// SessionID identifies a backend session. SQL and Redis backends use 128 random bits as 32
// lowercase hex characters made by the client; ZooKeeper uses its session id as 16 lowercase hex.
type SessionID string

// Session is the reply of OpenSession: the new session's id and the time it has left, measured
// by the backend's clock from when the backend handled the request.
type Session struct {
	ID        SessionID
	Remaining time.Duration
}

// Held is one lease a session holds, with the fencing token of its current tenure.
type Held struct {
	Name  string
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
	Held []Held
	// Members maps each group named in the request to its live members, sorted ascending.
	Members map[string][]SessionID
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
	Kind AcquireKind
	// Token is the fencing token of the grant (Granted only). A re-acquire by the holder returns
	// the same token.
	Token int64
	// Remaining is, for Granted, the acquiring session's time left; for HeldBy, the holder's
	// time left (unless RemainingUnknown).
	Remaining time.Duration
	// RemainingUnknown is set on HeldBy by backends with hints (ZooKeeper) that cannot tell the
	// holder's time left; the engine then waits for a released hint.
	RemainingUnknown bool
	// Holder and HolderOwner identify the current holder (HeldBy only).
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

// Backend is the SPI every Simba backend implements. Each method makes a number of round trips
// to the server that does not grow with the number of leases the session holds (KeepAlive on a
// partitioned Redis Cluster is bounded by the number of masters). Methods are safe for
// concurrent use.
type Backend interface {
	// OpenSession opens a new session for owner that expires ttl after its last keep-alive.
	OpenSession(ctx context.Context, owner string, ttl time.Duration) (Session, error)
	// KeepAlive renews the session, reports which of names it holds, refreshes its membership
	// of groups and returns each group's live members.
	KeepAlive(ctx context.Context, session SessionID, names []string, groups []string) (KeepAlive, error)
	// CloseSession ends the session and releases everything it holds, with hints.
	CloseSession(ctx context.Context, session SessionID) error
	// Acquire takes the lease name for session if it is free or its holder's session expired.
	Acquire(ctx context.Context, session SessionID, name string) (Acquire, error)
	// Release frees name if session holds it with token; otherwise it changes nothing.
	Release(ctx context.Context, session SessionID, name string, token int64) error
	// Join makes session a member of group until it leaves or expires.
	Join(ctx context.Context, session SessionID, group string) (Status, error)
	// Leave removes session from group.
	Leave(ctx context.Context, session SessionID, group string) (Status, error)
	// Members lists the live members of group, sorted ascending.
	Members(ctx context.Context, group string) ([]SessionID, error)
	// Close releases the backend's own resources (connections it opened). It does not close
	// pools the user passed in.
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
	Kind HintKind
	Name string
}

// Hinter is the optional capability of backends that push hints (PostgreSQL NOTIFY, Redis
// pub/sub, ZooKeeper watches).
type Hinter interface {
	// Hints delivers hints on the returned channel until ctx is done, then closes it. The
	// implementation reconnects by itself; hints lost meanwhile are simply lost.
	Hints(ctx context.Context) (<-chan Hint, error)
}

// LeaseInfo describes one lease in a Snapshot.
type LeaseInfo struct {
	Name      string
	Holder    SessionID // empty when free
	Owner     string
	Token     int64
	Remaining time.Duration
}

// SessionInfo describes one live session in a Snapshot.
type SessionInfo struct {
	ID        SessionID
	Owner     string
	Remaining time.Duration
}

// Snapshot is what Inspect returns: the backend's view for status tools.
type Snapshot struct {
	Leases   []LeaseInfo
	Sessions []SessionInfo
	Groups   map[string][]SessionID
}

// Inspector is the optional capability of backends that can list their state for `simba status`
// and the HTTP status page.
type Inspector interface {
	Inspect(ctx context.Context) (Snapshot, error)
}

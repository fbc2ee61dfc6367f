package simba

import "github.com/simba-go/simba/internal/spi"

// The backend SPI. These are the names a backend author implements; they are defined in one
// leaf package shared with the engine and the model backend, and re-exported here.
type (
	// Backend is the SPI every backend implements (sessions, leases, groups). Each method makes
	// a number of round trips that does not grow with the number of leases held.
	Backend = spi.Backend
	// Hinter is the optional capability of backends that push released and group-change hints.
	Hinter = spi.Hinter
	// Inspector is the optional capability of backends that list their state for status tools.
	Inspector = spi.Inspector
	// SessionID identifies a backend session.
	SessionID = spi.SessionID
	// Session is the reply of Backend.OpenSession.
	Session = spi.Session
	// KeepAliveReply is the reply of Backend.KeepAlive.
	KeepAliveReply = spi.KeepAlive
	// AcquireReply is the reply of Backend.Acquire: Granted, HeldBy or SessionExpired.
	AcquireReply = spi.Acquire
	// AcquireKind says which reply an AcquireReply is.
	AcquireKind = spi.AcquireKind
	// Held is a lease a session holds, with its fencing token.
	Held = spi.Held
	// Status is the reply of Join and Leave.
	Status = spi.Status
	// Hint is a push notification from a backend.
	Hint = spi.Hint
	// HintKind says what a Hint reports.
	HintKind = spi.HintKind
	// Snapshot is what an Inspector returns.
	Snapshot = spi.Snapshot
	// LeaseInfo describes one lease in a Snapshot.
	LeaseInfo = spi.LeaseInfo
	// SessionInfo describes one session in a Snapshot.
	SessionInfo = spi.SessionInfo
	// Clock is the monotonic clock a client runs on.
	Clock = spi.Clock
	// Timer is a pending Clock.AfterFunc call.
	Timer = spi.Timer
	// ErrorClass says whether a backend error is worth retrying.
	ErrorClass = spi.Class
)

// Replies and classes.
const (
	Granted        = spi.Granted
	HeldBy         = spi.HeldBy
	SessionExpired = spi.SessionExpired
	StatusOK       = spi.OK
	StatusExpired  = spi.Expired
	HintReleased   = spi.Released
	HintGroup      = spi.GroupChanged
	Retryable      = spi.Retryable
	Permanent      = spi.Permanent
)

// Sentinel errors, all testable with errors.Is.
var (
	// ErrInvalidName: a lease or group name breaks the wire grammar (1–128 of [A-Za-z0-9._:-],
	// not "." or "..").
	ErrInvalidName = spi.ErrInvalidName
	// ErrClosed: the client was closed.
	ErrClosed = spi.ErrClosed
	// ErrNotHeld: the caller is not the leader / does not hold the lock.
	ErrNotHeld = spi.ErrNotHeld
	// ErrLockHeld: TryLock found the lock held by another session.
	ErrLockHeld = spi.ErrLockHeld
	// ErrUnavailable: the backend is unreachable or failing transiently; wraps the cause.
	ErrUnavailable = spi.ErrUnavailable
	// ErrSchemaMissing: the backend's schema is missing or old; the error names the migration.
	ErrSchemaMissing = spi.ErrSchemaMissing
	// ErrSchemaDrift: the backend's schema differs from the one the library needs (a column,
	// collation, key or foreign key changed by hand); the error names what. It matches
	// ErrSchemaMissing too.
	ErrSchemaDrift = spi.ErrSchemaDrift
	// ErrInvalidOption: an option or DSN is invalid.
	ErrInvalidOption = spi.ErrInvalidOption
	// ErrTokenOverflow: a lease's fencing token has no successor the backend can store; nothing
	// was written. Permanent.
	ErrTokenOverflow = spi.ErrTokenOverflow
	// ErrCorruptToken: a lease record holds a token that is not a non-negative integer (never
	// coerced); nothing was written. Permanent.
	ErrCorruptToken = spi.ErrCorruptToken
	// ErrTLS: a TLS failure (a certificate that does not verify, a server that does not speak
	// or refuses TLS); permanent.
	ErrTLS = spi.ErrTLS
)

// Classify says whether a backend error is retryable or permanent.
func Classify(err error) ErrorClass { return spi.Classify(err) }

// AsPermanent marks a backend error as permanent (for backend authors).
func AsPermanent(err error) error { return spi.AsPermanent(err) }

// Unavailable wraps a transient backend failure of operation op (for backend authors).
func Unavailable(op string, cause error) error { return spi.Unavailable(op, cause) }

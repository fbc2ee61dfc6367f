package simba

import (
	"context"
	"errors"
	"fmt"

	"github.com/simba-go/simba/spi"
)

// SessionID identifies a backend session (events, Leader and group members carry it).
type SessionID = spi.SessionID

// Sentinel errors, all testable with errors.Is.
var (
	// ErrInvalidName: a lease or group name breaks the wire grammar (1–128 of [A-Za-z0-9._:-],
	// not "." or "..").
	ErrInvalidName = spi.ErrInvalidName
	// ErrClosed: the client was closed (or its backend: ErrBackendClosed matches it too).
	ErrClosed = spi.ErrClosed
	// ErrBackendClosed: the backend was closed, by whoever opened it, possibly under a live
	// client; it matches ErrClosed too.
	ErrBackendClosed = spi.ErrBackendClosed
	// ErrNotHeld: the caller is not the leader / does not hold the lock. IsPermanent reports
	// it permanent: retrying the call that reported it cannot make the lease held.
	ErrNotHeld = spi.ErrNotHeld
	// ErrLockHeld: TryLock found the lock held by another session, or by this client itself
	// (another goroutine's Lock or TryLock of the name: LockHeldError.Self).
	ErrLockHeld = spi.ErrLockHeld
	// ErrUnavailable: the backend is unreachable or failing transiently; wraps the cause.
	ErrUnavailable = spi.ErrUnavailable
	// ErrContended: a backend call lost its race with other clients' changes too many times
	// in a row (the backend answering); it matches ErrUnavailable too and is retried like it,
	// but the outage log does not take it for an outage (DEBUG, still an EventBackendError).
	ErrContended = spi.ErrContended
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
	// ErrCorruptRecord: a record where the backend keeps its state is not of the kind it writes
	// there (Redis: a key of another type, such as a string where a lease hash belongs); the
	// error names it and what is wrong; nothing was written. Permanent.
	ErrCorruptRecord = spi.ErrCorruptRecord
	// ErrTLS: a TLS failure (a certificate that does not verify, a server that does not speak
	// or refuses TLS); permanent.
	ErrTLS = spi.ErrTLS
	// ErrAccessDenied: the backend refused the client's credentials or privileges — a wrong or
	// missing password, an unknown user or role, or a missing privilege (a GRANT on Simba's
	// tables, a ZooKeeper ACL, an etcd role, a Redis ACL rule, a SQLite file this process may
	// not write) — on any backend; the error says which, for which user and server, and what
	// to do. Permanent.
	ErrAccessDenied = spi.ErrAccessDenied
)

// SessionCloseError is Close's error when the client's session could not be closed at the
// backend: its close call failed, and is not retried. Everything else Close does is done (every
// term revoked, every goroutine of the client exited); only the backend's record of the session
// is left, and it lapses at the session's TTL, as a crashed client's would: until then the
// backend may still list the session and hold the leases and memberships the close would have
// freed (others take them over once it lapses). Err is the close call's error: a permanent
// one (IsPermanent: the backend refused, say a missing schema or a closed backend, so the
// session was not closed) or one matching ErrUnavailable (a timeout, a lost connection: the
// close may have landed or not). errors.Is and errors.As see through to Err. Every later Close
// of the client returns the same error.
type SessionCloseError struct {
	// Session is the session whose close failed.
	Session SessionID
	// Err is the close call's error.
	Err error
}

// Error says which session was not closed and why.
func (e *SessionCloseError) Error() string {
	if spi.Classify(e.Err) == spi.Permanent {
		return fmt.Sprintf("simba: close: the backend refused to close session %s (it lapses at its TTL): %v", e.Session, e.Err)
	}
	return fmt.Sprintf("simba: close: closing session %s failed, outcome unknown (if not closed, it lapses at its TTL): %v", e.Session, e.Err)
}

// Unwrap returns Err.
func (e *SessionCloseError) Unwrap() error { return e.Err }

// IsPermanent reports whether err will not heal by retrying (spi.Classify): an invalid name or
// option, a closed client, a missing or drifted schema, a token the backend cannot store or
// read, a backend record of the wrong kind, a TLS failure, and what a backend marks permanent —
// refused credentials or privileges, a database that does not exist, a server of the wrong
// kind. The client already acts on it:
// Lock and TryLock return such an error at once instead of retrying, and an election reports
// it through Err. Everything else (timeouts, lost connections, busy servers, ErrUnavailable
// around a transient cause) is worth retrying. A nil err is not permanent.
//
// The two context errors differ on purpose. context.Canceled is permanent: someone decided the
// work should stop (a shutdown, a request that went away), and a retry under the same ctx would
// only fail again. context.DeadlineExceeded is not: a deadline is a budget that ran out, and the
// same call may well succeed with a new one. So a Lock whose ctx was cancelled returns an error
// that is permanent, and one whose deadline passed a retryable one (a permanent backend error
// would have ended the Lock before); both match their context error with errors.Is. A
// retry loop with a deadline per attempt under a cancellable parent thus stops on the parent's
// cancellation and goes on after an attempt's timeout.
//
// An error matching ErrNotHeld is permanent too: the lease is not held, and retrying the call
// that said so only says it again. Unlock reports it for a lock already unlocked (a second
// Unlock, or one after an Unlock whose release failed: that error was the one to act on) or
// lost meanwhile (its *RevokedError, which also is the cause of a revoked term's context), so
// a retry loop around Unlock that stops on IsPermanent stops there instead of spinning. Holding
// the lease again takes a new Lock (or Start), not a retry. This is IsPermanent's rule only:
// spi.Classify, by which the client classifies a backend's replies (EventBackendError's
// Class, its own retries), leaves ErrNotHeld retryable, as for any error a backend has not
// marked permanent.
func IsPermanent(err error) bool {
	return err != nil && (spi.Classify(err) == spi.Permanent || errors.Is(err, ErrNotHeld))
}

// ctxErr is ctx's error with its cause (context.WithCancelCause, WithTimeoutCause,
// WithDeadlineCause) when the cause is another error: a call ended by ctx says why, and
// errors.Is finds both context.Canceled (or DeadlineExceeded) and the cause.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// nilContext is the error of a method called with a nil ctx: it matches ErrInvalidOption and
// nothing was done (a nil context would otherwise panic deep inside the client).
func nilContext(method string) error {
	return invalid("%s called with a nil context", method)
}

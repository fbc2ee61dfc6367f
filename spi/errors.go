package spi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/simba-go/simba/generated/wire"
)

// Sentinel errors shared by the engine, the backends and package simba (which re-exports them).
// All are testable with errors.Is.
var (
	// ErrInvalidName: a lease or group name breaks the wire grammar. It is the generated
	// wire package's sentinel, so name errors from any layer match it.
	ErrInvalidName = wire.ErrInvalidName
	// ErrClosed: the client was closed; it also matches ErrBackendClosed.
	ErrClosed = errors.New("simba: client closed")
	// ErrBackendClosed: the backend was closed (spi.Backend.Close) — by whoever opened it,
	// possibly under a live client. It matches ErrClosed too, and says which was closed.
	// Permanent.
	ErrBackendClosed error = &childError{msg: "simba: backend closed", parent: ErrClosed}
	// ErrNotHeld: the caller is not the leader / does not hold the lock.
	ErrNotHeld = errors.New("simba: not held")
	// ErrLockHeld: TryLock found the lock held by another session.
	ErrLockHeld = errors.New("simba: lock held")
	// ErrUnavailable: the backend could not be reached or answered with a transient failure;
	// it wraps the cause and is retryable.
	ErrUnavailable = errors.New("simba: backend unavailable")
	// ErrContended: the backend answered, but the call lost its race with other clients'
	// concurrent changes (a ZooKeeper acquire whose waiter queue kept changing under it) too
	// many times in a row and gave up; it wraps the cause. Retryable, like any ErrUnavailable,
	// which it matches too (it is unavailable to this call for now), but the backend is
	// reachable: the client counts it as contention, not as a sign of an outage (see
	// Contended).
	ErrContended error = &childError{msg: "simba: backend call contended", parent: ErrUnavailable}
	// ErrSchemaMissing: the backend's schema is missing or older than this library needs; the
	// wrapping error names the migration to apply. Permanent.
	ErrSchemaMissing = errors.New("simba: schema missing")
	// ErrInvalidOption: a configuration value (option, DSN) is invalid. Permanent.
	ErrInvalidOption = errors.New("simba: invalid option")
	// ErrSchemaDrift: the backend's schema has the right version but differs from the one the
	// library needs (a table, column, type, collation, primary key or foreign key changed or
	// dropped by hand); the wrapping error names the table, the column, what is wrong and the
	// migration. It matches ErrSchemaMissing too. Permanent.
	ErrSchemaDrift error = &childError{msg: "simba: schema drift", parent: ErrSchemaMissing}
	// ErrTokenOverflow: a lease's fencing token has no successor the backend can store (SQL: the
	// stored token is the int64 maximum; Redis: the next token would reach 2^53, past which Lua
	// numbers are inexact). Nothing was written. Permanent: the lease needs an operator.
	ErrTokenOverflow = errors.New("simba: token overflow")
	// ErrCorruptToken: a lease record holds a token that is not a non-negative integer (a
	// negative SQL token; a Redis token that is not a plain decimal). It is never coerced and
	// nothing was written. Permanent: the lease needs an operator.
	ErrCorruptToken = errors.New("simba: corrupt token")
	// ErrCorruptRecord: a record where the backend keeps its state is not of the kind it
	// writes there, so no operation can read or update it (Redis: a key of another type, such
	// as a string or a list where a lease hash belongs, written by hand or by another
	// program). The wrapping error names the record and what is wrong. Nothing was written.
	// Permanent: the record needs an operator.
	ErrCorruptRecord = errors.New("simba: corrupt record")
	// ErrTLS: a TLS failure: a server certificate that does not verify, a server that does not
	// speak TLS or refuses it, a handshake the server rejects. Permanent: it does not heal by
	// retrying; the DSN's TLS settings (sslmode, tls, rediss://) or the server's certificate
	// need fixing. The wrapping error names the cause (see IsTLSError, TLSFailure).
	ErrTLS = errors.New("simba: TLS failure")
	// ErrAccessDenied: the backend refused the client's credentials or privileges. It covers
	// every authentication failure (a wrong or missing password, an unknown user or role, an
	// authentication mechanism the server refuses) and every authorization failure (a missing
	// GRANT on Simba's tables, a ZooKeeper ACL, an etcd role without permission on Simba's
	// keys, a Redis ACL user without a command, key or channel Simba needs, a SQLite file this
	// process may not write). The wrapping error says which (authentication or privilege), for
	// which user, at which server, and what to do. Permanent: credentials and grants do not
	// change by retrying (see AccessDenied).
	ErrAccessDenied = errors.New("simba: access denied")
)

// ValidateName checks a lease or group name for a backend's Acquire, Release, Join, Leave,
// Members and KeepAlive, before any I/O: 1 to wire.MaxNameLen characters of [A-Za-z0-9._:-],
// and not "." or "..". The error matches ErrInvalidName (permanent for Classify).
func ValidateName(name string) error { return wire.ValidateName(name) }

// ValidateOwner checks a session's owner string for a backend's OpenSession, before any I/O:
// wire.ValidateOwner (1 to wire.MaxOwnerLen bytes of UTF-8 without a character that
// wire.OwnerRefuses: control, format, line and paragraph separators). An SPI caller can pass
// anything; the error matches both ErrInvalidOption and wire.ErrInvalidOwner.
func ValidateOwner(owner string) error {
	if err := wire.ValidateOwner(owner); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return nil
}

// childError is a sentinel that also matches a more general sentinel (its parent).
type childError struct {
	msg    string
	parent error
}

func (e *childError) Error() string { return e.msg }
func (e *childError) Unwrap() error { return e.parent }

// Class is how the client treats a backend error.
type Class uint8

const (
	// Retryable errors (timeouts, connection loss, busy servers) leave the call's outcome
	// unknown; the client retries with backoff inside the time the session has left.
	Retryable Class = iota + 1
	// Permanent errors (authentication, missing schema, invalid configuration) will not heal by
	// retrying; the client reports them.
	Permanent
)

// String names the class.
func (c Class) String() string {
	if c == Permanent {
		return "permanent"
	}
	return "retryable"
}

// Classify says whether err is worth retrying. Errors are retryable unless marked permanent
// with AsPermanent, wrapping ErrSchemaMissing (or ErrSchemaDrift), ErrInvalidOption,
// ErrInvalidName, ErrClosed, ErrTokenOverflow, ErrCorruptToken, ErrCorruptRecord,
// ErrAccessDenied or context.Canceled, or a TLS
// failure (IsTLSError, wherever it comes from): an unknown failure of a network call is more
// likely transient than not, and treating it as transient loses nothing but a retry. The whole
// chain counts, so Unavailable around a permanent cause is still permanent.
//
// The client retries a retryable error with backoff while the session has time left, and
// reports a permanent one instead of retrying it. A backend therefore never has to retry by
// itself; it has to classify.
func Classify(err error) Class {
	switch {
	case err == nil:
		return Retryable
	case errors.Is(err, errPermanent),
		errors.Is(err, ErrSchemaMissing),
		errors.Is(err, ErrInvalidOption),
		errors.Is(err, ErrInvalidName),
		errors.Is(err, ErrClosed),
		errors.Is(err, ErrTokenOverflow),
		errors.Is(err, ErrCorruptToken),
		errors.Is(err, ErrCorruptRecord),
		errors.Is(err, ErrAccessDenied),
		errors.Is(err, context.Canceled),
		IsTLSError(err):
		return Permanent
	}
	return Retryable
}

// IsTLSError reports whether err is or wraps a TLS failure: ErrTLS; a certificate that does not
// verify (tls.CertificateVerificationError and the x509 errors: unknown authority, wrong host
// name, expired or otherwise invalid certificate, ...); a server that does not speak TLS
// (tls.RecordHeaderError, "first record does not look like a TLS handshake"); or an alert the
// server sent during the handshake ("remote error: tls: ..."). Backends call it before their
// own classification (a TLS failure often arrives wrapped in a net.Error, which they would
// otherwise class retryable), and Classify calls it for errors no backend classified.
func IsTLSError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrTLS) {
		return true
	}
	var (
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		alert    tls.AlertError
		ech      *tls.ECHRejectionError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		roots    x509.SystemRootsError
		algo     x509.InsecureAlgorithmError
		critical x509.UnhandledCriticalExtension
		op       *net.OpError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &header), errors.As(err, &alert),
		errors.As(err, &ech), errors.As(err, &unknown), errors.As(err, &hostname),
		errors.As(err, &invalid), errors.As(err, &roots), errors.As(err, &algo),
		errors.As(err, &critical):
		return true
	case errors.As(err, &op) && op.Op == "remote error":
		return true // crypto/tls reports the server's alerts as a *net.OpError "remote error"
	}
	return false
}

// TLSFailure wraps a TLS failure of operation op so that it matches ErrTLS (permanent) and
// stays errors.Is/As-testable as cause.
func TLSFailure(op string, cause error) error {
	if errors.Is(cause, ErrTLS) {
		return fmt.Errorf("%s: %w", op, cause)
	}
	return fmt.Errorf("%w: %s: %w", ErrTLS, op, cause)
}

var errPermanent = errors.New("permanent")

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() []error {
	return []error{e.err, errPermanent}
}

// AsPermanent marks err as permanent for Classify, keeping it (and everything it wraps)
// testable with errors.Is and errors.As. Use it for failures that no sentinel names and that
// retrying will not heal: authentication refused, a missing permission, a server of the wrong
// kind (a Redis Cluster node where a standalone server was configured). It returns nil for a
// nil err.
func AsPermanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// Contended wraps the failure of operation op that lost its race with concurrent changes too
// many times (the backend answering every request) so that it is errors.Is-testable as
// ErrContended, as ErrUnavailable and as the cause. Classify reports it retryable. The client
// retries it like any retryable failure, but does not take it for an outage: its outage log
// tells it at DEBUG (it is still an EventBackendError to the listeners).
func Contended(op string, cause error) error {
	return fmt.Errorf("%w: %s: %w", ErrContended, op, cause)
}

// AccessDenied wraps the failure of operation op by which the backend refused the client's
// credentials or privileges, so that it is errors.Is-testable as ErrAccessDenied (permanent
// for Classify) and as cause. what says which it was and what to do (the user, the server, the
// missing privilege, the fix); it goes between op and the cause, and may be "". A cause that
// already matches ErrAccessDenied is wrapped without it again.
func AccessDenied(op, what string, cause error) error {
	if what != "" {
		what = ": " + what
	}
	if errors.Is(cause, ErrAccessDenied) {
		return fmt.Errorf("%s%s: %w", op, what, cause)
	}
	return fmt.Errorf("%w: %s%s: %w", ErrAccessDenied, op, what, cause)
}

// Unavailable wraps a transient cause from operation op (a timeout, a lost connection, a busy
// server) so that it is errors.Is-testable as ErrUnavailable and as the cause. Classify reports
// it retryable unless the cause itself is permanent (a TLS failure, say).
func Unavailable(op string, cause error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, cause)
}

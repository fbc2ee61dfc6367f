package spi

import (
	"context"
	"errors"
	"fmt"

	"github.com/simba-go/simba/generated/wire"
)

// Sentinel errors shared by the engine, the backends and package simba (which re-exports them).
// All are testable with errors.Is.
var (
	// ErrInvalidName: a lease or group name breaks the wire grammar. It is the generated
	// wire package's sentinel, so name errors from any layer match it.
	ErrInvalidName = wire.ErrInvalidName
	// ErrClosed: the client (or backend) was closed.
	ErrClosed = errors.New("simba: client closed")
	// ErrNotHeld: the caller is not the leader / does not hold the lock.
	ErrNotHeld = errors.New("simba: not held")
	// ErrLockHeld: TryLock found the lock held by another session.
	ErrLockHeld = errors.New("simba: lock held")
	// ErrUnavailable: the backend could not be reached or answered with a transient failure;
	// it wraps the cause and is retryable.
	ErrUnavailable = errors.New("simba: backend unavailable")
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
)

// ValidateOwner checks a session's owner string for a backend's OpenSession, before any I/O:
// wire.ValidateOwner (1 to wire.MaxOwnerLen bytes of UTF-8 without control characters). An SPI
// caller can pass anything; the error matches both ErrInvalidOption and wire.ErrInvalidOwner.
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

// Class is how the shell treats a backend error.
type Class uint8

const (
	// Retryable errors (timeouts, connection loss, busy servers) leave the call's outcome
	// unknown; the engine retries with backoff inside the time the session has left.
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
// with Permanentf / AsPermanent or wrapping ErrSchemaMissing, ErrInvalidOption, ErrInvalidName,
// ErrClosed, ErrTokenOverflow or ErrCorruptToken: an unknown failure of a network call is more likely transient than not, and
// treating it as transient loses nothing but a retry.
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
		errors.Is(err, context.Canceled):
		return Permanent
	}
	return Retryable
}

var errPermanent = errors.New("permanent")

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() []error {
	return []error{e.err, errPermanent}
}

// AsPermanent marks err as permanent for Classify, keeping it testable with errors.Is.
func AsPermanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// Unavailable wraps a transient cause from operation op so that it is errors.Is-testable as
// ErrUnavailable and as the cause.
func Unavailable(op string, cause error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, cause)
}

// Package fence makes a resource reject writes from stale holders: it holds what the helpers
// that enforce fencing tokens at the resource share — the error they return on rejection
// (ErrStaleToken, detailed by *StaleTokenError) and the rule for resource names.
//
// A fencing token (simba.Term.Token) only helps where the resource checks it (Kleppmann's
// fencing argument): a holder paused by GC, SIGSTOP or a slow network may write after its term
// ended and a newer holder wrote. The helpers keep, per resource, the highest token seen and
// refuse any write whose token is lower, atomically with the write itself:
//
//   - fencesql: PostgreSQL, MySQL/MariaDB and SQLite; the user's write runs in one transaction
//     with the check, against the simba_fence table of migration 0002_fence.
//   - fenceredis: SET and HSET guarded by a token key in one Lua script, usable on Redis
//     Cluster (the token key and the guarded key share a hash slot).
//   - fencehttp: a server middleware and a client round-tripper carrying the token in the
//     Simba-Fencing-Token header.
//
// A write with a token equal to the highest seen is accepted: one holder writes many times
// within one term. Tokens of different resources are independent; tokens from different lease
// names must not share a resource (their orders are unrelated).
//
// By default a helper trusts every token, so one that is not its lease's — a token of another
// lease name sent by a buggy client, the int64 maximum sent by a hostile one — raises the
// resource's highest for good and every legitimate holder after it is refused as stale. Give
// the helper a Verifier (the Verify field of fencehttp.Guard, fencesql.Fence and
// fenceredis.Fence) and it admits a token that would raise the highest only once the lock
// service confirms it; LeaseVerifier is the ready-made one, on any backend that implements
// spi.Inspector (it reads just the lease checked where the backend implements
// spi.LeaseInspector, as every backend Simba ships does). A refused token matches ErrUnverifiedToken (*UnverifiedTokenError) and
// changes nothing. A token equal to the highest is never re-checked: one check per tenure.
package fence

import (
	"errors"
	"fmt"
)

// ErrStaleToken is the sentinel every helper's rejection matches (errors.Is): the write carried
// a token lower than the highest the resource has seen, and nothing was written. The error is
// a *StaleTokenError with the details (errors.As).
var ErrStaleToken = errors.New("fence: stale fencing token")

// StaleTokenError is a rejected write: Token is below Highest, the highest token the resource
// had seen.
type StaleTokenError struct {
	// Resource is the fenced resource the write was for.
	Resource string
	// Token is the write's token.
	Token int64
	// Highest is the highest token the resource had seen when it refused the write.
	Highest int64
}

// Error says which resource refused which token, and why.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("%v: resource %q refused token %d: it has seen token %d", ErrStaleToken, e.Resource, e.Token, e.Highest)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// ErrInvalidResource is matched (errors.Is) by the error for a resource name that breaks
// ValidateResource's rule, and, as before ErrInvalidToken existed, by the error for a token
// below zero.
var ErrInvalidResource = errors.New("fence: invalid resource")

// ErrInvalidToken is matched (errors.Is) by the error for a token below zero (ValidateToken,
// and every helper's write); that error matches ErrInvalidResource too.
var ErrInvalidToken = errors.New("fence: invalid token")

// invalidTokenError is a token below zero: it says so, and matches ErrInvalidToken and, for
// callers written before ErrInvalidToken, ErrInvalidResource.
type invalidTokenError struct{ token int64 }

func (e invalidTokenError) Error() string {
	return fmt.Sprintf("%v: negative token %d (Simba's tokens are never negative)", ErrInvalidToken, e.token)
}

func (e invalidTokenError) Is(target error) bool {
	return target == ErrInvalidToken || target == ErrInvalidResource
}

// MaxResourceLen is the longest resource name, in bytes.
const MaxResourceLen = 128

// ValidateResource checks a resource name: 1 to MaxResourceLen bytes of printable ASCII
// (0x21-0x7e) without '{' or '}'. fencesql and fenceredis apply the same rule, so a name that
// works with one works with the other: it fits the SQL column (ASCII, bytewise) and forms a
// Redis Cluster hash tag ({resource}) that Redis hashes as a whole. fencehttp's Guard, which
// keeps its resources only in memory, fences any string (a URL path as it is, by default).
func ValidateResource(resource string) error {
	if len(resource) == 0 || len(resource) > MaxResourceLen {
		return fmt.Errorf("%w: %q: want 1 to %d bytes", ErrInvalidResource, resource, MaxResourceLen)
	}
	for i := 0; i < len(resource); i++ {
		c := resource[i]
		if c < 0x21 || c > 0x7e || c == '{' || c == '}' {
			return fmt.Errorf("%w: %q: byte %d (%#02x) is not printable ASCII without braces", ErrInvalidResource, resource, i, c)
		}
	}
	return nil
}

// ValidateToken checks a fencing token: Simba's tokens are never negative.
func ValidateToken(token int64) error {
	if token < 0 {
		return invalidTokenError{token}
	}
	return nil
}

package engine

import (
	"fmt"
	"time"

	"github.com/simba-go/simba/internal/spi"
)

// Defaults (DESIGN.md §4).
const (
	DefaultTTL         = 15 * time.Second
	DefaultDrift       = 0.01
	DefaultMargin      = 50 * time.Millisecond
	DefaultRetryJitter = 25 * time.Millisecond
	DefaultBackoffMin  = 50 * time.Millisecond
	// MaxOwnerLen bounds the owner string, in bytes.
	MaxOwnerLen = 255
)

// Rule names one of the rules of DESIGN.md §2 that the engine keeps.
type Rule uint8

// The rules, for Options.Break.
const (
	// Rule1: adopt a term only from a reply to the election's current attempt, before the
	// session's local deadline, with a token above every token this session released for it.
	Rule1 Rule = iota + 1
	// Rule2: revoke a term first, then release its lease with its token.
	Rule2
	// Rule3: keep-alive reconciliation (ask about in-flight and unknown acquires, revoke terms
	// missing from the reply, release leases nobody wants).
	Rule3
	// Rule4: an expired session never resurrects.
	Rule4
	// Rule5: handover keeps the lease of a stopped term while its work runs.
	Rule5
)

// Options configure an engine. Zero values take the defaults of DESIGN.md §4.
type Options struct {
	// Owner is shown as the holder of this client's leases; 1..255 bytes. Required.
	Owner string
	// TTL is the session time-to-live (default 15 s).
	TTL time.Duration
	// RenewInterval is the time between keep-alives and the timeout of every call (default
	// TTL/3). TTL must be at least three renewal intervals (a renewal interval plus twice the
	// call timeout).
	RenewInterval time.Duration
	// Drift is the clock-rate drift the local deadline allows for, in [0, 0.5) (default 1%).
	// A negative value means zero.
	Drift float64
	// Margin is subtracted from every local deadline (default 50 ms). A negative value means
	// zero.
	Margin time.Duration
	// Cooldown is how long a stepped-down election waits before it is a candidate again
	// (default one TTL).
	Cooldown time.Duration
	// RetryJitter bounds the jitter added to a candidate's retry at the holder's remaining
	// time (default 25 ms).
	RetryJitter time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff of failed calls (defaults 50 ms
	// and the renewal interval); each delay is drawn uniformly below the bound (full jitter).
	BackoffMin, BackoffMax time.Duration

	// Break disables one rule of DESIGN.md §2. TEST ONLY: the engine's transcripts and the
	// simulator's mutation tests use it to prove that each rule is needed. Never set it
	// elsewhere.
	Break Rule
}

// withDefaults fills zero fields and validates the result.
func (o Options) withDefaults() (Options, error) {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.TTL / 3
	}
	if o.Drift == 0 {
		o.Drift = DefaultDrift
	} else if o.Drift < 0 {
		o.Drift = 0
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	} else if o.Margin < 0 {
		o.Margin = 0
	}
	if o.Cooldown == 0 {
		o.Cooldown = o.TTL
	}
	if o.RetryJitter == 0 {
		o.RetryJitter = DefaultRetryJitter
	}
	if o.BackoffMin == 0 {
		o.BackoffMin = DefaultBackoffMin
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = o.RenewInterval
	}
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: %s", spi.ErrInvalidOption, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Owner == "" || len(o.Owner) > MaxOwnerLen:
		return bad("owner must be 1..%d bytes, got %d", MaxOwnerLen, len(o.Owner))
	case o.TTL < 0 || o.RenewInterval <= 0:
		return bad("TTL %v and renewal interval %v must be positive", o.TTL, o.RenewInterval)
	case o.TTL < 3*o.RenewInterval:
		return bad("TTL %v must be at least three renewal intervals (%v): one interval plus twice the call timeout", o.TTL, 3*o.RenewInterval)
	case o.Drift >= 0.5:
		return bad("drift %v must be below 0.5", o.Drift)
	case o.Margin >= o.TTL/2:
		return bad("margin %v must be below half the TTL %v", o.Margin, o.TTL)
	case o.Cooldown < 0 || o.RetryJitter < 0:
		return bad("cooldown %v and retry jitter %v must not be negative", o.Cooldown, o.RetryJitter)
	case o.BackoffMin <= 0 || o.BackoffMax < o.BackoffMin:
		return bad("backoff bounds [%v, %v] are invalid", o.BackoffMin, o.BackoffMax)
	case o.Break > Rule5:
		return bad("unknown rule %d", o.Break)
	}
	return o, nil
}

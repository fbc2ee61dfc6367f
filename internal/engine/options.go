package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// Defaults (DESIGN.md §4).
const (
	DefaultTTL         = 15 * time.Second
	DefaultDrift       = 0.01
	DefaultMargin      = 50 * time.Millisecond
	DefaultRetryJitter = 25 * time.Millisecond
	DefaultBackoffMin  = 50 * time.Millisecond
	// MaxDuration bounds every duration option (TTL, renewal interval, margin, cooldown, retry
	// jitter, backoff bounds): 24 hours. A lease that must survive a day without a keep-alive
	// is not a lease; the bound keeps every time sum the engine makes (a monotonic time of up
	// to decades plus a few option values) far below the 292 years that int64 nanoseconds
	// hold, so no option value can make a deadline wrap around. The engine's time sums also
	// saturate, so even a monotonic time near the limit cannot wrap.
	MaxDuration = 24 * time.Hour
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
	// Owner is shown as the holder of this client's leases. Required; wire.ValidateOwner
	// checks it (1..wire.MaxOwnerLen bytes of UTF-8 without control characters).
	Owner string
	// TTL is the session time-to-live (default 15 s), at most MaxDuration. It also bounds
	// every remaining time a backend reports for this client's session: a backend can never
	// legitimately grant more than the TTL it was asked for.
	TTL time.Duration
	// RenewInterval is the time between keep-alives and the timeout of every call (default
	// TTL/3). TTL must be at least three renewal intervals (a renewal interval plus twice the
	// call timeout).
	RenewInterval time.Duration
	// Drift is the clock-rate drift the local deadline allows for, in [0, 0.5) (default 1%).
	// A negative finite value means zero; NaN and ±Inf are invalid.
	Drift float64
	// Margin is subtracted from every local deadline (default 50 ms), below TTL/2. A negative
	// value means zero.
	Margin time.Duration
	// Cooldown is how long a stepped-down election waits before it is a candidate again
	// (default one TTL), at most MaxDuration.
	Cooldown time.Duration
	// RetryJitter bounds the jitter added to a candidate's retry at the holder's remaining
	// time (default 25 ms), at most MaxDuration.
	RetryJitter time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff of failed calls (defaults 50 ms
	// and the renewal interval; 0 < BackoffMin ≤ BackoffMax ≤ MaxDuration); each delay is drawn
	// uniformly below the bound (full jitter).
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
	if math.IsNaN(o.Drift) || math.IsInf(o.Drift, 0) {
		return o, fmt.Errorf("%w: drift %v must be a finite number in [0, 0.5)", spi.ErrInvalidOption, o.Drift)
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
	if err := wire.ValidateOwner(o.Owner); err != nil {
		return o, fmt.Errorf("%w: %w", spi.ErrInvalidOption, err)
	}
	// Every comparison is written so that no product or sum can overflow.
	switch {
	case o.TTL < 0 || o.RenewInterval <= 0:
		return bad("TTL %v and renewal interval %v must be positive", o.TTL, o.RenewInterval)
	case o.TTL > MaxDuration:
		return bad("TTL %v must be at most %v", o.TTL, MaxDuration)
	case o.RenewInterval > o.TTL/3:
		return bad("TTL %v must be at least three renewal intervals (renewal interval %v): one interval plus twice the call timeout", o.TTL, o.RenewInterval)
	case !(o.Drift >= 0 && o.Drift < 0.5):
		return bad("drift %v must be below 0.5", o.Drift)
	case o.Margin >= o.TTL/2:
		return bad("margin %v must be below half the TTL %v", o.Margin, o.TTL)
	case o.Cooldown < 0 || o.RetryJitter < 0:
		return bad("cooldown %v and retry jitter %v must not be negative", o.Cooldown, o.RetryJitter)
	case o.Cooldown > MaxDuration || o.RetryJitter > MaxDuration:
		return bad("cooldown %v and retry jitter %v must be at most %v", o.Cooldown, o.RetryJitter, MaxDuration)
	case o.BackoffMin <= 0 || o.BackoffMax < o.BackoffMin || o.BackoffMax > MaxDuration:
		return bad("backoff bounds [%v, %v] are invalid: want 0 < min ≤ max ≤ %v", o.BackoffMin, o.BackoffMax, MaxDuration)
	case o.Break > Rule5:
		return bad("unknown rule %d", o.Break)
	}
	return o, nil
}

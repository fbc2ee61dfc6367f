package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// Defaults (DESIGN.md §4). These are the only definitions of the defaults: package simba's
// DefaultTTL, DefaultDrift, DefaultMargin, DefaultMaxJitter and DefaultMinBackoff are these
// constants, and its Client hands every option to the engine as it is (Options.Resolve derives
// the rest).
const (
	// DefaultTTL is the session time-to-live.
	DefaultTTL = 15 * time.Second
	// DefaultDrift is the clock-rate drift every local deadline allows for (1%).
	DefaultDrift = 0.01
	// DefaultMargin is subtracted from every local deadline.
	DefaultMargin = 50 * time.Millisecond
	// DefaultRetryJitter bounds the jitter a candidate adds to the holder's remaining time.
	DefaultRetryJitter = 25 * time.Millisecond
	// DefaultBackoffMin is the first backoff bound after a failed call, capped at BackoffMax
	// (see Options.BackoffMin).
	DefaultBackoffMin = 50 * time.Millisecond
	// MaxDuration bounds every duration option (TTL, renewal interval, margin, cooldown, retry
	// jitter, backoff bounds): 24 hours. A lease that must survive a day without a keep-alive
	// is not a lease; the bound keeps every time sum the engine makes (a monotonic time of up
	// to decades plus a few option values) far below the 292 years that int64 nanoseconds
	// hold, so no option value can make a deadline wrap around. The engine's time sums also
	// saturate, so even a monotonic time near the limit cannot wrap.
	MaxDuration = 24 * time.Hour
	// MaxDrift bounds Options.Drift: drift is in [0, MaxDrift).
	MaxDrift = 0.5
)

// DefaultRenewInterval is the renewal interval of a session with the given TTL when none is
// set: TTL/3, the longest the rule TTL ≥ 3 × renewal interval allows.
func DefaultRenewInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// DefaultCooldown is the cooldown of a session with the given TTL when none is set: one TTL.
func DefaultCooldown(ttl time.Duration) time.Duration { return ttl }

// DefaultBackoffMax is the backoff bound for a given renewal interval when none is set: the
// renewal interval.
func DefaultBackoffMax(renew time.Duration) time.Duration { return renew }

// DefaultBackoffMinFor is the first backoff bound for a given BackoffMax when none is set:
// DefaultBackoffMin, capped at backoffMax (a short renewal interval keeps its backoffs short).
func DefaultBackoffMinFor(backoffMax time.Duration) time.Duration {
	return min(DefaultBackoffMin, backoffMax)
}

// Defaults returns the options of DESIGN.md §4 with no owner: TTL DefaultTTL, Drift
// DefaultDrift, Margin DefaultMargin, RetryJitter DefaultRetryJitter, and zero (derived from
// the TTL by Resolve) in RenewInterval, Cooldown, BackoffMin and BackoffMax. Set Owner (and
// change what else you need) before New.
func Defaults() Options {
	return Options{
		TTL:         DefaultTTL,
		Drift:       DefaultDrift,
		Margin:      DefaultMargin,
		RetryJitter: DefaultRetryJitter,
	}
}

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
	// Rule6: a term's deadline is bounded by its grant's own remaining time until a
	// keep-alive that asked about the lease lists it held (a lease whose expiry the backend
	// copies at grant time, as Redis does, is not renewed by a keep-alive sent before the
	// acquire).
	Rule6
)

// Options configure an engine. They are taken literally: a zero Drift, Margin or RetryJitter
// is zero, and a zero TTL or Owner is invalid. Only the four fields whose defaults derive from
// another field read zero as "the default": RenewInterval, Cooldown, BackoffMin and
// BackoffMax. Start from Defaults() for the defaults of DESIGN.md §4.
type Options struct {
	// Owner is shown as the holder of this client's leases. Required; wire.ValidateOwner
	// checks it (1..wire.MaxOwnerLen bytes of UTF-8 without a character wire.OwnerRefuses).
	Owner string
	// TTL is the session time-to-live, in (0, MaxDuration] (DefaultTTL in Defaults). It also
	// bounds every remaining time a backend reports for this client's session: a backend can
	// never legitimately grant more than the TTL it was asked for.
	TTL time.Duration
	// RenewInterval is the time between keep-alives and the timeout of every call; zero means
	// DefaultRenewInterval(TTL), that is TTL/3. TTL must be at least three renewal intervals (a
	// renewal interval plus twice the call timeout).
	RenewInterval time.Duration
	// Drift is the clock-rate drift the local deadline allows for, a finite number in
	// [0, MaxDrift) (DefaultDrift in Defaults); zero is no drift allowance. NaN, ±Inf and
	// negative values are invalid.
	Drift float64
	// Margin is subtracted from every local deadline, in [0, TTL/2) (DefaultMargin in
	// Defaults); zero is no margin. Negative values are invalid.
	Margin time.Duration
	// Cooldown is how long a stepped-down election waits before it is a candidate again, at
	// most MaxDuration; zero means DefaultCooldown(TTL), one TTL.
	Cooldown time.Duration
	// RetryJitter bounds the jitter added to a candidate's retry at the holder's remaining
	// time, in [0, MaxDuration] (DefaultRetryJitter in Defaults); zero is no jitter.
	RetryJitter time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff of failed calls, with
	// 0 < BackoffMin ≤ BackoffMax ≤ MaxDuration once resolved; each delay is drawn uniformly
	// below the bound (full jitter). A sign that the backend answers again (EvReachable, or
	// a call sent after the latest failure that succeeds) cuts a retryable failure's backoff
	// short: the call is retried within a jitter of BackoffMin, at most once per BackoffMax. A zero BackoffMax means DefaultBackoffMax(RenewInterval),
	// the renewal interval; a zero BackoffMin means DefaultBackoffMinFor(BackoffMax), 50 ms
	// capped at BackoffMax.
	BackoffMin, BackoffMax time.Duration
	// Queue says the backend keeps a waiter queue per name (spi.Queuer). The acquires of
	// Lock, elections and partitions then wait in it (Effect.Queue), and a waiting candidate
	// re-attempts no later than its session's local deadline as of its previous attempt, so
	// that its entry (which expires with the session's expiry as of that attempt) never lapses
	// while it waits. TryLock never queues.
	Queue bool
	// QueueLivesWithSession says the backend's waiter entries live as long as their session
	// (spi.SessionQueue: ZooKeeper, etcd), not until the session's expiry as of the latest
	// attempt. A waiting candidate then does not re-attempt before its session's local
	// deadline as of its previous attempt: it retries at the holder's remaining time (one TTL
	// when unknown) and at once on a released hint, as without Queue. And since such an entry
	// never lapses, a queued attempt whose outcome is unknown (its call failed, the request
	// may land later) is withdrawn by the keep-alive that settles the outcome (rule 3) when
	// the election no longer waits by then. It requires Queue.
	QueueLivesWithSession bool
	// SteadyHints says the backend's released hints survive its reconnects (spi.SteadyHints:
	// ZooKeeper, etcd). A candidate that finds a lease held with the holder's time left unknown
	// then tries again two TTLs after the reply, should the hint be lost, instead of one: a
	// crashed holder's lease goes within a TTL of the crash, so a fallback attempt one TTL
	// after an attempt made just before the crash mostly lands before the release, one more
	// acquire per failover; two TTLs after it, one made less than a TTL before the crash
	// lands after the release, whose hint has brought the grant. A hint that is lost after
	// all costs up to a TTL more than without it.
	SteadyHints bool

	// Break disables one rule of DESIGN.md §2. TEST ONLY: the engine's transcripts and the
	// simulator's mutation tests use it to prove that each rule is needed. Never set it
	// elsewhere.
	Break Rule
}

// Resolve returns o with its derived defaults filled in (the zero RenewInterval, Cooldown,
// BackoffMin and BackoffMax) and checks every field; the error wraps spi.ErrInvalidOption. New
// runs the engine with exactly the options Resolve returns, so a driver can read the values
// the engine uses (the renewal interval is also its call timeout) from it.
func (o Options) Resolve() (Options, error) {
	if o.RenewInterval == 0 {
		o.RenewInterval = DefaultRenewInterval(o.TTL)
	}
	if o.Cooldown == 0 {
		o.Cooldown = DefaultCooldown(o.TTL)
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax(o.RenewInterval)
	}
	if o.BackoffMin == 0 {
		o.BackoffMin = DefaultBackoffMinFor(o.BackoffMax)
	}
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: %s", spi.ErrInvalidOption, fmt.Sprintf(format, args...))
	}
	if err := wire.ValidateOwner(o.Owner); err != nil {
		return o, fmt.Errorf("%w: %w", spi.ErrInvalidOption, err)
	}
	// Every comparison is written so that no product or sum can overflow.
	switch {
	case o.TTL <= 0 || o.RenewInterval <= 0:
		return bad("TTL %v and renewal interval %v must be positive", o.TTL, o.RenewInterval)
	case o.TTL > MaxDuration:
		return bad("TTL %v must be at most %v", o.TTL, MaxDuration)
	case o.RenewInterval > o.TTL/3:
		return bad("TTL %v must be at least three renewal intervals (renewal interval %v): one interval plus twice the call timeout", o.TTL, o.RenewInterval)
	case math.IsNaN(o.Drift) || math.IsInf(o.Drift, 0) || !(o.Drift >= 0 && o.Drift < MaxDrift):
		return bad("drift %v must be a finite number in [0, %v)", o.Drift, MaxDrift)
	case o.Margin < 0 || o.Margin >= o.TTL/2:
		return bad("margin %v must be in [0, TTL/2) for the TTL %v (a TTL of twice the margin or less needs a smaller margin: WithMargin)", o.Margin, o.TTL)
	case o.Cooldown < 0 || o.RetryJitter < 0:
		return bad("cooldown %v and retry jitter %v must not be negative", o.Cooldown, o.RetryJitter)
	case o.Cooldown > MaxDuration || o.RetryJitter > MaxDuration:
		return bad("cooldown %v and retry jitter %v must be at most %v", o.Cooldown, o.RetryJitter, MaxDuration)
	case o.BackoffMin <= 0 || o.BackoffMax < o.BackoffMin || o.BackoffMax > MaxDuration:
		return bad("backoff bounds [%v, %v] are invalid: want 0 < min ≤ max ≤ %v", o.BackoffMin, o.BackoffMax, MaxDuration)
	case o.QueueLivesWithSession && !o.Queue:
		return bad("QueueLivesWithSession needs Queue: a backend without a waiter queue has no entries")
	case o.Break > Rule6:
		return bad("unknown rule %d", o.Break)
	}
	return o, nil
}

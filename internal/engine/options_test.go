package engine

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// opts returns Defaults() with owner "a", changed by set.
func opts(set func(o *Options)) Options {
	o := Defaults()
	o.Owner = "a"
	if set != nil {
		set(&o)
	}
	return o
}

// TestOptionsRejectNonFiniteAndOverflow: every float and duration option is finite and in
// range, with no check that an overflowing product or sum can slip past (issue 13, item 1: a
// NaN drift passed `drift < 0 || drift >= 0.5` and made a deadline ~292 years away).
func TestOptionsRejectNonFiniteAndOverflow(t *testing.T) {
	bad := map[string]Options{
		"drift NaN":                 opts(func(o *Options) { o.Drift = math.NaN() }),
		"drift +Inf":                opts(func(o *Options) { o.Drift = math.Inf(1) }),
		"drift -Inf":                opts(func(o *Options) { o.Drift = math.Inf(-1) }),
		"drift 0.5":                 opts(func(o *Options) { o.Drift = 0.5 }),
		"drift negative":            opts(func(o *Options) { o.Drift = -1 }),
		"TTL zero":                  opts(func(o *Options) { o.TTL = 0 }),
		"TTL negative":              opts(func(o *Options) { o.TTL = -1 }),
		"TTL too short to renew":    opts(func(o *Options) { o.TTL, o.Margin = 2, 0 }),
		"TTL above MaxDuration":     opts(func(o *Options) { o.TTL = MaxDuration + 1 }),
		"TTL MaxInt64":              opts(func(o *Options) { o.TTL = math.MaxInt64 }),
		"renewal negative":          opts(func(o *Options) { o.RenewInterval = -1 }),
		"renewal wraps 3×":          opts(func(o *Options) { o.TTL, o.RenewInterval = time.Second, math.MaxInt64/3+1 }),
		"renewal MaxInt64":          opts(func(o *Options) { o.TTL, o.RenewInterval = time.Second, math.MaxInt64 }),
		"renewal above TTL/3":       opts(func(o *Options) { o.TTL, o.RenewInterval = 3*time.Second, time.Second+1 }),
		"margin TTL/2":              opts(func(o *Options) { o.TTL, o.Margin = 3*time.Second, 1500*time.Millisecond }),
		"margin MaxInt64":           opts(func(o *Options) { o.Margin = math.MaxInt64 }),
		"margin negative":           opts(func(o *Options) { o.Margin = -1 }),
		"cooldown MaxInt64":         opts(func(o *Options) { o.Cooldown = math.MaxInt64 }),
		"cooldown negative":         opts(func(o *Options) { o.Cooldown = -1 }),
		"jitter MaxInt64":           opts(func(o *Options) { o.RetryJitter = math.MaxInt64 }),
		"jitter negative":           opts(func(o *Options) { o.RetryJitter = -1 }),
		"backoff max MaxInt64":      opts(func(o *Options) { o.BackoffMax = math.MaxInt64 }),
		"backoff max negative":      opts(func(o *Options) { o.BackoffMax = -1 }),
		"backoff min above max":     opts(func(o *Options) { o.BackoffMin, o.BackoffMax = 2*time.Second, time.Second }),
		"backoff min negative":      opts(func(o *Options) { o.BackoffMin = -1 }),
		"unknown rule":              opts(func(o *Options) { o.Break = Rule6 + 1 }),
		"session queue, no queue":   opts(func(o *Options) { o.QueueLivesWithSession = true }),
		"owner empty":               opts(func(o *Options) { o.Owner = "" }),
		"owner with NUL":            opts(func(o *Options) { o.Owner = "a\x00b" }),
		"owner with ESC":            opts(func(o *Options) { o.Owner = "a\x1b[2J" }),
		"owner not UTF-8":           opts(func(o *Options) { o.Owner = "a\xff" }),
		"owner longer than the max": opts(func(o *Options) { o.Owner = strings.Repeat("o", wire.MaxOwnerLen+1) }),
		"zero Options":              {},
	}
	for what, o := range bad {
		if _, err := New(o); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", what, err)
		}
	}
	for _, owner := range []string{"a\x00b", "a\xff"} {
		if _, err := New(opts(func(o *Options) { o.Owner = owner })); !errors.Is(err, wire.ErrInvalidOwner) {
			t.Errorf("owner %q: New = %v, want it to match wire.ErrInvalidOwner too", owner, err)
		}
	}
	good := map[string]Options{
		"defaults": opts(nil),
		"TTL MaxDuration": opts(func(o *Options) {
			o.TTL, o.Cooldown, o.RetryJitter, o.BackoffMax = MaxDuration, MaxDuration, MaxDuration, MaxDuration
		}),
		"drift, margin and jitter zero":      opts(func(o *Options) { o.Drift, o.Margin, o.RetryJitter = 0, 0, 0 }),
		"drift negative zero":                opts(func(o *Options) { o.Drift = math.Copysign(0, -1) }),
		"owner max length":                   opts(func(o *Options) { o.Owner = strings.Repeat("é", wire.MaxOwnerLen/2) }),
		"backoff min at max":                 opts(func(o *Options) { o.TTL, o.BackoffMin = 3*time.Second, time.Second }),
		"renewal exactly TTL/3":              opts(func(o *Options) { o.TTL, o.RenewInterval = 3*time.Second, time.Second }),
		"short renewal, default backoff min": opts(func(o *Options) { o.TTL, o.Margin = 30*time.Millisecond, 0 }),
		"queue living with sessions":         opts(func(o *Options) { o.Queue, o.QueueLivesWithSession = true, true }),
	}
	for what, o := range good {
		if _, err := New(o); err != nil {
			t.Errorf("%s: New = %v, want it accepted", what, err)
		}
	}
}

// TestOptionsLiteral: New takes Drift, Margin and RetryJitter literally (zero is zero) and
// fills only the derived defaults, with the rules of DESIGN.md §4; Resolve returns exactly what
// the engine runs with, and resolving twice changes nothing.
func TestOptionsLiteral(t *testing.T) {
	for what, c := range map[string]struct{ in, want Options }{
		"defaults": {opts(nil), Options{Owner: "a", TTL: 15 * time.Second, RenewInterval: 5 * time.Second,
			Drift: 0.01, Margin: 50 * time.Millisecond, Cooldown: 15 * time.Second, RetryJitter: 25 * time.Millisecond,
			BackoffMin: 50 * time.Millisecond, BackoffMax: 5 * time.Second}},
		"zeros are literal": {opts(func(o *Options) { o.Drift, o.Margin, o.RetryJitter = 0, 0, 0 }),
			Options{Owner: "a", TTL: 15 * time.Second, RenewInterval: 5 * time.Second, Cooldown: 15 * time.Second,
				BackoffMin: 50 * time.Millisecond, BackoffMax: 5 * time.Second}},
		"derived from the TTL": {opts(func(o *Options) { o.TTL = 30 * time.Millisecond; o.Margin = 0 }),
			Options{Owner: "a", TTL: 30 * time.Millisecond, RenewInterval: 10 * time.Millisecond, Drift: 0.01,
				Cooldown: 30 * time.Millisecond, RetryJitter: 25 * time.Millisecond,
				BackoffMin: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond}},
		"derived from the renewal interval": {opts(func(o *Options) { o.RenewInterval = time.Second }),
			Options{Owner: "a", TTL: 15 * time.Second, RenewInterval: time.Second, Drift: 0.01,
				Margin: 50 * time.Millisecond, Cooldown: 15 * time.Second, RetryJitter: 25 * time.Millisecond,
				BackoffMin: 50 * time.Millisecond, BackoffMax: time.Second}},
		"explicit values kept": {opts(func(o *Options) {
			o.RenewInterval, o.Cooldown, o.BackoffMin, o.BackoffMax = time.Second, time.Minute, time.Millisecond, 2*time.Second
		}), Options{Owner: "a", TTL: 15 * time.Second, RenewInterval: time.Second, Drift: 0.01,
			Margin: 50 * time.Millisecond, Cooldown: time.Minute, RetryJitter: 25 * time.Millisecond,
			BackoffMin: time.Millisecond, BackoffMax: 2 * time.Second}},
	} {
		got, err := c.in.Resolve()
		if err != nil || got != c.want {
			t.Errorf("%s: Resolve = %+v, %v; want %+v", what, got, err, c.want)
			continue
		}
		if again, err := got.Resolve(); err != nil || again != got {
			t.Errorf("%s: resolving twice = %+v, %v; want %+v", what, again, err, got)
		}
		e, err := New(c.in)
		if err != nil || e.Options() != c.want {
			t.Errorf("%s: New runs with %+v (%v), want %+v", what, e.Options(), err, c.want)
		}
	}
}

// TestTimeSumsSaturate: the engine's time sums never wrap around.
func TestTimeSumsSaturate(t *testing.T) {
	for _, c := range []struct{ a, b, want time.Duration }{
		{1, 2, 3},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MinInt64 + 1, math.MinInt64, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
		{-5, 0, -5},
	} {
		if got := add(c.a, c.b); got != c.want {
			t.Errorf("add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestBackoffNeverOverflows: the exponential backoff stays within [0, BackoffMax] for any
// number of failures, whatever the bounds.
func TestBackoffNeverOverflows(t *testing.T) {
	e, err := New(opts(func(o *Options) { o.TTL, o.BackoffMin = MaxDuration, MaxDuration/4 }))
	if err != nil {
		t.Fatal(err)
	}
	e.jitter = 1
	for _, fails := range []int{-1, 0, 1, 2, 3, 30, 31, 62, 63, 64, 1 << 30} {
		if d := e.backoff(fails, nil); d < 0 || d > e.opt.BackoffMax {
			t.Errorf("backoff(%d) = %v, outside [0, %v]", fails, d, e.opt.BackoffMax)
		}
	}
}

// TestJoinPartitionCountIsAnOption: the engine answers a Join with a partition count out of
// [1, wire.MaxPartitions] with ErrInvalidOption, not a name error.
func TestJoinPartitionCountIsAnOption(t *testing.T) {
	e, err := New(opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []int{0, -1, wire.MaxPartitions + 1} {
		f := FutureID(i + 1)
		var got error
		completed := false
		for _, ef := range e.Step(Event{Kind: EvJoin, Name: "g", Partitions: p, Future: f}, 0) {
			if ef.Kind == EfComplete && ef.Future == f {
				got, completed = ef.Err, true
			}
		}
		if !completed || !errors.Is(got, spi.ErrInvalidOption) || errors.Is(got, spi.ErrInvalidName) {
			t.Errorf("join g with %d partitions: completed %v with %v, want ErrInvalidOption", p, completed, got)
		}
	}
}

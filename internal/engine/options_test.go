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

// TestOptionsRejectNonFiniteAndOverflow: every float and duration option is finite and in
// range, with no check that an overflowing product or sum can slip past (issue 13, item 1: a
// NaN drift passed `drift < 0 || drift >= 0.5` and made a deadline ~292 years away).
func TestOptionsRejectNonFiniteAndOverflow(t *testing.T) {
	bad := map[string]Options{
		"drift NaN":                 {Owner: "a", Drift: math.NaN()},
		"drift +Inf":                {Owner: "a", Drift: math.Inf(1)},
		"drift -Inf":                {Owner: "a", Drift: math.Inf(-1)},
		"drift 0.5":                 {Owner: "a", Drift: 0.5},
		"TTL above MaxDuration":     {Owner: "a", TTL: MaxDuration + 1},
		"TTL MaxInt64":              {Owner: "a", TTL: math.MaxInt64},
		"renewal wraps 3×":          {Owner: "a", TTL: time.Second, RenewInterval: math.MaxInt64/3 + 1},
		"renewal MaxInt64":          {Owner: "a", TTL: time.Second, RenewInterval: math.MaxInt64},
		"renewal above TTL/3":       {Owner: "a", TTL: 3 * time.Second, RenewInterval: time.Second + 1},
		"margin TTL/2":              {Owner: "a", TTL: 3 * time.Second, Margin: 1500 * time.Millisecond},
		"margin MaxInt64":           {Owner: "a", Margin: math.MaxInt64},
		"cooldown MaxInt64":         {Owner: "a", Cooldown: math.MaxInt64},
		"cooldown negative":         {Owner: "a", Cooldown: -1},
		"jitter MaxInt64":           {Owner: "a", RetryJitter: math.MaxInt64},
		"backoff max MaxInt64":      {Owner: "a", BackoffMax: math.MaxInt64},
		"backoff min above max":     {Owner: "a", BackoffMin: 2 * time.Second, BackoffMax: time.Second},
		"backoff min negative":      {Owner: "a", BackoffMin: -1},
		"owner empty":               {},
		"owner with NUL":            {Owner: "a\x00b"},
		"owner with ESC":            {Owner: "a\x1b[2J"},
		"owner not UTF-8":           {Owner: "a\xff"},
		"owner longer than the max": {Owner: strings.Repeat("o", wire.MaxOwnerLen+1)},
	}
	for what, o := range bad {
		if _, err := New(o); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", what, err)
		}
	}
	for _, owner := range []string{"a\x00b", "a\xff"} {
		if _, err := New(Options{Owner: owner}); !errors.Is(err, wire.ErrInvalidOwner) {
			t.Errorf("owner %q: New = %v, want it to match wire.ErrInvalidOwner too", owner, err)
		}
	}
	good := map[string]Options{
		"defaults":              {Owner: "a"},
		"TTL MaxDuration":       {Owner: "a", TTL: MaxDuration, Cooldown: MaxDuration, RetryJitter: MaxDuration, BackoffMax: MaxDuration},
		"drift negative":        {Owner: "a", Drift: -1},
		"owner max length":      {Owner: strings.Repeat("é", wire.MaxOwnerLen/2)},
		"backoff min at max":    {Owner: "a", TTL: 3 * time.Second, BackoffMin: time.Second},
		"renewal exactly TTL/3": {Owner: "a", TTL: 3 * time.Second, RenewInterval: time.Second},
	}
	for what, o := range good {
		if _, err := New(o); err != nil {
			t.Errorf("%s: New = %v, want it accepted", what, err)
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
	e, err := New(Options{Owner: "a", TTL: MaxDuration, BackoffMin: MaxDuration / 4})
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
	e, err := New(Options{Owner: "a"})
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

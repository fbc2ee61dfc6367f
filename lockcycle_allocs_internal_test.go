package simba

import (
	"context"
	"testing"
	"time"
)

// maxLockCycleAllocs is what an uncontended Lock and Unlock may allocate on a backend that
// allocates nothing per call: the lock's queue, its term, the Held, the engine's election, the
// two futures and a few closures: 8, and one to spare. Until 2026-12-06 it was 23: each call's
// own timeout context (WithTimeout: its context, its timer and its channel, 4 allocations a
// call), the errors.As target of isAbandoned, asked of every call, success or not, and each
// request's future channel; then 11, with the term's context (context.WithCancelCause, 2
// allocations) and the revocation's RevokedError, now made only when the context is asked for
// (Term.Context).
const maxLockCycleAllocs = 9

// TestLockCycleAllocations counts the heap allocations of an uncontended Lock and Unlock cycle
// on grantAll, whose Acquire and Release allocate nothing: the shell's own, which on a fast
// backend are a visible share of the cycle (BenchmarkLockCycle). Counted, not timed. With
// context.Background both steps and both calls run inline, on the caller's goroutine; with a
// context that can end (one that can only be cancelled, and one with a deadline, as the
// bench harness passes) the calls run there too, and share one context cut by the caller's
// (callerCut): until 2026-12-06 each made its own (context.WithCancel and context.AfterFunc
// on the caller's), 21 and 19 allocations a cycle.
func TestLockCycleAllocations(t *testing.T) {
	for _, kind := range []string{"background", "cancellable", "deadline"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			switch kind {
			case "cancellable":
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			case "deadline":
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			c, err := New(&grantAll{held: map[string]int64{}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			cycle := func() {
				h, err := c.Lock(ctx, "allocs")
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cycle() // the session
			got := testing.AllocsPerRun(500, cycle)
			t.Logf("%.1f allocations per Lock and Unlock", got)
			if got > maxLockCycleAllocs {
				t.Errorf("a Lock and Unlock cycle allocated %.1f times, want at most %d", got, maxLockCycleAllocs)
			}
		})
	}
}

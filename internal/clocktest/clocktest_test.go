package clocktest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// countingClock counts the virtual time advanced.
type countingClock struct{ advanced atomic.Int64 }

func (c *countingClock) Advance(d time.Duration) { c.advanced.Add(int64(d)) }

// TestCloseAdvancesUntilClosed: a close that waits for virtual time returns once enough has
// passed, with its error; one that never returns ends at the timeout with the context's error.
func TestCloseAdvancesUntilClosed(t *testing.T) {
	clock := &countingClock{}
	closed := errors.New("closed")
	err := Close(clock, time.Minute, func(ctx context.Context) error {
		for clock.advanced.Load() < int64(100*time.Millisecond) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(time.Millisecond)
		}
		return closed
	})
	if !errors.Is(err, closed) {
		t.Fatalf("Close = %v, want closeFn's error", err)
	}
	err = Close(clock, 10*time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close of a close that waits for its context = %v, want the deadline", err)
	}
}

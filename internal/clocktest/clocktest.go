// Package clocktest helps tests whose clients run on a virtual clock (simbatest.VirtualClock),
// where nothing timed happens unless the test moves the clock.
package clocktest

import (
	"context"
	"time"
)

// Advancer is a virtual clock that a test moves by hand.
type Advancer interface {
	Advance(d time.Duration)
}

// Close calls closeFn with a context that ends after timeout of real time, and advances clock
// by 10 ms every millisecond of real time until closeFn returns: a close may wait for timers (a
// handover deadline, a retry), which fire only as virtual time passes. It returns closeFn's
// error.
func Close(clock Advancer, timeout time.Duration, closeFn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- closeFn(ctx) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			clock.Advance(10 * time.Millisecond)
		}
	}
}

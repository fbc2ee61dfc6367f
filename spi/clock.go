package spi

import "time"

// Clock is the monotonic clock the client runs on. Now is the time since an arbitrary origin
// (never the wall clock: lease decisions must not move when the wall clock jumps). The shell
// uses the real monotonic clock by default; simbatest offers a virtual one that tests advance.
type Clock interface {
	// Now returns the monotonic time since the clock's origin.
	Now() time.Duration
	// AfterFunc calls f on its own goroutine once d has passed on this clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did so.
	Stop() bool
}

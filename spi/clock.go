package spi

import "time"

// Clock is the monotonic clock the client runs on. Now is the time since an arbitrary origin
// (never the wall clock: lease decisions must not move when the wall clock jumps). The shell
// uses the real monotonic clock by default (SystemClock); simbatest offers a virtual one that
// tests advance. Implementations are safe for concurrent use.
//
// The client measures with it only its own side: when a request was sent, and so the local
// deadline of its session. A backend decides with its server's clock and may ignore any Clock
// it is given (tck.BackendConfig.Clock).
type Clock interface {
	// Now returns the time since the clock's origin. It never decreases.
	Now() time.Duration
	// AfterFunc calls f on its own goroutine once d has passed on this clock (at once, for
	// d ≤ 0), like time.AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started, and reports whether it did so: false means
	// f has started (or finished) or the timer was stopped already, as for time.Timer.Stop.
	Stop() bool
}

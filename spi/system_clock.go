package spi

import "time"

// SystemClock returns the real monotonic clock: Now is the time since the call (Go's monotonic
// reading, so wall-clock jumps never move it) and AfterFunc is time.AfterFunc.
func SystemClock() Clock { return systemClock{origin: time.Now()} }

type systemClock struct{ origin time.Time }

func (c systemClock) Now() time.Duration { return time.Since(c.origin) }

func (c systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

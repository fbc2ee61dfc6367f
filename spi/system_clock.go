package spi

import "time"

// SystemClock returns the real monotonic clock: Now is the time since the call (Go's monotonic
// reading, so wall-clock jumps never move it) and AfterFunc is time.AfterFunc. Go's monotonic
// clock stops while the machine is suspended (on Linux and macOS); the simba client's default
// clock counts that time too, this one does not.
func SystemClock() Clock { return systemClock{origin: time.Now()} }

type systemClock struct{ origin time.Time }

func (c systemClock) Now() time.Duration { return time.Since(c.origin) }

func (c systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

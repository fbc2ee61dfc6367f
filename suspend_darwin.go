//go:build darwin

package simba

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootClock reads CLOCK_MONOTONIC, which on macOS counts the time the system slept
// (mach_continuous_time), unlike Go's monotonic clock (mach_absolute_time).
func bootClock() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

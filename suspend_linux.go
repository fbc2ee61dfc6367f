//go:build linux

package simba

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootClock reads CLOCK_BOOTTIME: the monotonic clock plus the time the system was suspended.
// It is a system call (x/sys/unix does not use the vDSO), which suspendClock makes only when
// the wall clock moved against the monotonic one.
func bootClock() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

//go:build unix

package simba_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far, or false where the
// platform cannot tell.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

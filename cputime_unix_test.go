//go:build unix

package simba_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far and its threads'
// voluntary context switches (a thread that blocked: how often a hand-off between goroutines
// put a thread to sleep and woke another), or false where the platform cannot tell.
func processCPU() (time.Duration, int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw), true
}

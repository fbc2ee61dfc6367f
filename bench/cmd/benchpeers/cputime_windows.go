//go:build windows

package main

import (
	"syscall"
	"time"
)

// cpuTime is this process's CPU time so far (user + kernel), from GetProcessTimes.
func cpuTime() time.Duration {
	self, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	var creation, exit, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(self, &creation, &exit, &kernel, &user); err != nil {
		return 0
	}
	// FILETIMEs of a duration count 100 ns units (Filetime.Nanoseconds reads a date).
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}

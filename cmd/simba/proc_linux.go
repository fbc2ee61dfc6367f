//go:build linux

package main

import (
	"syscall"
	"unsafe"
)

// commandSysProcAttr puts the command of simba run / simba lock in a process group of its own
// (so that stopping it reaches everything it started) and has the kernel SIGKILL it if its
// supervisor dies.
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// monoNow reads CLOCK_MONOTONIC, which every process of the machine shares and which no
// setting of the time moves: simba and the supervisor of its command (runTerm) exchange
// deadlines as readings of it.
func monoNow() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1 // CLOCK_MONOTONIC
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return ts.Nano()
}

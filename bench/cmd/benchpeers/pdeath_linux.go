package main

import "syscall"

// childAttr has the kernel SIGKILL a stale-write holder process when the harness dies: a
// holder the harness left SIGSTOPped would otherwise stay stopped (SIGKILL ends a stopped
// process too).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

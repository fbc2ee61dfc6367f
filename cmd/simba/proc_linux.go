//go:build linux

package main

import "syscall"

// commandSysProcAttr puts the command of simba run / simba lock in a process group of its own
// (so that stopping it reaches everything it started) and has the kernel SIGKILL it if its
// supervisor dies.
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

//go:build unix && !linux

package main

import "syscall"

// commandSysProcAttr puts the command of simba run / simba lock in a process group of its own,
// so that stopping it reaches everything it started. (There is no parent-death signal outside
// Linux: the supervisor's pipe from simba is what notices simba's death.)
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

//go:build unix

package testenv

import "syscall"

// OwnGroup is the SysProcAttr of a private server a test starts: a process group of its own,
// apart from the test's.
func OwnGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

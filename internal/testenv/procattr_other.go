//go:build !unix

package testenv

import "syscall"

// OwnGroup is the SysProcAttr of a private server a test starts: nil where there are no Unix
// process groups (the test's cleanup kills the server all the same).
func OwnGroup() *syscall.SysProcAttr { return nil }

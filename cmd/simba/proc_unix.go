//go:build unix && !linux

package main

import (
	"syscall"
	"time"
)

// commandSysProcAttr puts the command of simba run / simba lock in a process group of its own,
// so that stopping it reaches everything it started. (There is no parent-death signal outside
// Linux: the supervisor's pipe from simba is what notices simba's death.)
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// monoNow reads the wall clock: simba and the supervisor of its command (runTerm) exchange
// deadlines as readings of a clock they share, and the syscall package offers no monotonic
// one outside Linux. A step of the system time while a command runs shifts its deadline by as
// much.
func monoNow() int64 { return time.Now().UnixNano() }

// adoptOrphans does nothing outside Linux: what the command starts in a process group or
// session of its own is beyond the supervisor's reach there.
func adoptOrphans() error { return nil }

// signalDescendants does nothing outside Linux (see adoptOrphans) and returns 0.
func signalDescendants(syscall.Signal, int) int { return 0 }

// reapOrphans does nothing: without a subreaper the supervisor inherits no orphans.
func reapOrphans(int) {}

//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package sql

import "golang.org/x/sys/unix"

// POSIX record locks: owned by the process (its operations on one file take turns before they
// come here, and it keeps the sidecar's one descriptor open).
const (
	setLockWait = unix.F_SETLKW
	setLockSet  = unix.F_SETLK
)

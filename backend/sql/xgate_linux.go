package sql

import "golang.org/x/sys/unix"

// Open file description locks: owned by the descriptor, not the process.
const (
	setLockWait = unix.F_OFD_SETLKW
	setLockSet  = unix.F_OFD_SETLK
)

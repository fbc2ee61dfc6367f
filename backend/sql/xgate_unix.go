//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sql

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// fcntlGate is the cross-process gate's lock on this platform: fcntl byte-range write locks
// on the sidecar file (setLockWait: open file description locks where the system has them, so
// two descriptors of one process exclude each other too).
type fcntlGate struct{ fd int }

// openGate opens (creating it if need be, with the database file's permissions) the sidecar of
// the SQLite file at path and returns its lock, or nil if it cannot be opened for writing.
// The descriptor stays open for the life of the process (one per database file).
func openGate(path string) gateLock {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	perm := uint32(st.Mode().Perm())
	name := path + gateSuffix
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, perm)
	switch {
	case err == nil:
		_ = unix.Fchmod(fd, perm) // undo the umask: whoever may write the database may lock
	case errors.Is(err, unix.EEXIST):
		if fd, err = unix.Open(name, unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
			return nil
		}
	default:
		return nil
	}
	return &fcntlGate{fd: fd}
}

func (g *fcntlGate) lock(off int64) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	for {
		err := unix.FcntlFlock(uintptr(g.fd), setLockWait, &lk)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func (g *fcntlGate) tryLock(off int64) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	for {
		err := unix.FcntlFlock(uintptr(g.fd), setLockSet, &lk)
		if !errors.Is(err, unix.EINTR) {
			return err == nil // EAGAIN or EACCES: held; another error: let lock try and tell
		}
	}
}

func (g *fcntlGate) unlock(off int64) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: off, Len: 1}
	for errors.Is(unix.FcntlFlock(uintptr(g.fd), setLockSet, &lk), unix.EINTR) {
	}
}

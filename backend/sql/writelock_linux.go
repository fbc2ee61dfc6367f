package sql

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// SQLite's lock bytes (os_unix.c): in WAL mode a writer holds the WAL_WRITE_LOCK byte of the
// -shm file; in a rollback-journal mode it holds the RESERVED byte of the database file.
const (
	sqliteWALWriteByte = 120
	sqliteReservedByte = 0x40000001
)

// sqliteWriter returns the id of another process that holds SQLite's write lock on the
// database file at path, or 0 if none does (or it cannot tell). It reads /proc/locks rather
// than asking fcntl(F_GETLK), which would need a descriptor of the file: closing one drops
// every POSIX lock this process's own SQLite connections hold on it.
func sqliteWriter(path string) int {
	if pid := lockHolder(path+"-shm", sqliteWALWriteByte); pid != 0 {
		return pid
	}
	return lockHolder(path, sqliteReservedByte)
}

// lockHolder returns the id of a process other than this one that holds a write lock on
// byte off of the file at path, as /proc/locks lists it; 0 if none.
func lockHolder(path string, off int64) int {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	dev := uint64(st.Dev) //nolint:unconvert // its type differs between platforms
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	me := os.Getpid()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: POSIX  ADVISORY  WRITE 32195 fe:00:9978125 120 120"; a blocked waiter's line
		// has "->" after the number, and is no holder.
		fs := strings.Fields(sc.Text())
		if len(fs) != 8 || fs[3] != "WRITE" || fs[5] != id {
			continue
		}
		pid, err := strconv.Atoi(fs[4])
		if err != nil || pid <= 0 || pid == me {
			continue
		}
		start, err := strconv.ParseInt(fs[6], 10, 64)
		if err != nil || start > off {
			continue
		}
		if fs[7] != "EOF" {
			end, err := strconv.ParseInt(fs[7], 10, 64)
			if err != nil || end < off {
				continue
			}
		}
		return pid
	}
	return 0
}

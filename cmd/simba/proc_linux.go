//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// commandSysProcAttr puts the command of simba run / simba lock in a process group of its own
// (so that stopping it reaches everything it started) and has the kernel SIGKILL it if its
// supervisor dies.
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// monoNow reads CLOCK_MONOTONIC, which every process of the machine shares and which no
// setting of the time moves: simba and the supervisor of its command (runTerm) exchange
// deadlines as readings of it.
func monoNow() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1 // CLOCK_MONOTONIC
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return ts.Nano()
}

// prSetChildSubreaper is prctl(2)'s PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// adoptOrphans makes the supervisor its descendants' subreaper: what the command starts and
// leaves behind — a daemon that left its process group and session (setsid, a double fork) —
// is reparented to the supervisor instead of to init, so that signalDescendants still finds it.
func adoptOrphans() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

// signalDescendants sends sig to every live process descended from this one (found through
// the parent pids of /proc), whatever its session, and returns how many it signalled. A
// process that is gone by then, or a zombie, is skipped, and so is one in process group
// skipGroup (when > 0), which the caller has just signalled as a group: a second SIGTERM would
// run a shell's TERM trap twice.
func signalDescendants(sig syscall.Signal, skipGroup int) int {
	children, state := procTable()
	n := 0
	queue := append([]int(nil), children[os.Getpid()]...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		queue = append(queue, children[pid]...)
		if skipGroup > 0 {
			if pg, err := syscall.Getpgid(pid); err == nil && pg == skipGroup {
				continue
			}
		}
		if state[pid] != 'Z' && syscall.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}

// procTable reads every process of /proc: the children of each parent pid, and each pid's
// state ('Z' for a zombie). A process gone while it is read is left out.
func procTable() (children map[int][]int, state map[int]byte) {
	children, state = map[int][]int{}, map[int]byte{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return children, state
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, st, ok := procStat(pid); ok {
			children[ppid] = append(children[ppid], pid)
			state[pid] = st
		}
	}
	return children, state
}

// procStat reads the parent pid and the state of pid from /proc/<pid>/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses; the state follows the
	// last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

// reapOrphans waits for every zombie child of this process but the command (pid except): as
// the subreaper (adoptOrphans) the supervisor inherits what the command's descendants leave
// behind, and each of them that exits stays a zombie, holding its pid, until its parent
// waits for it. A long `simba run` whose command daemonizes helpers again and again would
// otherwise collect them for as long as it runs. The command itself is left to its Wait.
func reapOrphans(except int) {
	children, state := procTable()
	for _, pid := range children[os.Getpid()] {
		if pid != except && state[pid] == 'Z' {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// Command trial31 is the outside trial of 2026-12-07: a platform team wraps Simba in an internal
// library for 40 services, and checks, from the README, the package docs and the examples alone,
// what such a wrapper must know: many names in one process, cancellation storms and shutdown,
// faults under load, and hostile input.
//
//	trial31 many -b mysql|cluster      2,000 lock names, 50 elections, a 64-partition group in one client
//	trial31 storm -b mysql|cluster     500 timed-out Locks, Close with hundreds in flight, SIGTERM
//	trial31 sigchild …                 the child process storm sends SIGTERM to
//	trial31 faults -b mysql|redis      a private server restarted, a blackhole, latency: safety and liveness
//	trial31 hostile                    names, TTLs, a wrong password, a missing schema
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: trial31 many|storm|faults|hostile [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"many": many, "storm": storm, "sigchild": sigchild, "faults": faults, "hostile": hostile,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
	if err := f(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "trial31:", err)
		os.Exit(1)
	}
}

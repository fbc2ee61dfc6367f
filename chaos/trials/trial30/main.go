// Command trial30 is the outside trial of 2026-12-07: an on-call payments team runs a ledger
// writer as a leader-elected singleton, fencing its appends to a PostgreSQL ledger with fencesql,
// under faults (SIGSTOP for 2×TTL, SIGKILL, a network partition, a server restart), watching it
// through simbaprom, simbahttp and the simba CLI, and feeds it hostile input.
//
//	trial30 run -b pg|redis|etcd   scenarios 1 and 2: 3 writers, the faults, the on-call view, the CLI
//	trial30 writer …               one writer process (started by run)
//	trial30 hostile                scenario 3: names, TTLs, DSNs, metrics, two clients on one name
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: trial30 run|writer|hostile [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{"run": run, "writer": writer, "hostile": hostile}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
	if err := f(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "trial30:", err)
		os.Exit(1)
	}
}

// Command trial29 is the outside trial of 2026-12-07: a job-sharding team runs partitioned workers
// (JoinGroup) in separate processes, each partition's owner writing fenced records through
// fencehttp to a guard verified with fence.LeaseVerifier, with churn, a soak with a server restart
// and hostile input.
//
//	trial29 rebal -b sqlite|pg|mysql|redis|zk|etcd   scenario 1: 4 workers, 64 partitions, join/TERM/KILL/STOP
//	trial29 soak -b …                                scenario 2: 3 workers, 256 partitions, a private server restarted
//	trial29 worker …                                 one worker process (started by rebal and soak)
//	trial29 hostile                                  scenario 3: names, groups and options at their edges
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: trial29 rebal|soak|worker|hostile [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"rebal": rebal, "soak": soak, "worker": worker, "hostile": hostile,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
	if err := f(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "trial29:", err)
		os.Exit(1)
	}
}

// Command trial27 is an outside trial of Simba by a Go team coming from redsync, pglock and
// etcd's concurrency package, on SQLite, MariaDB and ZooKeeper: three worker processes doing
// one workload (an election, 20 goroutines' locks on 30 names, or a 16-partition group) and
// writing to a fenced sink with their tokens, while the runner kills, stops and cuts them off
// (a TCP proxy per worker). Written from the documentation alone.
//
//	trial27 run -backend mariadb|sqlite|zk|zkens -mode elect|lock|group [-faults kill,stop,bh1,...]
//	trial27 worker -dsn … -id w1 -mode … -sink http://…
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: trial27 run|worker [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "worker":
		err = worker(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	case "private":
		err = privateRun(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trial27:", err)
		os.Exit(1)
	}
}

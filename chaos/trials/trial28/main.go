// Command trial28 is the outside trial of 2026-12-07: three teams porting from redsync/redislock,
// client-go's leaderelection and etcd's concurrency / pglock to Simba, with server restarts.
//
//	trial28 redis -fault restart|promote   team 1: job locks on a private Redis without persistence
//	trial28 pg -fault fast,immediate       team 2: an election on a private PostgreSQL, shut down and restarted
//	trial28 group                          team 3: a 128-partition group on SQLite with churn and a kill -9
//	trial28 member …                       one group member process (started by group)
//	trial28 hostile                        the hostile-use checks
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: trial28 redis|pg|group|member|hostile [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"redis": redisTeam, "pg": pgTeam, "group": groupTeam, "member": member, "hostile": hostile,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
	if err := f(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "trial28:", err)
		os.Exit(1)
	}
}

// Command simba is Simba's command-line tool:
//
//	simba demo    [-dsn D] [-workers N] [-ttl T]   leader election across real processes, with
//	                                               SIGKILL and SIGSTOP, and a fenced resource
//	simba migrate -dsn D                           apply the SQL schema (SQL backends)
//	simba status  -dsn D                           list leases, sessions and groups
//	simba run     -dsn D -name N -- CMD [ARGS]     run CMD while this process leads N
//	simba lock    -dsn D -name N -- CMD [ARGS]     run CMD under the lock N
//
// D is a backend DSN: sqlite://path (the default for demo: a file in a temporary directory),
// postgres://…, mysql://…, redis://…, rediss://…, redis+cluster://…, zk://…, zk+tls://….
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: simba <command> [flags]

commands:
  demo      leader election across real processes: SIGKILL and SIGSTOP the leader, watch the
            failover and the fenced resource reject the paused ex-leader's stale write
  migrate   apply the SQL schema to the database of -dsn
  status    list the leases, sessions and groups of -dsn
  run       run a command while this process leads -name; stop it when leadership is lost
  lock      run a command under the lock -name

Run 'simba <command> -h' for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "demo":
		err = demo(ctx, args)
	case "demo-worker":
		err = demoWorker(ctx, args)
	case "migrate":
		err = migrate(ctx, args)
	case "status":
		err = status(ctx, args)
	case "run":
		err = runCommand(ctx, args, false)
	case "lock":
		err = runCommand(ctx, args, true)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "simba: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, "simba:", escapeControls(err.Error()))
		os.Exit(1)
	}
}

// exitCode makes main exit with a given status without printing (the child's status, for run
// and lock).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Command simba is Simba's command-line tool:
//
//	simba demo    [-dsn D] [-workers N] [-ttl T]   leader election across real processes, with
//	                                               SIGKILL and SIGSTOP, and a fenced resource
//	simba migrate -dsn D                           apply the SQL schema (SQL backends)
//	simba status  -dsn D [-prefix P] [-all]        list leases, sessions and groups
//	simba run     -dsn D -name N -- CMD [ARGS]     run CMD while this process leads N
//	simba lock    -dsn D -name N -- CMD [ARGS]     run CMD under the lock N
//
// D is a backend DSN: sqlite://path (the default for demo: a file in a temporary directory),
// postgres://…, mysql://…, redis://…, rediss://…, redis+cluster://…, redis+sentinel://…,
// zk://…, zk+tls://…, etcd://…, etcd+tls://….
//
// run and lock start CMD with $SIMBA_TOKEN (the term's fencing token) and $SIMBA_LEASE (the
// lease name) in its environment, in a process group of its own. CMD never outlives the term
// or the simba process: when the term ends, or simba is stopped by SIGINT or SIGTERM, the
// group gets SIGTERM and, after -grace (cut to the term's remaining validity), SIGKILL; when
// simba itself dies (even by SIGKILL) or is paused past the term's validity, a small
// supervisor process between simba and CMD does the same. The exit status is CMD's.
//
// The SQL backends need Simba's tables, which migrate creates or upgrades. run and lock
// create them themselves in a new SQLite database (a file that does not exist yet, or one
// without any table); on any other database that lacks them or has an old schema they fail,
// saying to run simba migrate.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// dsnForms lists every DSN form the CLI takes; each command's help includes it.
const dsnForms = `DSN forms (-dsn, or $SIMBA_DSN):
  sqlite:///path/to/file.db                       SQLite file (created if missing)
  postgres://user:pass@host:5432/db               PostgreSQL (postgresql:// too)
  mysql://user:pass@host:3306/db                  MySQL or MariaDB
  redis://:pass@host:6379/0                       Redis standalone
  rediss://:pass@host:6380/0                      Redis standalone over TLS
  redis+cluster://:pass@host1:7001,host2:7002     Redis Cluster (rediss+cluster:// for TLS)
  redis+sentinel://:pass@s1:26379,s2/mymaster     Redis behind Sentinel (rediss+sentinel://)
  zk://user:pass@host1:2181,host2:2181/chroot     ZooKeeper ensemble (?tickTime=2s: zoo.cfg's tickTime)
  zk+tls://user:pass@host:2281/chroot             ZooKeeper over TLS (secureClientPort)
  etcd://user:pass@host1:2379,host2:2379/prefix   etcd cluster (key prefix; /simba if none)
  etcd+tls://host:2379/prefix?ca=ca.pem           etcd over TLS (cert=, key= for client certs)
The SQL backends need Simba's tables: simba migrate creates or upgrades them (run and lock
create them themselves in a new SQLite database only).
`

const usage = `usage: simba <command> [flags]

commands:
  demo      leader election across real processes: SIGKILL and SIGSTOP the leader, watch the
            failover and the fenced resource reject the paused ex-leader's stale write
  migrate   apply the SQL schema to the database of -dsn
  status    list the leases, sessions and groups of -dsn (-prefix P, -all)
  run       run a command while this process leads -name; stop it (SIGTERM, then SIGKILL)
            when leadership is lost
  lock      run a command under the lock -name; stop it the same way if the lock is lost

run and lock give the command $SIMBA_TOKEN (the fencing token) and $SIMBA_LEASE (the lease
name). The command never outlives simba: if simba dies, even by SIGKILL, its command is
stopped at once, and never later than the term's validity.

` + dsnForms + `
Run 'simba <command> -h' for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if os.Args[1] == supervisorCommand {
		// The supervisor between `simba run` and its command: it handles its signals itself.
		os.Exit(supervise(os.Args[2:]))
	}
	routeDriverLogs()
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
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is the line main prints for err: "simba: " and the message, with control
// characters escaped. The library's errors carry a "simba: " prefix of their own, at the start
// and after each wrapping "...: "; errorLine drops those, so the line has exactly one.
func errorLine(err error) string {
	msg := err.Error()
	for {
		trimmed := strings.TrimPrefix(msg, "simba: ")
		trimmed = strings.ReplaceAll(trimmed, ": simba: ", ": ")
		if trimmed == msg {
			break
		}
		msg = trimmed
	}
	return "simba: " + escapeControls(msg)
}

// exitCode makes main exit with a given status without printing (the child's status, for run
// and lock; 0 after -h; 2 after a flag error, which the flag's parser has printed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

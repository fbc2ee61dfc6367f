// Command simba is Simba's command-line tool:
//
//	simba demo    [-dsn D] [-workers N] [-ttl T]   leader election across real processes, with
//	                                               SIGKILL and SIGSTOP, and a fenced resource
//	simba migrate -dsn D                           apply the SQL schema (SQL backends; others:
//	                                               connect and open a session, as a check)
//	simba status  -dsn D [-name N | -prefix P] [-all] [-json]
//	                                               list leases, sessions and groups (-name N:
//	                                               one election, lock or group; -json: one
//	                                               JSON document)
//	simba run     -dsn D -name N [-wait W] -- CMD [ARGS]
//	                                               run CMD while this process leads N
//	simba lock    -dsn D -name N [-wait W] -- CMD [ARGS]
//	                                               run CMD under the lock N
//
// run and lock wait for N without limit, unless -wait W bounds the wait: not led or locked
// within W, simba gives up (leaving no waiter behind) and exits 75 without running CMD, saying
// on stderr who holds N if it can read it; -wait 0 makes one attempt, one acquire that never
// queues (TryLock's), for run as for lock, so N cron hosts firing simba lock -wait 0 run the
// job once.
//
// D is a backend DSN: sqlite://path (the default for demo: a file in a temporary directory),
// postgres://…, mysql://…, redis://…, rediss://…, redis+cluster://…, redis+sentinel://…,
// zk://…, zk+tls://…, etcd://…, etcd+tls://….
//
// run and lock start CMD with $SIMBA_TOKEN (the term's fencing token) and $SIMBA_LEASE (the
// lease name) in its environment, in a process group of its own. CMD never outlives the term
// or the simba process: when the term ends, or simba is stopped by SIGINT or SIGTERM, the
// group gets SIGTERM and, after -grace (cut to the term's remaining validity), SIGKILL; when
// simba itself dies (even by SIGKILL), a small supervisor process between simba and CMD does
// the same, and when simba is paused (SIGSTOP, a frozen VM) the supervisor makes the early stop
// below itself, from the last validity simba told it. A term lost to an outage ends only
// once its validity has run out, too late for a SIGTERM: so while renewals fail, the group
// gets SIGTERM when the term's remaining validity falls to the early stop, -grace capped at a
// quarter of the TTL (and below what one failed keep-alive leaves, TTL/3 less 100 ms; none
// under a TTL of 300 ms or a -grace of 0), and SIGKILL when the validity runs out, with one
// stderr line saying why (the last backend error since the term was last renewed, or "no
// keep-alive reply"). One failed keep-alive never gets there; renewals that recover
// before it change nothing. CMD stopped early is stopped for good, even if renewals recover
// meanwhile: simba releases the lease if it still holds it and exits 1, as for a term lost.
// On Linux the supervisor is the
// subreaper of what CMD starts and signals what left the group (setsid, a daemon's double
// fork) with it. The exit status is CMD's.
//
// The above holds on Unix (Linux, macOS, the BSDs). Outside Unix (Windows) there are no
// signals to send and no process groups: run and lock start CMD alone, without a supervisor,
// and kill it (no SIGTERM first, no -grace, no early stop) when the term ends or simba is
// interrupted; a simba that is itself killed leaves CMD running. demo, which sends SIGKILL
// and SIGSTOP to its workers, fails there saying it needs a Unix system (exit status 1).
//
// The SQL backends need Simba's tables, which migrate creates or upgrades. run and lock
// create them themselves in a new SQLite database (a file that does not exist yet, or one
// without any table); on any other database that lacks them or has an old schema they fail,
// saying to run simba migrate. status never creates a file: it fails on a missing SQLite file,
// and does not create the gate file (<file>-simba-gate) beside an existing one; nor does it
// change one: no schema, and the journal mode stays as it is. The commands that write put a
// SQLite file in WAL mode, with a warning if it held tables in another mode
// (?_pragma=journal_mode(delete) in the DSN keeps that mode).
//
// $SIMBA_LOG_LEVEL sets what simba logs: debug (also the database drivers' own lines, such
// as each failed dial while a server is down, which simba otherwise keeps from stderr), info
// (the default), warn or error.
//
// Exit status:
//
//	0       success; for run and lock: CMD exited 0
//	1       an error: the backend refusing (credentials, printed as one line beginning
//	        "simba: access denied: " by every command; no schema: run simba migrate), or
//	        unreachable (migrate, status, demo: run and lock wait for it, retrying), a
//	        missing SQLite file (status), or, for run and lock, the term lost or given up to
//	        failing renewals (CMD was stopped)
//	2       a usage error: an unknown command or flag, an argument to migrate, status or
//	        demo (which take flags only), a missing -dsn, -name or CMD, a bad flag value (a
//	        malformed DSN, a -ttl out of range (for run and lock, under 500ms), a negative
//	        -grace, a bad name, or one the backend refuses, such as etcd's -ttl under 1s), a
//	        bad $SIMBA_LOG_LEVEL
//	3       status -name N: nothing is named N (no lease record N or N.<n>, no group N with
//	        live members; a free lease counts where the backend keeps its record: SQL and
//	        Redis do, etcd and ZooKeeper do not); status -prefix P: no such name starts with
//	        P; with -json the document ("found": false) still goes to stdout
//	75      run and lock with -wait W: N was not taken within W (held by another); CMD did
//	        not run (75 is sysexits.h's EX_TEMPFAIL, which FreeBSD's lockf(1) exits with on a
//	        held lock; flock(1)'s 1 would read as simba's errors, timeout(1)'s 124 as a
//	        command cut short)
//	127     run and lock: CMD could not be started (not found, not executable); simba
//	        prints why and releases the term at once
//	128+n   simba stopped by signal n (130 SIGINT, 143 SIGTERM) before CMD started (while
//	        waiting for the lock or to lead) or while migrate, status or demo ran
//	other   run and lock: CMD's own status (128+n if CMD died of signal n: after a SIGINT or
//	        SIGTERM to simba while CMD runs, CMD gets SIGTERM, so often 143)
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/printable"
)

// dsnForms lists every DSN form the CLI takes; each command's help includes it.
const dsnForms = `DSN forms (-dsn, or $SIMBA_DSN):
  sqlite:///path/to/file.db                       SQLite file (created if missing; not by status; sqlite3:// too)
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
Redis DSNs take ?strict_durability=true: refuse (exit 1) a server that could lose a held lease's
record (appendonly no, or an allkeys-* maxmemory-policy) instead of only warning of it.
A ZooKeeper DSN without user:pass leaves Simba's nodes open to every client (world:anyone) and
warns so at each run or lock; ?acl=open says the open ACL is intended and keeps that warning for
SIMBA_LOG_LEVEL=debug (a job started from cron every minute then logs nothing about it).
The SQL backends need Simba's tables: simba migrate creates or upgrades them (run and lock
create them themselves in a new SQLite database only).
`

const usage = `usage: simba <command> [flags]

commands:
  demo      leader election across real processes: SIGKILL and SIGSTOP the leader, watch the
            failover and the fenced resource reject the paused ex-leader's stale write
  migrate   apply the SQL schema to the database of -dsn (Redis, ZooKeeper, etcd: no schema;
            connect and open a session, to check the DSN's server and credentials)
  status    list the leases, sessions and groups of -dsn (-name N: one election, lock or
            group with its partitions; -prefix P; -all)
  run       run a command while this process leads -name; stop it (SIGTERM, then SIGKILL)
            when leadership is lost (-wait W: give up, exit 75, if not leading within W)
  lock      run a command under the lock -name; stop it the same way if the lock is lost
            (-wait W: give up, exit 75, if not taken within W; -wait 0: try once)

run and lock give the command $SIMBA_TOKEN (the fencing token) and $SIMBA_LEASE (the lease
name). The command never outlives simba: if simba dies, even by SIGKILL, its command is
stopped at once, and never later than the term's validity. (On Unix; on Windows the command
is killed when the term ends or simba is interrupted, and outlives a simba that is killed.)

` + dsnForms + `
` + exitStatuses + `
$SIMBA_LOG_LEVEL sets what simba logs: debug (also the database drivers' own lines, such as
each failed dial while a server is down), info (the default), warn or error.

Run 'simba <command> -h' for the flags of a command.
`

// exitStatuses is the table of simba's exit statuses, in the tool's help and in run's and
// lock's (the README's CLI section has the same table).
const exitStatuses = `exit status:
  0      success; run and lock: CMD exited 0
  1      an error: the backend refusing (credentials, said as "access denied"; no schema:
         run simba migrate), or unreachable (migrate, status, demo: run and lock wait for
         it, retrying), a missing SQLite file (status); run and lock: the term was lost, or
         given up to failing renewals (CMD stopped)
  2      a usage error: an unknown command or flag; an argument to migrate, status or demo
         (flags only); a missing -dsn, -name or CMD; a bad flag value (a malformed DSN, -ttl
         out of range, a negative -grace, an invalid name, or one the backend refuses, such as
         etcd's -ttl under 1s); a bad $SIMBA_LOG_LEVEL
  3      status -name N: nothing is named N (no lease record N or N.<n>, no group N with
         live members; a free lease counts where the backend keeps its record: SQL and
         Redis do, etcd and ZooKeeper do not); status -prefix P: no such name starts with
         P; with -json the document ("found": false) still goes to stdout
  75     run and lock -wait W: not taken within W (held by another, named on stderr); CMD
         did not run
  127    run and lock: CMD could not be started (not found, not executable)
  128+n  simba stopped by signal n (130 SIGINT, 143 SIGTERM) before CMD started (waiting for
         the lock or to lead), or during migrate, status or demo
  other  run and lock: CMD's own status (128+n if CMD died of signal n; a SIGINT or SIGTERM
         to simba while CMD runs sends CMD SIGTERM, often giving 143)
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
	if err := setLogLevel(os.Getenv(logLevelEnv)); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(2)
	}
	routeDriverLogs()
	ctx, stop := signalContext()
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
	var sig signalCause
	if err == nil && errors.As(context.Cause(ctx), &sig) {
		// A command that ended well after all, but cut short: 128+n, as a shell reports it.
		os.Exit(128 + int(sig.sig))
	}
	if err != nil {
		var code exitCode
		if !errors.As(err, &code) {
			fmt.Fprintln(os.Stderr, errorLine(err))
		}
		os.Exit(exitStatusOf(ctx, err))
	}
}

// signalContext returns a context that SIGINT or SIGTERM cancels with a signalCause naming the
// signal (signal.NotifyContext's does not say which), and the function that stops relaying
// them.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			sig, _ := s.(syscall.Signal)
			cancel(signalCause{sig})
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel(context.Canceled)
		})
	}
}

// signalCause is the cause of main's context once simba gets SIGINT or SIGTERM.
type signalCause struct{ sig syscall.Signal }

func (c signalCause) Error() string {
	switch c.sig {
	case syscall.SIGINT:
		return "stopped by SIGINT"
	case syscall.SIGTERM:
		return "stopped by SIGTERM"
	}
	return "stopped by signal " + strconv.Itoa(int(c.sig))
}

// exitStatusOf is the status simba exits with after a command's error err (see the table in
// the package doc and exitStatuses): CMD's own for an exitCode, 2 for a usage error, 3 for
// status -name N or -prefix P finding nothing, 128+n
// after signal n stopped simba, 1 otherwise.
func exitStatusOf(ctx context.Context, err error) int {
	var (
		code     exitCode
		usage    usageError
		notFound notFoundError
		sig      signalCause
	)
	switch {
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		return 2
	case errors.As(err, &notFound):
		return 3
	case errors.As(err, &notAcquiredError{}):
		return exitNotAcquired
	case errors.As(err, &sig), errors.As(context.Cause(ctx), &sig):
		return 128 + int(sig.sig)
	}
	return 1
}

// usageError is a mistake in the command line (a missing -dsn, -name or CMD, a bad flag value,
// a malformed DSN): main prints it and exits 2, as for an unknown flag.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// badUsage returns a usageError matching simba.ErrInvalidOption that says what format says.
func badUsage(format string, args ...any) error {
	return usageError{fmt.Errorf("%w: %s", simba.ErrInvalidOption, fmt.Sprintf(format, args...))}
}

// errorLine is the line main prints for err: "simba: " and the message, with control
// characters escaped. The library's errors carry a "simba: " prefix of their own, at the start
// and after each wrapping "...: "; errorLine drops those, so the line has exactly one. A
// message of several lines (pgx lists each connect attempt on a line of its own, after "\n\t";
// errors.Join puts "\n" between errors) is joined with "; ". An error matching
// simba.ErrAccessDenied begins "simba: access denied: ", whichever command and backend.
func errorLine(err error) string {
	msg := strings.NewReplacer(":\n\t", ": ", "\n\t", "; ", "\n", "; ").Replace(err.Error())
	for {
		trimmed := strings.TrimPrefix(msg, "simba: ")
		trimmed = strings.ReplaceAll(trimmed, ": simba: ", ": ")
		if trimmed == msg {
			break
		}
		msg = trimmed
	}
	if errors.Is(err, simba.ErrAccessDenied) && !strings.HasPrefix(msg, "access denied: ") {
		// Refused credentials or privileges read the same from every command and backend:
		// "simba: access denied: " first (PostgreSQL's and MySQL's errors begin so, Redis's
		// "redis: authentication failed", and the demo's "migrating ...: access denied: ..."
		// did not), said once.
		msg = "access denied: " + strings.Replace(msg, ": access denied: ", ": ", 1)
	}
	return "simba: " + printable.Escape(msg)
}

// exitCode makes main exit with a given status without printing (the child's status, for run
// and lock; 0 after -h; 2 after a flag error, which the flag's parser has printed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/printable"
	"github.com/simba-go/simba/internal/sqlitebusy"
	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"
	sqlbackend "github.com/simba-go/simba/backend/sql"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

// supervisorCommand is the hidden command simba run and simba lock start between themselves
// and the user's command (see runTerm).
const supervisorCommand = "run-supervisor"

// synopses holds each command's usage line and description for its -h.
var synopses = map[string]string{
	"demo": `usage: simba demo [-dsn D] [-workers N] [-ttl T]

Leader election across real worker processes: the leader is killed with SIGKILL, the next one
paused with SIGSTOP past its TTL, and a fenced resource rejects the paused ex-leader's write.
`,
	"migrate": `usage: simba migrate -dsn D

Apply the embedded SQL schema to the database of D: create Simba's tables, or upgrade an old
schema (other backends need none), and say which migrations it applied ("applied migrations
1–3 to D") or that the schema was already up to date. A SQLite file that does not exist is
created (its directory must exist). run and lock apply the schema themselves only to a new
SQLite database.
`,
	"status": `usage: simba status -dsn D [-name N | -prefix P] [-all] [-json]

List the leases (name, token, holder, owner, time left), the live sessions and the groups with
live members D knows. Free leases are hidden unless -all is given (a free lease keeps its row
or hash for its token, so a backend accumulates them). -name N shows one election, lock or
group: the lease N, the group N with its partitions' leases N.0, N.1, … (a partition's lease is
its group's name, a dot and its number), and the sessions holding them or in the group; not
N-2, nor N.eu (a name of its own). -prefix P keeps every lease and group whose name starts
with P (ledger also shows ledger-2), and the sessions holding or in them. REMAINING is "unknown"
where the backend cannot tell: ZooKeeper tells a client nothing of another client's sessions,
which live as long as their connection to the ensemble (plus the session timeout once it is
cut). A lease record Simba cannot read (forged or damaged: on Redis a token that is not a
plain decimal, a holder with no readable expiry, an expiry beyond any session's TTL) is
listed, never as free, with REMAINING "unreadable record: <why>". A column with nothing to
show has "-" (a free lease's HOLDER, OWNER and REMAINING), so a row splits on spaces. status only reads and creates no file: on a SQLite file that does not exist it fails
(exit status 1) instead of creating it, and beside one that exists it does not create the gate
file (<file>-simba-gate) that the commands that write use; it changes nothing in the file
either (neither its schema nor its journal mode, which the commands that write set to WAL).

-json prints one JSON document instead of the tables, in the dialect of simbahttp's /status
(its "backend" snapshot): {"leases": [{"name", "session", "owner", "token", "remaining_ms",
"unreadable"}], "sessions": [{"id", "owner", "remaining_ms", "unreadable"}], "groups":
[{"name", "members"}], "free_leases"}, with "name" and "found" for -name and "prefix" and
"found" for -prefix. remaining_ms is -1 where REMAINING says "unknown" or "unreadable record" (whose
reason is in "unreadable", present only then), 0 for a free lease; a free lease's "session"
and "owner" are "". Names and owners are given as they are (JSON escapes them; the tables
escape control and format characters). Errors go to stderr, with the exit statuses below.

-name N that matches nothing (no lease record N or N.<n>, no group N with live members) exits 3
with "no lease, lock or group named N" on stderr (with -json, after the document with "found":
false). A free lease keeps its record on SQL and Redis, so is found there; etcd and ZooKeeper
keep none, so a name no one holds there exits 3. N must be a name lock and run take (exit 2).
-prefix P that matches nothing (no lease record, no group with live members whose name starts
with P) exits 3 too, with "no lease, lock or group whose name starts with P" on stderr, as grep
exits 1 when it selects no line (with -json, after the document with "found": false).

` + exitStatuses,
	"run": `usage: simba run -dsn D -name N [-ttl T] [-grace G] [-wait W] -- CMD [ARGS]

Stand for election as leader of N and run CMD while leading, like etcdctl elect or consul
lock: one CMD at a time across every simba run of N. Without -wait simba waits to lead as long
as it takes, so every simba run of N runs CMD in its turn: four hosts firing simba run -name
nightly from cron run the job four times, one after another. -wait W bounds the wait: a
candidate that has not led within W stops standing (it leaves N's waiter queue) and exits 75
without running CMD, naming the leader on stderr if it can read it. -wait 0 makes one attempt
and never queues: one acquire of the lease N, as simba lock -wait 0 makes (an election's first
attempt would queue), so N cron hosts firing simba run -wait 0 run the job once.
` + waitDetails + commandDetails,
	"lock": `usage: simba lock -dsn D -name N [-ttl T] [-grace G] [-wait W] -- CMD [ARGS]

Take the lock N, run CMD and release the lock when CMD exits, like flock(1), etcdctl lock or
consul lock. Without -wait simba waits for the lock as long as it takes, so every simba lock of
N runs CMD in its turn. -wait W bounds the wait, as flock -w does: a lock not taken within W is
given up (simba leaves N's waiter queue) and simba exits 75 without running CMD, naming the
holder on stderr if it can read it. -wait 0 tries once, as flock -n: one acquire, never queued
(it takes no place ahead of, or behind, the waiters), so N cron hosts firing simba lock
-wait 0 -name nightly run the job once. Unlike timeout(1) around simba, -wait never bounds
CMD's run.
` + waitDetails + commandDetails,
	"demo-worker": "usage: simba demo-worker (started by simba demo)\n",
}

// waitDetails is the part of run's and lock's help about -wait's exit status.
const waitDetails = `
Exit status 75 (EX_TEMPFAIL, "try again later", as FreeBSD's lockf(1) exits on a held lock)
means that -wait ran out: CMD did not run, and simba left no waiter and no lease behind. A
SIGINT or SIGTERM during the wait still exits 128+n; a backend that cannot be reached or
refuses is an error (exit 1), not 75, with -wait 0 too.
`

// commandDetails is the part of run's and lock's help about the command.
const commandDetails = `
CMD's environment has SIMBA_TOKEN, the term's fencing token (greater than every token of N
before it: pass it to what CMD writes to and have that reject lower ones), and SIMBA_LEASE,
the lease name N.

CMD runs in a process group of its own (so it cannot read from the terminal); neither CMD
nor what it starts outlives the term or simba itself:
  - when the term ends (leadership or the lock lost) or simba gets SIGINT or SIGTERM, the
    group gets SIGTERM, then SIGKILL after -grace or when the term's validity runs out,
    whichever comes first;
  - while renewals fail (the backend unreachable), the group gets SIGTERM once the term's
    remaining validity is down to the early stop, and SIGKILL when the validity runs out, so
    that a cleanup trap for SIGTERM runs inside the term (a term lost to an outage ends only
    once its validity has run out, too late for it). The early stop is -grace, but at most
    TTL/4 and under TTL/3 - 100ms (what one keep-alive failing at its timeout leaves): one
    failed keep-alive never stops CMD, renewals that recover before it change nothing, and
    -grace 0 or a -ttl of 300ms or less means none. simba says why in one stderr line (the
    last backend error since the term was last renewed, or "no keep-alive reply"); CMD
    stopped early is stopped for good, even if renewals recover meanwhile: simba releases N
    if it still holds it and exits 1, as after losing the term;
  - if simba dies, even by SIGKILL, a supervisor process does the same at once; if simba is
    paused (SIGSTOP, a frozen VM, a long stall), the supervisor makes the early stop itself:
    simba silent for two of its ticks (TTL/10) and the last validity it told down to the
    early stop, the group gets SIGTERM, and SIGKILL when that validity runs out, with a
    stderr line saying so; the resumed simba exits 1 as after its own early stop (with no
    early stop, the SIGKILL comes when the validity runs out, with that line) (on Linux CMD
    also gets SIGKILL if the supervisor dies);
  - what CMD leaves running in its group when it exits is killed;
  - on Linux, so is what CMD started outside its group (setsid, a daemon's double fork): the
    supervisor is its subreaper and signals it with the group. Elsewhere, and for what
    is not CMD's descendant (systemd-run, docker run -d), only the group is reached.
simba exits with CMD's status (128+n after signal n), or 127 if CMD could not be started;
after losing the term it prints why and exits 1; stopped by SIGINT or SIGTERM before CMD started, it exits 128+n (130, 143).
If its session cannot be closed at exit (the backend refuses, or the close times out), simba
prints that on stderr and keeps the exit status: the session, and a lease it still held, lapse
at the TTL, so the next holder of N may wait up to that long.

On a SQL backend, Simba's tables must exist: simba migrate -dsn D creates them. A new SQLite
database (a file that does not exist yet, or one without any table) is the exception: simba
creates the tables in it first. On any other database without them, or with an old schema,
simba exits 1 saying to run simba migrate (as it does on any other permanent backend error,
such as bad credentials, met before CMD starts: at once, after the first refused attempt; it
waits and retries only through an outage).

` + exitStatuses

// parseFlags parses args with fs. After -h it prints the command's help to stdout and returns
// exitCode(0). After an unknown flag it prints the problem and the help, which lists the flags
// the command has, to stderr; after a bad value of a flag it has (`-ttl x`, a -name without its
// argument) one line with the problem and one pointing to -h, as for the values the commands
// check themselves (`-ttl 0`): the whole help, some 75 lines, said nothing more about the value
// and filled a cron job's mail. Both return exitCode(2).
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if err == nil {
		return nil
	}
	help := func(out io.Writer) {
		fmt.Fprint(out, synopses[fs.Name()])
		fmt.Fprintln(out, "\nflags:")
		fs.SetOutput(out)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if fs.Lookup("dsn") != nil {
			fmt.Fprint(out, "\n"+dsnForms)
		}
	}
	if errors.Is(err, flag.ErrHelp) {
		help(os.Stdout)
		return exitCode(0)
	}
	// The flag package's errors, as its own help text: an unknown flag is "flag provided but
	// not defined: -x"; anything else concerns a flag the command has.
	if !strings.HasPrefix(err.Error(), "flag provided but not defined") {
		fmt.Fprintf(os.Stderr, "simba: %s: %s\nrun 'simba %s -h' for help\n", fs.Name(), printable.Escape(err.Error()), fs.Name())
		return exitCode(2)
	}
	fmt.Fprintf(os.Stderr, "simba: %s: %s\n\n", fs.Name(), printable.Escape(err.Error()))
	help(os.Stderr)
	return exitCode(2)
}

// parseFlagsOnly is parseFlags for a command that takes flags only (migrate, status, demo):
// it refuses the arguments left after the flags, since the flag package stops at the first
// argument that is not a flag, so `simba status extra -dsn D` read no -dsn and `simba migrate
// -dsn D extra` dropped extra without a word. It names the first one, and says so when flags
// follow it.
func parseFlagsOnly(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil || fs.NArg() == 0 {
		return err
	}
	why := ""
	for _, a := range fs.Args()[1:] {
		if strings.HasPrefix(a, "-") {
			why = ", and the flags after it were not read: flags come first"
			break
		}
	}
	return badUsage("unexpected argument %q: simba %s takes flags only%s", fs.Arg(0), fs.Name(), why)
}

// dsnFlags returns the flag set of the command name with its -dsn flag, which holds
// $SIMBA_DSN until -dsn is given.
func dsnFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dsn := os.Getenv("SIMBA_DSN")
	fs.Var(dsnValue{&dsn}, "dsn", "backend `DSN` (default $SIMBA_DSN)")
	return fs, &dsn
}

// dsnValue is the -dsn flag. Its String is always empty, so the help never prints its value as
// the default: the flag package printed $SIMBA_DSN there, password included, in every -h and
// in the help a bad flag puts on stderr (a cron job's mail, a unit's journal).
type dsnValue struct{ dsn *string }

// String returns "": the DSN is never shown (see dsnValue).
func (v dsnValue) String() string { return "" }

// Set sets the DSN.
func (v dsnValue) Set(s string) error {
	*v.dsn = s
	return nil
}

func needDSN(dsn string) error {
	if dsn == "" {
		return badUsage("-dsn (or $SIMBA_DSN) is required")
	}
	return nil
}

// openDSN is openBackend for a command: without options Open does no I/O, so an error matching
// simba.ErrInvalidOption is a malformed DSN, a usage error.
func openDSN(ctx context.Context, dsn string) (spi.Backend, error) {
	b, err := openBackend(ctx, dsn)
	if errors.Is(err, simba.ErrInvalidOption) {
		return nil, usageError{err}
	}
	return b, err
}

// checkTTL checks a -ttl flag, in the CLI's terms: the client keeps a safety margin
// (simba.DefaultMargin) on its deadlines that must be under half the TTL, and no TTL is over
// simba.MaxTTL. (simba.New says the same in the library's terms: "margin ... for the TTL".)
// For run and lock (supervised: minCommandTTL, 0 for demo) it must also be at least
// minCommandTTL.
func checkTTL(ttl time.Duration, supervised bool) error {
	switch {
	case supervised && ttl < minCommandTTL:
		return badUsage("-ttl %v is too short: run and lock need at least %v (the term's validity, down to about two thirds of the TTL less %v between renewals, must cover starting CMD under its supervisor and telling it the validity; shorter TTLs failed on a loaded host: the term ended before CMD could start, or CMD was killed)",
			ttl, minCommandTTL, simba.DefaultMargin)
	case ttl <= 2*simba.DefaultMargin:
		return badUsage("-ttl %v is too short: it must be longer than %v (twice the %v safety margin of the client's deadlines)",
			ttl, 2*simba.DefaultMargin, simba.DefaultMargin)
	case ttl > simba.MaxTTL:
		return badUsage("-ttl %v is too long: the maximum is %v", ttl, simba.MaxTTL)
	}
	return nil
}

// minCommandTTL is the shortest -ttl of run and lock. The library takes any TTL over twice its
// margin (100 ms), but run and lock start CMD under a supervisor process that must start, and
// hear the term's validity from simba (every TTL/10, at least 20 ms), within that validity: on
// a loaded 2-CPU host `simba lock -ttl T -- sh -c 'sleep 0.3'` failed 10 of 15 runs at 120ms,
// 8 of 15 at 150ms, 6 of 15 at 200ms, 6 of 35 at 300ms (exit 1 "the term ended before its
// command could start", or 137 without a word: the supervisor's deadline passed before
// simba's next message), and none of 35 at 500ms nor of 20 at 1s. A TTL of 300 ms or less
// also leaves no early stop (earlyStopAt).
const minCommandTTL = 500 * time.Millisecond

// ttlRange is the range of -ttl, for the flags' help (commandTTLRange: run and lock).
var (
	ttlRange        = fmt.Sprintf("more than %v, at most %v", 2*simba.DefaultMargin, simba.MaxTTL)
	commandTTLRange = fmt.Sprintf("at least %v, at most %v", minCommandTTL, simba.MaxTTL)
)

// sqliteFile returns the file of a sqlite:// DSN, and "" for a DSN of another scheme (or a
// malformed one, which opening it reports).
func sqliteFile(dsn string) string {
	scheme, _, _ := strings.Cut(dsn, "://")
	if scheme = strings.ToLower(scheme); scheme != "sqlite" && scheme != "sqlite3" {
		return ""
	}
	name, err := sqlbackend.SQLiteDSN(dsn)
	if err != nil {
		return ""
	}
	file, _, _ := strings.Cut(strings.TrimPrefix(name, "file:"), "?")
	return file
}

// checkSQLiteFile checks, for a sqlite:// DSN, that the file's directory exists (SQLite's own
// error, "unable to open database file (14)", names neither) and, when mustExist (a command
// that only reads, which must not create a database), that the file exists; otherwise, when the
// file does not exist yet, that this process may create it in that directory.
func checkSQLiteFile(dsn string, mustExist bool) error {
	file := sqliteFile(dsn)
	if file == "" {
		return nil
	}
	if dir := filepath.Dir(file); !exists(dir) {
		return fmt.Errorf("cannot open the database file %s: its directory %s does not exist", file, dir)
	}
	if mustExist && !exists(file) {
		return fmt.Errorf("no such database file %s; run `simba migrate` with the same -dsn to create it", file)
	}
	if st, err := os.Stat(file); err == nil && st.IsDir() {
		return fmt.Errorf("cannot open the database file %s: it is a directory", file)
	}
	if dir := filepath.Dir(file); !exists(file) {
		if err := notWritable(dir); err != nil {
			return fmt.Errorf("cannot create the database file %s: its directory %s is not writable by this process (%w)", file, dir, err)
		}
	}
	return nil
}

// exists reports whether path names an existing file or directory (an error other than "does
// not exist" counts as existing: opening it reports that error).
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// migrate applies the embedded schema of a SQL backend. A backend without a schema (Redis,
// ZooKeeper, etcd) has nothing to apply, but migrate still connects and opens a session and
// closes it (checkSession: the checks every client's first session makes, Redis's password
// and durability checks and WAIT included), so that refused credentials or an unreachable
// server fail it as they fail the other commands, rather than passing unnoticed until the
// first lock.
func migrate(ctx context.Context, args []string) error {
	fs, dsn := dsnFlags("migrate")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if err := needDSN(*dsn); err != nil {
		return err
	}
	b, err := openDSN(ctx, *dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	m, ok := b.(migrator)
	if !ok {
		if err := checkSession(ctx, b, *dsn, "simba-migrate-check", simba.DefaultTTL); err != nil {
			return err
		}
		fmt.Println(noSchemaReport(dsnutil.Redact(*dsn)))
		return nil
	}
	if err := checkSQLiteFile(*dsn, false); err != nil {
		return err
	}
	before, err := schemaVersion(ctx, m)
	if err != nil {
		return err
	}
	if err := m.Migrate(ctx); err != nil {
		return err
	}
	after, err := schemaVersion(ctx, m)
	if err != nil {
		return err
	}
	fmt.Println(migrateReport(dsnutil.Redact(*dsn), before, after))
	return nil
}

// checkSessionWait bounds checkSession's session open.
const checkSessionWait = 15 * time.Second

// checkSession opens a session of owner on b (dsn's backend) and closes it, before the demo
// starts its workers, and for simba migrate on a backend without a schema: a
// backend that refuses the session (refused credentials, a Redis password the server has
// none for, a TTL it refuses) or cannot be reached fails the demo at once with that error,
// exit status 1 and one line. Each worker printed its own refusal and exited, and the demo
// waited for a leader for its whole limit (10 TTLs and 10 s: 30 s at the default TTL) to
// say "no new leader in time".
func checkSession(ctx context.Context, b spi.Backend, dsn, owner string, ttl time.Duration) error {
	octx, cancel := context.WithTimeout(ctx, checkSessionWait)
	defer cancel()
	s, err := b.OpenSession(octx, owner, ttl)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return withMigrateHint(fmt.Errorf("opening a session on %s: %w", dsnutil.Redact(dsn), err), dsn)
	}
	_ = b.CloseSession(octx, s.ID)
	return nil
}

// noSchemaReport is what simba migrate prints for dsn (redacted) of a backend without a
// schema, once a session opened and closed there.
func noSchemaReport(dsn string) string {
	return fmt.Sprintf("%s needs no schema: connected and opened a session; nothing to apply", dsn)
}

// migrator is what a SQL backend offers simba migrate.
type migrator interface {
	Migrate(ctx context.Context) error
	SchemaVersion(ctx context.Context) (int64, error)
}

// schemaVersion returns the schema version of m's database: 0 when it has no schema at all.
func schemaVersion(ctx context.Context, m migrator) (int64, error) {
	v, err := m.SchemaVersion(ctx)
	if errors.Is(err, simba.ErrSchemaMissing) {
		return 0, nil
	}
	return v, err
}

// migrateReport is what simba migrate prints after taking the schema of dsn (redacted) from
// version before to version after: the migrations applied, or that there were none to apply.
// (Another process migrating the same database at the same time may have applied some of them.)
func migrateReport(dsn string, before, after int64) string {
	switch {
	case after <= before:
		return fmt.Sprintf("schema of %s is already up to date (version %d)", dsn, after)
	case after == before+1:
		return fmt.Sprintf("applied migration %d to %s (schema version %d)", after, dsn, after)
	}
	return fmt.Sprintf("applied migrations %d–%d to %s (schema version %d)", before+1, after, dsn, after)
}

// status prints what the backend knows: leases, sessions, groups.
func status(ctx context.Context, args []string) error {
	return statusTo(ctx, os.Stdout, args)
}

// statusTo is status writing to out. With -name N or -prefix P that matches nothing it returns
// a notFoundError (exit status 3) after printing, with -json, the document saying so.
func statusTo(ctx context.Context, out io.Writer, args []string) error {
	fs, dsn := dsnFlags("status")
	var filter statusFilter
	fs.StringVar(&filter.name, "name", "", "show only the election, lock or group `N` (a group with its partitions N.0, N.1, …); exit status 3 if nothing has that name")
	fs.StringVar(&filter.prefix, "prefix", "", "show only leases and groups whose name starts with `P`; exit status 3 if none does")
	fs.BoolVar(&filter.all, "all", false, "show free leases too")
	asJSON := fs.Bool("json", false, "print one JSON document (the dialect of simbahttp's /status) instead of the tables")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if filter.name != "" && filter.prefix != "" {
		return badUsage("-name and -prefix select alike: give one")
	}
	if filter.name != "" {
		// The name rules of lock and run: a name no client can hold is a typo, not a free name.
		if err := spi.ValidateName(filter.name); err != nil {
			return usageError{fmt.Errorf("-name: %w", err)}
		}
	}
	if err := needDSN(*dsn); err != nil {
		return err
	}
	b, err := openDSN(ctx, *dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := checkSQLiteFile(*dsn, true); err != nil {
		return err
	}
	in, ok := b.(spi.Inspector)
	if !ok {
		return fmt.Errorf("%w: the backend of %s cannot list its state", simba.ErrInvalidOption, dsnutil.Redact(*dsn))
	}
	snap, err := in.Inspect(ctx)
	if err != nil {
		return withMigrateHint(err, *dsn)
	}
	kept, free := filter.apply(snap)
	found := len(kept.Leases)+free+len(kept.Groups) > 0
	if *asJSON {
		if err := writeStatusJSON(out, newStatusDoc(kept, filter, free, found)); err != nil {
			return err
		}
	} else if !filter.selects() || found {
		if err := printKept(out, kept, filter, free); err != nil {
			return err
		}
	}
	if filter.selects() && !found {
		return notFoundError{name: filter.name, prefix: filter.prefix}
	}
	return nil
}

// notFoundError is simba status -name N finding nothing named N: no lease record (held, or free
// where the backend keeps one), no partition lease N.<n> and no group N with live members; or
// -prefix P finding no lease record and no group with live members whose name starts with P.
// main prints it and exits 3, as grep does 1 for no line selected.
type notFoundError struct{ name, prefix string }

func (e notFoundError) Error() string {
	if e.name == "" {
		return fmt.Sprintf("no lease, lock or group whose name starts with %s (no lease record, no group with live members)", safe(e.prefix))
	}
	return fmt.Sprintf("no lease, lock or group named %s (no lease record %[1]s or %[1]s.<n>, no group %[1]s with live members)", safe(e.name))
}

// statusFilter says which part of a snapshot simba status prints.
type statusFilter struct {
	name   string // only this election, lock or group, with its partitions ("": no such choice)
	prefix string // only leases and groups whose name starts with it ("": all)
	all    bool   // free leases too
}

// selects reports whether the filter keeps only some names (and so only their sessions).
func (f statusFilter) selects() bool { return f.name != "" || f.prefix != "" }

// keepsLease reports whether the lease name is kept: with -name, the name itself or a
// partition lease of the group of that name.
func (f statusFilter) keepsLease(name string) bool {
	if f.name != "" {
		return name == f.name || isPartitionOf(name, f.name)
	}
	return strings.HasPrefix(name, f.prefix)
}

// keepsGroup reports whether the group is kept.
func (f statusFilter) keepsGroup(group string) bool {
	if f.name != "" {
		return group == f.name
	}
	return strings.HasPrefix(group, f.prefix)
}

// isPartitionOf reports whether lease is the lease of a partition of group, as the client names
// it (wire.PartitionName: the group, a dot, the partition number in decimal).
func isPartitionOf(lease, group string) bool {
	p, ok := strings.CutPrefix(lease, group+wire.PartitionSeparator)
	if !ok {
		return false
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n < wire.MaxPartitions && wire.PartitionName(group, n) == lease
}

// apply returns the part of snap that f keeps, and how many free lease records it selected
// (hidden unless f.all). With a name or a prefix, the sessions kept are those holding a kept
// lease or in a kept group.
func (f statusFilter) apply(snap spi.Snapshot) (spi.Snapshot, int) {
	var out spi.Snapshot
	free := 0
	sessions := map[simba.SessionID]bool{}
	for _, l := range snap.Leases {
		if !f.keepsLease(l.Name) {
			continue
		}
		if l.Holder == "" && l.Unreadable == "" {
			free++
			if !f.all {
				continue
			}
		}
		out.Leases = append(out.Leases, l)
		sessions[l.Holder] = true
	}
	out.Groups = map[string][]simba.SessionID{}
	for g, members := range snap.Groups {
		// A group without live members is not listed (spi.Snapshot): drop one a backend
		// lists anyway.
		if f.keepsGroup(g) && len(members) > 0 {
			out.Groups[g] = members
			for _, m := range members {
				sessions[m] = true
			}
		}
	}
	for _, s := range snap.Sessions {
		if !f.selects() || sessions[s.ID] {
			out.Sessions = append(out.Sessions, s)
		}
	}
	return out, free
}

// printKept prints as tables the part snap of a snapshot that f kept (statusFilter.apply),
// with free the number of free lease records f selected. Every string in it comes from backend
// records that anyone with write access to the backend can forge, so each goes through safe:
// no control character (a terminal escape sequence) or invalid UTF-8 reaches the terminal.
func printKept(out io.Writer, snap spi.Snapshot, f statusFilter, free int) error {
	hidden := free
	if f.all {
		hidden = 0
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "LEASE\tTOKEN\tHOLDER\tOWNER\tREMAINING")
	for _, l := range snap.Leases {
		holder, owner, rem := safe(string(l.Holder)), safe(l.Owner), remaining(l.Remaining, l.RemainingUnknown)
		switch {
		case l.Unreadable != "":
			// A forged or damaged record: never shown free, whatever its holder field says.
			if l.Holder == "" {
				holder = "?"
			}
			// The reason is the backend's text (it quotes the fields it names), escaped but
			// not quoted whole as safe would: it is prose, not a value.
			rem = "unreadable record: " + printable.Escape(l.Unreadable)
		case l.Holder == "":
			holder, rem = "-", "-"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", safe(l.Name), l.Token, holder, orDash(owner), rem)
	}
	if hidden > 0 {
		fmt.Fprintf(w, "(%d free lease(s) not shown: -all shows them)\n", hidden)
	}
	fmt.Fprintln(w, "\nSESSION\tOWNER\tREMAINING")
	for _, s := range snap.Sessions {
		rem := remaining(s.Remaining, s.RemainingUnknown)
		if s.Unreadable != "" {
			// A forged or damaged record (spi.SessionInfo.Unreadable): its figure is not shown.
			rem = "unreadable record: " + printable.Escape(s.Unreadable)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", safe(string(s.ID)), orDash(safe(s.Owner)), rem)
	}
	fmt.Fprintln(w, "\nGROUP\tMEMBERS")
	for _, g := range sortedGroups(snap) {
		members := make([]string, len(snap.Groups[g]))
		for i, m := range snap.Groups[g] {
			members[i] = safe(string(m))
		}
		fmt.Fprintf(w, "%s\t[%s]\n", safe(g), strings.Join(members, " "))
	}
	return w.Flush()
}

// sortedGroups returns the names of snap's groups, sorted.
func sortedGroups(snap spi.Snapshot) []string {
	groups := make([]string, 0, len(snap.Groups))
	for g := range snap.Groups {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	return groups
}

// orDash is s, or "-" for an empty s: a blank column would shift the fields of its row for a
// script that splits the rows on spaces (awk '{print $4}').
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// remaining is what the REMAINING column shows: the time left, to the millisecond, or
// "unknown" where the backend cannot tell (ZooKeeper, for another client's session).
func remaining(d time.Duration, unknown bool) string {
	if unknown {
		return "unknown"
	}
	return d.Round(time.Millisecond).String()
}

// safe returns s unchanged when it is valid UTF-8 made only of graphic characters (letters,
// marks, numbers, punctuation, symbols, spaces) other than '"', and otherwise as a quoted Go
// string literal (strconv.QuoteToGraphic): control characters, format characters such as
// bidirectional overrides, and invalid bytes become \x.., \u.... escapes.
func safe(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || r == '"' || !unicode.IsGraphic(r) {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}

// runCommand runs a command while this process leads (run) or holds the lock (lock) -name,
// under a supervisor (runTerm) that stops it when the term ends or this process goes away (see
// the run and lock help). The exit status is the command's.
func runCommand(ctx context.Context, args []string, lock bool) error {
	name, what := "run", "leadership"
	if lock {
		name, what = "lock", "lock"
	}
	fs, dsn := dsnFlags(name)
	lease := fs.String("name", "", "lease `name` (in the command's $SIMBA_LEASE)")
	ttl := fs.Duration("ttl", simba.DefaultTTL, "session TTL: how long a dead simba holds the lease ("+commandTTLRange+")")
	grace := fs.Duration("grace", 5*time.Second, "time the command has after SIGTERM before SIGKILL (at most the term's remaining validity); with renewals failing, SIGTERM comes when that much validity is left (at most TTL/4)")
	var wait waitValue
	fs.Var(&wait, "wait", "wait at most `W` for the "+what+", then exit 75 without running CMD; 0: one attempt, never queued (default: without limit)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := needDSN(*dsn); err != nil {
		return err
	}
	if *lease == "" {
		return badUsage("-name is required (simba %s -dsn D -name N -- CMD [ARGS])", name)
	}
	if err := spi.ValidateName(*lease); err != nil {
		return usageError{fmt.Errorf("-name: %w", err)}
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return badUsage("no command given (simba %s -dsn D -name N -- CMD [ARGS])", name)
	}
	if err := checkTTL(*ttl, true); err != nil {
		return err
	}
	if *grace < 0 {
		return badUsage("-grace %v is negative", *grace)
	}
	b, err := openDSN(ctx, *dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := checkSQLiteFile(*dsn, false); err != nil {
		return err
	}
	if fresh, err := newSQLiteFile(ctx, *dsn); err != nil {
		return err
	} else if fresh {
		if err := b.(migrator).Migrate(ctx); err != nil {
			return err
		}
	}
	// A permanent backend error (a missing schema, bad credentials) fails a Lock that waits, but
	// an election retries through it; run fails on one too while it waits to lead, as lock does.
	permanent := make(chan error, 1)
	outages := newOutageReporter(slog.Default())
	errs := &backendErrors{}
	waiting := "while waiting to lead " + *lease
	if lock {
		waiting = "while waiting for the lock " + *lease
	}
	c, err := newClient(ctx, b, simba.WithTTL(*ttl), simba.WithListener(func(ev simba.Event) {
		outages.event(ev)
		errs.event(ev)
		if ev.Kind == simba.EventBackendError && ev.Class == spi.Permanent {
			select {
			case permanent <- ev.Err:
			default:
			}
		}
	}))
	if ctx.Err() != nil { // stopped before it could wait
		if c != nil {
			closeClient(ctx, c, os.Stderr)
		}
		return fmt.Errorf("%w %s", context.Cause(ctx), waiting)
	}
	if err != nil {
		// What New refuses as an option (ErrInvalidOption: a -ttl the backend refuses) is a
		// usage error; anything else is the backend's answer to New's hint subscription (a
		// Redis server refusing the credentials: simba.ErrAccessDenied), exit status 1 as for
		// any refusal, not 2.
		return withMigrateHint(err, *dsn)
	}
	closeOnce := sync.OnceFunc(func() { closeClient(ctx, c, os.Stderr) })
	defer closeOnce()
	// The supervisor hears of the term's validity ten times per TTL (the client renews it
	// three times per TTL).
	tick := min(max(*ttl/10, 20*time.Millisecond), time.Second)

	// Renewals failing, the command gets SIGTERM while the term still holds, so that its
	// graceful stop fits in the term (earlyStopAt).
	early := earlyStop{at: earlyStopAt(*ttl, *grace), what: what, errs: errs, stderr: os.Stderr}

	var started atomic.Bool // the command has started once
	run := func(runCtx context.Context, t simba.Term) error {
		started.Store(true)
		status, stoppedEarly, err := runTerm(runCtx, t, argv, *grace, tick, early)
		switch {
		case err != nil:
			return err
		case ctx.Err() != nil: // simba was told to stop: exit as the command did
			return exitCode(status)
		case stoppedEarly:
			// The command is stopped for good even if the renewals recovered meanwhile:
			// simba ends as for a term lost (exit status 1), releasing the lease if it still
			// holds it.
			return fmt.Errorf("%s of %s given up (token %d): not renewed, its validity fell to %v; the command was stopped (exit status %d)",
				what, t.Name(), t.Token(), early.at, status)
		case runCtx.Err() != nil:
			return fmt.Errorf("%s of %s lost (token %d); the command was stopped (exit status %d): %w",
				what, t.Name(), t.Token(), status, context.Cause(runCtx))
		case !t.IsValid():
			// simba was paused (or starved) past the term's validity, and the supervisor
			// killed the command; the term's revocation has not been processed yet.
			return fmt.Errorf("%s of %s lost (token %d): its validity ran out; the command was stopped (exit status %d)",
				what, t.Name(), t.Token(), status)
		case status != 0:
			return exitCode(status)
		}
		return nil
	}

	if lock || (wait.set && wait.d == 0) {
		// lock, and run -wait 0: run's one attempt is TryLock's, one acquire of the lease N
		// that never queues, as an election's first attempt would be but for its queueing.
		acquire, lockCtx := c.Lock, ctx
		if wait.set && wait.d == 0 {
			acquire = c.TryLock
		} else if wait.set {
			var cancel context.CancelFunc
			lockCtx, cancel = context.WithTimeout(ctx, wait.d)
			defer cancel()
		}
		err := lockAndRun(ctx, lockCtx, c, *lease, acquire, run)
		switch {
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			return fmt.Errorf("%w %s", context.Cause(ctx), waiting)
		case wait.set && errors.Is(err, simba.ErrLockHeld):
			return notAcquiredError{fmt.Errorf("%w: %s not run (-wait 0)", err, argv[0])}
		case wait.set && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !started.Load():
			return notAcquired(ctx, c, b, what, *lease, wait.d, argv[0], *ttl, err)
		}
		return withMigrateHint(err, *dsn)
	}
	// run -wait D: the election is a candidate for D at most. The command starts only if the
	// term comes before D runs out; a term that comes after is released by the close.
	var (
		waitMu sync.Mutex
		gaveUp bool
		waited <-chan time.Time
	)
	if wait.set {
		timer := time.NewTimer(wait.d)
		defer timer.Stop()
		waited = timer.C
	}
	leads := run
	run = func(runCtx context.Context, t simba.Term) error {
		waitMu.Lock()
		if gaveUp {
			waitMu.Unlock()
			return nil
		}
		started.Store(true)
		waitMu.Unlock()
		return leads(runCtx, t)
	}
	done := make(chan error, 1)
	e, err := c.NewElection(*lease, simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
		err := run(ctx, t)
		select {
		case done <- err:
		default:
		}
		return err
	}))
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	for waiting := true; waiting; {
		select {
		case err := <-done:
			return err
		case err := <-permanent:
			if !started.Load() {
				return withMigrateHint(fmt.Errorf("while waiting to lead %s: %w", *lease, err), *dsn)
			}
		case <-waited:
			waitMu.Lock()
			gaveUp = !started.Load()
			waitMu.Unlock()
			if gaveUp {
				err := notAcquired(ctx, c, b, what, *lease, wait.d, argv[0], *ttl, nil)
				closeOnce() // stops the election: its queue entry is withdrawn with the session
				return err
			}
		case <-ctx.Done():
			waiting = false
		}
	}
	// Stopped by a signal: Close revokes the term, which stops the command, and waits for it.
	closeOnce()
	select {
	case err := <-done:
		return err
	default:
		return fmt.Errorf("%w %s", context.Cause(ctx), waiting)
	}
}

// closeClient closes c (under ctx without its cancellation: a signal that stopped simba must
// not cut the close short) and says so on stderr, one line, if the session could not be closed
// at the backend (a *simba.SessionCloseError: refused, or of unknown outcome): the session, and
// with it whatever lease or membership the close would have freed, lapses at its TTL only, so
// the next simba run or lock of the name may wait that long. The exit status stays what it was
// (the command's): the command ran, and nothing is left that the TTL does not end. runCommand
// calls it once (every later Close returns the same error).
func closeClient(ctx context.Context, c *simba.Client, stderr io.Writer) {
	if c == nil {
		return
	}
	if err := c.Close(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintln(stderr, errorLine(fmt.Errorf("at exit: %w; the next holder may wait up to the TTL", err)))
	}
}

// lockAndRun runs fn under the lock lease, taken by acquire (c.Lock or c.TryLock) under
// lockCtx (ctx, or ctx with -wait's deadline), as c.WithLock does, with fn's ctx ended by ctx or
// by the term's end (with its cause), except that once ctx has ended (simba stopped by a
// signal) it leaves the release to the client's Close, which the caller makes next: Close
// sends it together with the session's close, where WithLock's Unlock waited for it first. At
// a backend gone silent each waits a call timeout (TTL/3), and `lock` exited two of them after
// SIGTERM (2.0 s at -ttl 3s), `run` one.
func lockAndRun(ctx, lockCtx context.Context, c *simba.Client, lease string,
	acquire func(context.Context, string) (*simba.Held, error), fn func(context.Context, simba.Term) error) error {
	h, err := acquire(lockCtx, lease)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(h.Context(), func() { cancel(context.Cause(h.Context())) })
	ferr := fn(runCtx, h.Term)
	stop()
	cancel(nil)
	if ctx.Err() != nil {
		return ferr
	}
	if uerr := h.Unlock(context.WithoutCancel(ctx)); ferr == nil {
		return uerr
	}
	return ferr
}

// newClient is simba.New(b, opts...) for a command that ctx (SIGINT, SIGTERM) stops: New
// subscribes to the backend's hints first, and at a Redis server that accepts connections but
// does not answer it waits for that up to a read timeout. Once ctx ends, newClient closes b,
// which ends that wait (New then fails), and returns New's client if it made one anyway, or
// nil; the caller, which tells by ctx.Err(), closes that client.
func newClient(ctx context.Context, b spi.Backend, opts ...simba.Option) (*simba.Client, error) {
	type result struct {
		c   *simba.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := simba.New(b, opts...)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
	}
	b.Close()
	r := <-done
	return r.c, r.err
}

// newSQLiteFile reports whether dsn names a SQLite database that is new: it has no table,
// index, view or trigger at all (a file that did not exist, which this creates as SQLite does,
// an empty one, or one an earlier command created without tables). run and lock create Simba's schema in such a database themselves; any
// other database must have it already (simba migrate), so that run and lock never create or
// upgrade a schema that other processes use.
func newSQLiteFile(ctx context.Context, dsn string) (bool, error) {
	scheme, _, _ := strings.Cut(dsn, "://")
	if scheme != "sqlite" && scheme != "sqlite3" {
		return false, nil
	}
	name, err := sqlbackend.SQLiteDSN(dsn)
	if err != nil {
		return false, err
	}
	// Only read here: without the journal_mode(wal) SQLiteDSN adds, which would switch a file
	// kept in another mode before the backend's first write, which warns when it does that.
	name = strings.Replace(name, "&_pragma="+url.QueryEscape("journal_mode(wal)"), "", 1)
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return false, dsnutil.ScrubError(err, dsn)
	}
	defer db.Close()
	var objects int
	count := func() error {
		return db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&objects)
	}
	// A read fails with SQLITE_BUSY at once, without waiting in the busy handler, while another
	// connection switches the file to WAL mode — another simba run or lock setting up the same
	// new file: try again, for up to the busy timeout.
	if err = sqlitebusy.Retry(ctx, count); err != nil && ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return false, fmt.Errorf("reading the tables of %s: %w", dsnutil.Redact(dsn), dsnutil.ScrubError(err, dsn))
	}
	return objects == 0, nil
}

// withMigrateHint adds to an error that matches simba.ErrSchemaMissing (no schema, or an old
// one) the command that applies the schema, and to one that matches simba.ErrSchemaDrift that
// simba migrate cannot repair it, and makes one that matches simba.ErrInvalidOption
// (a value of the command line the backend refused) a usage error, unless it matches
// simba.ErrAccessDenied (refused credentials: exit status 1).
func withMigrateHint(err error, dsn string) error {
	if errors.Is(err, simba.ErrAccessDenied) {
		// Refused credentials are the backend refusing, exit status 1, also when the error
		// matches ErrInvalidOption too (a Redis password for the default user at a server
		// that has none: redis.ErrAuth): it was taken for a usage error, exit 2.
		return err
	}
	if errors.Is(err, simba.ErrInvalidOption) {
		// The backend refused a value of the command line (etcd a -ttl under 1s, ZooKeeper
		// one outside the server's session timeouts): a usage error, as the CLI's own checks.
		var usage usageError
		if !errors.As(err, &usage) {
			return usageError{err}
		}
		return err
	}
	if errors.Is(err, simba.ErrSchemaDrift) {
		// Tables changed by hand (a dropped table or column) at the current schema version:
		// simba migrate applies only what the version table lacks, so it cannot mend them.
		return fmt.Errorf("%s has Simba's tables changed by hand (`simba migrate` does not repair them; the error says what differs and which migration to apply again): %w",
			dsnutil.Redact(dsn), err)
	}
	if !errors.Is(err, simba.ErrSchemaMissing) {
		return err
	}
	return fmt.Errorf("%s lacks Simba's schema or has an old one: run `simba migrate` with the same -dsn: %w",
		dsnutil.Redact(dsn), err)
}

// termEnv is the command's environment for the term t: simba's, with $SIMBA_TOKEN and
// $SIMBA_LEASE set.
func termEnv(t simba.Term) []string {
	return append(os.Environ(), fmt.Sprintf("SIMBA_TOKEN=%d", t.Token()), "SIMBA_LEASE="+t.Name())
}

// exitNotAcquired is the exit status of run and lock when -wait ran out before the lock or
// leadership came: EX_TEMPFAIL of sysexits.h, as FreeBSD's lockf(1) exits when the lock is
// held ("try again later"); none of simba's other statuses, nor timeout(1)'s 124.
const exitNotAcquired = 75

// waitValue is the -wait flag of run and lock: how long to wait for the lock or to lead. Unset
// (the default), they wait without limit.
type waitValue struct {
	d   time.Duration
	set bool
}

func (v *waitValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return v.d.String()
}

func (v *waitValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (such as 0, 30s or 5m)")
	}
	if d < 0 {
		return errors.New("negative")
	}
	v.d, v.set = d, true
	return nil
}

// notAcquiredError is run's or lock's giving up when -wait ran out: main prints it and exits
// exitNotAcquired.
type notAcquiredError struct{ err error }

func (e notAcquiredError) Error() string { return e.err.Error() }
func (e notAcquiredError) Unwrap() error { return e.err }

// notAcquired is the notAcquiredError of a -wait d that ran out for lease, naming its holder
// as the backend reads it now, if it can tell (one read, of at most a call timeout). With no
// live session at the backend (unreachable, or refusing) it is not that someone else holds
// lease: it returns a plain error (exit status 1) instead, with waitErr, the wait's error if
// any (Lock's, which carries the last backend error).
func notAcquired(ctx context.Context, c *simba.Client, b spi.Backend, what, lease string, d time.Duration, cmd string,
	ttl time.Duration, waitErr error) error {
	if c.Session() == "" {
		err := fmt.Errorf("%s of %s not taken within -wait %v: no live session at the backend: %s not run", what, lease, d, cmd)
		if waitErr != nil {
			err = fmt.Errorf("%w: %w", err, waitErr)
		}
		return err
	}
	held := ""
	if li, ok := b.(spi.LeaseInspector); ok {
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl/3)
		info, found, err := li.InspectLease(ictx, lease)
		cancel()
		switch {
		case err != nil || !found || info.Holder == "":
		case info.Owner == "":
			held = fmt.Sprintf(" (held by session %s)", info.Holder)
		default:
			held = fmt.Sprintf(" (held by %s, session %s)", info.Owner, info.Holder)
		}
	}
	return notAcquiredError{fmt.Errorf("%s of %s not taken within -wait %v%s: %s not run", what, lease, d, held, cmd)}
}

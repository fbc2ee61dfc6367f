package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	sqlbackend "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/sqlitetest"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/sql/schema"
)

// runSimba runs the built simba binary with args and no $SIMBA_DSN, and returns its stdout,
// stderr and exit status.
func runSimba(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, simbaBinary(t), args...)
	cmd.Env = append(os.Environ(), "SIMBA_DSN=")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("simba %q: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// TestHelpExitsZero: -h, for the tool and for each command, prints the help to stdout and
// exits 0; an unknown flag exits 2 with one "simba:" line naming it, and the help, on stderr.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"help"},
		{"run", "-h"}, {"lock", "-h"}, {"status", "-h"}, {"migrate", "-h"}, {"demo", "-h"}, {"run", "--help"},
	} {
		stdout, stderr, status := runSimba(t, args...)
		if status != 0 || !strings.HasPrefix(stdout, "usage: simba") || stderr != "" {
			t.Errorf("simba %q: exit status %d, stdout %q, stderr %q; want 0, the help on stdout, nothing on stderr",
				args, status, stdout, stderr)
		}
	}
	stdout, stderr, status := runSimba(t, "run", "-bogus", "-dsn", "sqlite://x.db", "-name", "job", "--", "true")
	first, _, _ := strings.Cut(stderr, "\n")
	if status != 2 || stdout != "" || first != "simba: run: flag provided but not defined: -bogus" ||
		!strings.Contains(stderr, "usage: simba run") || strings.Count(stderr, "simba:") != 1 {
		t.Errorf("simba run -bogus: exit status %d, stdout %q, stderr %q; want 2 and one error line with the help on stderr",
			status, stdout, stderr)
	}
}

// TestHelpListsEveryDSNForm: the tool's help and the help of each command that takes -dsn
// list every DSN scheme; run's and lock's name $SIMBA_TOKEN, $SIMBA_LEASE and SIGTERM.
func TestHelpListsEveryDSNForm(t *testing.T) {
	schemes := []string{"sqlite://", "postgres://", "mysql://", "redis://", "rediss://", "redis+cluster://",
		"redis+sentinel://", "zk://", "zk+tls://"}
	for _, args := range [][]string{{"-h"}, {"run", "-h"}, {"lock", "-h"}, {"status", "-h"}, {"migrate", "-h"}} {
		stdout, _, _ := runSimba(t, args...)
		for _, s := range schemes {
			if !strings.Contains(stdout, s) {
				t.Errorf("simba %q does not list %s:\n%s", args, s, stdout)
			}
		}
	}
	for _, cmd := range []string{"run", "lock"} {
		stdout, _, _ := runSimba(t, cmd, "-h")
		for _, want := range []string{"SIMBA_TOKEN", "SIMBA_LEASE", "group gets SIGTERM", "-grace"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("simba %s -h does not mention %q:\n%s", cmd, want, stdout)
			}
		}
	}
}

// TestErrorsHaveOneSimbaPrefix: errors from the CLI itself, from the DSN parser and from the
// library (whose messages start with "simba: " of their own) are printed as one line with
// exactly one "simba:" prefix; a usage error (the command line's: a missing or bad flag, no
// CMD, a malformed DSN) exits 2, as an unknown flag does, and any other error 1.
func TestErrorsHaveOneSimbaPrefix(t *testing.T) {
	unmigrated := sqliteWithout(t, nil)
	for _, tc := range []struct {
		args   []string
		status int
		want   string // what the line says after the prefix
	}{
		{[]string{"status"}, 2, "-dsn (or $SIMBA_DSN) is required"},
		{[]string{"migrate"}, 2, "-dsn (or $SIMBA_DSN) is required"},
		{[]string{"lock", "-name", "x", "--", "true"}, 2, "-dsn (or $SIMBA_DSN) is required"},
		{[]string{"lock", "-dsn", "no-scheme", "-name", "x", "--", "true"}, 2, "no scheme"},
		{[]string{"status", "-dsn", "postgres://u:pw@h/db?sslmode=bogus"}, 2, "sslmode is invalid"},
		{[]string{"run", "-dsn", unmigrated, "-name", "job"}, 2, "no command given"},
		{[]string{"run", "-dsn", unmigrated, "--", "true"}, 2, "-name is required"},
		{[]string{"lock", "-dsn", unmigrated, "-name", "bad name!", "--", "true"}, 2, "invalid name"},
		{[]string{"lock", "-dsn", unmigrated, "-name", "job", "-ttl", "100ms", "--", "true"}, 2,
			"-ttl 100ms is too short: run and lock need at least 500ms"},
		// Over the library's bound, but too short for a supervised command (trial 32).
		{[]string{"lock", "-dsn", unmigrated, "-name", "job", "-ttl", "101ms", "--", "true"}, 2,
			"-ttl 101ms is too short: run and lock need at least 500ms"},
		{[]string{"run", "-dsn", unmigrated, "-name", "job", "-ttl", "499ms", "--", "true"}, 2,
			"-ttl 499ms is too short: run and lock need at least 500ms"},
		{[]string{"demo", "-ttl", "100ms"}, 2, "-ttl 100ms is too short: it must be longer than 100ms"},
		{[]string{"run", "-dsn", unmigrated, "-name", "job", "-ttl", "0s", "--", "true"}, 2, "-ttl 0s is too short"},
		{[]string{"lock", "-dsn", unmigrated, "-name", "job", "-ttl", "25h", "--", "true"}, 2, "-ttl 25h0m0s is too long"},
		{[]string{"lock", "-dsn", unmigrated, "-name", "job", "-grace", "-1s", "--", "true"}, 2, "-grace -1s is negative"},
		{[]string{"demo", "-workers", "2"}, 2, "-workers must be at least 3"},
		{[]string{"demo", "-ttl", "50ms"}, 2, "-ttl 50ms is too short"},
		// A TTL the backend can never serve (spi.TTLChecker): refused up front, not retried.
		{[]string{"lock", "-dsn", "zk://127.0.0.1:2181/simba-cli-ttlcheck?tickTime=2s", "-name", "job", "-ttl", "3s", "--", "true"}, 2,
			"tickTime 2s must be less than half the ttl 3s: lower the DSN's tickTime or raise the TTL"},
		{[]string{"run", "-dsn", "etcd://127.0.0.1:2379/simba-cli-ttlcheck", "-name", "job", "-ttl", "500ms", "--", "true"}, 2,
			"etcd: TTL 500ms outside [1s, "},
		{[]string{"demo", "-dsn", "zk://127.0.0.1:2181/simba-cli-ttlcheck?tickTime=2s", "-ttl", "3s"}, 2,
			"tickTime 2s must be less than half the ttl 3s"},
		{[]string{"lock", "-dsn", unmigrated, "-name", "job", "--", "true"}, 1, "run `simba migrate` with the same -dsn"},
	} {
		stdout, stderr, status := runSimba(t, tc.args...)
		if status != tc.status || stdout != "" || !strings.HasPrefix(stderr, "simba: ") || strings.Count(stderr, "simba:") != 1 ||
			strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("simba %q: exit status %d, stdout %q, stderr %q; want %d and one line \"simba: ...%s...\"",
				tc.args, status, stdout, stderr, tc.status, tc.want)
		}
	}
}

// TestMigrateSaysWhatItApplied: simba migrate names the migrations it applied (all of them to
// a new database, the missing ones to an old schema) and, run again, says the schema was
// already up to date.
func TestMigrateSaysWhatItApplied(t *testing.T) {
	latest := schema.Migrations(wire.SQLSQLite)
	n := latest[len(latest)-1].Version
	fresh := "sqlite://" + filepath.Join(t.TempDir(), "fresh.db")
	old := sqliteWithout(t, latest[:1])
	for _, tc := range []struct {
		dsn  string
		want string
		warn string // stderr holds this warning and nothing else ("": stderr is empty)
	}{
		{fresh, fmt.Sprintf("applied migrations 1–%d to %s (schema version %d)\n", n, fresh, n), ""},
		{fresh, fmt.Sprintf("schema of %s is already up to date (version %d)\n", fresh, n), ""},
		// Another program's file, in rollback-journal mode: migrate puts it in WAL mode, saying so.
		{old, fmt.Sprintf("applied migrations 2–%d to %s (schema version %d)\n", n, old, n), "from journal_mode delete to WAL"},
	} {
		stdout, stderr, status := runSimba(t, "migrate", "-dsn", tc.dsn)
		warned := tc.warn == "" && stderr == "" ||
			tc.warn != "" && strings.Count(stderr, "\n") == 1 && strings.Contains(stderr, " WARN ") && strings.Contains(stderr, tc.warn)
		if status != 0 || stdout != tc.want || !warned {
			t.Errorf("simba migrate -dsn %s: exit status %d, stdout %q, stderr %q; want 0 and %q", tc.dsn, status, stdout, stderr, tc.want)
		}
	}
	if got, want := migrateReport("D", 2, 3), "applied migration 3 to D (schema version 3)"; got != want {
		t.Errorf("migrateReport(2, 3) = %q, want %q", got, want)
	}
}

// TestStatusOnSQLiteCreatesNoFile: simba status on an existing SQLite database leaves no file
// behind: not the cross-process gate file beside it, "<file>-simba-gate", which the commands
// that write create (migrate did here; it is removed before status runs). It changes nothing
// in the file either: a database in rollback-journal mode (the sqlite3 shell's default) stays
// in it, byte for byte (status switched it to WAL before); one without the schema gets none,
// and status says to run simba migrate. simba lock, which writes, switches it to WAL, saying so.
func TestStatusOnSQLiteCreatesNoFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "simba.db")
	if _, stderr, status := runSimba(t, "migrate", "-dsn", "sqlite://"+file); status != 0 {
		t.Fatalf("simba migrate: exit status %d, stderr %q", status, stderr)
	}
	if err := os.Remove(file + "-simba-gate"); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if mode := journalMode(t, file, "PRAGMA journal_mode=delete"); mode != "delete" {
		t.Fatalf("journal mode %q", mode)
	}
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, status := runSimba(t, "status", "-dsn", "sqlite://"+file); status != 0 || !strings.HasPrefix(stdout, "LEASE") {
		t.Fatalf("simba status: exit status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	if names, err := filepath.Glob(filepath.Join(dir, "*")); err != nil || len(names) != 1 || names[0] != file {
		t.Errorf("after simba status the directory holds %v (%v), want only %s", names, err, file)
	}
	if after, err := os.ReadFile(file); err != nil || !bytes.Equal(after, before) {
		t.Errorf("simba status changed the database file (%v)", err)
	}
	if mode := journalMode(t, file); mode != "delete" {
		t.Errorf("simba status switched the file to journal mode %q", mode)
	}

	bare := filepath.Join(dir, "app.db")
	journalMode(t, bare, "CREATE TABLE app (x)")
	stdout, stderr, status := runSimba(t, "status", "-dsn", "sqlite://"+bare)
	if status != 1 || stdout != "" || !strings.Contains(stderr, "run `simba migrate`") || !strings.Contains(stderr, "0001_init.sql") {
		t.Errorf("simba status on a file without the schema: exit status %d, stdout %q, stderr %q; want 1, naming simba migrate and the migration", status, stdout, stderr)
	}
	if mode := journalMode(t, bare); mode != "delete" {
		t.Errorf("simba status switched a file without the schema to journal mode %q", mode)
	}
	// simba lock refuses such a file (run simba migrate) and leaves it as it is too.
	if _, stderr, status := runSimba(t, "lock", "-dsn", "sqlite://"+bare, "-name", "job", "--", "true"); status != 1 || !strings.Contains(stderr, "run `simba migrate`") {
		t.Errorf("simba lock on a file without the schema: exit status %d, stderr %q; want 1, naming simba migrate", status, stderr)
	}
	if mode := journalMode(t, bare); mode != "delete" {
		t.Errorf("simba lock switched a file without the schema to journal mode %q", mode)
	}

	_, stderr, status = runSimba(t, "lock", "-dsn", "sqlite://"+file, "-name", "job", "--", "true")
	if status != 0 || !strings.Contains(stderr, "from journal_mode delete to WAL") {
		t.Errorf("simba lock: exit status %d, stderr %q; want 0 and a warning that it switched the file to WAL", status, stderr)
	}
	if mode := journalMode(t, file); mode != "wal" {
		t.Errorf("after simba lock the file is in journal mode %q, want wal", mode)
	}
}

// journalMode runs statements on the SQLite file with the driver alone (as the sqlite3 shell
// would, without Simba's pragmas) and returns the file's journal mode.
func journalMode(t *testing.T, file string, statements ...string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, st := range statements {
		if _, err := db.Exec(st); err != nil {
			t.Fatal(err)
		}
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// TestSQLiteFileErrorsNameThePath: simba status never creates a SQLite database: on a file
// that does not exist it exits 1 naming the file and simba migrate, and leaves no file (nor
// the gate file beside it) behind. When the file's directory does not exist, every command
// exits 1 naming the file and the directory (SQLite's own message names neither).
func TestSQLiteFileErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	stdout, stderr, status := runSimba(t, "status", "-dsn", "sqlite://"+typo)
	if status != 1 || stdout != "" || stderr != "simba: no such database file "+typo+"; run `simba migrate` with the same -dsn to create it\n" {
		t.Errorf("simba status on a missing SQLite file: exit status %d, stdout %q, stderr %q; want 1 naming the file", status, stdout, stderr)
	}
	if names, err := filepath.Glob(filepath.Join(dir, "*")); err != nil || len(names) != 0 {
		t.Errorf("simba status left %v (%v) in the directory, want nothing", names, err)
	}
	nodir := filepath.Join(dir, "nodir")
	file := filepath.Join(nodir, "simba.db")
	want := "simba: cannot open the database file " + file + ": its directory " + nodir + " does not exist\n"
	for _, args := range [][]string{
		{"status", "-dsn", "sqlite://" + file},
		{"migrate", "-dsn", "sqlite://" + file},
		{"lock", "-dsn", "sqlite://" + file, "-name", "job", "--", "true"},
		{"run", "-dsn", "sqlite://" + file, "-name", "job", "--", "true"},
		{"demo", "-dsn", "sqlite://" + file},
	} {
		if stdout, stderr, status := runSimba(t, args...); status != 1 || stdout != "" || stderr != want {
			t.Errorf("simba %q: exit status %d, stdout %q, stderr %q; want 1 and %q", args, status, stdout, stderr, want)
		}
	}
	if _, err := os.Stat(nodir); !os.IsNotExist(err) {
		t.Errorf("a command created the missing directory: %v", err)
	}
}

// sqliteWithout returns the DSN of a SQLite file in a temporary directory that is not new: it
// has a table of its own (other) and, in it, the SQLite migrations ms only.
func sqliteWithout(t *testing.T, ms []schema.Migration) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	statements := []string{"CREATE TABLE other (x INTEGER)"}
	for _, m := range ms {
		statements = append(statements, m.Statements...)
	}
	for _, st := range statements {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	return "sqlite://" + path
}

// TestRunAndLockCreateTheSchemaOnlyInANewSQLiteDatabase: as their help says, simba run and
// simba lock create Simba's tables in a new SQLite database (a missing file, an empty one)
// and run the command; on a SQLite database with
// tables of its own but not Simba's, or with an old Simba schema, each exits 1 at once (run
// no longer waits to lead forever) saying to run simba migrate, and leaves it unchanged; after
// simba migrate both run the command.
func TestRunAndLockCreateTheSchemaOnlyInANewSQLiteDatabase(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"run", "lock"} {
		for _, dsn := range []string{"sqlite://" + filepath.Join(dir, cmd+"-missing.db"), "sqlite://" + empty} {
			stdout, stderr, status := runSimba(t, cmd, "-dsn", dsn, "-name", "job", "--", "sh", "-c", `echo "ran $SIMBA_LEASE"`)
			if status != 0 || stdout != "ran job\n" || stderr != "" {
				t.Errorf("simba %s on the new SQLite database %s: exit status %d, stdout %q, stderr %q; want 0 and the command's output",
					cmd, dsn, status, stdout, stderr)
			}
		}
	}
	old := schema.Migrations(wire.SQLSQLite)[:1]
	for _, tc := range []struct {
		what    string
		dsn     string
		version int64 // the schema version it must keep (0: none)
	}{
		{"without Simba's tables", sqliteWithout(t, nil), 0},
		{"with schema version 1", sqliteWithout(t, old), 1},
	} {
		for _, cmd := range []string{"run", "lock"} {
			stdout, stderr, status := runSimba(t, cmd, "-dsn", tc.dsn, "-name", "job", "--", "echo", "ran")
			if status != 1 || stdout != "" || !strings.Contains(stderr, "run `simba migrate` with the same -dsn") {
				t.Errorf("simba %s on a SQLite database %s: exit status %d, stdout %q, stderr %q; want 1 and the migrate hint",
					cmd, tc.what, status, stdout, stderr)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := sqlbackend.Open(ctx, tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		v, err := b.SchemaVersion(ctx)
		b.Close()
		cancel()
		if tc.version == 0 && !errors.Is(err, simba.ErrSchemaMissing) || tc.version != 0 && (err != nil || v != tc.version) {
			t.Errorf("SQLite database %s: schema version %d, %v afterwards; want it unchanged", tc.what, v, err)
		}
		if _, stderr, status := runSimba(t, "migrate", "-dsn", tc.dsn); status != 0 {
			t.Fatalf("simba migrate: exit status %d, stderr %q", status, stderr)
		}
		for _, cmd := range []string{"run", "lock"} {
			if stdout, stderr, status := runSimba(t, cmd, "-dsn", tc.dsn, "-name", "job", "--", "echo", "ran"); status != 0 || stdout != "ran\n" {
				t.Errorf("simba %s on a SQLite database %s after simba migrate: exit status %d, stdout %q, stderr %q; want 0",
					cmd, tc.what, status, stdout, stderr)
			}
		}
	}
}

// TestErrorLine: the line main prints drops the "simba: " the library puts at the start of its
// messages and after each wrapping, keeping one in front.
func TestErrorLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{simba.ErrInvalidOption, "simba: invalid option"},
		{fmt.Errorf("%w: -dsn is required", simba.ErrInvalidOption), "simba: invalid option: -dsn is required"},
		{fmt.Errorf("leadership of job lost: %w", fmt.Errorf("simba: term job#3 revoked: %w", simba.ErrUnavailable)),
			"simba: leadership of job lost: term job#3 revoked: backend unavailable"},
		{errors.New("lock \"simba: x\" held"), "simba: lock \"simba: x\" held"},
		{errors.New("bad \x1b[2J byte"), `simba: bad \x1b[2J byte`},
		// pgx's connect error, an attempt a line (seen: a refused role printed as
		// "...`:\n\t127.0.0.1:5432 ...\n\t127.0.0.1:5432 ...", escapes and all).
		{errors.New("failed to connect to `user=x database=test`:\n\t127.0.0.1:5432: FATAL: no role\n\t127.0.0.1:5432: FATAL: no role"),
			"simba: failed to connect to `user=x database=test`: 127.0.0.1:5432: FATAL: no role; 127.0.0.1:5432: FATAL: no role"},
		{errors.Join(errors.New("one"), errors.New("two")), "simba: one; two"},
		{errors.New("bad \n\r line"), `simba: bad ; \r line`},
	} {
		if got := errorLine(tc.err); got != tc.want {
			t.Errorf("errorLine(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestStatusPrefixAndAll runs `simba status` on SQLite with leases jobs.a (held), jobs.b (free)
// and other (held by another session): -prefix jobs. shows only jobs. leases and the session
// holding one; free leases show only with -all, and a line says how many were hidden.
func TestStatusPrefixAndAll(t *testing.T) {
	ctx, dsn, b := sqliteStatusBackend(t)
	jobs, err := b.OpenSession(ctx, "jobs-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	others, err := b.OpenSession(ctx, "other-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		s    spi.Session
		name string
	}{{jobs, "jobs.a"}, {jobs, "jobs.b"}, {others, "other"}} {
		if a, err := b.Acquire(ctx, l.s.ID, l.name); err != nil || a.Kind != spi.Granted {
			t.Fatalf("acquire %s: %+v, %v", l.name, a, err)
		} else if l.name == "jobs.b" {
			if err := b.Release(ctx, l.s.ID, l.name, a.Token); err != nil {
				t.Fatal(err)
			}
		}
	}
	status := func(args ...string) string {
		var buf bytes.Buffer
		if err := statusTo(ctx, &buf, append([]string{"-dsn", dsn}, args...)); err != nil {
			t.Fatal(err)
		}
		t.Logf("simba status %q:\n%s", args, buf.String())
		return buf.String()
	}
	check := func(out string, want, notWant []string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q", w)
			}
		}
		for _, w := range notWant {
			if strings.Contains(out, w) {
				t.Errorf("output shows %q", w)
			}
		}
	}
	check(status(), []string{"jobs.a", "other", "jobs-worker", "other-worker", "1 free lease(s) not shown"}, []string{"jobs.b"})
	check(status("-all"), []string{"jobs.a", "jobs.b", "other"}, []string{"not shown"})
	check(status("-prefix", "jobs."), []string{"jobs.a", "jobs-worker", "1 free lease(s) not shown"}, []string{"jobs.b", "other"})
	check(status("-prefix", "jobs.", "-all"), []string{"jobs.a", "jobs.b", "jobs-worker"}, []string{"other"})
}

// TestStatusFilterGroups: -prefix keeps the groups whose name starts with it and their
// members' sessions.
func TestStatusFilterGroups(t *testing.T) {
	snap := spi.Snapshot{
		Leases: []spi.LeaseInfo{{Name: "jobs.a", Holder: "s1", Owner: "w1", Token: 1, Remaining: time.Second}},
		Sessions: []spi.SessionInfo{
			{ID: "s1", Owner: "w1", Remaining: time.Second},
			{ID: "s2", Owner: "w2", Remaining: time.Second},
			{ID: "s3", Owner: "w3", Remaining: time.Second},
		},
		Groups: map[string][]simba.SessionID{"jobs.consumers": {"s2"}, "mail": {"s3"}},
	}
	got, hidden := statusFilter{prefix: "jobs."}.apply(snap)
	var ids []simba.SessionID
	for _, s := range got.Sessions {
		ids = append(ids, s.ID)
	}
	if hidden != 0 || len(got.Leases) != 1 || len(got.Groups) != 1 || got.Groups["jobs.consumers"] == nil ||
		fmt.Sprint(ids) != "[s1 s2]" {
		t.Errorf("filtered snapshot %+v (hidden %d), want jobs.a, jobs.consumers and sessions s1, s2", got, hidden)
	}
}

// TestNewSQLiteFileWaitsForAWriter: while another connection writes to a SQLite file not yet in
// WAL mode (another simba run or lock setting up the same new file), the journal_mode=wal of
// newSQLiteFile's connection fails with SQLITE_BUSY at once, without the busy handler;
// newSQLiteFile tries again until the writer is done instead of failing the command ("reading
// the tables of …: database is locked", one round in sixty of six concurrent simba lock).
func TestNewSQLiteFileWaitsForAWriter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "busy.db")
	committed := sqlitetest.WriterOnNewFile(t, ctx, path, 300*time.Millisecond)
	fresh, err := newSQLiteFile(ctx, "sqlite://"+path)
	if err != nil || fresh {
		t.Errorf("newSQLiteFile while another connection writes = %v, %v; want false (it has a table), nil", fresh, err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
}

// TestDemoRefusesABadDSNBeforeItStarts: a DSN that cannot work is a usage error (exit 2) with
// nothing on stdout; the demo used to print its banner ("3 worker processes electing … on
// foo://") before it found the DSN bad.
func TestDemoRefusesABadDSNBeforeItStarts(t *testing.T) {
	for _, dsn := range []string{"foo://x", "postgres://%zz", "redis://127.0.0.1:6379?foo=bar"} {
		stdout, stderr, status := runSimba(t, "demo", "-dsn", dsn)
		if status != 2 || stdout != "" || !strings.HasPrefix(stderr, "simba: invalid option: ") {
			t.Errorf("simba demo -dsn %q: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, one invalid option line", dsn, status, stdout, stderr)
		}
	}
}

// TestFlagsOnlyCommandsRefuseArguments: migrate, status and demo take flags only; an argument
// is a usage error (exit 2) naming it, before any I/O. The flag package stops at the first
// argument that is not a flag, so `simba status extra -dsn D` failed for want of the -dsn it
// was given, and `simba migrate -dsn D extra` (or status, or demo) ran with extra dropped.
func TestFlagsOnlyCommandsRefuseArguments(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite://" + filepath.Join(dir, "simba.db")
	for _, tc := range []struct {
		args     []string
		mentions string
	}{
		{[]string{"migrate", "-dsn", dsn, "extra"}, `unexpected argument "extra": simba migrate takes flags only`},
		{[]string{"status", "extra", "-dsn", dsn}, `unexpected argument "extra": simba status takes flags only, and the flags after it were not read`},
		{[]string{"status", "-dsn", dsn, "-prefix", "a", "b"}, `unexpected argument "b": simba status takes flags only`},
		{[]string{"demo", "-workers", "3", "extra"}, `unexpected argument "extra": simba demo takes flags only`},
	} {
		stdout, stderr, status := runSimba(t, tc.args...)
		if status != 2 || stdout != "" || !strings.HasPrefix(stderr, "simba: invalid option: ") || !strings.Contains(stderr, tc.mentions) {
			t.Errorf("simba %q: exit %d, stdout %q, stderr %q; want exit 2 and an error saying %q", tc.args, status, stdout, stderr, tc.mentions)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "simba.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused command created the database file (stat: %v)", err)
	}
}

package main

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/simba-go/simba/internal/printable"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"
	sqlbackend "github.com/simba-go/simba/backend/sql"
)

// checkTerminalSafe fails unless out is valid UTF-8 with no control character but newlines
// (no ESC, CSI, BEL, NUL, CR, DEL) and no bidirectional override.
func checkTerminalSafe(t *testing.T, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("output is not valid UTF-8: %q", out)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) || r == '\u202e' {
			t.Errorf("output has %U at byte %d: %q", r, i, out)
		}
	}
}

// TestPrintStatusEscapes: every string of a snapshot — names, holder ids, owners, group names
// and members — is printed escaped when it carries control characters or invalid UTF-8, and
// unchanged otherwise.
func TestPrintStatusEscapes(t *testing.T) {
	const esc = "\x1b[2J\x1b]0;pwned\x07"
	snap := spi.Snapshot{
		Leases: []spi.LeaseInfo{
			{Name: "jobs", Holder: "0123456789abcdef", Owner: "web-1:42", Token: 7, Remaining: time.Second},
			{Name: "x" + esc, Holder: simba.SessionID("h" + esc), Owner: "o" + esc + "\xff\u202e\u009b", Token: 1, Remaining: time.Second},
		},
		Sessions: []spi.SessionInfo{{ID: simba.SessionID("s\r" + esc), Owner: "\x00nul", Remaining: time.Second}},
		Groups:   map[string][]simba.SessionID{"g" + esc: {"m\t" + esc, "ok-member"}},
	}
	var buf bytes.Buffer
	if err := printStatus(&buf, snap, statusFilter{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	checkTerminalSafe(t, out)
	for _, want := range []string{"web-1:42", "jobs", "ok-member", `\x1b[2J`, `\xff`, `\u202e`, `\x00nul`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestStatusOnSQLiteEscapesForgedOwner: an owner with a terminal escape sequence, written into
// the session row by hand (no client can open such a session), never reaches the terminal.
func TestStatusOnSQLiteEscapesForgedOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "simba.db")
	dsn := "sqlite://" + path
	b, err := sqlbackend.Open(ctx, dsn, sqlbackend.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.OpenSession(ctx, "honest", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := b.Acquire(ctx, s.ID, "jobs"); err != nil || a.Kind != spi.Granted {
		t.Fatalf("acquire: %+v, %v", a, err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "UPDATE simba_session SET owner = ? WHERE id = ?", "\x1b[2J\x1b[31mforged\x00", string(s.ID)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := statusTo(ctx, &buf, []string{"-dsn", dsn}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	if strings.Contains(out, "\x1b") {
		t.Error("an ESC byte reached the output")
	}
	checkTerminalSafe(t, out)
	if !strings.Contains(out, `\x1b[2J\x1b[31mforged\x00`) {
		t.Errorf("output does not show the forged owner escaped")
	}
}

// TestEscapeControls: error messages printed by the CLI keep their text and quotes but lose
// every control character, format character and invalid byte to an escape.
func TestEscapeControls(t *testing.T) {
	for in, want := range map[string]string{
		`lock "x" held by web-1 (ab12)`: `lock "x" held by web-1 (ab12)`,
		"held by \x1b[2Jevil\x07":       `held by \x1b[2Jevil\a`,
		"bad \xff byte, nul \x00":       `bad \xff byte, nul \x00`,
		"bidi \u202e, c1 \u009b, é 界":   `bidi \u202e, c1 \u009b, é 界`,
		"two\nlines\ttab\r":             `two\nlines\ttab\r`,
	} {
		got := printable.Escape(in)
		if got != want {
			t.Errorf("printable.Escape(%q) = %q, want %q", in, got, want)
		}
		checkTerminalSafe(t, got)
	}
}

// TestPrintStatusUnknownRemaining: a lease and a session whose time left the backend cannot
// tell (ZooKeeper, another client's session) show REMAINING "unknown", not 0s, which would
// read as about to expire; a group without members is not listed, on any backend.
func TestPrintStatusUnknownRemaining(t *testing.T) {
	snap := spi.Snapshot{
		Leases: []spi.LeaseInfo{
			{Name: "zk-held", Holder: "0x1", Owner: "other", Token: 7, RemainingUnknown: true},
			{Name: "sql-held", Holder: "s2", Owner: "mine", Token: 8, Remaining: 1500 * time.Millisecond},
		},
		Sessions: []spi.SessionInfo{
			{ID: "0x1", Owner: "other", RemainingUnknown: true},
			{ID: "s2", Owner: "mine", Remaining: 1500 * time.Millisecond},
		},
		Groups: map[string][]simba.SessionID{"emptied": {}, "workers": {"s2"}},
	}
	var buf bytes.Buffer
	if err := printStatus(&buf, snap, statusFilter{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = strings.Join(f, " ")
		}
	}
	for first, want := range map[string]string{
		"zk-held":  "zk-held 7 0x1 other unknown",
		"sql-held": "sql-held 8 s2 mine 1.5s",
		"0x1":      "0x1 other unknown",
		"s2":       "s2 mine 1.5s",
		"workers":  "workers [s2]",
	} {
		if lines[first] != want {
			t.Errorf("line %q, want %q", lines[first], want)
		}
	}
	if strings.Contains(out, "emptied") || strings.Contains(out, " 0s") {
		t.Errorf("output lists the group without members or a remaining time of 0s")
	}
}

// TestPrintStatusUnreadableRecord: a lease record the backend could not read (spi.LeaseInfo's
// Unreadable, a forged Redis hash) is listed without -all and never as free: its holder field,
// or "?" when it has none, and "unreadable record: <why>" in REMAINING, escaped. Before
// Unreadable was shown, such a record with no holder read as free ("-") and was hidden without
// -all: this test failed on that code.
func TestPrintStatusUnreadableRecord(t *testing.T) {
	snap := spi.Snapshot{Leases: []spi.LeaseInfo{
		{Name: "forged-token", Unreadable: `token "abc" is not a plain decimal integer`, RemainingUnknown: true},
		{Name: "forged-expiry", Holder: "h1", Owner: "x", Token: 7, Unreadable: "held by \"h1\" with no expiry\x1b", RemainingUnknown: true},
		{Name: "free", Token: 3},
	}}
	var buf bytes.Buffer
	if err := printStatus(&buf, snap, statusFilter{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	for _, want := range []string{
		`forged-token   0      ?       -      unreadable record: token "abc" is not a plain decimal integer`,
		`forged-expiry  7      h1      x      unreadable record: held by "h1" with no expiry\x1b`,
		"(1 free lease(s) not shown",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("output carries a raw ESC")
	}
}

// TestPrintStatusUnreadableSession: a session whose record lies beyond any TTL (a forged Redis
// or SQL session expiring years away; spi.BoundSession marks it) shows "unreadable record:
// <why>" in REMAINING, never its figure of years. Before, only lease records were checked
// against the 24 h bound, and such a session showed its real figure (the backend side:
// TestInspectForgedSession in backend/redis).
func TestPrintStatusUnreadableSession(t *testing.T) {
	snap := spi.Snapshot{Sessions: []spi.SessionInfo{
		spi.BoundSession(spi.SessionInfo{ID: "forged", Owner: "x", Remaining: 10 * 365 * 24 * time.Hour}),
		spi.BoundSession(spi.SessionInfo{ID: "sound", Owner: "y", Remaining: 15 * time.Second}),
	}}
	var buf bytes.Buffer
	if err := printStatus(&buf, snap, statusFilter{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"forged   x      unreadable record: expiry 87600h0m0s away, beyond the longest session TTL (24h0m0s)",
		"sound    y      15s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "87600h0m0s\n") {
		t.Errorf("the forged session's figure is shown as its time left")
	}
}

// TestStatusOnZooKeeperIsQuiet: simba status at a ZooKeeper DSN without credentials prints the
// tables and nothing on stderr: it only reads and creates no node, so the warning that the
// nodes a backend creates without credentials are open is not its business (simba lock, which
// creates them, still warns).
func TestStatusOnZooKeeperIsQuiet(t *testing.T) {
	dsn := zktest.New(t, testenv.ZooKeeper(t), "simba-cli-status").DSN("", "")
	stdout, stderr, status := runSimba(t, "status", "-dsn", dsn)
	if status != 0 || !strings.HasPrefix(stdout, "LEASE") || stderr != "" {
		t.Fatalf("simba status -dsn %s: exit status %d, stdout %q, stderr %q; want 0, the tables and nothing on stderr", dsn, status, stdout, stderr)
	}
	_, stderr, status = runSimba(t, "lock", "-dsn", dsn, "-name", "quiet", "--", "true")
	if status != 0 || !strings.Contains(stderr, "put a user:password in the DSN") {
		t.Errorf("simba lock -dsn %s: exit status %d, stderr %q; want 0 and the open-ACL warning", dsn, status, stderr)
	}
}

// TestPrintStatusColumnsSplitOnSpaces: every row of the lease and session tables has one
// field per column when split on spaces, as a script's awk or cut splits it: a free lease, or
// a session with no owner, shows "-" in OWNER. Before, a free lease's OWNER was blank, so
// `simba status -all | awk '{print $4}'` read its REMAINING as its owner (trial 32).
func TestPrintStatusColumnsSplitOnSpaces(t *testing.T) {
	snap := spi.Snapshot{
		Leases: []spi.LeaseInfo{
			{Name: "held", Holder: "0123456789abcdef", Owner: "web-1:42", Token: 7, Remaining: time.Second},
			{Name: "free", Token: 3},
			{Name: "noowner", Holder: "fedcba9876543210", Token: 9, Remaining: time.Second},
		},
		Sessions: []spi.SessionInfo{
			{ID: "0123456789abcdef", Owner: "web-1:42", Remaining: time.Second},
			{ID: "fedcba9876543210", Remaining: time.Second},
		},
	}
	var buf bytes.Buffer
	if err := printStatus(&buf, snap, statusFilter{all: true}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	tables := strings.Split(out, "\n\n")
	if len(tables) != 3 {
		t.Fatalf("want 3 tables, got %d:\n%s", len(tables), out)
	}
	for i, cols := range []int{5, 3} {
		for _, row := range strings.Split(tables[i], "\n") {
			if f := strings.Fields(row); len(f) != cols {
				t.Errorf("row %q has %d fields, want %d:\n%s", row, len(f), cols, out)
			}
		}
	}
}

// printStatus prints snap as simba status does: the part f keeps, as tables.
func printStatus(out io.Writer, snap spi.Snapshot, f statusFilter) error {
	kept, free := f.apply(snap)
	return printKept(out, kept, f, free)
}

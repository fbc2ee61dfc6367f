package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
		got := escapeControls(in)
		if got != want {
			t.Errorf("escapeControls(%q) = %q, want %q", in, got, want)
		}
		checkTerminalSafe(t, got)
	}
}

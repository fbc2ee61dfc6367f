package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dropSessionsCommand makes the test binary (TestMain) rename the simba_session table of the
// SQLite file named by its argument away: a command for `simba run` after which the client's
// session can no longer be closed (the backend refuses: schema missing).
const dropSessionsCommand = "test-drop-sessions"

func dropSessions(path string) int {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "ALTER TABLE simba_session RENAME TO simba_session_gone"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	return 0
}

// TestRunReportsAFailedSessionClose: `simba run` whose session cannot be closed at exit (here
// its command renamed the session table away, so the backend refuses the close) says so on
// stderr, naming the session and the refusal, and still exits with the command's status (0):
// the command ran, and what the failed close leaves (the session, the lease) lapses at the TTL.
// simba run exited 0 without a word (Close's *SessionCloseError was dropped).
func TestRunReportsAFailedSessionClose(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "db.sqlite")
	start := time.Now()
	stdout, stderr, status := runSimba(t, "run", "-dsn", "sqlite://"+file, "-name", "job", "-ttl", "3s", "--", self, dropSessionsCommand, file)
	t.Logf("simba run: exit status %d after %v, stderr %q", status, time.Since(start).Round(time.Millisecond), stderr)
	if status != 0 || stdout != "" {
		t.Errorf("exit status %d, stdout %q; want the command's 0 and nothing", status, stdout)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "simba: at exit: close: the backend refused to close session ") ||
		!strings.Contains(lines[0], "schema missing") || !strings.Contains(lines[0], "lapses at its TTL") {
		t.Errorf("stderr %q, want one line saying the session's close was refused (schema missing) and that it lapses at its TTL", stderr)
	}
}

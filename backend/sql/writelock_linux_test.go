package sql

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestSQLiteWriteLockHolderNamed: while a process outside Simba holds a write transaction on
// the file, a keep-alive waits in SQLite's busy handler until its deadline; its error says
// which process holds the write lock, where it said only "context deadline exceeded" (a trial
// of four members on one file lost every session to a sqlite3 shell's BEGIN IMMEDIATE, and
// their errors did not say why).
func TestSQLiteWriteLockHolderNamed(t *testing.T) {
	dsn := liteDSN(t)
	b := migrated(t, dsn)
	s := openSession(t, b, longTTL)
	cmd, stdin, stdout := startChild(t, writerEnv+"="+strings.TrimPrefix(dsn, "sqlite://"))
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "locked" {
		t.Fatalf("the writer said %q, %v", sc.Text(), sc.Err())
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	_, err := b.KeepAlive(ctx, s, nil, nil)
	if !errors.Is(err, spi.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("keep-alive under another process's write lock: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if want := fmt.Sprintf("process %d holds SQLite's write lock", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("keep-alive under another process's write lock: %v, want it to say %q", err, want)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	if _, err := b.KeepAlive(testCtx(t), s, nil, nil); err != nil {
		t.Fatalf("keep-alive once the writer is gone: %v", err)
	}
}

// TestSQLiteBusyNamesFileAndHolder: while a process outside Simba holds a write transaction on
// the file past busy_timeout (100 ms in the DSN; the call's deadline is longer), a keep-alive
// fails with SQLITE_BUSY, retryably (spi.ErrUnavailable, not permanent), and the error names
// the file and the process holding its write lock; once that process ends its transaction the
// same keep-alive succeeds, so retrying was right: the condition lasts as long as the other
// process's transaction, which nothing but its end lifts. On the old code the error said only
// "database is locked (5) (SQLITE_BUSY)".
func TestSQLiteBusyNamesFileAndHolder(t *testing.T) {
	dsn := liteDSN(t)
	file := strings.TrimPrefix(dsn, "sqlite://")
	b := migrated(t, dsn+"?_pragma=busy_timeout(100)")
	s := openSession(t, b, longTTL)
	cmd, stdin, stdout := startChild(t, writerEnv+"="+file)
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "locked" {
		t.Fatalf("the writer said %q, %v", sc.Text(), sc.Err())
	}
	_, err := b.KeepAlive(testCtx(t), s, nil, nil)
	t.Logf("keep-alive past busy_timeout: %v", err)
	if !errors.Is(err, spi.ErrUnavailable) || spi.Classify(err) != spi.Retryable || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("keep-alive past busy_timeout: %v, want a retryable ErrUnavailable (SQLITE_BUSY, not the deadline)", err)
	}
	for _, want := range []string{"SQLITE_BUSY", fmt.Sprintf("process %d holds SQLite's write lock on %s", cmd.Process.Pid, file), "busy_timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("keep-alive past busy_timeout: %v, want it to say %q", err, want)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	if _, err := b.KeepAlive(testCtx(t), s, nil, nil); err != nil {
		t.Fatalf("keep-alive once the writer is gone: %v", err)
	}
}

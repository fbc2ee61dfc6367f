// Package sqlitetest sets SQLite files up for tests of the code that opens them (the SQL
// backend, the CLI): the states other processes leave a file in.
package sqlitetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// WriterOnNewFile makes the file at path, still in rollback-journal mode as a new file is before
// any WAL, with a table and a write transaction open on it — another process setting the same
// new file up — and commits that transaction after commitAfter. The returned channel gets the
// COMMIT's error. Meanwhile a new connection's PRAGMA journal_mode=wal fails with SQLITE_BUSY at
// once, without waiting in the busy handler. The writer's own busy timeout makes its COMMIT wait
// for the readers that try again meanwhile. Everything is closed when the test ends.
func WriterOnNewFile(t testing.TB, ctx context.Context, path string, commitAfter time.Duration) <-chan error {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, st := range []string{"CREATE TABLE other (x)", "BEGIN IMMEDIATE", "INSERT INTO other VALUES (1)"} {
		if _, err := c.ExecContext(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	committed := make(chan error, 1)
	time.AfterFunc(commitAfter, func() {
		_, err := c.ExecContext(ctx, "COMMIT")
		committed <- err
	})
	return committed
}

package sql

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
)

// writerEnv carries the SQLite file to the child of TestSQLiteWriteLockHolderNamed, which
// holds a write transaction on it as the sqlite3 shell's BEGIN IMMEDIATE does.
const writerEnv = "SIMBA_SQL_WRITER_FILE"

// writerChild runs that child's part when the binary was started as it, and reports whether
// it did: it begins a write transaction, says "locked", and rolls back when its stdin closes.
func writerChild() bool {
	file := os.Getenv(writerEnv)
	if file == "" {
		return false
	}
	err := func() error {
		db, err := sql.Open("sqlite", file)
		if err != nil {
			return err
		}
		defer db.Close()
		ctx := context.Background()
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return err
		}
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		_, err = c.ExecContext(ctx, "ROLLBACK")
		return err
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer child:", err)
		os.Exit(2)
	}
	os.Exit(0)
	return true
}

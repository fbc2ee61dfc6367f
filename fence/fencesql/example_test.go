package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencesql"
)

// A holder's token guards its write to the resource's own database: the stale write of a
// holder that lost its lock is rolled back.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fencesql-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")

	// The fence table comes with Simba's migrations (0002_fence.sql): `simba migrate -dsn …`,
	// or a SQL backend's Migrate, on the resource's database.
	b, err := simbasql.Open(ctx, "sqlite://"+path, simbasql.WithAutoMigrate())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	db, _ := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	defer db.Close()
	_, _ = db.ExecContext(ctx, "CREATE TABLE invoice (id INTEGER PRIMARY KEY, status TEXT)")
	_, _ = db.ExecContext(ctx, "INSERT INTO invoice VALUES (42, 'open')")

	f, _ := fencesql.New(db, "sqlite")
	setStatus := func(token int64, status string) error {
		// token is held.Token() of the lock "invoice-42" (simba.Client.Lock).
		return f.Write(ctx, "invoice-42", token, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE invoice SET status = ? WHERE id = 42", status)
			return err
		})
	}
	fmt.Println(setStatus(1796238121161000, "paid")) // the current holder
	err = setStatus(1796238119122000, "cancelled")   // a paused ex-holder
	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	var status string
	_ = db.QueryRowContext(ctx, "SELECT status FROM invoice WHERE id = 42").Scan(&status)
	fmt.Println(status)
	// Output:
	// <nil>
	// true
	// paid
}

// Command postgres elects a leader among processes anywhere through PostgreSQL.
//
// Run it in two terminals: one process leads, the other waits as a candidate; stop the leader
// (Ctrl-C) and the other takes over at once (PostgreSQL tells it, by LISTEN/NOTIFY) with a
// greater fencing token. Kill it instead (kill -9) and the other takes over once the leader's
// lease has expired (its TTL, 3 s here).
//
//	go run ./examples/postgres -for 1m
//	go run ./examples/postgres -dsn 'postgres://app:secret@db.internal:5432/app?sslmode=require'
package main

import (
	"context"
	"io"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/examples/internal/elect"
)

func main() { cli.Main("postgres", run) }

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := elect.NewFlags("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "the PostgreSQL database, as a postgres:// URL")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	// The backend: a pool on the database, with Simba's tables created if missing (or apply
	// sql/schema/postgres with your migration tool, or run simba migrate, and drop the option).
	backend, err := simbasql.Open(ctx, flags.DSN, simbasql.WithAutoMigrate())
	if err != nil {
		return err
	}
	defer backend.Close()

	// The election: a candidate that leads until ctx ends (see package elect).
	return elect.Run(ctx, stdout, backend, flags.Options())
}

// Command sqlite elects a leader among the processes of one host through a SQLite file.
//
// Run it in two terminals: one process leads, the other waits as a candidate; stop the leader
// (Ctrl-C) and the other takes over with a greater fencing token. Kill it instead (kill -9) and
// the other takes over once the leader's lease has expired (its TTL, 3 s here).
//
//	go run ./examples/sqlite -for 1m
//	go run ./examples/sqlite -dsn sqlite:///var/lib/app/simba.db
package main

import (
	"context"
	"io"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/examples/internal/elect"
)

func main() { cli.Main("sqlite", run) }

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := elect.NewFlags("sqlite", cli.SQLiteDSN, "the SQLite file, as sqlite:///path/to/file.db")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	// The backend: a pool on the file (created if missing), with Simba's tables.
	backend, err := simbasql.Open(ctx, flags.DSN, simbasql.WithAutoMigrate())
	if err != nil {
		return err
	}
	defer backend.Close()

	// The election: a candidate that leads until ctx ends (see package elect).
	return elect.Run(ctx, stdout, backend, flags.Options())
}

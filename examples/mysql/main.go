// Command mysql elects a leader among processes anywhere through MySQL 8 or MariaDB 10.11.
//
// Run it in two terminals: one process leads, the other waits as a candidate; stop the leader
// (Ctrl-C) or kill it (kill -9) and the other takes over with a greater fencing token, within
// the leader's TTL (3 s here: MySQL cannot tell a candidate that a lease was released, so the
// candidate retries when the holder's lease would expire).
//
//	go run ./examples/mysql -for 1m
//	go run ./examples/mysql -dsn 'mysql://app:secret@db.internal:3306/app?tls=true'
package main

import (
	"context"
	"io"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/examples/internal/elect"
)

func main() { cli.Main("mysql", run) }

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := elect.NewFlags("mysql", "mysql://root@127.0.0.1:3306/test", "the MySQL/MariaDB database, as a mysql:// URL")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	// The backend: a pool on the database, with Simba's tables created if missing (or apply
	// sql/schema/mysql with your migration tool, or run simba migrate, and drop the option).
	backend, err := simbasql.Open(ctx, flags.DSN, simbasql.WithAutoMigrate())
	if err != nil {
		return err
	}
	defer backend.Close()

	// The election: a candidate that leads until ctx ends (see package elect).
	return elect.Run(ctx, stdout, backend, flags.Options())
}

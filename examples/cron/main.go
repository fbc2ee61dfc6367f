// Command cron runs a job every -every on exactly one of its replicas: the leader of an
// election, through simba.Schedule. Start as many replicas as you like; one runs the job, the
// others wait, and when the leader stops or dies another one takes over, with a greater fencing
// token (hand it to what the job writes to).
//
// The DSN is any of package backend/sql's: a SQLite file (the default; replicas on one host),
// or a PostgreSQL or MySQL/MariaDB database (replicas anywhere).
//
//	go run ./examples/cron -every 2s -for 1m    # in two terminals; Ctrl-C the one that runs the job
//	go run ./examples/cron -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/examples/internal/cli"
)

func main() { cli.Main("cron", run) }

// run is one replica: it runs the job while it leads, until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := cli.NewFlags("cron", cli.SQLiteDSN, cli.SQLUsage, 10*time.Second)
	name := flags.String("name", "example-cron", "the job's name: replicas with the same name share it")
	flags.AddOwner("replica")
	every := flags.Duration("every", time.Second, "how often the job runs")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	backend, err := simbasql.Open(ctx, flags.DSN, simbasql.WithAutoMigrate())
	if err != nil {
		return err
	}
	defer backend.Close()
	client, err := cli.Client(backend, flags.Owner) // a TTL of 3 s: a takeover after a crash is quick to watch
	if err != nil {
		return err
	}
	defer client.Close(context.WithoutCancel(ctx))
	me := client.Owner()

	// The job: Schedule calls it at once when this replica is elected, then every interval
	// while it leads. A long job should watch ctx, which ends with the term.
	job := func(ctx context.Context, t simba.Term) {
		fmt.Fprintf(stdout, "%s runs the job at %s with token %d\n", me, time.Now().Format(time.TimeOnly), t.Token())
	}
	election, err := client.NewElection(*name,
		simba.Schedule(*every, job),
		simba.OnRevoked(func(_ context.Context, t simba.Term, reason simba.RevokeReason) {
			fmt.Fprintf(stdout, "%s no longer runs the job (token %d: %v)\n", me, t.Token(), reason)
		}))
	if err != nil {
		return err
	}
	if err := election.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s is a replica of %s\n", me, *name)
	<-ctx.Done()

	// Hand the job over: the lease is released once a run in progress has returned.
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelStop()
	if err := election.Stop(stopCtx); err != nil {
		return err
	}
	return election.Err()
}

// Command zookeeper elects a leader among processes anywhere through ZooKeeper.
//
// Run it in two terminals: one process leads, the other waits as a candidate; stop the leader
// (Ctrl-C) and the other takes over at once (a watch tells it) with a greater fencing token,
// the lease node's czxid. Kill it instead (kill -9) and the other takes over once the leader's
// ZooKeeper session has expired (its TTL, 3 s here, raised to the server's minSessionTimeout).
//
// Without user:password in the DSN Simba's nodes are open to every client of the ensemble, and
// the backend warns about it once (on slog's default logger).
//
//	go run ./examples/zookeeper -for 1m
//	go run ./examples/zookeeper -dsn 'zk://app:secret@zk1:2181,zk2:2181,zk3:2181/myapp'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/spi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "zookeeper:", err)
		os.Exit(1)
	}
}

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("zookeeper", flag.ContinueOnError)
	dsn := flags.String("dsn", "zk://127.0.0.1:2181", "the ensemble, as a zk:// URL naming some of its servers")
	name := flags.String("name", "example-leader", "the election's name")
	owner := flags.String("owner", "", "who this process is, as the holder shows (default host:pid)")
	runFor := flags.Duration("for", 10*time.Second, "how long to run")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *runFor)
	defer cancel()

	// The backend: each Simba session is a ZooKeeper session (New does no I/O).
	backend, err := zookeeper.New(*dsn)
	if err != nil {
		return err
	}
	defer backend.Close()

	// A short TTL, so that a takeover after a crash is quick to watch.
	opts := []simba.Option{simba.WithTTL(3 * time.Second)}
	if *owner != "" {
		opts = append(opts, simba.WithOwner(*owner))
	}
	client, err := simba.New(backend, opts...)
	if err != nil {
		return err
	}
	defer client.Close(context.WithoutCancel(ctx))

	election, err := client.NewElection(*name, simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
		fmt.Fprintf(stdout, "%s leads %s with token %d\n", client.Owner(), t.Name(), t.Token())
		// The leader's work goes here: hand t.Token() to whatever it writes to, and stop when
		// ctx ends (the term is over).
		<-ctx.Done()
		fmt.Fprintf(stdout, "%s stops leading %s: %v\n", client.Owner(), t.Name(), context.Cause(ctx))
		return nil
	}))
	if err != nil {
		return err
	}
	events := election.Events(ctx)
	if err := election.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s is a candidate for %s\n", client.Owner(), *name)
	for ev := range events { // until ctx ends
		if ev.Kind == simba.EventBackendError {
			fmt.Fprintf(stdout, "%s: %v\n", client.Owner(), ev)
			if ev.Class == spi.Permanent { // a misconfiguration: retrying will not help
				return ev.Err
			}
		}
	}

	// Let the name go: the work's ctx is cancelled, and the lease released once it returns.
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelStop()
	return election.Stop(stopCtx)
}

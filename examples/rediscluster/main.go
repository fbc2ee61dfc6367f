// Command rediscluster elects a leader among processes anywhere through a Redis Cluster.
//
// Run it in two terminals: one process leads, the other waits as a candidate; stop the leader
// (Ctrl-C) and the other takes over at once with a greater fencing token. Kill it instead
// (kill -9) and the other takes over once the leader's lease has expired (its TTL, 3 s here).
//
// A Cluster DSN names some of the nodes (the client discovers the rest) and must use the
// redis+cluster scheme: a plain redis:// DSN pointed at a Cluster node is refused at once, as a
// permanent error, since its keys would not follow their slots.
//
//	go run ./examples/rediscluster -for 1m
//	go run ./examples/rediscluster -dsn 'redis+cluster://app:secret@10.0.0.1:6379,10.0.0.2:6379'
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
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/spi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rediscluster:", err)
		os.Exit(1)
	}
}

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("rediscluster", flag.ContinueOnError)
	dsn := flags.String("dsn", "redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003", "the Cluster, as a redis+cluster:// URL naming some of its nodes")
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

	// The backend: a go-redis Cluster client of its own (Open does no I/O; Close closes it).
	backend, err := redis.Open(*dsn)
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

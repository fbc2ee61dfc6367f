// Package elect is the program of the backend examples (sqlite, postgres, mysql, redis,
// rediscluster, zookeeper) once each has opened its backend: a candidate for an election that
// prints when it becomes a candidate, when it leads (with its fencing token) and when it stops
// leading, until its context ends.
//
// The lines it prints, which the examples' tests read, are
//
//	<owner> is a candidate for <name>
//	<owner> leads <name> with token <token>
//	<owner> stops leading <name>: <cause>
//	<owner>: <backend error event>
package elect

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/spi"
)

// Flags are a backend example's flags: -dsn, -owner, -for (10 s by default) and -name.
type Flags struct {
	*cli.Flags
	Name string // -name: the election's name
}

// NewFlags returns the flags of the backend example program, whose -dsn defaults to dsn and is
// described by dsnUsage.
func NewFlags(program, dsn, dsnUsage string) *Flags {
	f := &Flags{Flags: cli.NewFlags(program, dsn, dsnUsage, 10*time.Second)}
	f.StringVar(&f.Name, "name", "example-leader", "the election's name")
	f.AddOwner("process")
	return f
}

// Options returns what Run needs of the flags.
func (f *Flags) Options() Options {
	return Options{Name: f.Name, Owner: f.Owner}
}

// Options are the election Run takes part in and who takes part.
type Options struct {
	Name  string // the election's name
	Owner string // who this process is, as the holder shows ("" for host:pid)
}

// StopTimeout bounds the release of the lease when Run returns.
const StopTimeout = 5 * time.Second

// Run is a candidate for the election opts.Name on backend, with a client of TTL cli.TTL: it
// leads or waits to lead until ctx ends, printing to stdout, then stops, releasing the lease if
// it leads. It returns early, with the event's error, on a permanent backend error (a
// misconfiguration: retrying will not help). The caller opens and closes backend.
func Run(ctx context.Context, stdout io.Writer, backend spi.Backend, opts Options) error {
	client, err := cli.Client(backend, opts.Owner)
	if err != nil {
		return err
	}
	defer client.Close(context.WithoutCancel(ctx))
	me := client.Owner()

	election, err := client.NewElection(opts.Name, simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
		fmt.Fprintf(stdout, "%s leads %s with token %d\n", me, t.Name(), t.Token())
		// The leader's work goes here: hand t.Token() to whatever it writes to, and stop when
		// ctx ends (the term is over).
		<-ctx.Done()
		fmt.Fprintf(stdout, "%s stops leading %s: %v\n", me, t.Name(), context.Cause(ctx))
		return nil
	}))
	if err != nil {
		return err
	}
	events := election.Events(ctx)
	if err := election.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s is a candidate for %s\n", me, opts.Name)
	for ev := range events { // until ctx ends
		if ev.Kind == simba.EventBackendError {
			fmt.Fprintf(stdout, "%s: %v\n", me, ev)
			if ev.Class == spi.Permanent { // a misconfiguration: retrying will not help
				return ev.Err
			}
		}
	}

	// Let the name go: the work's ctx is cancelled, and the lease released once it returns.
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), StopTimeout)
	defer cancelStop()
	return election.Stop(stopCtx)
}

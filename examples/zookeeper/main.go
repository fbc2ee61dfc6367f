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
	"io"

	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/examples/internal/elect"
)

func main() { cli.Main("zookeeper", run) }

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := elect.NewFlags("zookeeper", "zk://127.0.0.1:2181", "the ensemble, as a zk:// URL naming some of its servers")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	// The backend: each Simba session is a ZooKeeper session (New does no I/O).
	backend, err := zookeeper.New(flags.DSN)
	if err != nil {
		return err
	}
	defer backend.Close()

	// The election: a candidate that leads until ctx ends (see package elect).
	return elect.Run(ctx, stdout, backend, flags.Options())
}

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
	"io"

	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/examples/internal/elect"
)

func main() { cli.Main("rediscluster", run) }

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := elect.NewFlags("rediscluster", "redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003", "the Cluster, as a redis+cluster:// URL naming some of its nodes")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	// The backend: a go-redis Cluster client of its own (Open does no I/O; Close closes it).
	backend, err := redis.Open(flags.DSN)
	if err != nil {
		return err
	}
	defer backend.Close()

	// The election: a candidate that leads until ctx ends (see package elect).
	return elect.Run(ctx, stdout, backend, flags.Options())
}

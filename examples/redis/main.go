// Command redis elects a leader among processes anywhere through a standalone Redis server
// (a Sentinel-managed one works the same, through redis.New on a failover client).
//
// Run it in two terminals: one process leads, the other waits as a candidate; stop the leader
// (Ctrl-C) and the other takes over at once (Redis tells it, by PUBLISH) with a greater fencing
// token. Kill it instead (kill -9) and the other takes over once the leader's lease has expired
// (its TTL, 3 s here).
//
// The backend warns (on slog's default logger) when the server could lose lease hashes, the
// fencing tokens' memory: run Redis with appendonly yes and maxmemory-policy noeviction.
//
//	go run ./examples/redis -for 1m
//	go run ./examples/redis -dsn 'rediss://app:secret@redis.internal:6380/0'
package main

import (
	"context"
	"io"

	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/examples/internal/elect"
)

func main() { cli.Main("redis", run) }

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := elect.NewFlags("redis", "redis://127.0.0.1:6379", "the Redis server, as a redis:// or rediss:// URL")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	// The backend: a go-redis client of its own (Open does no I/O; Close closes it).
	backend, err := redis.Open(flags.DSN)
	if err != nil {
		return err
	}
	defer backend.Close()

	// The election: a candidate that leads until ctx ends (see package elect).
	return elect.Run(ctx, stdout, backend, flags.Options())
}

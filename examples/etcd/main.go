// Command etcd elects a leader among processes anywhere through etcd.
//
// Run it in two terminals: one process leads, the other waits as a candidate; stop the leader
// (Ctrl-C) and the other takes over at once (a watch on the lease prefix tells it) with a
// greater fencing token, the lease key's create revision. Kill it instead (kill -9) and the
// other takes over once etcd has revoked the leader's lease: its TTL (3 s here), plus up to
// half a second of etcd's own expiry check.
//
//	go run ./examples/etcd -for 1m
//	go run ./examples/etcd -dsn 'etcd://app:secret@etcd1:2379,etcd2:2379,etcd3:2379/myapp'
package main

import (
	"context"
	"io"

	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/examples/internal/elect"
)

func main() { cli.Main("etcd", run) }

// run is the program: it leads or waits to lead until ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := elect.NewFlags("etcd", "etcd://127.0.0.1:2379", "the cluster, as an etcd:// URL naming some of its members")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	// The backend: each Simba session is an etcd lease (New does no I/O).
	backend, err := etcd.New(flags.DSN)
	if err != nil {
		return err
	}
	defer backend.Close()

	// The election: a candidate that leads until ctx ends (see package elect).
	return elect.Run(ctx, stdout, backend, flags.Options())
}

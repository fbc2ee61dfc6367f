// Command partitions is a partitioned consumer: the -partitions partitions of a stream (the
// partitions of a topic, the shards of a queue table) are shared among every running copy of
// this program, each consumed by exactly one copy at a time. When a copy starts or stops, only
// its share moves: rendezvous hashing over the live members decides who owns what, and a
// partition moves only once its old consumer has stopped consuming it.
//
//	go run ./examples/partitions -for 1m    # then start a second and a third copy, stop one
//	go run ./examples/partitions -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
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

func main() { cli.Main("partitions", run) }

// run is one member of the group: it consumes its partitions until ctx ends or -for has
// passed, then leaves.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := cli.NewFlags("partitions", cli.SQLiteDSN, cli.SQLUsage, 10*time.Second)
	groupName := flags.String("group", "example-orders", "the group's name: its partitions are the leases <group>.<p>")
	partitions := flags.Int("partitions", 8, "the number of partitions")
	flags.AddOwner("member")
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

	group, err := client.JoinGroup(ctx, *groupName, *partitions,
		simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
			fmt.Fprintf(stdout, "%s consumes partition %d with token %d\n", me, p, t.Token())
			// Consume partition p here until ctx ends (the partition moved or was lost): read
			// from the offset its last consumer committed, and commit offsets with t.Token(),
			// so that a consumer that lost the partition cannot overwrite them.
			<-ctx.Done()
			fmt.Fprintf(stdout, "%s stops consuming partition %d\n", me, p)
			return nil
		}))
	if err != nil {
		return err
	}
	events := group.Events(ctx)
	report := func(members int, mine []int) {
		fmt.Fprintf(stdout, "%s sees %d members; its partitions: %v\n", me, members, mine)
	}
	report(len(group.Members()), group.Assigned()) // the view before the first event
	for ev := range events {                       // until ctx ends
		if ev.Kind == simba.EventMembers {
			report(len(ev.Members), ev.Partitions)
		}
	}

	// Leave: every partition is handed over once its consumer has returned.
	leaveCtx, cancelLeave := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelLeave()
	if err := group.Leave(leaveCtx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s left %s\n", me, *groupName)
	return group.Err()
}

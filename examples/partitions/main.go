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
	"maps"
	"slices"
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

	// Each partition's consumer runs on a goroutine of its own, so they start and stop in no
	// particular order: they report to the loop below, which prints what changed in partition
	// order once this member consumes exactly what it is assigned. A stopping consumer waits
	// until its stop is printed, so a partition's next consumer, which starts only once it has
	// returned, is never printed before it.
	reports := make(chan report)
	quit := make(chan struct{}) // run returns: nothing is printed any more
	defer close(quit)
	tell := func(r report) bool {
		select {
		case reports <- r:
			return true
		case <-quit:
			return false
		}
	}
	group, err := client.JoinGroup(ctx, *groupName, *partitions,
		simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
			tell(report{p: p, token: t.Token()})
			// Consume partition p here until ctx ends (the partition moved or was lost): read
			// from the offset its last consumer committed, and commit offsets with t.Token(),
			// so that a consumer that lost the partition cannot overwrite them.
			<-ctx.Done()
			printed := make(chan struct{})
			if tell(report{p: p, stopped: printed}) {
				select {
				case <-printed:
				case <-quit:
				}
			}
			return nil
		}))
	if err != nil {
		return err
	}
	out := &printer{w: stdout, me: me, consuming: map[int]int64{}}
	events := group.Events(ctx)
	for events != nil { // until ctx ends
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Kind == simba.EventMembers {
				out.members, out.assigned = len(ev.Members), ev.Partitions
			}
		case r := <-reports:
			out.note(r)
		}
		out.printIfSettled()
	}

	// Leave: every partition is handed over once its consumer has returned; their stops are
	// printed, in partition order, once all have.
	leaveCtx, cancelLeave := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelLeave()
	left := make(chan error, 1)
	go func() { left <- group.Leave(leaveCtx) }()
	out.members, out.assigned = 0, nil
	for {
		select {
		case r := <-reports:
			out.note(r)
			out.printIfSettled()
			continue
		case err := <-left:
			if err != nil {
				return err
			}
		}
		break
	}
	fmt.Fprintf(stdout, "%s left %s\n", me, *groupName)
	return group.Err()
}

// report is what a partition's consumer tells the loop: it started consuming p with token
// (stopped nil), or it stopped (it waits for stopped to be closed, once that is printed).
type report struct {
	p       int
	token   int64
	stopped chan struct{}
}

// printer prints a member's changes in a fixed order: when the member consumes exactly the
// partitions it is assigned (settled), the view (when it changed), then each partition it
// stopped consuming and each it started, in partition order.
type printer struct {
	w  io.Writer
	me string

	members   int   // the latest view: the number of members
	assigned  []int // and the partitions assigned to this member, in order
	printed   string
	consuming map[int]int64         // partition → token, as printed or to print
	started   []int                 // started since the last print
	stopped   map[int]chan struct{} // stopped since the last print, waiting for it
}

func (o *printer) note(r report) {
	if r.stopped == nil {
		o.consuming[r.p] = r.token
		o.started = append(o.started, r.p)
		return
	}
	delete(o.consuming, r.p)
	if i := slices.Index(o.started, r.p); i >= 0 {
		// Started and stopped since the last print: neither is printed.
		o.started = slices.Delete(o.started, i, i+1)
		close(r.stopped)
		return
	}
	if o.stopped == nil {
		o.stopped = map[int]chan struct{}{}
	}
	o.stopped[r.p] = r.stopped
}

// printIfSettled prints what changed once the partitions consumed are those assigned.
func (o *printer) printIfSettled() {
	if len(o.consuming) != len(o.assigned) {
		return
	}
	for _, p := range o.assigned {
		if _, ok := o.consuming[p]; !ok {
			return
		}
	}
	view := fmt.Sprintf("%s sees %d members; its partitions: %v\n", o.me, o.members, o.assigned)
	if o.members > 0 && view != o.printed {
		fmt.Fprint(o.w, view)
		o.printed = view
	}
	for _, p := range slices.Sorted(maps.Keys(o.stopped)) {
		fmt.Fprintf(o.w, "%s stops consuming partition %d\n", o.me, p)
		close(o.stopped[p])
	}
	slices.Sort(o.started)
	for _, p := range o.started {
		fmt.Fprintf(o.w, "%s consumes partition %d with token %d\n", o.me, p, o.consuming[p])
	}
	o.started, o.stopped = o.started[:0], nil
}

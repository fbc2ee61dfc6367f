package simba_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba"
)

// TestElectionOnAPartitionNameLeavesTheGroupAlone: an election created (not even started) on
// the name of a partition of a group the client has joined must not take that partition's
// events away from the group. It did: NewElection registered the name, the client then routed
// the partition's term updates to the election, and the group's term of "g.0" lapsed at its
// grant deadline while the backend still listed it as held — no revocation, nobody leading the
// partition. NewElection (and Lock) now refuse such a name at once, as Start and TryLock already
// did in the engine, and JoinGroup refuses a group one of whose partitions has an election or a
// lock on this client.
func TestElectionOnAPartitionNameLeavesTheGroupAlone(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ctx := context.Background()
	g, err := c.JoinGroup(ctx, "g", 1)
	if err != nil {
		t.Fatal(err)
	}
	w.until(testTTL, "partition 0 led", func() bool { return len(g.Held()) == 1 })

	if _, err := c.NewElection("g.0"); !errors.Is(err, simba.ErrInvalidOption) {
		t.Errorf("NewElection(g.0) with group g joined = %v, want ErrInvalidOption", err)
	}
	if _, err := c.TryLock(ctx, "g.0"); !errors.Is(err, simba.ErrInvalidOption) {
		t.Errorf("TryLock(g.0) with group g joined = %v, want ErrInvalidOption", err)
	}
	// Three TTLs later the group still leads its partition: keep-alives reach its term.
	for end := w.clock.Now() + 3*testTTL; w.clock.Now() < end; {
		w.clock.Advance(10 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
	}
	if len(g.Held()) != 1 {
		t.Fatalf("after an election was created on g.0, the group leads %v (assigned %v)", g.Held(), g.Assigned())
	}
	if err := g.Leave(ctx); err != nil {
		t.Fatal(err)
	}

	// The other way round: an election of a partition name that exists, even unstarted,
	// keeps the group out, as a running one does.
	e, err := c.NewElection("h.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JoinGroup(ctx, "h", 2); !errors.Is(err, simba.ErrInvalidOption) {
		t.Errorf("JoinGroup(h, 2) with an election h.1 = %v, want ErrInvalidOption", err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JoinGroup(ctx, "h", 2); err != nil {
		t.Errorf("JoinGroup(h, 2) after the election h.1 stopped = %v", err)
	}
}

package simba_test

import (
	"context"
	"testing"
	"time"
)

// TestStopOfAStoppedElectionLeavesItsSuccessorAlone: once an election has been stopped and a new
// election of the same name started on the client, the first one's Stop and StepDown (a
// deferred Stop, say) must do nothing. Found by an outside trial: the engine knows elections by
// name, and the old handle's Stop stopped the new election (it no longer led, nor ran).
func TestStopOfAStoppedElectionLeavesItsSuccessorAlone(t *testing.T) {
	w := newWorld(t)
	c, b := w.client("a")
	ctx := context.Background()
	old, err := c.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return old.Start(ctx) })
	w.until(10*time.Second, "the first election to lead", old.IsLeader)
	w.async(func() error { return old.Stop(ctx) })
	cur, err := c.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return cur.Start(ctx) })
	w.until(10*time.Second, "the second election to lead", cur.IsLeader)
	releases := b.Calls("Release")
	w.async(func() error { return old.StepDown(ctx) })
	w.async(func() error { return old.Stop(ctx) })
	for range 100 {
		w.clock.Advance(10 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
	}
	if n := b.Calls("Release"); n != releases {
		t.Errorf("the old election's StepDown and Stop released the new one's lease %d times", n-releases)
	}
	if !cur.IsLeader() {
		t.Error("the new election no longer leads after the old one's StepDown and Stop")
	}
}

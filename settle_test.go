package simba_test

import (
	"context"
	"testing"

	"github.com/simba-go/simba"
)

// A callback that waits for something that needs virtual time (a Stop whose handover lasts until
// the session's deadline, because the work lingers) waits idle: Settle and Advance do not wait
// for it, and once the deadline is passed the callback has seen Stop return when Advance does.
func TestSettleDoesNotWaitForACallbackWaitingOnTheClock(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	release := make(chan struct{})
	stopped := make(chan error, 1)
	var e *simba.Election
	e, err := c.NewElection("x",
		simba.RunWhileLeader(func(ctx context.Context, _ simba.Term) error {
			<-ctx.Done()
			<-release // the work lingers after its term ends: the handover waits for the deadline
			return nil
		}),
		simba.OnElected(func(ctx context.Context, _ simba.Term) { stopped <- e.Stop(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.clock.Settle() // elected; the callback now waits in Stop
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) during the handover", err)
	default:
	}
	if _, held := w.srv.Lease("x"); !held {
		t.Fatal("the lease was never granted")
	}
	w.clock.Advance(testTTL) // past the deadline as of the stop: the handover ends
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	default:
		t.Fatal("Advance returned before the callback saw Stop return")
	}
	if info, _ := w.srv.Lease("x"); info.Holder != "" {
		t.Fatalf("lease still held by %s after Stop", info.Holder)
	}
}

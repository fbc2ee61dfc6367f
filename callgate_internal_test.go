package simba

import (
	"slices"
	"testing"

	"github.com/simba-go/simba/internal/engine"
)

// TestCallGateQueues: beyond maxCallsInFlight calls are queued, a caller's calls ahead of
// partition calls and each kind in the engine's order; an identical release queued again joins
// the queued one (one backend call, two replies); a queued acquire of a session lost meanwhile
// is not sent; and once stopped the queue is dropped.
func TestCallGateQueues(t *testing.T) {
	var g callGate
	for i := 0; i < maxCallsInFlight; i++ {
		if !g.tryEnter() {
			t.Fatalf("call %d found no free slot", i)
		}
	}
	acq := func(req engine.ReqID, sess, name string) engine.Effect {
		return engine.Effect{Kind: engine.EfCall, Req: req, Op: engine.OpAcquire, Session: SessionID(sess), Name: name}
	}
	rel := engine.Effect{Kind: engine.EfCall, Req: 3, Op: engine.OpRelease, Session: "s1", Name: "g.7", Token: 9}
	if g.tryEnter() || g.enterOrQueue(acq(1, "s1", "g.0"), true) || g.enterOrQueue(acq(2, "s1", "g.1"), true) ||
		g.enterOrQueue(rel, true) || g.enterOrQueue(acq(4, "s1", "lock"), false) {
		t.Fatal("a call got a slot beyond maxCallsInFlight")
	}
	dup := rel
	dup.Req = 5
	if g.enterOrQueue(dup, true) {
		t.Fatal("a call got a slot beyond maxCallsInFlight")
	}
	g.sessionGone("s1")
	if g.enterOrQueue(acq(6, "s2", "g.2"), true) {
		t.Fatal("a call got a slot beyond maxCallsInFlight")
	}
	var order []engine.ReqID
	for {
		next, dropped := g.next(false)
		if dropped != nil {
			t.Fatal("calls dropped while running")
		}
		if next == nil {
			break
		}
		order = append(order, next.ef.Req)
		switch next.ef.Req {
		case 1, 2, 4:
			if !next.skip {
				t.Errorf("queued acquire %d of the lost session s1 is to be sent", next.ef.Req)
			}
		case 3:
			if len(next.also) != 1 || next.also[0] != 5 {
				t.Errorf("release 3 answers %v, want [5]", next.also)
			}
		case 6:
			if next.skip {
				t.Error("acquire 6 of the live session s2 is not to be sent")
			}
		}
	}
	if want := []engine.ReqID{4, 1, 2, 3, 6}; !slices.Equal(order, want) {
		t.Fatalf("calls started in order %v, want %v", order, want)
	}
	if g.running != maxCallsInFlight-1 {
		t.Fatalf("running %d after the queue emptied, want %d", g.running, maxCallsInFlight-1)
	}
	if g.enterOrQueue(acq(7, "s2", "g.3"), true) != true {
		t.Fatal("no slot free after one was freed")
	}
	for i := 8; i < 100; i++ {
		g.enterOrQueue(acq(engine.ReqID(i), "s2", "g.x"), true)
	}
	next, dropped := g.next(true)
	if next != nil || len(dropped) != 92 || g.running != maxCallsInFlight-1 {
		t.Fatalf("stopped: next %v, %d dropped, running %d; want nil, 92, %d", next, len(dropped), g.running, maxCallsInFlight-1)
	}
}

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

// TestCallGateCancel: a queued acquire the engine cancels (engine.EfCancel) is dropped: cancel
// returns it once, the queue never hands it out, and a stopped gate does not drop it again
// (its settling ended when it was cancelled); an acquire that got a slot, or is not queued,
// cannot be cancelled.
func TestCallGateCancel(t *testing.T) {
	var g callGate
	for i := 0; i < maxCallsInFlight; i++ {
		if !g.tryEnter() {
			t.Fatalf("call %d found no free slot", i)
		}
	}
	acq := func(req engine.ReqID, name string) engine.Effect {
		return engine.Effect{Kind: engine.EfCall, Req: req, Op: engine.OpAcquire, Session: "s1", Name: name}
	}
	for req := engine.ReqID(1); req <= 4; req++ {
		if g.enterOrQueue(acq(req, "g."+string(rune('0'+req))), true) {
			t.Fatal("a call got a slot beyond maxCallsInFlight")
		}
	}
	if cl := g.cancel(2); cl == nil || cl.ef.Req != 2 {
		t.Fatalf("cancel(2) = %v, want the queued acquire 2", cl)
	}
	if cl := g.cancel(2); cl != nil {
		t.Fatal("acquire 2 cancelled twice")
	}
	if cl := g.cancel(99); cl != nil {
		t.Fatal("cancel of a request never queued returned a call")
	}
	next, _ := g.next(false)
	if next == nil || next.ef.Req != 1 {
		t.Fatalf("next = %v, want acquire 1", next)
	}
	if g.cancel(1) != nil {
		t.Fatal("acquire 1, handed out to run, was cancelled")
	}
	next, _ = g.next(false)
	if next == nil || next.ef.Req != 3 {
		t.Fatalf("next = %v, want acquire 3 (2 was cancelled)", next)
	}
	g.cancel(4)
	if next, _ := g.next(false); next != nil {
		t.Fatalf("next = %v, want none: 4 was cancelled", next.ef.Req)
	}
	if g.running != maxCallsInFlight-1 {
		t.Fatalf("running = %d, want %d: the slot that found only cancelled calls is free", g.running, maxCallsInFlight-1)
	}
	// Once stopped, cancelled calls are not dropped (settled) a second time.
	if !g.tryEnter() {
		t.Fatal("the free slot was not found")
	}
	if g.enterOrQueue(acq(5, "g.5"), true) || g.enterOrQueue(acq(6, "g.6"), true) {
		t.Fatal("a call got a slot while the queue was not empty")
	}
	g.cancel(5)
	if _, dropped := g.next(true); len(dropped) != 1 || dropped[0].ef.Req != 6 {
		t.Fatalf("dropped on stop = %v, want only acquire 6", dropped)
	}
}

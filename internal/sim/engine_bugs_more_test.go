package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/engine"
)

// A join times out while a Leave waits for it; the engine sends the Leave at once, the
// abandoned join lands after it, and the session stays a member of g until it ends: every
// partition rendezvous hashing gives it is never taken.
func TestEngineLeaveAfterLateJoin(t *testing.T) {
	r := newRig(t)
	var abandoned engine.Effect
	r.hold = func(ef engine.Effect) bool { return ef.Op == engine.OpJoin && abandoned.Req == 0 }
	r.step(engine.Event{Kind: engine.EvJoin, Name: groupName, Partitions: 1, Future: 1})
	abandoned = r.held[0]
	r.hold = func(engine.Effect) bool { return false }
	r.now = 500 * time.Millisecond
	r.step(engine.Event{Kind: engine.EvLeave, Name: groupName, Future: 2})
	r.advance(time.Second)
	r.timeOut(abandoned) // the engine sends the Leave now; it lands
	r.now += 500 * time.Millisecond
	r.step(r.land(abandoned)) // the abandoned join lands after the Leave
	r.advance(5 * time.Second)
	if m, _ := r.model.Members(r.now, groupName); slices.Contains(m, r.sid) {
		t.Fatalf("at %v the session is still a member of %s after leaving (the join abandoned at 1s landed at 1.5s)", r.now, groupName)
	}
}

// A Leave times out, its retry lands, the group is joined again, then the abandoned Leave
// lands: the session is no member while the engine believes it joined, and keep-alives (which
// do not re-add memberships on the model, nor on SQL) never repair it.
func TestEngineRejoinAfterLateLeave(t *testing.T) {
	r := newRig(t)
	r.step(engine.Event{Kind: engine.EvJoin, Name: groupName, Partitions: 1, Future: 1})
	var abandoned engine.Effect
	r.hold = func(ef engine.Effect) bool { return ef.Op == engine.OpLeave && abandoned.Req == 0 }
	r.now = 500 * time.Millisecond
	r.step(engine.Event{Kind: engine.EvLeave, Name: groupName, Future: 2})
	abandoned = r.held[0]
	r.hold = func(engine.Effect) bool { return false }
	r.now = 1500 * time.Millisecond
	r.timeOut(abandoned)
	r.advance(1600 * time.Millisecond) // the retried Leave lands
	r.step(engine.Event{Kind: engine.EvJoin, Name: groupName, Partitions: 1, Future: 3})
	r.now = 1900 * time.Millisecond
	r.land(abandoned) // the abandoned Leave lands after the re-join
	r.advance(6 * time.Second)
	g, _ := r.eng.Group(groupName)
	if m, _ := r.model.Members(r.now, groupName); g.Joined && !slices.Contains(m, r.sid) {
		t.Fatalf("at %v the engine believes it joined %s but the backend's members are %v", r.now, groupName, m)
	}
}

// A Leave times out, its retry lands, the group is joined again, then the abandoned Leave
// lands (within one call timeout of being abandoned, as a timed-out request may): the Join's
// call waits until the abandoned Leave can no longer land, so it deletes nothing. The engine
// sent the Join at once: the late Leave deleted the membership it made, the engine believed
// it joined while the backend listed no such member, and a keep-alive had to show it before
// the engine joined again (two Join calls, the partitions handed to others and back).
func TestEngineJoinWaitsOutLateLeave(t *testing.T) {
	r := newRig(t)
	r.step(engine.Event{Kind: engine.EvJoin, Name: groupName, Partitions: 1, Future: 1})
	var abandoned engine.Effect
	r.hold = func(ef engine.Effect) bool { return ef.Op == engine.OpLeave && abandoned.Req == 0 }
	r.now = 500 * time.Millisecond
	r.step(engine.Event{Kind: engine.EvLeave, Name: groupName, Future: 2})
	abandoned = r.held[0]
	joins := 0
	r.hold = func(ef engine.Effect) bool {
		if ef.Op == engine.OpJoin {
			joins++
		}
		return false
	}
	r.now = 1500 * time.Millisecond
	r.timeOut(abandoned)
	r.advance(1600 * time.Millisecond) // the retried Leave lands
	r.step(engine.Event{Kind: engine.EvJoin, Name: groupName, Partitions: 1, Future: 3})
	r.now = 1900 * time.Millisecond
	r.step(r.land(abandoned)) // the abandoned Leave lands after the re-join
	g, _ := r.eng.Group(groupName)
	if m, _ := r.model.Members(r.now, groupName); g.Joined && !slices.Contains(m, r.sid) {
		t.Errorf("at %v, right after the abandoned Leave landed, the engine believes it joined %s but the backend's members are %v", r.now, groupName, m)
	}
	r.advance(6 * time.Second)
	g, _ = r.eng.Group(groupName)
	if m, _ := r.model.Members(r.now, groupName); !g.Joined || !slices.Contains(m, r.sid) {
		t.Fatalf("at %v: joined=%v, the backend's members %v", r.now, g.Joined, m)
	}
	if joins != 1 {
		t.Errorf("%d Join calls after the re-join, want 1 (sent once the abandoned Leave could no longer land)", joins)
	}
}

package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// rig drives one engine against the model by hand: calls are answered at once, except those
// the test holds back; timers fire when the test advances the clock (one clock for both).
type rig struct {
	t      *testing.T
	eng    *engine.Engine
	model  *simbatest.Model
	now    time.Duration
	timers map[engine.Timer]time.Duration
	hold   func(ef engine.Effect) bool
	held   []engine.Effect
	sid    spi.SessionID
}

func newRig(t *testing.T) *rig {
	o := engine.Defaults()
	o.Owner, o.TTL = "a", 3*time.Second
	eng, err := engine.New(o)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, eng: eng, model: simbatest.NewModel(), timers: make(map[engine.Timer]time.Duration),
		hold: func(engine.Effect) bool { return false }}
	r.step(engine.Event{Kind: engine.EvBoot})
	if r.eng.SessionState() != engine.SessionLive {
		t.Fatal("no live session after boot")
	}
	r.sid = r.eng.SessionID()
	return r
}

// step steps ev now (jitter 0: retries at once) and carries out the effects.
func (r *rig) step(ev engine.Event) {
	effs := slices.Clone(r.eng.Step(ev, r.now))
	for _, ef := range effs {
		switch ef.Kind {
		case engine.EfArm:
			r.timers[ef.Timer] = ef.At
		case engine.EfCall:
			if r.hold(ef) {
				r.held = append(r.held, ef)
			} else {
				r.step(r.land(ef))
			}
		}
	}
}

// land carries out call ef at the model now and returns its reply.
func (r *rig) land(ef engine.Effect) engine.Event {
	ev := engine.ReplyTo(ef)
	ev.SentAt = r.now
	m := r.model
	switch ef.Op {
	case engine.OpOpenSession:
		ev.Session, ev.Err = m.OpenSession(r.now, ef.Owner, ef.TTL)
	case engine.OpKeepAlive:
		ev.KeepAlive, ev.Err = m.KeepAlive(r.now, ef.Session, ef.Names, ef.Groups)
	case engine.OpCloseSession:
		ev.Err = m.CloseSession(r.now, ef.Session)
	case engine.OpAcquire:
		ev.Acquire, ev.Err = m.Acquire(r.now, ef.Session, ef.Name)
	case engine.OpRelease:
		ev.Err = m.Release(r.now, ef.Session, ef.Name, ef.Token)
	case engine.OpJoin:
		ev.Status, ev.Err = m.Join(r.now, ef.Session, ef.Name)
	case engine.OpLeave:
		ev.Status, ev.Err = m.Leave(r.now, ef.Session, ef.Name)
	case engine.OpMembers:
		ev.Members, ev.Err = m.Members(r.now, ef.Name)
	}
	if ev.Err != nil {
		r.t.Fatalf("model refused %v: %v", ef, ev.Err)
	}
	return ev
}

// advance moves the clock to `to`, firing due timers in time order.
func (r *rig) advance(to time.Duration) {
	for {
		var next engine.Timer
		at := to + 1
		for k, v := range r.timers {
			if v < at || (v == at && k.String() < next.String()) {
				next, at = k, v
			}
		}
		if at > to {
			r.now = to
			return
		}
		delete(r.timers, next)
		r.now = max(r.now, at)
		r.step(engine.Event{Kind: engine.EvTimer, Timer: next})
	}
}

// timeOut answers the held call ef with the timeout error a driver reports after one renewal
// interval (the request itself is still on its way).
func (r *rig) timeOut(ef engine.Effect) {
	ev := engine.ReplyTo(ef)
	ev.SentAt, ev.Err = 0, errTimeout
	r.step(ev)
}

// TestEngineReleasesLateGrantAfterAdoption reproduces an engine bug the simulator found (seed
// 892 of the first cut): an acquire times out (its outcome is unknown: the request may still
// reach the backend within one call timeout of being abandoned), the retry is granted and
// adopted, and adoption clears the unknown flag (internal/engine/election.go, adopt:
// `e.workRunning, e.unknown, e.fails = e.hasWork, false, 0`). The lock is then released, the
// abandoned request lands and grants the lease again, and no keep-alive ever asks about it:
// the session holds the lock until it ends, and every other Lock waits forever. Rule 3 wants
// it released within one renewal interval plus a round trip. The fix: keep e.unknown on
// adoption (reconcile clears it once a keep-alive sent a call timeout later does not list it).
func TestEngineReleasesLateGrantAfterAdoption(t *testing.T) {
	r := newRig(t)
	var abandoned engine.Effect
	r.hold = func(ef engine.Effect) bool { return ef.Op == engine.OpAcquire && abandoned.Req == 0 }
	r.step(engine.Event{Kind: engine.EvStart, Name: lockName, Flavor: engine.FlavorLock, Future: 1})
	abandoned = r.held[0]
	r.hold = func(engine.Effect) bool { return false }

	r.advance(time.Second)
	r.timeOut(abandoned)
	r.advance(time.Second) // the retry is granted at once (token 1) and adopted
	if e, ok := r.eng.Election(lockName); !ok || e.State != engine.Leader {
		t.Fatalf("the retry was not adopted: %+v", e)
	}
	r.step(engine.Event{Kind: engine.EvStop, Name: lockName, Future: 2}) // unlock: revoke, release
	r.now += 500 * time.Millisecond
	r.step(r.land(abandoned)) // the abandoned request lands: granted again (token 2)
	if info, _ := r.model.Lease(r.now, lockName); info.Holder != r.sid {
		t.Fatalf("setup: the late grant did not land: %+v", info)
	}
	r.advance(time.Second + 3*time.Second)
	if info, _ := r.model.Lease(r.now, lockName); info.Holder == r.sid {
		t.Fatalf("at %v the session still holds %s#%d that no election wants (abandoned at 1s, landed at 1.5s): rule 3 wants it released within a renewal interval plus a round trip",
			r.now, lockName, info.Token)
	}
}

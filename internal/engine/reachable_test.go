package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// flapRun drives an engine (TTL 3 s: BackoffMin 50 ms, BackoffMax 1 s) for span while every
// call fails at once (a backend that refuses), with a waiting lock, stepping EvReachable every
// millisecond when signs is set (a probe that gets through every time while the calls still
// fail: the worst a flapping link can do). It returns how many opens were sent.
func flapRun(t *testing.T, span time.Duration, signs bool) (opens int) {
	t.Helper()
	o := Defaults()
	o.Owner, o.TTL = "a", 3*time.Second
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	refused := spi.Unavailable("call", errors.New("connection refused"))
	timers := map[Timer]time.Duration{}
	var now time.Duration
	var step func(ev Event)
	step = func(ev Event) {
		ev.Jitter = 0.5
		for _, ef := range append([]Effect(nil), e.Step(ev, now)...) {
			switch ef.Kind {
			case EfArm:
				timers[ef.Timer] = ef.At
			case EfCall:
				if ef.Op == OpOpenSession {
					opens++
				}
				r := ReplyTo(ef)
				r.SentAt, r.Err = now, refused
				step(r)
			}
		}
	}
	step(Event{Kind: EvBoot})
	step(Event{Kind: EvStart, Name: "x", Flavor: FlavorLock, Future: 1})
	for ; now < span; now += time.Millisecond {
		for k, at := range timers {
			if at <= now {
				delete(timers, k)
				step(Event{Kind: EvTimer, Timer: k})
			}
		}
		if signs {
			step(Event{Kind: EvReachable})
		}
	}
	return opens
}

// TestReachableIsDamped: signs that the backend answers again, however many, add at most one
// open per BackoffMax to those of the backoff, while the calls keep failing: a link that flaps
// (or a probe that gets through while the opens fail) cannot make a client hammer its backend.
func TestReachableIsDamped(t *testing.T) {
	const span = 20 * time.Second
	base := flapRun(t, span, false)
	flapped := flapRun(t, span, true)
	// BackoffMax is 1 s at TTL 3 s: at most one extra open per second.
	if limit := base + int(span/time.Second) + 1; flapped > limit {
		t.Fatalf("20 s of failing opens: %d opens with a sign every millisecond, %d without; want at most %d", flapped, base, limit)
	}
	if flapped <= base {
		t.Fatalf("20 s of failing opens: %d opens with a sign every millisecond, %d without: the signs changed nothing", flapped, base)
	}
	t.Logf("20 s of failing opens: %d without signs, %d with a sign every millisecond", base, flapped)
}

// TestBackingOffPrunedOnDrop: a client that starts and drops elections while every acquire
// fails, and sees no sign that the backend answers again — its keep-alives succeed, but each
// was sent no later than the latest failure — keeps Engine.backingOff to about the candidates
// still waiting out a backoff. Before, only a sign pruned it: it kept every election dropped
// since, long after the keep-alives had settled and forgotten them.
func TestBackingOffPrunedOnDrop(t *testing.T) {
	o := Defaults()
	o.Owner, o.TTL = "a", 3*time.Second
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	refused := spi.Unavailable("call", errors.New("connection refused"))
	var now time.Duration
	var calls []Effect
	timers := map[Timer]time.Duration{}
	step := func(ev Event) {
		ev.Jitter = 0.5
		for _, ef := range e.Step(ev, now) {
			switch ef.Kind {
			case EfCall:
				calls = append(calls, ef)
			case EfArm:
				timers[ef.Timer] = ef.At
			}
		}
	}
	// answer replies to the calls of op made so far: the keep-alives succeed, the rest fail.
	answer := func(op Op) {
		rest := calls[:0]
		for _, ef := range calls {
			if ef.Op != op {
				rest = append(rest, ef)
				continue
			}
			r := ReplyTo(ef)
			r.SentAt = now
			switch op {
			case OpOpenSession:
				r.Session = spi.Session{ID: "s1", Remaining: o.TTL}
			case OpKeepAlive:
				r.KeepAlive.Remaining = o.TTL
			default:
				r.Err = refused
			}
			step(r)
		}
		calls = rest
	}
	step(Event{Kind: EvBoot})
	answer(OpOpenSession)
	const span = 30 * time.Second
	for i := 0; now < span; i++ {
		now += 100 * time.Millisecond
		for k, at := range timers {
			if at <= now {
				delete(timers, k)
				step(Event{Kind: EvTimer, Timer: k})
			}
		}
		name := fmt.Sprintf("x%d", i)
		step(Event{Kind: EvStart, Name: name, Flavor: FlavorElection})
		answer(OpAcquire) // fails now: its retry waits out a backoff
		answer(OpRelease)
		step(Event{Kind: EvStop, Name: name})
		answer(OpKeepAlive) // sent no later than that failure: no sign
	}
	if e.sess.state != SessionLive || e.sess.gen != 1 {
		t.Fatalf("the session did not live through the run: %v, generation %d", e.sess.state, e.sess.gen)
	}
	if limit := 2*len(e.elections) + 1; len(e.backingOff) > limit {
		t.Fatalf("%v of elections started, failed and stopped: %d entries in backingOff for %d elections left; want at most %d",
			span, len(e.backingOff), len(e.elections), limit)
	}
	t.Logf("%d entries in backingOff, %d elections left", len(e.backingOff), len(e.elections))
}

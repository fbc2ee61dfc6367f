package simba

import (
	"context"
	"errors"
	"time"

	"github.com/simba-go/simba/spi"
)

// settle reports the client's activity to a clock that waits for it (spi.Settler, such as
// simbatest.VirtualClock), so that a test that moves the clock sees every consequence due by
// the new time. When the clock is not a Settler every method here does nothing beyond what the
// client would do anyway.
//
// What is busy (one unit each, begun by whoever hands the work over, before the handoff):
//   - a function queued for the loop (post, postSelf) until the loop has run it;
//   - a backend call from startCall until its reply is posted, except while the backend waits
//     through spi.Await for the clock or the test (a delay, a cut link, its own timeout);
//   - a hint the backend began a unit for, until readHints has posted it;
//   - a run of a serial dispatcher (OnElected, OnRevoked, OnAssigned, OnUnassigned callbacks)
//     from the submit that started it until its queue is empty;
//   - Schedule's leader work while it calls its function, and from its term's end until its
//     exit is posted; it waits for its next tick idle, and holds no unit while it waits for
//     the earlier work of its name to return (startWork).
//
// Not busy: the loop waiting for work, leader work of RunWhileLeader and RunPartition (user
// code that typically runs for the whole term), and a callback or Schedule function blocked in
// a request (Stop, StepDown, Lock, ...) that needs the clock to move.
type settle struct {
	act    spi.Activity // nil unless the clock is a spi.Settler
	hints  spi.Activity // hints received and not yet posted to the loop
	owners goroutines   // goroutines that hold a unit of act: callback runs, Schedule work
	// timers arms the client's timers on the clock in a deterministic order (ordertimer.go),
	// and turns has its backend calls take turns (callturn.go).
	timers *orderedTimers
	turns  *callTurns
}

// init starts tracking when clock is a Settler.
func (s *settle) init(clock spi.Clock, owner string) {
	st, ok := clock.(spi.Settler)
	if !ok {
		return
	}
	s.act = st.Track("simba client " + owner)
	s.hints = st.Track("simba client " + owner + " hints")
	s.timers = &orderedTimers{clock: clock}
	s.turns = newCallTurns()
}

// afterFunc arms f to run after d on clock: on a settling clock ordered by key among the
// client's timers due at one instant (orderedTimers, keys in ordertimer.go), elsewhere on the
// clock directly.
func (s *settle) afterFunc(clock spi.Clock, d time.Duration, key uint64, f func()) spi.Timer {
	if s.timers == nil {
		return clock.AfterFunc(d, f)
	}
	return s.timers.afterFunc(d, key, f)
}

// close stops tracking: the loop has exited and will run nothing more.
func (s *settle) close() {
	if s.act != nil {
		s.act.Close()
		s.hints.Close()
	}
}

func (s *settle) begin() {
	if s.act != nil {
		s.act.Begin()
	}
}

func (s *settle) end() {
	if s.act != nil {
		s.act.End()
	}
}

// tracked begins a unit now and returns f, which ends it after running.
func (s *settle) tracked(f func()) func() {
	if s.act == nil {
		return f
	}
	s.act.Begin()
	return func() {
		defer s.act.End()
		f()
	}
}

// executor wraps a callback executor: each run it starts holds a unit, begun before the
// handoff, and its goroutine may wait idle in await.
func (s *settle) executor(exec Executor) Executor {
	if s.act == nil {
		return exec
	}
	return func(f func()) {
		s.act.Begin()
		exec(func() {
			defer s.act.End()
			defer s.own()()
			f()
		})
	}
}

// own marks the calling goroutine as holding a unit until the returned function is called.
func (s *settle) own() func() {
	if s.act == nil {
		return func() {}
	}
	return s.owners.enter()
}

// await waits until ch is closed (nil) or ctx is done (ctx.Err()); a goroutine that holds a
// unit waits idle, so that a callback waiting for something that needs the clock to move does
// not keep the clock from moving.
func (s *settle) await(ctx context.Context, ch <-chan struct{}) error {
	if s.act != nil && s.owners.has(goid()) {
		return s.act.Wait(ctx, ch)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// callContext is the context of one backend call: a timeout of d. On a settling clock the
// timeout runs on the clock, ordered by key among the client's timers due at one instant
// (ordertimer.go), and the context carries the activity, whose unit the call's goroutine
// holds, so that a backend that waits on the clock waits idle (spi.Await), and ends the call's
// turn (callturn.go) as it does.
func (s *settle) callContext(parent context.Context, d time.Duration, key, turn uint64) (context.Context, context.CancelFunc) {
	if s.act == nil {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := s.timers.afterFunc(d, key, func() { cancel(context.DeadlineExceeded) })
	return spi.ContextWithActivity(clockTimeout{ctx}, turnActivity{Activity: s.act, turns: s.turns, n: turn}), func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// clockTimeout reports a timeout on the clock as context.DeadlineExceeded, as
// context.WithTimeout would.
type clockTimeout struct{ context.Context }

func (c clockTimeout) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// hintsContext is the context of the hint subscription: it carries the hints activity, for a
// Hinter that begins a unit per hint.
func (s *settle) hintsContext(ctx context.Context) context.Context {
	if s.hints == nil {
		return ctx
	}
	return spi.ContextWithActivity(ctx, s.hints)
}

// hintDone ends the unit of a hint received (ignored if the Hinter began none).
func (s *settle) hintDone() {
	if s.hints != nil {
		s.hints.End()
	}
}

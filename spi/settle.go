package spi

import "context"

// Settler is an optional capability of a Clock whose time moves only when a test moves it
// (simbatest.VirtualClock). Every client on such a clock reports its activity to it through an
// Activity, and the clock, each time it moves, waits until every activity is idle: so a test
// that moves the clock sees every consequence due by the new time (timers fired, the events they
// caused stepped, backend calls that completed replied, callbacks run) without sleeping.
//
// A Settler also waits for the callbacks of its AfterFunc while they run (those with d ≤ 0
// too): a client hands a timer's event to its loop from the callback, beginning a unit there.
//
// A client never blocks the clock for something that itself waits for the clock: a unit of
// work that waits (Activity.Wait) for a timer, a context or the test counts as idle until what
// it waits for is ready. A client on a clock that is not a Settler reports nothing.
type Settler interface {
	Clock
	// Track returns a new, idle Activity; name identifies it in diagnostics. The clock waits
	// for it until Close.
	Track(name string) Activity
}

// Activity counts the units of work of one client that a Settler waits for. A unit is busy
// from Begin to End, except while the goroutine that holds it waits in Wait for something that
// is not ready yet. The activity is idle when none of its units is busy.
//
// Whoever hands work to another goroutine begins a unit for it before the handoff and the
// receiver ends it once done, so the activity is never idle in between. All methods are safe
// for concurrent use. After Close, Begin and End do nothing and Wait waits without reporting.
type Activity interface {
	// Begin reports one more unit of work under way.
	Begin()
	// End reports one unit done. An End with no unit under way is ignored (the receiver of
	// hints ends one unit per hint whether or not the Hinter began one).
	End()
	// Wait blocks until ch is closed (it returns nil) or ctx is done (it returns ctx.Err()).
	// The calling goroutine must hold a unit; that unit counts as idle while ch is open and ctx
	// is not done, and as busy again as soon as either is ready, before Wait returns. ch must
	// only ever be closed, never sent on; a nil ch never becomes ready.
	Wait(ctx context.Context, ch <-chan struct{}) error
	// Close ends the activity: the clock no longer waits for it.
	Close()
}

type activityKey struct{}

// ContextWithActivity returns a copy of ctx that carries a. A client passes it:
//
//   - in the context of each backend call, whose goroutine holds a unit of a: a backend that
//     blocks on the Settler's time or on the test (a simulated delay, a cut link) waits
//     through Await, so that the clock does not wait for the call;
//   - in the context given to Hinter.Hints, when a is an activity for hints: the Hinter may
//     Begin a unit for each hint before it sends it on the channel, and the client Ends one
//     once it has handled each hint it received; a Hinter that drops a hint it began a unit
//     for Ends that unit itself.
func ContextWithActivity(ctx context.Context, a Activity) context.Context {
	return context.WithValue(ctx, activityKey{}, a)
}

// ActivityFromContext returns the Activity ctx carries (see ContextWithActivity), or nil.
func ActivityFromContext(ctx context.Context) Activity {
	a, _ := ctx.Value(activityKey{}).(Activity)
	return a
}

// Await blocks until ch is closed (it returns nil) or ctx is done (it returns ctx.Err()). If
// ctx carries an Activity, it waits through Activity.Wait, so a Settler does not wait for the
// caller meanwhile. ch must only ever be closed; a nil ch waits for ctx alone.
func Await(ctx context.Context, ch <-chan struct{}) error {
	if a := ActivityFromContext(ctx); a != nil {
		return a.Wait(ctx, ch)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

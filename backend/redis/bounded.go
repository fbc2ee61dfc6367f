package redis

import (
	"context"

	"github.com/simba-go/simba/spi"
)

// bounded runs f, a call's whole body, so that the call returns once ctx is done, as the SPI
// requires ("a call returns promptly once ctx is done") and CutSafe relies on: without it, a
// call to a server that stopped answering (a blackholed network) lasted for go-redis's read
// timeout, times its retries, so a Lock outlived its ctx, and a keep-alive its timeout.
// go-redis never watches a context while it waits for a reply, but with ContextTimeoutEnabled
// (which ParseDSN sets, so Open's clients have it) it reads and writes with ctx's deadline,
// and stops retrying at it.
//
// So f runs on the caller's goroutine when ctx cannot end (no Done channel), or when ctx has a
// deadline, the client honours deadlines and only that deadline or a cancellation that does
// not wait for an answer may end ctx (a Simba client's call: each has a timeout of one renewal
// interval, and a Close closes the client anyway); a cancellation before that deadline then
// ends the call at the deadline if the server does not answer, no later. Otherwise (a client
// without ContextTimeoutEnabled, such as one passed to New, a ctx without a deadline, or a
// call a Simba client runs for a caller whose cancellation may end it early,
// spi.CallerCancels: a Lock with a cancel-only ctx waited out the call's timeout, 5 s at the
// default TTL, when cancelled at a blackholed server) f runs on a goroutine of its own, and bounded returns as soon as ctx is done with ctx's error
// (classified by fail, as go-redis's own would be) while f goes on to its end, its result
// dropped. That hop costs: BenchmarkLockCycle/redis took ~45 % more CPU per cycle with it on
// every call. Each step of a call is one script, applied whole or not at all, so a call that
// goes on after its caller left leaves an outcome the caller treats as unknown, as for a
// timed-out call (Inspect and CheckDurability only read); the goroutine ends with go-redis's
// timeouts, or when Close closes the client.
//
// OpenSession is bounded by boundedCancel instead, which always takes the hop: an open is made
// once per session, and a Simba client cuts the open in flight when it is closed (Client.Close),
// which must not wait a whole call timeout for a server that does not answer.
//
// op names the call in the error of a ctx that ended, with about (a lease or group name, or "")
// after it: the two are joined only then, so that a call that goes well builds no string.
func bounded[T any](ctx context.Context, b *Backend, op, about string, f func() (T, error)) (T, error) {
	return bound(ctx, b, op, about, f, false)
}

// boundedCancel is bounded for a call that a cancellation ends at once too, not only at ctx's
// deadline: f always runs on a goroutine of its own when ctx can end.
func boundedCancel[T any](ctx context.Context, b *Backend, op, about string, f func() (T, error)) (T, error) {
	return bound(ctx, b, op, about, f, true)
}

// bound is bounded, or boundedCancel when hop.
func bound[T any](ctx context.Context, b *Backend, op, about string, f func() (T, error), hop bool) (T, error) {
	done := ctx.Done()
	if done == nil {
		took, _ := b.spare.enter(ctx, op) // waits for a slot: ctx cannot end
		defer b.spare.leave(took)
		return f()
	}
	if err := ctx.Err(); err != nil { // ended already: nothing is sent
		var zero T
		return zero, b.fail(opAbout(op, about), err)
	}
	b.tlsd.called(ctx)
	// A slot of the calls other than keep-alives (keepAliveConn), held until f has ended.
	took, err := b.spare.enter(ctx, op)
	if err != nil {
		var zero T
		return zero, b.fail(opAbout(op, about), err)
	}
	if _, ok := ctx.Deadline(); ok && b.deadlines && !hop && !spi.CallerCancels(ctx) {
		defer b.spare.leave(took)
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		b.spare.leave(took)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-done:
		select {
		case r := <-ch: // finished as ctx ended: its outcome is known
			return r.v, r.err
		default:
		}
		var zero T
		return zero, b.fail(opAbout(op, about), ctx.Err())
	}
}

// bounded0 is bounded for a call with no result but its error.
func bounded0(ctx context.Context, b *Backend, op, about string, f func() error) error {
	_, err := bounded(ctx, b, op, about, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// direct reports whether bounded runs a call with ctx on the caller's goroutine, as it does
// for a ctx that cannot end or whose deadline ends it (the fast path above), noting the call
// as bound does. The hot calls (Acquire, Release) ask first and call their body themselves
// then: bounded's closure, which may go to a goroutine of its own, is otherwise allocated on
// every call. A ctx that ended already gets false: bounded fails it.
func (b *Backend) direct(ctx context.Context) bool {
	if ctx.Done() == nil {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	if _, ok := ctx.Deadline(); ok && b.deadlines && !spi.CallerCancels(ctx) {
		b.tlsd.called(ctx)
		return true
	}
	return false
}

// opAbout is op, followed by about (a lease or group name) when there is one.
func opAbout(op, about string) string {
	if about == "" {
		return op
	}
	return op + " " + about
}

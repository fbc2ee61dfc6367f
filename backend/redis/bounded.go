package redis

import "context"

// bounded runs f, a call's whole body, and returns its result, or returns as soon as ctx is
// done with ctx's error (classified by fail, as go-redis's own would be) while f goes on to
// its end on its goroutine, its result dropped. go-redis never watches a context while it waits
// for a reply (a cancellation does not reach the socket, and a deadline does only with
// ContextTimeoutEnabled, which Open does not set), so without this a call to a server that
// stopped answering (a blackholed network) lasts for the client's read timeout, times its
// retries: a Lock outlived its ctx, and a keep-alive its timeout, which the SPI forbids ("a
// call returns promptly once ctx is done") and CutSafe relies on. Each step of a call is one
// script, applied whole or not at all, so a call that goes on after its caller left leaves
// an outcome the caller treats as unknown, as for a timed-out call; the goroutine ends with
// go-redis's timeouts, or when Close closes the client.
func bounded[T any](ctx context.Context, b *Backend, op string, f func() (T, error)) (T, error) {
	done := ctx.Done()
	if done == nil {
		return f()
	}
	if err := ctx.Err(); err != nil { // ended already: nothing is sent
		var zero T
		return zero, b.fail(op, err)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
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
		return zero, b.fail(op, ctx.Err())
	}
}

// bounded0 is bounded for a call with no result but its error.
func bounded0(ctx context.Context, b *Backend, op string, f func() error) error {
	_, err := bounded(ctx, b, op, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

package simba_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// stuckAcquires is a simbatest backend whose acquires wait, holding the call, until release
// is closed, whatever their context says (a server that does not answer, and a backend that
// does not give up); keep-alives go through and are signalled on kept.
type stuckAcquires struct {
	*simbatest.Backend
	release chan struct{}
	stuck   atomic.Int64 // acquires waiting now
	kept    chan struct{}
}

func (b *stuckAcquires) hold(ctx context.Context) error {
	b.stuck.Add(1)
	defer b.stuck.Add(-1)
	<-b.release
	return ctx.Err()
}

func (b *stuckAcquires) Acquire(ctx context.Context, sid spi.SessionID, name string) (spi.Acquire, error) {
	if err := b.hold(ctx); err != nil {
		return spi.Acquire{}, err
	}
	return b.Backend.Acquire(ctx, sid, name)
}

func (b *stuckAcquires) AcquireQueued(ctx context.Context, sid spi.SessionID, name string) (spi.Acquire, error) {
	if err := b.hold(ctx); err != nil {
		return spi.Acquire{}, err
	}
	return b.Backend.AcquireQueued(ctx, sid, name)
}

func (b *stuckAcquires) KeepAlive(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	select {
	case b.kept <- struct{}{}:
	default:
	}
	return b.Backend.KeepAlive(ctx, sid, names, groups)
}

// TestKeepAliveNotBehindAcquireBacklog: with a group's acquires filling every call slot of the
// client (simba.MaxCallsInFlight, each held at the backend) and hundreds more queued behind
// them, the session's keep-alive still reaches the backend, while none of those acquires has
// ended: a keep-alive takes no call slot and never queues behind the client's other calls.
// (A guard of the call gate: it passed before the backends' own keep-alive connections too.)
//
// Counted, not timed: the keep-alive awaited is one that reaches the backend after every slot
// is held and the queue is non-empty; the minute only bounds a hang.
func TestKeepAliveNotBehindAcquireBacklog(t *testing.T) {
	defer goleak.VerifyNone(t)
	const P = 1024
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	be := &stuckAcquires{Backend: srv.Backend(), release: make(chan struct{}), kept: make(chan struct{}, 1)}
	var expired atomic.Int64
	c, err := simba.New(be, simba.WithOwner("backlog"), simba.WithTTL(1500*time.Millisecond),
		simba.WithListener(func(ev simba.Event) {
			if ev.Kind == simba.EventSessionExpired {
				expired.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(be.release)
		}
	}
	defer c.Close(context.Background())
	defer release()
	g, err := c.JoinGroup(context.Background(), "backlog", P)
	if err != nil {
		t.Fatal(err)
	}
	if !waitFor(time.Minute, func() bool {
		_, bulk := simba.QueuedCalls(c)
		return be.stuck.Load() == simba.MaxCallsInFlight && bulk > 0
	}) {
		_, bulk := simba.QueuedCalls(c)
		t.Fatalf("the join's acquires did not fill the call slots in a minute (%d held at the backend, %d queued)", be.stuck.Load(), bulk)
	}
	select { // a keep-alive sent before the slots were full does not count
	case <-be.kept:
	default:
	}
	select {
	case <-be.kept:
	case <-time.After(time.Minute):
		t.Fatal("no keep-alive reached the backend in a minute while the acquires held every call slot")
	}
	_, bulk := simba.QueuedCalls(c)
	if n := be.stuck.Load(); n != simba.MaxCallsInFlight || bulk == 0 {
		t.Fatalf("the keep-alive came with %d acquires held and %d queued: the backlog had moved", n, bulk)
	}
	t.Logf("a keep-alive reached the backend with %d acquires held and %d queued", simba.MaxCallsInFlight, bulk)
	if n := expired.Load(); n > 0 {
		t.Fatalf("the session expired %d times", n)
	}
	release()
	if !waitFor(2*time.Minute, func() bool { return len(g.Held()) == P }) {
		t.Fatalf("held %d of %d partitions after the acquires were let go", len(g.Held()), P)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

package simba_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// closeBound is how long a test waits for a Close that must not wait for virtual time: it
// only has to hand the close to the loop (microseconds), and what it must not wait for — a
// callback that is waiting for it, an open's timeout — never comes while virtual time stands
// still, so a Close that waits for it never returns. The bound is only a deadline for a
// broken Close, generous for a loaded machine (-race, a CPU shared with other tests): it is
// no latency bound.
const closeBound = 30 * time.Second

// insideClose is a Close(context.Background()) made from inside a callback, leader work or an
// Events consumer: entered is closed just before the call, returned receives its result.
type insideClose struct {
	once     sync.Once
	entered  chan struct{}
	returned chan error
}

func newInsideClose() *insideClose {
	return &insideClose{entered: make(chan struct{}), returned: make(chan error, 1)}
}

// do calls c.Close(context.Background()) the first time it is called.
func (ic *insideClose) do(c *simba.Client) {
	ic.once.Do(func() {
		close(ic.entered)
		ic.returned <- c.Close(context.Background())
	})
}

// check waits (moving virtual time) until the Close has been called, then — without moving
// virtual time, so nothing but the close itself can let it return — requires it to return
// within closeBound, and the client to be closed: a later operation fails with ErrClosed.
func (ic *insideClose) check(t *testing.T, w *world, what string, later func() error) {
	t.Helper()
	w.until(10*time.Second, what+" to call Close", func() bool {
		select {
		case <-ic.entered:
			return true
		default:
			return false
		}
	})
	select {
	case err := <-ic.returned:
		if err != nil {
			t.Fatalf("Close from %s: %v", what, err)
		}
	case <-time.After(closeBound):
		t.Fatalf("Close(context.Background()) from %s did not return within %v", what, closeBound)
	}
	if err := later(); !errors.Is(err, simba.ErrClosed) {
		t.Fatalf("after Close from %s: %v, want ErrClosed", what, err)
	}
}

func TestCloseFromOnElectedWithBackgroundContext(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ic := newInsideClose()
	e, err := c.NewElection("ce", simba.OnElected(func(context.Context, simba.Term) { ic.do(c) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ic.check(t, w, "OnElected", func() error { return e.Start(context.Background()) })
	if e.IsLeader() {
		t.Fatal("still leader after Close")
	}
}

func TestCloseFromOnRevokedWithBackgroundContext(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ic := newInsideClose()
	e, err := c.NewElection("cr", simba.OnRevoked(func(context.Context, simba.Term, simba.RevokeReason) { ic.do(c) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "leadership", e.IsLeader)
	w.async(func() error {
		// The callback's Close may overtake the step-down: then StepDown reports ErrClosed.
		if err := e.StepDown(context.Background()); err != nil && !errors.Is(err, simba.ErrClosed) {
			return err
		}
		return nil
	})
	ic.check(t, w, "OnRevoked", func() error {
		_, err := c.NewElection("later")
		return err
	})
}

func TestCloseFromRunWhileLeaderWithBackgroundContext(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ic := newInsideClose()
	var term simba.Term
	e, err := c.NewElection("cw", simba.RunWhileLeader(func(_ context.Context, t simba.Term) error {
		term = t
		ic.do(c)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ic.check(t, w, "RunWhileLeader", func() error { return e.Start(context.Background()) })
	if term.IsValid() {
		t.Fatal("the work's term is still valid after Close")
	}
}

func TestCloseFromRunPartitionWithBackgroundContext(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ic := newInsideClose()
	_, err := c.JoinGroup(context.Background(), "cg", 2, simba.RunPartition(func(context.Context, int, simba.Term) error {
		ic.do(c)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ic.check(t, w, "RunPartition", func() error {
		_, err := c.JoinGroup(context.Background(), "cg2", 1)
		return err
	})
}

func TestCloseFromEventsConsumerWithBackgroundContext(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ic := newInsideClose()
	e, err := c.NewElection("cv")
	if err != nil {
		t.Fatal(err)
	}
	events := e.Events(context.Background())
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for ev := range events {
			if ev.Kind == simba.EventElected {
				ic.do(c)
			}
		}
	}()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ic.check(t, w, "an Events consumer", func() error { return e.Start(context.Background()) })
	select {
	case <-consumed: // the client closed the channel once it had finished closing
	case <-time.After(closeBound):
		t.Fatal("the Events channel was not closed after Close returned")
	}
}

// openProbe is a backend whose OpenSession calls send their context on opens before they run.
type openProbe struct {
	spi.Backend
	opens chan context.Context
}

func (b *openProbe) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	b.opens <- ctx
	return b.Backend.OpenSession(ctx, owner, ttl)
}

// TestCloseCutsTheOpenInFlight: Close does not wait for a session being opened at a backend
// that does not answer (a process stopped while waiting for a lock at a server that is down
// exited only at the open's timeout, one renewal interval later): without virtual time
// moving, so that the open's timeout never comes, Close returns, the open's context is
// cancelled, and no listener hears of a backend failure.
func TestCloseCutsTheOpenInFlight(t *testing.T) {
	w := newWorld(t)
	b := w.srv.Backend()
	b.CutOff(simbatest.Hang)
	probe := &openProbe{Backend: b, opens: make(chan context.Context, 10)}
	var failures atomic.Int32
	c := w.clientOn(probe, "a", simba.WithListener(func(ev simba.Event) {
		if ev.Kind == simba.EventBackendError {
			failures.Add(1)
		}
	}))
	var open context.Context
	select {
	case open = <-probe.opens:
	case <-time.After(10 * time.Second):
		t.Fatal("no open-session call")
	}
	done := make(chan error, 1)
	go func() { done <- c.Close(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(closeBound):
		t.Fatalf("Close did not return within %v while an open-session call hung", closeBound)
	}
	if !errors.Is(open.Err(), context.Canceled) {
		t.Fatalf("the open's context: %v, want it cancelled", open.Err())
	}
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d EventBackendError events for the open Close cut", n)
	}
	if _, err := c.TryLock(context.Background(), "job"); !errors.Is(err, simba.ErrClosed) {
		t.Fatalf("TryLock after Close: %v, want ErrClosed", err)
	}
}

// TestEndingOperationsAfterClose: after Close every operation fails with ErrClosed, those that
// end something included, whatever state their handle was in: Stop and StepDown of a leading
// election, of one stopped before the close and of one whose name a later election took, Leave
// of a joined group, of one left before and of one joined again since, and Unlock (its
// *RevokedError of reason RevokedClosed matches ErrClosed). Close ended them; the error tells
// a deferred Stop or Leave that runs after it that it did nothing. The handles superseded by a
// later one of their name returned nil after Close, unlike the others.
func TestEndingOperationsAfterClose(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c, _ := w.client("a")
	lead, err := c.NewElection("lead")
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := c.NewElection("stopped")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*simba.Election{lead, stopped} {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.until(5*time.Second, "leadership", func() bool { return lead.IsLeader() && stopped.IsLeader() })
	w.async(func() error { return stopped.Stop(ctx) })
	w.until(5*time.Second, "the stop", func() bool { return !stopped.IsLeader() })
	h, err := c.TryLock(ctx, "lock")
	if err != nil {
		t.Fatal(err)
	}
	joined, err := c.JoinGroup(ctx, "joined", 2)
	if err != nil {
		t.Fatal(err)
	}
	left, err := c.JoinGroup(ctx, "left", 2)
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return left.Leave(ctx) })
	w.until(5*time.Second, "the leave", func() bool { return len(left.Held()) == 0 })
	// A group left and joined again, an election stopped and its name taken by another.
	rejoined, err := c.JoinGroup(ctx, "rejoined", 2)
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return rejoined.Leave(ctx) })
	if _, err := c.JoinGroup(ctx, "rejoined", 2); err != nil {
		t.Fatal(err)
	}
	taken, err := c.NewElection("taken")
	if err != nil {
		t.Fatal(err)
	}
	if err := taken.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return taken.Stop(ctx) })
	later, err := c.NewElection("taken")
	if err != nil {
		t.Fatal(err)
	}
	if err := later.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := clocktest.Close(w.clock, 10*time.Second, c.Close); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		what string
		do   func() error
	}{
		{"Stop", func() error { return lead.Stop(ctx) }},
		{"Stop again", func() error { return lead.Stop(ctx) }},
		{"StepDown", func() error { return lead.StepDown(ctx) }},
		{"Stop of an election stopped before", func() error { return stopped.Stop(ctx) }},
		{"StepDown of an election stopped before", func() error { return stopped.StepDown(ctx) }},
		{"Leave", func() error { return joined.Leave(ctx) }},
		{"Leave again", func() error { return joined.Leave(ctx) }},
		{"Leave of a group left before", func() error { return left.Leave(ctx) }},
		{"Stop of an election whose name another took", func() error { return taken.Stop(ctx) }},
		{"StepDown of an election whose name another took", func() error { return taken.StepDown(ctx) }},
		{"Leave of a group joined again since", func() error { return rejoined.Leave(ctx) }},
		{"Unlock", func() error { return h.Unlock(ctx) }},
	} {
		if err := op.do(); !errors.Is(err, simba.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", op.what, err)
		}
	}
}

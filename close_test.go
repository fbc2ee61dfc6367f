package simba_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
)

// closeBound is how long a Close from inside the client may take: it only has to hand the
// close to the loop, which takes microseconds; the bound leaves room for a loaded machine.
const closeBound = time.Second

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

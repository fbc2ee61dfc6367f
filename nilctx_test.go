package simba_test

import (
	"context"
	"errors"
	"testing"

	"github.com/simba-go/simba"
)

// A nil ctx is refused with ErrInvalidOption by every method that takes one and returns an
// error, and changes nothing: the lock, election and group stay usable with a real ctx, and
// a Held refused so can still be unlocked. Events and All take a nil ctx as one that never
// ends.
func TestNilContextIsInvalidOption(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c, _ := w.client("a")
	var nilCtx context.Context // a variable, so that vet does not flag the literal nil

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, simba.ErrInvalidOption) {
			t.Fatalf("%s with a nil ctx: %v, want ErrInvalidOption", what, err)
		}
	}
	_, err := c.Lock(nilCtx, "n")
	refused("Lock", err)
	_, err = c.TryLock(nilCtx, "n")
	refused("TryLock", err)
	refused("WithLock", c.WithLock(nilCtx, "n", func(context.Context, simba.Term) error { return nil }))
	_, err = c.JoinGroup(nilCtx, "g", 2, simba.OnAssigned(func(context.Context, int, simba.Term) {}))
	refused("JoinGroup", err)

	h, err := c.Lock(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	refused("Unlock", h.Unlock(nilCtx))
	if err := h.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after a refused one: %v", err)
	}

	e, err := c.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	events := e.Events(nilCtx)
	seq := e.All(nilCtx)
	refused("Start", e.Start(nilCtx))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.until(testTTL, "leadership", e.IsLeader)
	if ev := <-events; ev.Kind != simba.EventElected {
		t.Fatalf("Events(nil) gave %v, want elected", ev)
	}
	refused("StepDown", e.StepDown(nilCtx))
	refused("Stop", e.Stop(nilCtx))
	if !e.IsLeader() {
		t.Fatal("a refused StepDown or Stop ended the term")
	}

	g, err := c.JoinGroup(ctx, "g", 2, simba.OnAssigned(func(context.Context, int, simba.Term) {}))
	if err != nil {
		t.Fatal(err)
	}
	w.until(testTTL, "both partitions", func() bool { return len(g.Held()) == 2 })
	refused("Leave", g.Leave(nilCtx))
	if len(g.Held()) != 2 {
		t.Fatal("a refused Leave gave partitions up")
	}

	refused("Close", c.Close(nilCtx))
	if !e.IsLeader() {
		t.Fatal("a refused Close ended the term")
	}
	w.async(func() error { return c.Close(ctx) })
	for range seq { // All(nil) ends when the client closes
	}
	if _, open := <-events; open {
		for range events {
		}
	}
}

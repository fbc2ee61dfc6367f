package simba_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
)

// Schedule runs its function at once on election and then every interval of the client's
// clock, and stops when the term ends.
func TestScheduleRunsEveryIntervalWhileLeader(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c, _ := w.client("a")
	var runs atomic.Int32
	var tokens sync.Map
	e, err := c.NewElection("sched", simba.Schedule(500*time.Millisecond, func(_ context.Context, term simba.Term) {
		runs.Add(1)
		tokens.Store(term.Token(), true)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "leadership", e.IsLeader)
	w.until(5*time.Second, "the first run", func() bool { return runs.Load() >= 1 })
	start := w.clock.Now()
	w.until(10*time.Second, "four more runs", func() bool { return runs.Load() >= 5 })
	if took := w.clock.Now() - start; took < 1900*time.Millisecond {
		t.Fatalf("4 intervals of 500ms took %v of virtual time", took)
	}
	w.async(func() error { return e.Stop(ctx) })
	n := runs.Load()
	for i := 0; i < 200; i++ {
		w.clock.Advance(10 * time.Millisecond)
		time.Sleep(100 * time.Microsecond)
	}
	if runs.Load() != n {
		t.Fatalf("Schedule kept running after Stop: %d runs, then %d", n, runs.Load())
	}
}

// Events, All, Leader and listeners see the same life of an election.
func TestEventsAllLeaderAndListener(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	var heard sync.Map // kind → count
	listener := func(ev simba.Event) {
		v, _ := heard.LoadOrStore(ev.Kind, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
	}
	ca, _ := w.client("a", simba.WithListener(listener))
	ea, _ := ca.NewElection("ev")
	events := ea.Events(ctx)
	allCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	fromAll := make(chan simba.Event, 16)
	seq := ea.All(allCtx) // subscribed from here on
	go func() {
		for ev := range seq {
			fromAll <- ev
		}
		close(fromAll)
	}()
	if err := ea.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "leadership", ea.IsLeader)
	term, _ := ea.Term()
	if l, ok := ea.Leader(); !ok || !l.Self || l.Owner != "a" {
		t.Fatalf("Leader() = %+v %v, want self", l, ok)
	}

	cb, _ := w.client("b")
	eb, _ := cb.NewElection("ev")
	_ = eb.Start(ctx)
	w.until(5*time.Second, "b to learn the holder", func() bool {
		l, ok := eb.Leader()
		return ok && !l.Self && l.Owner == "a"
	})

	w.async(func() error { return ea.Stop(ctx) })
	want := []simba.EventKind{simba.EventElected, simba.EventRevoked}
	for _, src := range []struct {
		name string
		ch   <-chan simba.Event
	}{{"Events", events}, {"All", fromAll}} {
		for i, kind := range want {
			select {
			case ev := <-src.ch:
				if ev.Kind != kind || ev.Name != "ev" || ev.Token != term.Token() {
					t.Fatalf("%s event %d = %v, want %v of ev#%d", src.name, i, ev, kind, term.Token())
				}
				if kind == simba.EventRevoked && ev.Reason != simba.RevokedStopped {
					t.Fatalf("%s: revoked with %v, want stopped", src.name, ev.Reason)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: no %v event", src.name, kind)
			}
		}
	}
	for _, kind := range []simba.EventKind{simba.EventSessionOpened, simba.EventElected, simba.EventRevoked} {
		if v, ok := heard.Load(kind); !ok || v.(*atomic.Int32).Load() == 0 {
			t.Errorf("the listener heard no %v", kind)
		}
	}
	stopAll()
	for range fromAll {
	}
}

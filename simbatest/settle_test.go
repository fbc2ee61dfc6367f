package simbatest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// Work handed from a timer callback to another goroutine, reported through an activity, is
// done when Advance returns.
func TestSettleWaitsForHandedOffWork(t *testing.T) {
	c := NewVirtualClock()
	a := c.Track("worker")
	var done atomic.Int32
	for i := range 3 {
		c.AfterFunc(time.Duration(i+1)*time.Second, func() {
			a.Begin() // before the handoff
			go func() {
				defer a.End()
				// A chain of handoffs: each begins the next unit before it ends its own.
				a.Begin()
				go func() {
					defer a.End()
					done.Add(1)
				}()
			}()
		})
	}
	c.Advance(2 * time.Second)
	if got := done.Load(); got != 2 {
		t.Fatalf("after 2s: %d pieces of work done, want 2", got)
	}
	c.Advance(time.Second)
	if got := done.Load(); got != 3 {
		t.Fatalf("after 3s: %d pieces of work done, want 3", got)
	}
	// Work begun outside any timer is waited for by Settle.
	a.Begin()
	go func() {
		defer a.End()
		done.Add(1)
	}()
	c.Settle()
	if got := done.Load(); got != 4 {
		t.Fatalf("after Settle: %d pieces of work done, want 4", got)
	}
}

// A unit that waits for the clock (a timer, a context the clock's timer cancels) is idle until
// what it waits for is ready, and then busy until it ends: Advance neither deadlocks on it nor
// returns before it has done what follows the wait.
func TestSettleWaitIsIdleUntilReady(t *testing.T) {
	c := NewVirtualClock()
	a := c.Track("sleeper")
	var mu sync.Mutex
	var woke []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		woke = append(woke, s+"@"+c.Now().String())
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), woke...)
	}

	a.Begin()
	go func() {
		defer a.End()
		tick := make(chan struct{})
		c.AfterFunc(2*time.Second, func() { close(tick) })
		if err := a.Wait(context.Background(), tick); err != nil {
			t.Error(err)
		}
		record("tick")
		// A call with a timeout on the clock, as a client makes them.
		ctx, cancel := context.WithCancel(context.Background())
		c.AfterFunc(time.Second, cancel)
		if err := awaitOn(ctx, a, nil); err != context.Canceled {
			t.Errorf("wait for a cancelled ctx = %v", err)
		}
		record("timeout")
	}()
	c.Advance(time.Second) // the sleeper waits idle: Advance returns
	if got := seen(); len(got) != 0 {
		t.Fatalf("woke early: %v", got)
	}
	c.Advance(time.Second)
	if got := seen(); len(got) != 1 || got[0] != "tick@2s" {
		t.Fatalf("after 2s: %v, want [tick@2s]", got)
	}
	c.Advance(5 * time.Second)
	if got := seen(); len(got) != 2 || got[1] != "timeout@3s" {
		t.Fatalf("after 7s: %v, want [tick@2s timeout@3s]", got)
	}
}

// awaitOn is spi.Await with the activity in the context.
func awaitOn(ctx context.Context, a spi.Activity, ch <-chan struct{}) error {
	return spi.Await(spi.ContextWithActivity(ctx, a), ch)
}

func TestSettleAfterFuncZeroAndClose(t *testing.T) {
	c := NewVirtualClock()
	var ran atomic.Bool
	c.AfterFunc(0, func() { ran.Store(true) })
	c.Settle()
	if !ran.Load() {
		t.Fatal("Settle returned before an AfterFunc(0) callback ran")
	}

	a := c.Track("closed")
	a.End() // nothing begun: ignored
	a.Begin()
	a.Close() // the clock no longer waits for it
	c.Advance(time.Second)
	a.Begin() // no effect after Close
	c.Settle()
	if c.Now() != time.Second {
		t.Fatalf("Now = %v", c.Now())
	}
}

// A client that keeps working without the clock moving never settles; the clock stops waiting
// for it after livelockUnits units, does not wait for it again until it is idle, and then
// waits for it as before.
func TestSettleGivesUpOnALivelock(t *testing.T) {
	c := NewVirtualClock()
	a := c.Track("spinner")
	stop, stopped := make(chan struct{}), make(chan struct{})
	a.Begin()
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				a.End()
				return
			default:
				a.Begin()
				a.End()
			}
		}
	}()
	c.Advance(time.Second) // returns: the spinner is given up on
	c.Advance(time.Second) // and not waited for again
	close(stop)
	<-stopped
	c.Settle() // idle now
	var done atomic.Bool
	c.AfterFunc(time.Second, func() {
		a.Begin()
		go func() {
			defer a.End()
			done.Store(true)
		}()
	})
	c.Advance(time.Second)
	if !done.Load() {
		t.Fatal("a formerly spinning activity is not waited for once it was idle")
	}
}

// The Server begins a unit of the subscriber's activity for each hint it sends; a subscriber
// that ends one per hint handled has handled every hint when Settle returns. A cut Link drops
// hints and ends their units.
func TestSettleWaitsForHints(t *testing.T) {
	srv := NewServer()
	clock := srv.VirtualClock()
	ctx := ctxT(t)
	consume := func(name string, b spi.Backend) func() []spi.Hint {
		a := clock.Track(name)
		hints, err := b.(spi.Hinter).Hints(spi.ContextWithActivity(ctx, a))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []spi.Hint
		go func() {
			for h := range hints {
				mu.Lock()
				got = append(got, h)
				mu.Unlock()
				a.End()
			}
		}()
		return func() []spi.Hint {
			mu.Lock()
			defer mu.Unlock()
			return append([]spi.Hint(nil), got...)
		}
	}
	direct := consume("direct", srv.Backend())
	link := NewLink(srv.Backend())
	linked := consume("linked", link.Backend())

	w := srv.Backend()
	s := openB(t, w, "w")
	r, _ := w.Acquire(ctx, s, "x")
	_ = w.Release(ctx, s, "x", r.Token)
	clock.Settle()
	want := spi.Hint{Kind: spi.Released, Name: "x"}
	if got := direct(); len(got) != 1 || got[0] != want {
		t.Fatalf("direct subscriber after Settle: %v", got)
	}
	if got := linked(); len(got) != 1 || got[0] != want {
		t.Fatalf("linked subscriber after Settle: %v", got)
	}
	link.CutOff()
	r, _ = w.Acquire(ctx, s, "y")
	_ = w.Release(ctx, s, "y", r.Token)
	clock.Settle() // the dropped hint's unit ended: no deadlock
	if got := direct(); len(got) != 2 {
		t.Fatalf("direct subscriber: %v", got)
	}
	if got := linked(); len(got) != 1 {
		t.Fatalf("a hint got through a cut link: %v", got)
	}
}

package simba

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/spi"
)

// handClock is a clock whose timers fire only when a test calls fire: the test decides the
// order in which a timer's firing and the loop's steps happen. Its time stands still.
type handClock struct {
	mu     sync.Mutex
	timers []*handTimer
}

type handTimer struct {
	clock   *handClock
	f       func()
	stopped bool
	fired   bool
}

func (c *handClock) Now() time.Duration { return time.Second }

func (c *handClock) AfterFunc(d time.Duration, f func()) spi.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &handTimer{clock: c, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *handTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	return true
}

// fire runs the timer's function on the calling goroutine, as a clock would once it is due.
func (t *handTimer) fire(tb testing.TB) {
	tb.Helper()
	t.clock.mu.Lock()
	if t.stopped || t.fired {
		t.clock.mu.Unlock()
		tb.Fatal("firing a timer that was stopped or has fired")
	}
	t.fired = true
	t.clock.mu.Unlock()
	t.f()
}

// last is the timer armed last.
func (c *handClock) last() *handTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timers[len(c.timers)-1]
}

// onLoop runs f as the loop goroutine (holding the stepper) and waits for it. Everything
// posted before it has run by then: the loop takes posted functions in order.
func (c *Client) onLoop(t testing.TB, f func()) {
	t.Helper()
	done := make(chan struct{})
	if !c.post(func() { f(); close(done) }) {
		t.Fatal("the client's loop has exited")
	}
	<-done
}

// TestArmKeepsTheNewerTimerOfAKey: a timer fires, and before the loop runs the step its
// firing enqueued, the same key is armed again. The stale step must not drop the newer timer
// from the client's map: that timer is still to fire, and the map is what stops it when the
// key is armed again or the client closes, and what leak checks count. The newer timer's
// own firing then drops it.
func TestArmKeepsTheNewerTimerOfAKey(t *testing.T) {
	defer goleak.VerifyNone(t)
	clock := &handClock{}
	c, err := New(&grantAll{held: make(map[string]int64)}, WithClock(clock), WithOwner("arm"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background()) // on a failure too, before goleak looks (a no-op after the Close below)
	// No election has this name: the engine ignores the key's firings.
	key := engine.Timer{Kind: engine.TimerRetry, Name: "nobody"}
	var older, newer *handTimer
	c.onLoop(t, func() {
		c.arm(key, c.cfg.clock.Now()+time.Minute, c.cfg.clock.Now())
		older = clock.last()
	})
	c.onLoop(t, func() {
		// On the loop goroutine, so the step that the firing enqueues runs only after this
		// function: the older timer has fired and its step waits, when the key is armed again.
		older.fire(t)
		c.arm(key, c.cfg.clock.Now()+time.Minute, c.cfg.clock.Now())
		newer = clock.last()
	})
	if newer == older {
		t.Fatal("the second arm made no timer")
	}
	var armed spi.Timer
	c.onLoop(t, func() { armed = c.timers[key].timer }) // after the older firing's step
	if armed != newer {
		t.Fatalf("after the older timer's step the key's entry is %v, want the newer timer %p", armed, newer)
	}
	newer.fire(t)
	var left bool
	c.onLoop(t, func() { _, left = c.timers[key] }) // after the newer firing's step
	if left {
		t.Fatal("the newer timer's firing left its entry in the map")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestHandoverTimerStoppedWhenTheWorkExits: Stop while leader work runs starts a hand-over
// and arms its timer for the deadline as of the stop. The work then exits, the lease is
// released and Stop returns: the hand-over is over, so its timer must be stopped and dropped
// from the client's map, not left pending until the deadline (up to a TTL), when it would
// step an event that the engine ignores; a member handing over many partitions would keep
// one such timer per partition, all due at the same instant. Close then leaves no timer of
// the client pending and no goroutine behind.
func TestHandoverTimerStoppedWhenTheWorkExits(t *testing.T) {
	defer goleak.VerifyNone(t)
	clock := &handClock{}
	c, err := New(&grantAll{held: make(map[string]int64)}, WithClock(clock), WithOwner("handover"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background()) // on a failure too, before goleak looks (a no-op after the Close below)
	started, release := make(chan context.Context, 1), make(chan struct{})
	e, err := c.NewElection("job", RunWhileLeader(func(ctx context.Context, _ Term) error {
		started <- ctx
		<-ctx.Done()
		<-release // the work outlives its term: Stop hands over
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	work := <-started
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(ctx) }()
	<-work.Done() // revoked by the stop; the hand-over timer is armed in the same step
	key := engine.Timer{Kind: engine.TimerHandover, Name: "job"}
	var handover spi.Timer
	c.onLoop(t, func() { handover = c.timers[key].timer })
	if handover == nil {
		t.Fatalf("no hand-over timer armed after Stop with work running; timers %v", c.timerKeys(t))
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	var left bool
	c.onLoop(t, func() { _, left = c.timers[key] })
	if left {
		t.Errorf("the hand-over timer is still in the client's map after the hand-over ended: %v", c.timerKeys(t))
	}
	if ht := handover.(*handTimer); ht.Stop() {
		t.Error("the hand-over timer was still pending after the hand-over ended (stopped only now, by the test)")
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	clock.mu.Lock()
	defer clock.mu.Unlock()
	for i, ht := range clock.timers {
		if !ht.stopped && !ht.fired {
			t.Errorf("timer %d of the client is pending after Close", i)
		}
	}
}

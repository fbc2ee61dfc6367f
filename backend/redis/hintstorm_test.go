package redis

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// countingBackend counts the acquires a client makes, queued or not (Hints and Withdraw are
// the embedded backend's).
type countingBackend struct {
	*Backend
	acquires atomic.Int64
}

func (c *countingBackend) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	c.acquires.Add(1)
	return c.Backend.Acquire(ctx, s, name)
}

func (c *countingBackend) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	c.acquires.Add(1)
	return c.Backend.AcquireQueued(ctx, s, name)
}

// TestForgedReleasedPublishStormIsDamped is issue 13's reproduction on a real Redis: 2,000
// forged "released" PUBLISHes on a held lock's channel made 3 waiters run 3,562 acquires. The
// clients run on a virtual clock that stands still during the storm, so only hints can make
// them acquire: with the engine's damping, each waiter makes at most one acquire for the first
// hint and one follow-up for the hints that came during it (bound: 4). Then, past the hint
// windows, a genuine release still hands the lock to a waiter at once (no virtual time passes).
func TestForgedReleasedPublishStormIsDamped(t *testing.T) {
	rc := standaloneClient(t)
	clock := simbatest.NewVirtualClock()
	name := uniq(t, "storm")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newClient := func(owner string) (*simba.Client, *countingBackend) {
		b, err := New(rc)
		if err != nil {
			t.Fatal(err)
		}
		cb := &countingBackend{Backend: b}
		c, err := simba.New(cb, simba.WithClock(clock), simba.WithTTL(30*time.Second), simba.WithOwner(owner), simba.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := clocktest.Close(clock, time.Minute, c.Close); err != nil {
				t.Errorf("close %s: %v", owner, err)
			}
			b.Close()
		})
		return c, cb
	}
	holder, _ := newClient("holder")
	hl, err := holder.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	held := hl.Term
	type waiter struct {
		b   *countingBackend
		got chan simba.Term
	}
	var ws []waiter
	for _, owner := range []string{"w1", "w2", "w3"} {
		c, cb := newClient(owner)
		got := make(chan simba.Term, 1)
		lockCtx, stop := context.WithCancel(ctx)
		t.Cleanup(stop)
		go func() {
			if h, err := c.Lock(lockCtx, name); err == nil {
				got <- h.Term
			}
		}()
		ws = append(ws, waiter{b: cb, got: got})
	}
	counts := func() []int64 {
		n := make([]int64, len(ws))
		for i, x := range ws {
			n[i] = x.b.acquires.Load()
		}
		return n
	}
	// settle waits until no waiter has acquired for 300 ms of real time.
	settle := func() []int64 {
		last := counts()
		for {
			time.Sleep(300 * time.Millisecond)
			now := counts()
			if slices.Equal(now, last) {
				return now
			}
			last = now
		}
	}
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if n := counts(); n[0] > 0 && n[1] > 0 && n[2] > 0 {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the waiters did not all try the lock: %v acquires", counts())
		}
	}
	before := settle()

	// The storm: 2,000 forged PUBLISHes on the lease's channel, as anyone with PUBLISH
	// rights can send, spread over a second or more (a burst would be absorbed by the
	// one-follow-up rule alone).
	for i := 0; i < 2000; i++ {
		if err := rc.Publish(ctx, wire.LeaseKey(name), name).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Microsecond)
	}
	after := settle()
	for i := range ws {
		n := after[i] - before[i]
		t.Logf("waiter %d: %d acquires for 2,000 forged hints", i+1, n)
		if n > 4 {
			t.Errorf("waiter %d made %d acquires for 2,000 forged hints; want at most 4", i+1, n)
		}
	}
	if !held.IsValid() {
		t.Fatal("the holder lost the lock during the storm")
	}

	// Past every hint window (no acquire for two windows of virtual time), a genuine release
	// wakes a waiter without any virtual time passing: only its hint can.
	for {
		c0 := counts()
		for i := 0; i < 20; i++ {
			clock.Advance(10 * time.Millisecond)
			time.Sleep(time.Millisecond)
		}
		if slices.Equal(settle(), c0) {
			break
		}
	}
	at := clock.Now()
	if err := hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var winner simba.Term
	for start := time.Now(); winner.Token() == 0; time.Sleep(time.Millisecond) {
		for _, x := range ws {
			select {
			case winner = <-x.got:
			default:
			}
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("no waiter took the lock after the genuine release")
		}
	}
	if now := clock.Now(); now != at {
		t.Errorf("the hand-over took %v of virtual time; want none", now-at)
	}
	if winner.Token() <= held.Token() {
		t.Errorf("winner token %d, want above %d", winner.Token(), held.Token())
	}
}

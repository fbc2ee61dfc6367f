package simba_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// gatedAcquires holds each name's first Acquire until the test opens the name's gate, then
// fails it (retryable); it records when each later Acquire reached it. Only spi.Backend's
// methods are promoted, so the client acquires through Acquire (no Queuer, no Hinter).
type gatedAcquires struct {
	spi.Backend
	clock *simbatest.VirtualClock
	gates map[string]chan struct{}

	mu     sync.Mutex
	first  map[string]bool
	second map[string]time.Duration
}

func (g *gatedAcquires) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	g.mu.Lock()
	gated := !g.first[name]
	g.first[name] = true
	if _, seen := g.second[name]; !gated && !seen {
		g.second[name] = g.clock.Now()
	}
	g.mu.Unlock()
	if gated {
		if err := spi.Await(ctx, g.gates[name]); err != nil {
			return spi.Acquire{}, err
		}
		return spi.Acquire{}, spi.Unavailable("acquire", errors.New("gated"))
	}
	return g.Backend.Acquire(ctx, s, name)
}

// With WithSeed, a client's retry delays do not depend on the order in which replies that
// reach it at one instant of a virtual clock are stepped: two elections whose acquires fail at
// the same instant retry at the same times whichever reply the client steps first. (The
// client drew each step's jitter from one stream in arrival order, so the two replies swapped
// their draws, and a test's run with the same seed took another course.)
func TestSeededRetriesIgnoreArrivalOrder(t *testing.T) {
	run := func(order ...string) map[string]time.Duration {
		srv := simbatest.NewServer()
		clock := srv.VirtualClock()
		g := &gatedAcquires{Backend: srv.Backend(), clock: clock,
			gates: map[string]chan struct{}{"x": make(chan struct{}), "y": make(chan struct{})},
			first: map[string]bool{}, second: map[string]time.Duration{}}
		c, err := simba.New(g, simba.WithClock(clock), simba.WithTTL(3*time.Second), simba.WithSeed(7))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close(context.Background()) }()
		for _, name := range []string{"x", "y"} {
			e, err := c.NewElection(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		clock.Settle() // both first acquires wait at their gates
		for _, name := range order {
			close(g.gates[name]) // this reply, and only it, is stepped now
			clock.Settle()
		}
		clock.Advance(time.Second) // both retry within their first backoff
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.second) != 2 {
			t.Fatalf("retries seen: %v, want both x and y", g.second)
		}
		return g.second
	}
	xy, yx := run("x", "y"), run("y", "x")
	if xy["x"] != yx["x"] || xy["y"] != yx["y"] {
		t.Fatalf("retry times depend on the order the failed replies were stepped: x first %v, y first %v", xy, yx)
	}
}

package simba_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestElectionHandoverPath pins what an Election's graceful hand-over costs the client beside
// a Lock's: the other candidate's OnElected runs on the call worker whose acquire's reply
// granted the term, once that worker has stepped it (no goroutine started for the callback:
// a Lock's grant wakes the Lock's caller, an Election's runs its callback where the grant
// came in), and the leader's Stop and StepDown take no goroutine id (a stack trace) when the
// election has no leader work. Until 2026-12-06 each OnElected ran on a goroutine started for
// it, which took its id first, and each Stop and StepDown took the caller's id to tell whether
// it ran inside the election's own work: on simbatest's server, a Stop's release hop took
// 35 µs longer at p50 than an Unlock's (BenchmarkHandoverHops/memory). With a
// WithCallbackExecutor, every callback still goes through the executor.
func TestElectionHandoverPath(t *testing.T) {
	leaderPath(t)
	if onWorker, _ := handoverPath(t); onWorker == 0 {
		t.Error("default executor: no grant was stepped on its call worker in 20 hand-overs")
	}
	var mu sync.Mutex
	executed := 0
	exec := func(f func()) {
		mu.Lock()
		executed++
		mu.Unlock()
		go f()
	}
	_, ran := handoverPath(t, simba.WithCallbackExecutor(exec))
	mu.Lock()
	defer mu.Unlock()
	if executed != ran {
		t.Errorf("WithCallbackExecutor: %d of %d OnElected callbacks went through the executor", executed, ran)
	}
}

// handoverPath hands an election between two clients back and forth by Stop and StepDown
// (with opts) and checks each hand-over's path (TestElectionHandoverPath). It returns how many
// grants were stepped on their call worker (without opts it checks that each one's OnElected
// ran there, with opts that it did not) and how many OnElected ran in all.
func handoverPath(t *testing.T, opts ...simba.Option) (onWorker, elected int) {
	ctx := context.Background()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	name := "handover-path"
	custom := len(opts) > 0
	type mark struct{ back, reply, elected uint64 }
	var mu sync.Mutex
	var marks [2]mark
	var es [2]*simba.Election
	var onElected [2]chan uint64
	for i := range es {
		c, err := simba.New(srv.Backend(), append([]simba.Option{simba.WithOwner(fmt.Sprint("path-", i)), simba.WithTTL(5 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		simba.OnHop(c, func(hop int, n string) {
			if n != name {
				return
			}
			g := goroutineID()
			mu.Lock()
			defer mu.Unlock()
			switch hop {
			case 2:
				marks[i].back = g
			case 3:
				marks[i].reply = g
			case 4:
				marks[i].elected = g
			}
		})
		ch := make(chan uint64, 1)
		onElected[i] = ch
		e, err := c.NewElection(name, simba.OnElected(func(context.Context, simba.Term) { ch <- goroutineID() }))
		if err != nil {
			t.Fatal(err)
		}
		es[i] = e
	}
	if err := es[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-onElected[0]
	elected++
	if err := es[1].Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the candidate has tried once and waits
	leader := 0
	for round := 0; round < 20 && (onWorker < 5 || custom && round < 6); round++ {
		w := 1 - leader
		mu.Lock()
		marks[w] = mark{}
		mu.Unlock()
		var err error
		if round%2 == 0 {
			err = es[leader].Stop(ctx)
		} else {
			err = es[leader].StepDown(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		g := <-onElected[w]
		elected++
		mu.Lock()
		m := marks[w]
		mu.Unlock()
		if m.elected == 0 {
			t.Fatalf("round %d: no grant stepped on the candidate's side", round)
		}
		// The reply stepped where it came back: on the call worker (the loop was idle).
		if m.back != 0 && m.back == m.reply && m.reply == m.elected {
			onWorker++
			if custom && g == m.elected {
				t.Errorf("round %d: OnElected ran on the call worker %d despite WithCallbackExecutor", round, g)
			}
			if !custom && g != m.elected {
				t.Errorf("round %d: OnElected ran on goroutine %d, the grant was stepped on the call worker %d: want the worker", round, g, m.elected)
			}
		}
		if round%2 == 1 {
			if err := es[leader].Stop(ctx); err != nil { // out of the cooldown
				t.Fatal(err)
			}
		}
		if err := es[leader].Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		leader = w
	}
	return onWorker, elected
}

// leaderPath checks that a leader's Stop and StepDown take no goroutine id when its election
// has no leader work, alone on its client and server. Something else of the client may take
// one meanwhile (its loop goroutine takes its own as it starts, which on a loaded machine can
// be late), so each is tried up to 5 times for one that took none; before, every one took one.
func leaderPath(t *testing.T) {
	ctx := context.Background()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	c, err := simba.New(srv.Backend(), simba.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	elected := make(chan struct{}, 1)
	e, err := c.NewElection("leader-path", simba.OnElected(func(context.Context, simba.Term) { elected <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	for _, stepDown := range []bool{false, true} {
		var took []uint64
		for len(took) < 5 && !slices.Contains(took, 0) {
			if err := e.Start(ctx); err != nil {
				t.Fatal(err)
			}
			<-elected
			before := simba.GoroutineIDsTaken()
			if stepDown {
				err = e.StepDown(ctx)
			} else {
				err = e.Stop(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			took = append(took, simba.GoroutineIDsTaken()-before)
			if stepDown {
				if err := e.Stop(ctx); err != nil { // out of the cooldown
					t.Fatal(err)
				}
			}
		}
		if !slices.Contains(took, 0) {
			t.Errorf("the leader's Stop (StepDown %v) took %v goroutine ids in %d tries, want 0 in one (its election has no leader work)", stepDown, took, len(took))
		}
	}
}

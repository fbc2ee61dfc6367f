package simba_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/simbatest"
)

// stormBackend is a simbatest backend whose hint stream also carries hints the test forges,
// like PUBLISHes anyone can send on a Redis lease channel.
type stormBackend struct {
	*simbatest.Backend
	fake chan spi.Hint
}

func (s stormBackend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	real, err := s.Backend.Hints(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan spi.Hint)
	go func() {
		defer close(out)
		for {
			var h spi.Hint
			var ok bool
			select {
			case h, ok = <-real:
				if !ok {
					return
				}
			case h = <-s.fake:
			case <-ctx.Done():
				return
			}
			select {
			case out <- h:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestHintStormIsDamped: 2,000 forged "released" hints over 2 s (virtual) to 3 waiters of a
// held lock cost each waiter at most two acquires per hint window (engine.HintWindow, 100 ms)
// plus a few (issue 13: they cost 3,562 acquires); and once the storm is over, a genuine
// release still wakes a waiter at once, with no virtual time passing.
func TestHintStormIsDamped(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	holder, _ := w.client("holder")
	var hl *simba.Held
	w.async(func() (err error) { hl, err = holder.Lock(ctx, "res"); return err })
	held := hl.Term

	type waiter struct {
		b    *simbatest.Backend
		fake chan spi.Hint
		got  chan simba.Term
	}
	var ws []waiter
	for _, owner := range []string{"w1", "w2", "w3"} {
		b := w.srv.Backend()
		sb := stormBackend{Backend: b, fake: make(chan spi.Hint)}
		c, err := simba.New(sb, simba.WithClock(w.clock), simba.WithTTL(testTTL), simba.WithOwner(owner), simba.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan simba.Term, 1)
		lockCtx, cancel := context.WithCancel(ctx)
		go func() {
			h, err := c.Lock(lockCtx, "res")
			if err == nil {
				got <- h.Term
			}
			close(got)
		}()
		t.Cleanup(func() {
			cancel()
			if err := clocktest.Close(w.clock, 10*time.Second, c.Close); err != nil {
				t.Errorf("close %s: %v", owner, err)
			}
		})
		ws = append(ws, waiter{b: b, fake: sb.fake, got: got})
	}
	w.until(time.Second, "every waiter asked once", func() bool {
		for _, x := range ws {
			if x.b.Calls("Acquire") == 0 {
				return false
			}
		}
		return true
	})
	before := make([]int, len(ws))
	for i, x := range ws {
		before[i] = x.b.Calls("Acquire")
	}

	// The storm: 2,000 forged hints, one per virtual millisecond, each to every waiter.
	const hints, every = 2000, time.Millisecond
	for i := 0; i < hints; i++ {
		for _, x := range ws {
			x.fake <- spi.Hint{Kind: spi.Released, Name: "res"}
		}
		w.clock.Advance(every)
		time.Sleep(20 * time.Microsecond)
	}
	storm := time.Duration(hints) * every
	// Two acquires per window (one coalesced retry and one follow-up), plus a few at the edges
	// and the holder's-remaining retries (every TTL at most).
	bound := 2*int(storm/engine.HintWindow) + 6
	total := 0
	for i, x := range ws {
		n := x.b.Calls("Acquire") - before[i]
		total += n
		t.Logf("waiter %d: %d acquires during the storm", i+1, n)
		if n > bound {
			t.Errorf("waiter %d made %d acquires for %d forged hints in %v; want at most %d", i+1, n, hints, storm, bound)
		}
	}
	if total < len(ws) {
		t.Errorf("%d acquires in all: the forged hints were not even seen", total)
	}
	if !held.IsValid() {
		t.Fatal("the holder lost the lock during the storm")
	}

	// The honest path: past the last hint window, a genuine release wakes a waiter at once.
	// (Until no acquire happened for two windows: every window has then ended.)
	for settled := false; !settled; {
		c0 := make([]int, len(ws))
		for i, x := range ws {
			c0[i] = x.b.Calls("Acquire")
		}
		for i := 0; i < int(2*engine.HintWindow/(10*time.Millisecond)); i++ {
			w.clock.Advance(10 * time.Millisecond)
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		settled = true
		for i, x := range ws {
			settled = settled && x.b.Calls("Acquire") == c0[i]
		}
	}
	at := w.clock.Now()
	unlocked := make(chan error, 1)
	go func() { unlocked <- hl.Unlock(ctx) }()
	deadline := time.After(20 * time.Second)
	var winner simba.Term
	for winner.Token() == 0 {
		for _, x := range ws {
			select {
			case term := <-x.got:
				winner = term
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatal("no waiter took the lock after the genuine release")
		case <-time.After(time.Millisecond):
		}
	}
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	if now := w.clock.Now(); now != at {
		t.Errorf("the hand-over took %v of virtual time; want none (the release hint wakes a waiter at once)", now-at)
	}
	if winner.Token() <= held.Token() || !winner.IsValid() {
		t.Errorf("winner term %v after %v", winner, held)
	}
}

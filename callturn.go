package simba

import (
	"context"
	"slices"
	"sync"

	"github.com/simba-go/simba/spi"
)

// callTurns makes a client's backend calls on a settling clock (simbatest.VirtualClock) take
// turns: each call runs once the calls started before it have posted their replies or wait
// idle on the clock (spi.Await: a fault's delay, a cut link), in the order the loop started
// them. Calls started at one virtual instant reached the backend, and their replies the loop,
// in the order of their goroutines, so a seeded run (WithSeed) could take another course: two
// acquires of one client stepped in either order, a keep-alive that did or did not see an
// acquire made at the same instant. A call that waits idle ends its turn, so a call that a
// fault holds never holds the others back, as on a real clock. On a real clock calls run
// at once and concurrently (callTurns is nil).
type callTurns struct {
	mu     sync.Mutex
	cond   sync.Cond
	last   uint64   // the latest turn handed out
	active []uint64 // the turns handed out and not ended, ascending
}

func newCallTurns() *callTurns {
	t := &callTurns{}
	t.cond.L = &t.mu
	return t
}

// take hands out the next turn: on the loop goroutine for a call it starts, so that the turns
// follow the effects' order.
func (t *callTurns) take() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	t.active = append(t.active, t.last)
	return t.last
}

// wait blocks until every turn before n has ended.
func (t *callTurns) wait(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.active) > 0 && t.active[0] < n {
		t.cond.Wait()
	}
}

// end ends turn n (again: nothing).
func (t *callTurns) end(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := slices.BinarySearch(t.active, n); ok {
		t.active = slices.Delete(t.active, i, i+1)
		t.cond.Broadcast()
	}
}

// turnActivity is the activity a call's context carries on a settling clock: a call that waits
// idle in it (spi.Await) ends its turn.
type turnActivity struct {
	spi.Activity
	turns *callTurns
	n     uint64
}

// Wait implements spi.Activity.
func (a turnActivity) Wait(ctx context.Context, ch <-chan struct{}) error {
	a.turns.end(a.n)
	return a.Activity.Wait(ctx, ch)
}

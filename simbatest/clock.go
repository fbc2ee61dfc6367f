package simbatest

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/simba-go/simba/spi"
)

// VirtualClock is an spi.Clock whose time moves only when a test advances it. It starts at 0.
//
// Firing: Advance and Set move the time forward step by step to each due timer's deadline, in
// deadline order (ties in the order the timers were armed, or the reverse: ReverseTies), and
// run each callback on its own goroutine, as spi.Clock requires, waiting for it to return before firing the next one. So when
// Advance returns, every callback due by the new time has run, including those armed by earlier
// callbacks within the advanced span, and each callback saw Now() equal to its deadline. A
// callback must therefore not wait for the goroutine that called Advance, and must not call
// Advance or Set itself. AfterFunc with d ≤ 0 runs f at once on a new goroutine, like
// time.AfterFunc (Advance, Set and Settle wait for it to return too).
//
// Settling: VirtualClock is an spi.Settler. Every simba.Client running on it reports its
// activity, and Advance and Set wait, before moving the time, after each timer they fire, and
// before they return, until every client is idle (Settle waits the same way without moving the
// time). So when Advance returns, every client has processed everything due up to the new time:
// its timers fired and the events they caused stepped by its loop, backend calls that the
// in-memory Server answers at once made, replied to and stepped, hints delivered and stepped,
// OnElected/OnRevoked (and group) callbacks run, and Schedule's function called for each tick
// due. A test written this way needs neither sleeps nor BlockUntil. What the clock does not wait
// for, because it waits for the clock or for the test itself: a call that a fault holds (a
// delay, a cut-off, a cut Link) until its timeout on this clock or the test's Restore; a
// request (Stop, StepDown, Lock) made from a callback or a Schedule function that needs time
// to pass; leader work of RunWhileLeader and RunPartition, which is the user's code: the clock
// does not wait for it to start, act or return (Schedule's calls of its function, by contrast,
// are waited for). Consequently a callback or a Schedule function must not wait for the test
// (or for anything but the client and the clock): Advance would wait for it. A client's backend
// calls time out on this clock, after one renewal interval of virtual time.
//
// A client that keeps working without the time moving (a livelock: over 16,000 units of work
// begun while the clock waits at one instant) is not waited for beyond that, nor again until it
// is next idle: Advance returns rather than hang.
//
// Code that is not a simba.Client sees the plain timer semantics above: its callbacks are
// waited for, anything they start on other goroutines is not, unless it reports itself through
// Track (spi.Settler).
//
// All methods are safe for concurrent use; Advance and Set calls are serialised.
type VirtualClock struct {
	advance sync.Mutex // serialises Advance and Set

	mu      sync.Mutex
	now     time.Duration
	timers  timerHeap
	seq     uint64
	reverse bool          // ties fire in the reverse of their arming order (ReverseTies)
	changed chan struct{} // closed and replaced whenever the set of pending timers changes

	smu       sync.Mutex // guards acts and immediate; lock order: mu, then smu
	idle      *sync.Cond // on smu: signalled when some unit may have become idle
	acts      map[*activity]struct{}
	immediate int    // AfterFunc(d ≤ 0) callbacks running
	begun     uint64 // units begun by all activities, ever
}

// NewVirtualClock returns a virtual clock at time 0 with no timers.
func NewVirtualClock() *VirtualClock {
	c := &VirtualClock{changed: make(chan struct{}), acts: make(map[*activity]struct{})}
	c.idle = sync.NewCond(&c.smu)
	return c
}

var (
	_ spi.Clock   = (*VirtualClock)(nil)
	_ spi.Settler = (*VirtualClock)(nil)
)

// Now returns the clock's current time.
func (c *VirtualClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms a timer that calls f on its own goroutine once the clock has advanced by d.
func (c *VirtualClock) AfterFunc(d time.Duration, f func()) spi.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &virtualTimer{clock: c, f: f, index: -1}
	if d <= 0 {
		c.smu.Lock()
		c.immediate++
		c.smu.Unlock()
		go func() {
			defer func() {
				c.smu.Lock()
				c.immediate--
				c.idle.Broadcast()
				c.smu.Unlock()
			}()
			f()
		}()
		return t
	}
	t.deadline = c.now + d
	t.seq = c.seq
	c.seq++
	t.tie = c.tieKey(t.seq)
	heap.Push(&c.timers, t)
	c.notifyLocked()
	return t
}

// Advance moves the clock forward by d, firing every timer due by then and waiting for every
// client on the clock to settle, as the type documents. It panics if d is negative.
func (c *VirtualClock) Advance(d time.Duration) {
	if d < 0 {
		panic("simbatest: VirtualClock.Advance with a negative duration")
	}
	c.advance.Lock()
	defer c.advance.Unlock()
	c.mu.Lock()
	target := c.now + d
	c.mu.Unlock()
	c.advanceTo(target)
}

// Set moves the clock to t. Moving forward fires timers and settles as Advance does. Moving
// backward (to simulate a clock that jumps, which a monotonic clock never does) fires nothing;
// pending timers keep their deadlines, so they fire when the clock reaches them again. Set
// settles before and after moving the clock either way.
func (c *VirtualClock) Set(t time.Duration) {
	c.advance.Lock()
	defer c.advance.Unlock()
	c.mu.Lock()
	if t < c.now {
		c.mu.Unlock()
		c.settle()
		c.mu.Lock()
		c.now = t
		c.mu.Unlock()
		c.settle()
		return
	}
	c.mu.Unlock()
	c.advanceTo(t)
}

// Settle waits until every client on the clock is idle (see the type's doc), without moving the
// time: what a test calls after acting on a client (Start, a Lock, a fault) to see its effects
// at the current time. Advance(0) does the same.
func (c *VirtualClock) Settle() {
	c.advance.Lock()
	defer c.advance.Unlock()
	c.settle()
}

func (c *VirtualClock) advanceTo(target time.Duration) {
	c.settle()
	for {
		c.mu.Lock()
		if len(c.timers) == 0 || c.timers[0].deadline > target {
			c.now = target
			c.mu.Unlock()
			c.settle()
			return
		}
		t := heap.Pop(&c.timers).(*virtualTimer)
		if t.deadline > c.now {
			c.now = t.deadline
		}
		c.notifyLocked()
		c.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			t.f()
		}()
		<-done
		c.settle()
	}
}

// ReverseTies makes the timers due at one instant fire in the reverse of the order they were
// armed in (by default, in that order), those pending included. On a real clock the order of
// timers due together is arbitrary: a test runs a scenario with and without ReverseTies to
// check that nothing it asserts depends on it. A simba.Client orders its own timers due at
// one instant itself, so a client's course on the clock is the same either way (see the
// package doc, "Runs repeat").
func (c *VirtualClock) ReverseTies() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reverse = true
	for _, t := range c.timers {
		t.tie = c.tieKey(t.seq)
	}
	heap.Init(&c.timers)
}

// tieKey orders a timer armed as number seq among the timers due at one instant.
func (c *VirtualClock) tieKey(seq uint64) uint64 {
	if c.reverse {
		return ^seq
	}
	return seq
}

// Pending returns the number of armed timers that have not fired or been stopped.
func (c *VirtualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Next returns the deadline of the earliest pending timer, if any.
func (c *VirtualClock) Next() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return 0, false
	}
	return c.timers[0].deadline, true
}

// BlockUntil waits until at least n timers are pending: a test of code that is not a
// simba.Client calls it to let that code arm its timers (on goroutines the clock does not know)
// before it advances the clock. Tests of clients need not: Advance and Settle wait for them.
func (c *VirtualClock) BlockUntil(n int) {
	_ = c.BlockUntilContext(context.Background(), n)
}

// BlockUntilContext is BlockUntil that gives up when ctx is done, returning ctx.Err().
func (c *VirtualClock) BlockUntilContext(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		pending, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if pending >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *VirtualClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type virtualTimer struct {
	clock    *VirtualClock
	f        func()
	deadline time.Duration
	seq      uint64
	tie      uint64 // the order among timers of one deadline (tieKey)
	index    int    // in the heap; -1 when not pending
}

// Stop cancels the timer if it has not fired yet and reports whether it did so.
func (t *virtualTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&c.timers, t.index)
	c.notifyLocked()
	return true
}

type timerHeap []*virtualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].tie < h[j].tie
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*virtualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}

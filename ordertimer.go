package simba

import (
	stdheap "container/heap"
	"math"
	"sync"
	"time"

	"github.com/simba-go/simba/spi"
)

// On a settling clock (simbatest.VirtualClock) the timers due at one instant fire one at a
// time, in the order they were armed, and the clock lets the client settle between two. A
// client arms timers on several goroutines — the loop its engine's timers and probes, call
// goroutines their calls' timeouts, Schedule's work its ticks — so that order, and with it
// the order in which the client took events due at one instant (two calls timing out
// together, a timeout and a retry), depended on goroutine scheduling, and a seeded run
// (WithSeed) took another course from run to run. On such a clock the client arms through
// orderedTimers instead: each timer has a key that does not depend on scheduling (chosen on
// the loop: an engine timer's arming number, a call's request id, ...), and whichever of the
// clock's timers due at one instant fires, it runs the due timer of least (deadline, key).
// On a real clock, ties are no concern (time.AfterFunc fires them in any order anyway) and
// the client arms on the clock directly.

// The classes of timer keys: a key is its class ORed with a number within the class.
const (
	keyEngine uint64 = iota << 60 // the engine's timers, by arming number (Client.timerGen)
	keyCall                       // a backend call's timeout, by the call's request id
	keyProbe                      // a probe's delay and timeout, by the probe's number
	keyTick                       // a Schedule tick, by a hash of its election's name
	keyMask   = 1<<60 - 1
)

// orderedTimers arms timers on a clock so that timers due at one instant run in key order.
type orderedTimers struct {
	clock spi.Clock
	mu    sync.Mutex
	armed orderedHeap // armed, neither run nor stopped
	seq   uint64      // numbers the arms: the order of equal keys
}

// orderedTimer is a timer of orderedTimers. Its entry in the heap and its clock timer are
// paired loosely: a clock timer that fires runs the least due entry, not necessarily its
// own, and then hands its entry the clock timer of the entry it ran (still to fire), so that
// stopping an entry still stops a clock timer that would fire for nothing.
type orderedTimer struct {
	o        *orderedTimers
	deadline time.Duration
	key, seq uint64
	f        func()
	t        spi.Timer // the clock's timer this entry stops (mu)
	index    int       // in the heap; -1 once run or stopped (mu)
}

// afterFunc arms f to run after d, ordered by key among the timers due at one instant.
func (o *orderedTimers) afterFunc(d time.Duration, key uint64, f func()) spi.Timer {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	at := now + max(d, 0)
	if at < now {
		at = math.MaxInt64
	}
	e := &orderedTimer{o: o, deadline: at, key: key, seq: o.seq, f: f}
	o.seq++
	stdheap.Push(&o.armed, e)
	// The clock does not call back while its AfterFunc runs (f runs on a goroutine of its
	// own), so holding mu here is safe, and e.t is set before fire can read it.
	e.t = o.clock.AfterFunc(d, func() { o.fire(e) })
	return e
}

// fire runs the least due timer, on the clock timer of owner.
func (o *orderedTimers) fire(owner *orderedTimer) {
	o.mu.Lock()
	now := o.clock.Now()
	if len(o.armed) == 0 || o.armed[0].deadline > now {
		o.mu.Unlock()
		return // its entry was stopped, or ran on an earlier firing at this instant
	}
	e := stdheap.Pop(&o.armed).(*orderedTimer)
	if e != owner && owner.index >= 0 {
		owner.t, e.t = e.t, owner.t
	}
	o.mu.Unlock()
	e.f()
}

// Stop implements spi.Timer.
func (e *orderedTimer) Stop() bool {
	o := e.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.index < 0 {
		return false
	}
	stdheap.Remove(&o.armed, e.index)
	e.t.Stop()
	return true
}

type orderedHeap []*orderedTimer

func (h orderedHeap) Len() int { return len(h) }
func (h orderedHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.deadline != b.deadline {
		return a.deadline < b.deadline
	}
	if a.key != b.key {
		return a.key < b.key
	}
	return a.seq < b.seq
}
func (h orderedHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *orderedHeap) Push(x any) {
	e := x.(*orderedTimer)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *orderedHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}

// selfTimer is an engine timer due at once on a settling clock: its firing is posted to the
// loop itself (postSelf), in the order of the effects that armed it, rather than run on a
// goroutine of the clock's, where two due at once reached the loop in either order. Loop
// goroutine only.
type selfTimer struct{ stopped, fired bool }

// Stop implements spi.Timer.
func (t *selfTimer) Stop() bool {
	was := !t.stopped && !t.fired
	t.stopped = true
	return was
}

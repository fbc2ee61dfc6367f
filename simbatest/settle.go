package simbatest

import (
	"context"

	"github.com/simba-go/simba/spi"
)

// Track implements spi.Settler: it returns a new idle activity that Advance, Set and Settle wait
// for until it is closed. simba.New calls it for each client on the clock; code of a test's own
// can use it too, to make the clock wait for work it hands to other goroutines.
func (c *VirtualClock) Track(name string) spi.Activity {
	a := &activity{c: c, name: name, waits: make(map[*wait]struct{})}
	c.smu.Lock()
	c.acts[a] = struct{}{}
	c.smu.Unlock()
	return a
}

// livelockUnits bounds the units of work begun while one settle waits: a client that keeps
// working without the time moving would never be idle (a backend that always replies with no
// time left makes a client reopen its session again and again at the same instant). Past that
// many, the activities still busy are marked spinning, and no settle waits for them until they
// are next seen idle. Far more than a settle of hundreds of clients needs.
const livelockUnits = 1 << 14

// settle waits until no activity has a busy unit and no AfterFunc(0) callback runs, or until a
// livelock is evident (livelockUnits).
func (c *VirtualClock) settle() {
	c.smu.Lock()
	defer c.smu.Unlock()
	start := c.begun
	for !c.idleLocked() {
		if c.begun-start >= livelockUnits {
			for a := range c.acts {
				if !a.idleLocked() {
					a.spinning = true
				}
			}
			return
		}
		c.idle.Wait()
	}
}

// idleLocked reports whether every activity is idle: each of its units is waiting for something
// not yet ready. Readiness (a context done, a channel closed) is read here, so a wait that
// becomes ready needs no signal: the clock is only woken for changes that may make it idle.
func (c *VirtualClock) idleLocked() bool {
	if c.immediate > 0 {
		return false
	}
	for a := range c.acts {
		if !a.spinning && !a.idleLocked() {
			return false
		}
	}
	return true
}

// idleLocked reports whether each unit of a waits for something not ready yet.
func (a *activity) idleLocked() bool {
	waiting := 0
	for w := range a.waits {
		if !w.ready() {
			waiting++
		}
	}
	return a.units <= waiting
}

// activity is the spi.Activity of one client on a VirtualClock.
type activity struct {
	c    *VirtualClock
	name string

	// guarded by c.smu
	units    int
	waits    map[*wait]struct{}
	closed   bool
	spinning bool // livelocked: not waited for until seen idle
}

// wait is one unit waiting in Wait.
type wait struct {
	ctx context.Context
	ch  <-chan struct{}
}

func (w *wait) ready() bool {
	if w.ctx.Err() != nil {
		return true
	}
	select {
	case <-w.ch:
		return true
	default:
		return false
	}
}

// Begin implements spi.Activity.
func (a *activity) Begin() {
	a.c.smu.Lock()
	defer a.c.smu.Unlock()
	if !a.closed {
		a.units++
		a.c.begun++
	}
}

// End implements spi.Activity.
func (a *activity) End() {
	a.c.smu.Lock()
	defer a.c.smu.Unlock()
	if !a.closed && a.units > 0 {
		a.units--
		if a.spinning && a.idleLocked() {
			a.spinning = false
		}
		a.c.idle.Broadcast()
	}
}

// Wait implements spi.Activity.
func (a *activity) Wait(ctx context.Context, ch <-chan struct{}) error {
	w := &wait{ctx: ctx, ch: ch}
	a.c.smu.Lock()
	if !a.closed {
		a.waits[w] = struct{}{}
		if a.spinning && a.idleLocked() {
			a.spinning = false
		}
		a.c.idle.Broadcast()
	}
	a.c.smu.Unlock()
	// Once ch is closed or ctx is done the wait is ready, so it counts as busy until it is
	// removed below, and from then on the unit does: the clock never sees a gap.
	defer func() {
		a.c.smu.Lock()
		delete(a.waits, w)
		a.c.smu.Unlock()
	}()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements spi.Activity.
func (a *activity) Close() {
	a.c.smu.Lock()
	defer a.c.smu.Unlock()
	if !a.closed {
		a.closed = true
		a.units = 0
		clear(a.waits)
		delete(a.c.acts, a)
		a.c.idle.Broadcast()
	}
}

// String names the activity for diagnostics.
func (a *activity) String() string { return a.name }

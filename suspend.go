package simba

import (
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/spi"
)

// suspendTolerance is the least gap between the clock that counts a suspend and the monotonic
// clock that counts as one: smaller ones are read noise (the two clocks are read one after the
// other) or far below the drift and margin a deadline keeps anyway.
const suspendTolerance = 10 * time.Millisecond

// suspendClock is the client's default clock (no WithClock): Go's monotonic clock plus the time
// the machine spent suspended while the client ran. Go times with CLOCK_MONOTONIC on Linux
// (mach_absolute_time on macOS), which stops while the system sleeps (laptop sleep,
// `systemctl suspend`, some VM snapshot/restore and container freezes); a deadline counted on
// it alone would still lie ahead after a resume, although the backend, whose clock ran, has
// expired the session. Here a suspend moves Now forward by its length at the first reading
// after the resume, so that IsValid, Remaining and the loop's steps see the time that passed.
//
// Cost: Now reads the wall and monotonic clocks (time.Now, both vDSO reads on Linux) and two
// atomics. The offset of the wall clock from the monotonic one changes only when the wall
// clock is set (NTP step, settimeofday) or the machine was suspended; only when it moved by
// suspendTolerance or more does Now read the suspend-counting clock (boot: CLOCK_BOOTTIME on
// Linux, a system call), which tells a suspend from a wall clock set. On an OS without one
// (boot nil) a forward jump of the wall clock counts as a suspend: a wall clock set forward
// ends terms early, the safe side. AfterFunc is time.AfterFunc: a timer due during a suspend
// fires late, as after a SIGSTOP, and the step it triggers finds itself late (pause.go).
//
// The virtual clock of simbatest (WithClock) is used as given: no suspend there.
type suspendClock struct {
	origin time.Time // wall and monotonic reading at the start
	wall0  int64     // origin's wall time, ns since the epoch
	// read returns the monotonic and wall time since origin; nil: time.Now (tests inject).
	read func() (mono, wall time.Duration)
	// boot returns the suspend-counting clock since an arbitrary origin, or false when there
	// is none (tests inject).
	boot  func() (time.Duration, bool)
	boot0 time.Duration // boot − mono at origin (read in that order: never too small)
	// wallSeen is wall − mono as of the last check of the boot clock; slept is the suspended
	// time counted so far (Now adds it). Both only ever move by a check.
	wallSeen atomic.Int64
	slept    atomic.Int64
	// onSuspend, if set, is called once for each suspend counted, on the goroutine whose Now
	// noticed it, with its length (Client: have the loop step at once).
	onSuspend func(time.Duration)
}

// newSuspendClock returns the default clock with the OS's suspend-counting clock (bootClock).
func newSuspendClock() *suspendClock { return newSuspendClockWith(nil, bootClock) }

// newSuspendClockWith returns a suspendClock with read and boot as its sources (read nil:
// time.Now; boot nil: none, the wall clock alone tells).
func newSuspendClockWith(read func() (mono, wall time.Duration), boot func() (time.Duration, bool)) *suspendClock {
	c := &suspendClock{origin: time.Now(), read: read, boot: boot}
	c.wall0 = c.origin.UnixNano()
	mono, wall := c.readNow()
	c.wallSeen.Store(int64(wall - mono))
	if boot != nil {
		if b, ok := boot(); ok {
			c.boot0 = b - mono
		} else {
			c.boot = nil
		}
	}
	return c
}

// readNow returns the monotonic and wall time since origin.
func (c *suspendClock) readNow() (mono, wall time.Duration) {
	if c.read != nil {
		return c.read()
	}
	t := time.Now()
	return t.Sub(c.origin), time.Duration(t.UnixNano() - c.wall0)
}

// Now returns the monotonic time since origin plus the suspended time counted.
func (c *suspendClock) Now() time.Duration {
	mono, wall := c.readNow()
	if d := int64(wall-mono) - c.wallSeen.Load(); d >= int64(suspendTolerance) || d <= -int64(suspendTolerance) {
		c.check(wall - mono)
	}
	return mono + time.Duration(c.slept.Load())
}

// check runs when the wall clock moved against the monotonic one by wallAhead (since origin):
// a suspend, or the wall clock set. It counts a suspend the boot clock confirms (without one,
// a forward jump of the wall clock) and reports it to onSuspend.
func (c *suspendClock) check(wallAhead time.Duration) {
	prevWall := time.Duration(c.wallSeen.Swap(int64(wallAhead)))
	var ahead time.Duration // the suspended time since origin, at most
	if c.boot != nil {
		b, ok := c.boot()
		if !ok {
			return
		}
		mono, _ := c.readNow() // after boot: b − mono is never too large
		ahead = b - mono - c.boot0
	} else {
		// The wall clock alone: what it moved forward beyond the last check counts.
		ahead = time.Duration(c.slept.Load()) + wallAhead - prevWall
	}
	for {
		s := c.slept.Load()
		if ahead-time.Duration(s) < suspendTolerance {
			return
		}
		if c.slept.CompareAndSwap(s, int64(ahead)) {
			if c.onSuspend != nil {
				c.onSuspend(ahead - time.Duration(s))
			}
			return
		}
	}
}

// suspended returns the suspended time counted so far.
func (c *suspendClock) suspended() time.Duration { return time.Duration(c.slept.Load()) }

// AfterFunc is time.AfterFunc: its timers run on the monotonic clock.
func (c *suspendClock) AfterFunc(d time.Duration, f func()) spi.Timer { return time.AfterFunc(d, f) }

// resumed is the default clock's onSuspend: a reading after a resume (IsValid's, a step's)
// found that the machine was suspended for d. The loop steps at once, so that the engine sees
// the time that passed: a session whose local deadline passed in the suspend is lost and its
// terms revoked (reason deadline) before any keep-alive, their contexts cancelled, and the
// pause logged (checkPause); one that outlived it sends its overdue keep-alive. Timers due in
// the suspend would otherwise fire only once the monotonic clock reached them. The step is
// posted from a timer of its own (AfterFunc 0) because this may run on any goroutine, the
// loop's own inside a step included, and must not block.
func (c *Client) resumed(time.Duration) {
	c.cfg.clock.AfterFunc(0, func() {
		c.enqueue(func() { c.step(engine.Event{Kind: engine.EvTimer, Timer: engine.Timer{Kind: engine.TimerRenew}}) })
	})
}

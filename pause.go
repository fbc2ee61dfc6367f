package simba

import (
	"context"
	"log/slog"
	"time"

	"github.com/simba-go/simba/internal/engine"
)

// minPauseFloor is the least lateness of a session timer that counts as a pause, whatever the
// renewal interval: a Go GC pause is well under a millisecond and a loaded machine (two CPUs
// shared by several test runs under -race) delays a timer by tens, at worst a few hundred,
// milliseconds; a second is beyond both.
const minPauseFloor = time.Second

// pauseWatch notices that the client's loop did not run for a while — the process was stopped
// (SIGSTOP), frozen with its VM or container, starved of CPU, or the loop was blocked — from
// the session's own timers (open, renew, deadline), which are armed whenever the client has or
// wants a session: a step that finds one of them overdue by much, before its firing was
// stepped, comes after such a gap. It adds no timer, goroutine or wake-up: each step compares
// its clock reading with the three due times (loop goroutine only, like the engine).
//
// What it reports is a lower bound: the gap since the earliest of those timers was due, not
// since the process stopped running (at most a renewal interval more, or, with a keep-alive in
// flight, when only the deadline timer is armed, up to the time to the deadline more).
// On a virtual clock (simbatest) timers fire at their due time and each firing is stepped
// before the clock moves on, so no timer is ever found overdue: no false pause.
type pauseWatch struct {
	// due are the times the armed TimerOpen, TimerRenew and TimerDeadline are due (0: none
	// armed, or fired and stepped).
	due [3]time.Duration
	// seen is the clock reading when the last pause was noticed: timers due by then were
	// overdue in that pause and are not counted again.
	seen time.Duration
	// min is the lateness that counts as a pause (max(renewal interval/2, minPauseFloor)); it
	// is logged if the session's deadline passed in it, else only once it reaches long
	// (max(renewal interval, minPauseFloor): a whole keep-alive missed).
	min, long time.Duration
	// inStep is, during the step that noticed a pause that is logged, how long it was: the
	// session-lost and revoked lines of that step name it as their likely cause.
	inStep time.Duration
	// slept is the default clock's suspended time (suspend.go) as of the last step: what it
	// grew by since is a suspend of the machine, noticed since.
	slept time.Duration
}

// init sets the thresholds from the renewal interval.
func (p *pauseWatch) init(renewEvery time.Duration) {
	p.min = max(renewEvery/2, minPauseFloor)
	p.long = max(renewEvery, minPauseFloor)
}

// slot returns the index in due of the session timer key, or -1 for other timers.
func pauseSlot(key engine.Timer) int {
	if key.Name != "" || key.Kind < engine.TimerOpen || key.Kind > engine.TimerDeadline {
		return -1
	}
	return int(key.Kind - engine.TimerOpen)
}

// armed records that key is due at at (a session timer), or forgets it (at 0).
func (p *pauseWatch) armed(key engine.Timer, at time.Duration) {
	if i := pauseSlot(key); i >= 0 {
		p.due[i] = at
	}
}

// late returns how long ago the earliest armed session timer not counted in an earlier pause
// was due, or 0.
func (p *pauseWatch) late(now time.Duration) time.Duration {
	var first time.Duration
	for _, d := range p.due {
		if d > p.seen && (first == 0 || d < first) {
			first = d
		}
	}
	if first == 0 || now <= first {
		return 0
	}
	return now - first
}

// checkPause runs before each step at now (loop goroutine): when a session timer is overdue
// by a pause, it says so once — a WARN line "simba process paused" and an EventPaused — if the
// session's deadline passed meanwhile (this step loses it: its lost and revoked lines then
// carry paused_for too) or the pause was long; a shorter one that cost nothing is not logged.
//
// A suspend of the machine (suspend.go), which the default clock counts but the timers do not
// (they run on the monotonic clock, stopped meanwhile), is reported the same way: paused_for
// is at least its length, and the cause says the machine was suspended.
func (c *Client) checkPause(now time.Duration) {
	late := c.pause.late(now)
	var slept time.Duration
	if c.sclock != nil {
		total := c.sclock.suspended()
		slept, c.pause.slept = total-c.pause.slept, total
		late = max(late, slept)
	}
	if late < c.pause.min {
		return
	}
	c.pause.seen = now
	live := c.eng.SessionState() == engine.SessionLive
	lost := live && now >= c.eng.Deadline()
	if !lost && late < c.pause.long {
		return
	}
	c.pause.inStep = late
	sid := c.eng.SessionID()
	if !live {
		sid = ""
	}
	cause := "the client did not run: the process stopped (SIGSTOP), frozen (VM, container), starved of CPU, or its loop blocked"
	if slept >= c.pause.min {
		cause = "the machine was suspended (system sleep, VM snapshot or restore) for " + slept.Round(time.Millisecond).String() +
			": the clock that counts suspend ran on while the monotonic clock stopped"
	}
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "simba process paused",
		slog.Duration("paused_for", late.Round(time.Millisecond)), slog.String("session", string(sid)),
		slog.Bool("session_lost", lost),
		slog.String("cause", cause))
	c.emit(Event{Kind: EventPaused, At: now, Session: sid, Paused: late}, nil)
}

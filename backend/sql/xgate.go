package sql

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The SQLite backends of different processes on one file take turns at it through an advisory
// lock on a sidecar file next to it, "<file>-simba-gate" (the cross-process gate): without it,
// their writers meet only in SQLite's busy handler, which sleeps 1, 2, 5 … 100 ms between tries
// and then 100 ms on end, so a writer of one process can lose try after try to the writers of
// another and wait past its call's timeout (a keep-alive: the session is lost; a release: its
// outcome unknown). Measured from outside through the public API on a 2-CPU machine with three
// busy loops beside (2026-12-04; 2–4 processes of 6–8 goroutines locking 1–3 names, TTL 1 s
// and 3 s, 20 s each): before, keep-alives, acquires and releases timed out (call timeout
// about 334 ms at TTL 1 s) in six of eight runs, and sessions expired or releases ended
// "outcome unknown" in four, at 27–61 locks/s; with the gate, one acquire timed out in one run
// and no session was lost, at 56–203 locks/s (unloaded: 67–281 locks/s before, 201–340 after).
//
// The gate is two one-byte locks of the sidecar: the entry (byte 0) and the gate (byte 1). An
// operation takes the entry, then the gate, then lets the entry go, and holds the gate while it
// runs; a keep-alive (urgentCtx) goes straight to the gate. At most one ordinary operation (the
// one holding the entry) waits at the gate, so the process that just let the gate go cannot
// take it again before it (its next operation has to wait at the entry, behind it): writers of
// different processes alternate instead of one process keeping the file, and a waiter blocked
// in the lock is woken by the kernel as soon as the gate is let go, not at its next busy-handler
// try. A keep-alive waits for the operation running and at most one other.
//
// The lock is taken in fileGate.enter after the process's own turn (turns), so each process
// has at most one operation at the cross-process gate per file, and before the operation
// touches SQLite: an operation never waits for the gate while it holds one of SQLite's locks,
// so the gate and SQLite's locks cannot deadlock. SQLite still arbitrates the file: other
// programs (and Migrate) are not gated, and meet Simba's writers in the busy handler as before.
// Where the gate cannot be used (no such lock on the platform, a sidecar that cannot be opened
// for writing, a lock call that fails) operations go on without it, as before.
//
// The gate only orders writers that SQLite arbitrates anyway, so no operation waits for it
// long: one that has waited half the time left to its ctx's deadline (gateWaitNoDeadline
// without one) goes on without it, and so does every operation that comes while the attempt
// it would join has been waiting longer than that. Another process that stops while it holds
// the gate (SIGSTOP, a debugger, a VM paused) would otherwise hold every other process's
// operations on the file, keep-alives included, until their sessions expire, although it holds
// none of SQLite's locks (it takes the gate before them and lets it go after them). Seen in the
// demo (cmd/simba, TestDemoOnSQLite): a leader paused past its TTL held the gate, and no other
// worker could take over until it was let go on again.

// Bytes of the sidecar file locked by the cross-process gate.
const (
	gateEntryByte = 0
	gateByte      = 1
)

// gateSuffix names the sidecar file of a SQLite database file.
const gateSuffix = "-simba-gate"

// gateWaitNoDeadline bounds the wait at the gate of an operation whose ctx has no deadline.
const gateWaitNoDeadline = time.Second

// gateWait returns how long an operation entering the gate at now may wait for it: half the
// time left to ctx's deadline (the other half is the operation's own), or gateWaitNoDeadline.
func gateWait(ctx context.Context, now time.Time) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(d.Sub(now)/2, 0)
	}
	return gateWaitNoDeadline
}

// gateLock is the platform's advisory lock on the sidecar file (xgate_unix.go).
type gateLock interface {
	// lock takes byte off of the sidecar, waiting as long as it takes (it cannot be
	// cancelled).
	lock(off int64) error
	// tryLock takes byte off of the sidecar if no one holds it, without waiting, and reports
	// whether it did.
	tryLock(off int64) bool
	// unlock lets byte off go.
	unlock(off int64)
}

// crossGate is the cross-process gate of one SQLite file for this process. A blocking lock
// cannot be cancelled, so the lock is taken by an attempt on a goroutine of its own, which an
// operation waits for until its ctx ends; an attempt left behind so is taken over by the
// process's next operation on the file, or, if none waits for it when it gets the gate, lets
// the gate go at once.
type crossGate struct {
	lk gateLock

	mu      sync.Mutex
	attempt *gateAttempt // the attempt in flight, nil if none

	// attempts counts the attempts taken on a goroutine of their own (for the tests: an
	// operation that finds the gate free takes it without one).
	attempts atomic.Int64
}

// gateAttempt is one taking of the gate.
type gateAttempt struct {
	done    chan error // the outcome, to the waiter (capacity 1)
	started time.Time  // when it began waiting for the gate
	waiter  bool       // an operation waits for it (guarded by crossGate.mu)
}

// enter waits until this process holds the cross-process gate, or ctx ends, and returns its
// leave. If the gate cannot be taken (the lock call failed), or the attempt has waited longer
// than the operation may wait (gateWait, counted from the attempt's start), it returns a leave
// that does nothing: the operation goes on without the gate.
//
// An operation that finds the gate free (no attempt of this process in flight, and the entry
// and the gate not held by another process: tryGate) takes it at once on its own goroutine.
// Only one that has to wait starts an attempt on a goroutine of its own: every operation used
// to, which cost an uncontended Lock and Unlock two goroutines and two hand-offs to them and
// back (go test -trace of BenchmarkLockCycle/sqlite).
func (x *crossGate) enter(ctx context.Context, urgent bool) (func(), error) {
	now := time.Now()
	wait := gateWait(ctx, now)
	x.mu.Lock()
	a := x.attempt
	if a == nil {
		if x.tryGate(urgent) {
			x.mu.Unlock()
			return x.leave, nil
		}
		a = &gateAttempt{done: make(chan error, 1), started: now}
		x.attempt = a
		x.attempts.Add(1)
		go x.take(a, urgent)
	}
	left := wait - now.Sub(a.started)
	if left <= 0 { // the gate has been held too long: an attempt left behind still waits
		x.mu.Unlock()
		return noLeave, nil
	}
	a.waiter = true
	x.mu.Unlock()
	timer := time.NewTimer(left)
	defer timer.Stop()
	select {
	case err := <-a.done:
		if err != nil {
			return noLeave, nil
		}
		return x.leave, nil
	case <-timer.C:
		if x.giveUp(a) {
			return x.leave, nil
		}
		return noLeave, nil
	case <-ctx.Done():
		if x.giveUp(a) { // the gate came as ctx ended: let it go
			x.leave()
		}
		return nil, ctx.Err()
	}
}

// giveUp stops waiting for attempt a and reports whether it had got the gate meanwhile (the
// caller's now); otherwise the attempt goes on: the next operation takes it over, or take lets
// the gate go when it gets it.
func (x *crossGate) giveUp(a *gateAttempt) (got bool) {
	// Under mu, as take hands the gate over: once unlocked, a later operation may take the
	// attempt over, and what take then sends is that operation's.
	x.mu.Lock()
	defer x.mu.Unlock()
	a.waiter = false
	select {
	case err := <-a.done:
		return err == nil
	default:
		return false
	}
}

// noLeave is the leave of an operation that goes on without the gate.
func noLeave() {}

// take takes the gate for attempt a (through the entry unless urgent) and hands it to the
// operation waiting for it, or lets it go at once if none does.
func (x *crossGate) take(a *gateAttempt, urgent bool) {
	err := x.lockGate(urgent)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.attempt = nil
	if a.waiter {
		a.done <- err
	} else if err == nil {
		x.leave() // no one waits for it any more
	}
}

// tryGate takes the gate if it is free and no operation of another process waits for it (holds
// the entry), without waiting, and reports whether it did; urgent: if the gate is free. The
// caller holds x.mu, with no attempt in flight: no operation of this process holds either
// byte (on a platform whose locks are the process's, taking a byte it holds would succeed).
func (x *crossGate) tryGate(urgent bool) bool {
	if !urgent {
		if !x.lk.tryLock(gateEntryByte) {
			return false
		}
		defer x.lk.unlock(gateEntryByte)
	}
	return x.lk.tryLock(gateByte)
}

// lockGate takes the entry, then the gate, then lets the entry go; urgent: the gate alone.
func (x *crossGate) lockGate(urgent bool) error {
	if !urgent {
		if err := x.lk.lock(gateEntryByte); err != nil {
			return err
		}
		defer x.lk.unlock(gateEntryByte)
	}
	return x.lk.lock(gateByte)
}

// leave lets the gate go.
func (x *crossGate) leave() { x.lk.unlock(gateByte) }

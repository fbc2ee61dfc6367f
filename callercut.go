package simba

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/spi"
)

// callerCut is the context of the backend calls made for callers whose contexts can end (a
// Lock or Unlock with a context that can be cancelled or has a deadline) within one shared
// timeout (sharedTimeout): it ends with the timeout, at the caller's deadline if that comes
// first, and when the caller's context ends (context.AfterFunc). Calls of the same caller's
// context (the same Done channel and deadline) made within the same shared timeout share it,
// so that a caller that locks and unlocks with one context pays for the cut once, not for a
// context.WithCancel and a context.AfterFunc registration per call: 8 of an uncontended Lock
// and Unlock's 19 allocations with such a context (TestLockCycleAllocations), and their
// registration with and removal from both parents.
//
// A call that the caller's context ending cuts short is cut as before: the shared context is
// cancelled with it, and so is every other call made for it, which that context ending ends
// too. The cut a client keeps is retired (its context cancelled, its registration with the
// caller's context removed) as soon as a call for another caller's context or another
// timeout replaces it and the calls that use it have ended, so it holds on to at most one
// caller's context beyond the calls in flight; the loop's exit retires it too (retireCut).
type callerCut struct {
	done    <-chan struct{} // the caller context's Done
	dl      time.Time       // and its deadline (zero: none)
	timeout context.Context // the shared timeout it derives from
	ctx     context.Context
	cancel  context.CancelFunc
	stop    func() bool // context.AfterFunc's, on the caller's context
	// refs counts the calls using it and, while it is the client's current cut, one for that;
	// at 0 it is retired for good (ref fails).
	refs atomic.Int64
}

// callerCuts holds a client's current callerCut.
type callerCuts struct {
	cur atomic.Pointer[callerCut]
}

// get returns the cut for a call made for caller (whose Done is not nil) within timeout, with
// a reference the call gives back with release.
func (s *callerCuts) get(caller, timeout context.Context) *callerCut {
	done := caller.Done()
	dl, _ := caller.Deadline()
	if cc := s.cur.Load(); cc != nil && cc.done == done && cc.dl.Equal(dl) && cc.timeout == timeout && cc.ref() {
		return cc
	}
	cc := newCallerCut(caller, timeout, done, dl)
	if timeout.Err() != nil {
		// The timeout (or the client) ended already: not worth keeping.
		cc.refs.Store(1)
		return cc
	}
	cc.refs.Store(2)
	if old := s.cur.Swap(cc); old != nil {
		old.release()
	}
	return cc
}

// retire drops the current cut, if any (the loop's exit).
func (s *callerCuts) retire() {
	if cc := s.cur.Swap(nil); cc != nil {
		cc.release()
	}
}

// newCallerCut derives the cut's context from timeout: capped at the caller's deadline dl when
// that comes first (for a backend that heeds a deadline but not a cancellation: go-redis reads
// with ctx's deadline and never watches ctx otherwise, so a cancellation alone ended the call
// at its own timeout), marked spi.CallerCancels when the caller's context has no deadline
// (only its cancellation can end it, which a backend that watches only deadlines must know,
// or the caller waits out the call's timeout), and cancelled when the caller's context ends.
func newCallerCut(caller, timeout context.Context, done <-chan struct{}, dl time.Time) *callerCut {
	cc := &callerCut{done: done, dl: dl, timeout: timeout}
	ctx := timeout
	if !dl.IsZero() {
		if tdl, ok := timeout.Deadline(); !ok || dl.Before(tdl) {
			cc.ctx, cc.cancel = context.WithDeadline(ctx, dl)
		}
	} else {
		ctx = spi.WithCallerCancels(ctx)
	}
	if cc.cancel == nil {
		cc.ctx, cc.cancel = context.WithCancel(ctx)
	}
	cc.stop = context.AfterFunc(caller, cc.cancel)
	return cc
}

// ref takes a reference for a call, unless cc is retired.
func (cc *callerCut) ref() bool {
	for {
		n := cc.refs.Load()
		if n <= 0 {
			return false
		}
		if cc.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives a reference back; the last one retires cc.
func (cc *callerCut) release() {
	if cc.refs.Add(-1) == 0 {
		cc.stop()
		cc.cancel()
	}
}

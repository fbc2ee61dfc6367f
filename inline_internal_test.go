package simba

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// probeBackend is a backend that records which goroutine made each Acquire and Release, and
// can make the next Acquires or Releases block until their context ends: a blocked Acquire
// takes effect first (the grant lands, its reply is lost), a blocked Release does not.
type probeBackend struct {
	spi.Backend
	blockAcquire atomic.Int32 // how many of the next Acquires block
	blockRelease atomic.Int32 // how many of the next Releases block
	entered      chan struct{}
	// notCutSafe makes the probe deny spi.CutSafe (set before New reads it).
	notCutSafe bool
	// deadlineOnly makes a blocked call heed only its context's deadline, not its
	// cancellation, as the Redis backend's calls do (go-redis reads and writes with ctx's
	// deadline and never watches the context otherwise); blockedUntil receives the deadline
	// each blocked call got (none: the zero time).
	deadlineOnly bool
	blockedUntil chan time.Time
	// hold, when set, makes the next Acquire (after its grant landed) wait until it is closed
	// or its context ends; heldCtxErr is that context's error when it returned.
	hold       chan struct{}
	heldCtxErr chan error

	mu       sync.Mutex
	acquireG []uint64
	releaseG []uint64
}

func newProbe(b spi.Backend) *probeBackend {
	return &probeBackend{Backend: b, entered: make(chan struct{}, 1)}
}

// CutSafe implements spi.CutSafe as the probed backend does, unless notCutSafe.
func (p *probeBackend) CutSafe() bool {
	return !p.notCutSafe && spi.IsCutSafe(p.Backend)
}

func (p *probeBackend) Acquire(ctx context.Context, sess spi.SessionID, name string) (spi.Acquire, error) {
	p.mu.Lock()
	p.acquireG = append(p.acquireG, goid())
	hold := p.hold
	p.hold = nil
	p.mu.Unlock()
	a, err := p.Backend.Acquire(ctx, sess, name)
	if hold != nil {
		p.entered <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
		}
		p.heldCtxErr <- ctx.Err()
	}
	if p.blockAcquire.Add(-1) >= 0 {
		p.entered <- struct{}{}
		return spi.Acquire{}, fmt.Errorf("probe: acquire %s: %w", name, p.block(ctx))
	}
	return a, err
}

// block waits until ctx ends (its deadline only, with deadlineOnly) and returns its error.
func (p *probeBackend) block(ctx context.Context) error {
	if !p.deadlineOnly {
		<-ctx.Done()
		return ctx.Err()
	}
	dl, _ := ctx.Deadline()
	p.blockedUntil <- dl
	if dl.IsZero() {
		<-ctx.Done() // no deadline: nothing would end the call
		return ctx.Err()
	}
	time.Sleep(time.Until(dl))
	return context.DeadlineExceeded
}

func (p *probeBackend) Release(ctx context.Context, sess spi.SessionID, name string, token int64) error {
	p.mu.Lock()
	p.releaseG = append(p.releaseG, goid())
	p.mu.Unlock()
	if p.blockRelease.Add(-1) >= 0 {
		p.entered <- struct{}{}
		return fmt.Errorf("probe: release %s: %w", name, p.block(ctx))
	}
	return p.Backend.Release(ctx, sess, name, token)
}

// calls returns how many Acquires and Releases the probe saw.
func (p *probeBackend) calls() (acquires, releases int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acquireG), len(p.releaseG)
}

// goroutines returns the goroutine of Acquire number i and of Release number j (0 if none).
func (p *probeBackend) goroutines(i, j int) (acquire, release uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= 0 && i < len(p.acquireG) {
		acquire = p.acquireG[i]
	}
	if j >= 0 && j < len(p.releaseG) {
		release = p.releaseG[j]
	}
	return acquire, release
}

// last returns the goroutines of the latest Acquire and Release.
func (p *probeBackend) last() (acquire, release uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.acquireG); n > 0 {
		acquire = p.acquireG[n-1]
	}
	if n := len(p.releaseG); n > 0 {
		release = p.releaseG[n-1]
	}
	return acquire, release
}

// inlineWorld is a client on a probed in-memory backend (system clock) that records the backend
// errors its listeners hear of and the calls its observer sees.
type inlineWorld struct {
	srv   *simbatest.Server
	probe *probeBackend
	c     *Client

	mu     sync.Mutex
	errs   []Event
	called []CallInfo
}

func newInlineWorld(t *testing.T, ttl time.Duration) *inlineWorld {
	t.Helper()
	return newInlineWorldCut(t, ttl, true)
}

// newInlineWorldCut is newInlineWorld on a backend that is cut-safe (spi.CutSafe) or not.
func newInlineWorldCut(t *testing.T, ttl time.Duration, cutSafe bool) *inlineWorld {
	t.Helper()
	w := &inlineWorld{srv: simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))}
	w.probe = newProbe(w.srv.Backend())
	w.probe.notCutSafe = !cutSafe
	c, err := New(w.probe, WithTTL(ttl), WithOwner("inline"),
		WithListener(func(ev Event) {
			if ev.Kind == EventBackendError {
				w.mu.Lock()
				w.errs = append(w.errs, ev)
				w.mu.Unlock()
			}
		}),
		WithCallObserver(func(ci CallInfo) {
			w.mu.Lock()
			w.called = append(w.called, ci)
			w.mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	// The session: the first Lock's acquire waits for it and runs on a worker.
	w.idle(t)
	return w
}

// idle returns once the client's loop is idle: a call that ran on a worker (the first Lock's,
// waiting for the session; one whose context may cut it short) may still be stepping its reply
// as the next request comes, and that request then goes through the loop too. Once a whole
// cycle ran on this goroutine, the loop is idle.
func (w *inlineWorld) idle(t *testing.T) {
	t.Helper()
	me := goid()
	for i := 0; ; i++ {
		h, err := w.c.Lock(context.Background(), "warm-up")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if acq, rel := w.probe.last(); acq == me && rel == me {
			return
		}
		if i == 100 {
			t.Fatal("no Lock/Unlock cycle ran on the caller's goroutine")
		}
	}
}

// abandoned returns the calls of op the observer saw cut short.
func (w *inlineWorld) abandoned(op string) []CallInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []CallInfo
	for _, ci := range w.called {
		if ci.Abandoned && ci.Op == op {
			out = append(out, ci)
		}
	}
	return out
}

func (w *inlineWorld) backendErrors() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Event(nil), w.errs...)
}

// waitFree waits until the lease name is free at the server.
func (w *inlineWorld) waitFree(t *testing.T, name string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	snap, err := w.srv.WaitFor(ctx, func(snap spi.Snapshot) bool {
		for _, l := range snap.Leases {
			if l.Name == name && l.Holder != "" {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("lease %s still held after %v: %+v", name, within, snap.Leases)
	}
}

// cancelOnEntry cancels the returned context once the probe has entered a blocked call, and
// reports when.
func (w *inlineWorld) cancelOnEntry() (context.Context, <-chan time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	at := make(chan time.Time, 1)
	go func() {
		<-w.probe.entered
		at <- time.Now()
		cancel()
	}()
	return ctx, at
}

// TestInlineCallsWithCancellableContext: on an idle client, Lock, TryLock and Unlock run their
// acquire and release on the caller's goroutine whether or not the caller's context can end
// (one backend call per step, no hand-off to a call worker).
func TestInlineCallsWithCancellableContext(t *testing.T) {
	w := newInlineWorld(t, 30*time.Second) // no keep-alive during the test: the loop stays idle
	me := goid()
	timeout, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		what string
		ctx  context.Context
		try  bool
	}{
		{"Lock(Background)", context.Background(), false},
		{"Lock(WithTimeout)", timeout, false},
		{"TryLock(WithTimeout)", timeout, true},
	} {
		for i := range 5 {
			lock := w.c.Lock
			if tc.try {
				lock = w.c.TryLock
			}
			h, err := lock(tc.ctx, "job")
			if err != nil {
				t.Fatalf("%s: %v", tc.what, err)
			}
			if err := h.Unlock(tc.ctx); err != nil {
				t.Fatalf("%s: unlock: %v", tc.what, err)
			}
			acq, rel := w.probe.last()
			if acq != me || rel != me {
				t.Fatalf("%s, cycle %d: acquire on goroutine %d, release on %d; want the caller's, %d",
					tc.what, i, acq, rel, me)
			}
		}
	}
}

// cutBound is how long after its context ended a Lock, TryLock or Unlock whose call it cut may
// take to return. It returns at once (tens of milliseconds with a busy loop on its CPU); what
// it must not wait for is the call's own timeout, one renewal interval (ttl/3). Half of that
// is no latency bound: it leaves a loaded machine room and still fails a caller that waits
// for the call.
func cutBound(ttl time.Duration) time.Duration { return ttl / 3 / 2 }

// TestInlineAcquireCutByCaller: a Lock whose context ends while its acquire runs on its own
// goroutine returns at once with the context's error; the acquire, whose grant landed, is of
// unknown outcome, and the keep-alives release the lease; no backend error is reported, and
// the observer sees the call as abandoned.
func TestInlineAcquireCutByCaller(t *testing.T) {
	const ttl = 60 * time.Second // renewal and call timeout: 20 s
	w := newInlineWorld(t, ttl)
	me := goid()
	n, _ := w.probe.calls()
	w.probe.blockAcquire.Store(1)
	ctx, canceled := w.cancelOnEntry()
	h, err := w.c.Lock(ctx, "job")
	returned := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock cut short: %v, %v; want context.Canceled", h, err)
	}
	if took := returned.Sub(<-canceled); took > cutBound(ttl) {
		t.Fatalf("Lock returned %v after its context ended (the call timeout is %v)", took, ttl/3)
	}
	if acq, _ := w.probe.goroutines(n, -1); acq != me {
		t.Fatalf("the acquire ran on goroutine %d, not the caller's (%d)", acq, me)
	}
	// The grant landed: the session holds the lease nobody wants until a keep-alive asks, and
	// one goes 20 ms after the cut call (the engine's settleDelay), long before the next
	// renewal, 20 s after the last (at the open, just before): half of that is the limit.
	w.waitFree(t, "job", ttl/6)
	if errs := w.backendErrors(); len(errs) > 0 {
		t.Fatalf("backend errors reported for the caller's cancellation: %+v", errs)
	}
	cut := w.abandoned("acquire")
	if len(cut) != 1 || cut[0].Err == nil || cut[0].Class != spi.Retryable || !errors.Is(cut[0].Err, ErrUnavailable) {
		t.Fatalf("abandoned acquires observed: %+v; want one, retryable", cut)
	}
	// The client goes on as before.
	h, err = w.c.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestInlineTryLockCutByCaller: the same for TryLock, which the engine ends with the cut call's
// error: the caller still hears of its context's end.
func TestInlineTryLockCutByCaller(t *testing.T) {
	const ttl = 60 * time.Second
	w := newInlineWorld(t, ttl)
	w.probe.blockAcquire.Store(1)
	ctx, canceled := w.cancelOnEntry()
	h, err := w.c.TryLock(ctx, "job")
	returned := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock cut short: %v, %v; want context.Canceled", h, err)
	}
	if took := returned.Sub(<-canceled); took > cutBound(ttl) {
		t.Fatalf("TryLock returned %v after its context ended (the call timeout is %v)", took, ttl/3)
	}
	w.waitFree(t, "job", ttl/6)
	if errs := w.backendErrors(); len(errs) > 0 {
		t.Fatalf("backend errors reported for the caller's cancellation: %+v", errs)
	}
	h, err = w.c.TryLock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestInlineReleaseCutByCaller: an Unlock whose context ends while its release runs on its own
// goroutine returns at once with the context's error, and the release goes on (on a call
// worker): the lease is free long before a keep-alive could have settled it, and no backend
// error is reported.
func TestInlineReleaseCutByCaller(t *testing.T) {
	const ttl = 30 * time.Second // renewal and call timeout: 10 s
	w := newInlineWorld(t, ttl)
	me := goid()
	h, err := w.c.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	_, n := w.probe.calls()
	w.probe.blockRelease.Store(1)
	ctx, canceled := w.cancelOnEntry()
	err = h.Unlock(ctx)
	returned := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Unlock cut short: %v; want context.Canceled", err)
	}
	if took := returned.Sub(<-canceled); took > cutBound(ttl) {
		t.Fatalf("Unlock returned %v after its context ended (the call timeout is %v)", took, ttl/3)
	}
	if _, first := w.probe.goroutines(-1, n); first != me {
		t.Fatalf("the release ran on goroutine %d, not the caller's (%d)", first, me)
	}
	w.waitFree(t, "job", ttl/6)
	if errs := w.backendErrors(); len(errs) > 0 {
		t.Fatalf("backend errors reported for the caller's cancellation: %+v", errs)
	}
	if cut := w.abandoned("release"); len(cut) != 1 {
		t.Fatalf("abandoned releases observed: %+v; want one", cut)
	}
	h, err = w.c.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if h.Token() == 0 {
		t.Fatal("no token")
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestUnlockWithEndedContext: an Unlock whose context has ended before it is called (deferred
// past a deadline) does not make its release wait for it: the release goes on, on a call
// worker, and frees the lease at once.
func TestUnlockWithEndedContext(t *testing.T) {
	w := newInlineWorld(t, 30*time.Second) // renewal: 10s
	me := goid()
	h, err := w.c.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	_, n := w.probe.calls()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Unlock(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Unlock with an ended context: %v", err)
	}
	w.waitFree(t, "job", 3*time.Second)
	if _, g := w.probe.goroutines(-1, n); g == me {
		t.Fatal("the release ran on the caller's goroutine, whose context had ended")
	}
	if cut := w.abandoned("release"); len(cut) != 0 {
		t.Fatalf("releases cut short: %+v", cut)
	}
	if errs := w.backendErrors(); len(errs) > 0 {
		t.Fatalf("backend errors: %+v", errs)
	}
}

// TestAcquireOnWorkerWhenNotCutSafe: on a backend whose calls are not cut-safe (a SQL
// backend's acquire may hold row locks between statements), a Lock or Unlock whose deadline
// may fall during its call (one before the call's own timeout, here 10 s) runs that call on a
// call worker, not on its own goroutine, and its end does not cut the call short: the caller
// returns at once, the acquire runs to its end with a live context, and its grant, which nobody
// wants any more, is released. A deadline past the call's timeout cannot cut the call: the
// caller's goroutine runs it, as with a context that cannot end.
func TestAcquireOnWorkerWhenNotCutSafe(t *testing.T) {
	w := newInlineWorldCut(t, 30*time.Second, false)
	me := goid()
	for _, tc := range []struct {
		deadline time.Duration
		here     bool
	}{{time.Second, false}, {time.Minute, true}} {
		w.idle(t) // after the worker's cycle, its last reply may still be stepping
		ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
		h, err := w.c.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		acq, rel := w.probe.last()
		if (acq == me) != tc.here || (rel == me) != tc.here {
			t.Fatalf("deadline %v: acquire on goroutine %d, release on %d; the caller's is %d, want it to run them: %v",
				tc.deadline, acq, rel, me, tc.here)
		}
	}

	hold := make(chan struct{})
	w.probe.mu.Lock()
	w.probe.hold, w.probe.heldCtxErr = hold, make(chan error, 1)
	w.probe.mu.Unlock()
	ctx, canceled := w.cancelOnEntry()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := w.c.Lock(ctx, "job")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock whose context ended: %v, %v; want context.Canceled", h, err)
	}
	<-canceled
	close(hold) // the acquire, still running on its worker, returns its grant now
	if err := <-w.probe.heldCtxErr; err != nil {
		t.Fatalf("the acquire's context ended with the caller's (%v); want it left to run", err)
	}
	w.waitFree(t, "job", 5*time.Second) // released on its reply, a keep-alive is 10 s away
	if cut := w.abandoned("acquire"); len(cut) != 0 {
		t.Fatalf("acquires abandoned: %+v; want none", cut)
	}
}

// TestInlineCallsEndAtTheCallersDeadline: on a cut-safe backend whose calls heed only their
// context's deadline, not its cancellation (Redis: go-redis reads with the deadline and never
// watches the context), a Lock, TryLock or Unlock whose deadline comes before the call's own
// timeout, and which runs its call on its own goroutine, gives that call its own deadline:
// the call, and the caller, end at the caller's deadline, not at the call's timeout (here
// 60 s) as they did when only a cancellation cut the call.
func TestInlineCallsEndAtTheCallersDeadline(t *testing.T) {
	const ttl = 180 * time.Second // renewal and call timeout: 60 s
	w := newInlineWorld(t, ttl)
	w.probe.deadlineOnly = true
	w.probe.blockedUntil = make(chan time.Time, 1)
	check := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		want, _ := ctx.Deadline()
		err := call(ctx)
		<-w.probe.entered
		if got := <-w.probe.blockedUntil; got.IsZero() || got.After(want) {
			t.Fatalf("%s: the blocked call's deadline is %v, after the caller's (%v)", what, got, want)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v; want context.DeadlineExceeded", what, err)
		}
		if errs := w.backendErrors(); len(errs) > 0 {
			t.Fatalf("%s: backend errors reported for the caller's deadline: %+v", what, errs)
		}
	}
	for _, try := range []bool{false, true} {
		lock := w.c.Lock
		if try {
			lock = w.c.TryLock
		}
		w.idle(t)
		w.probe.blockAcquire.Store(1)
		check(fmt.Sprintf("Lock (try %v)", try), func(ctx context.Context) error {
			h, err := lock(ctx, "job")
			if err == nil {
				_ = h.Unlock(context.Background())
			}
			return err
		})
		w.waitFree(t, "job", 10*time.Second) // a keep-alive settles the grant 20 ms later
	}
	if cut := w.abandoned("acquire"); len(cut) != 2 {
		t.Fatalf("abandoned acquires observed: %+v; want two", cut)
	}

	w.idle(t)
	h, err := w.c.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	w.probe.blockRelease.Store(1)
	check("Unlock", h.Unlock)
	w.waitFree(t, "job", 10*time.Second) // the cut release goes on, on a call worker
	if cut := w.abandoned("release"); len(cut) != 1 {
		t.Fatalf("abandoned releases observed: %+v; want one", cut)
	}
}

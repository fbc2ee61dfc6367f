package simba

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// holdingBackend is simbatest's in-memory backend whose acquires of names starting with
// "fill-" wait until hold is closed (the client's calls in flight fill its callGate behind
// them), whose CloseSession waits for holdClose when set, and which counts, per name, the
// acquires and releases that reach the server and the grants it makes. It is not cut-safe:
// a call whose caller gave up runs to its end, so an acquire sent before the caller gave up is
// answered (and its grant released by the engine), as on the SQL backends.
type holdingBackend struct {
	*simbatest.Backend
	hold      chan struct{}
	holdClose chan struct{}
	waiting   atomic.Int32 // "fill-" acquires waiting for hold

	mu                         sync.Mutex
	acquires, grants, releases map[string]int
}

func newHoldingBackend() *holdingBackend {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	return &holdingBackend{Backend: srv.Backend(), hold: make(chan struct{}),
		acquires: map[string]int{}, grants: map[string]int{}, releases: map[string]int{}}
}

// CutSafe: calls run to their end (see holdingBackend).
func (b *holdingBackend) CutSafe() bool { return false }

// wait holds an acquire of a "fill-" name until hold is closed, whatever its ctx says, and
// returns the context to run it with: one that its caller's giving up does not cut (the
// acquire was sent: the backend applies it).
func (b *holdingBackend) wait(ctx context.Context, name string) context.Context {
	if !strings.HasPrefix(name, "fill-") {
		return ctx
	}
	b.waiting.Add(1)
	<-b.hold
	return context.WithoutCancel(ctx)
}

func (b *holdingBackend) note(name string, a spi.Acquire, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acquires[name]++
	if err == nil && a.Kind == spi.Granted {
		b.grants[name]++
	}
}

func (b *holdingBackend) Acquire(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	ctx = b.wait(ctx, name)
	a, err := b.Backend.Acquire(ctx, session, name)
	b.note(name, a, err)
	return a, err
}

func (b *holdingBackend) AcquireQueued(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	ctx = b.wait(ctx, name)
	a, err := b.Backend.AcquireQueued(ctx, session, name)
	b.note(name, a, err)
	return a, err
}

func (b *holdingBackend) Release(ctx context.Context, session spi.SessionID, name string, token int64) error {
	b.mu.Lock()
	b.releases[name]++
	b.mu.Unlock()
	return b.Backend.Release(ctx, session, name, token)
}

func (b *holdingBackend) CloseSession(ctx context.Context, session spi.SessionID) error {
	if b.holdClose != nil {
		select {
		case <-b.holdClose:
		case <-ctx.Done():
		}
	}
	return b.Backend.CloseSession(ctx, session)
}

// counts returns the acquires and grants of names with prefix, and the releases of name.
func (b *holdingBackend) counts(prefix string) (acquires, grants int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for n, k := range b.acquires {
		if strings.HasPrefix(n, prefix) {
			acquires += k
			grants += b.grants[n]
		}
	}
	return acquires, grants
}

// until polls cond until it holds, failing the test with what if ctx ends first.
func until(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// gateQueued returns the calls queued in c's callGate and those running.
func gateQueued(c *Client) (queued, running int) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	return c.gate.waited.len() + c.gate.bulk.len(), c.gate.running
}

// loopBarrier returns once c's loop has stepped everything posted before it, and what those
// steps posted to themselves.
func loopBarrier(t *testing.T, c *Client) {
	t.Helper()
	for range 2 {
		done := make(chan struct{})
		if !c.post(func() { close(done) }) {
			t.Fatal("loop exited")
		}
		<-done
	}
}

// fillGate locks fill-0 .. fill-31 on c, each with ctxs[i] (ctx when nil), and waits until the
// 32 acquires wait at the backend, holding every slot of c's callGate. The locks' outcomes come
// on the returned channel.
func fillGate(t *testing.T, ctx context.Context, c *Client, b *holdingBackend, ctxs map[int]context.Context) chan lockResult {
	t.Helper()
	filled := make(chan lockResult, maxCallsInFlight)
	for i := range maxCallsInFlight {
		lctx := ctx
		if ctxs[i] != nil {
			lctx = ctxs[i]
		}
		go func() {
			h, err := c.Lock(lctx, fmt.Sprintf("fill-%d", i))
			filled <- lockResult{h, err}
		}()
	}
	until(t, ctx, "the fill- acquires to fill the call gate", func() bool { return b.waiting.Load() == maxCallsInFlight })
	return filled
}

type lockResult struct {
	h   *Held
	err error
}

// TestLockWhoseCtxEndsWhileQueuedIsNotSent: many Locks and TryLocks whose callers give up while their
// acquires wait for one of the client's 32 call slots (500 goroutines each locking its own
// name with a 1 s timeout on a busy backend) send none of those acquires: before, each went
// out once a slot was free, was granted to nobody and released afterwards — extra calls, and
// a lease held for nobody that other processes' waiters waited for. On the old code this test
// counted 50 of 50 such acquires sent and granted, and 2 acquires for "w" (the stale one first,
// granted and released before the waiter behind it got its turn). An acquire already sent
// when its caller gave up (fill-0) is still answered, and its grant released. The waiter behind
// a Lock that gave up (B on "w") gets the lock, with the only acquire of "w" at the backend.
func TestLockWhoseCtxEndsWhileQueuedIsNotSent(t *testing.T) {
	b := newHoldingBackend()
	c, err := New(b, WithTTL(30*time.Second), WithOwner("queued-cancel"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer func() {
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	giveUp, giveUpNow := context.WithCancel(ctx)
	filled := fillGate(t, ctx, c, b, map[int]context.Context{0: giveUp})

	const n = 50 // 40 Locks, 10 TryLocks
	gaveUp := make(chan error, n+1)
	for i := range n {
		go func() {
			lock := c.Lock
			if i%5 == 4 {
				lock = c.TryLock
			}
			_, err := lock(giveUp, fmt.Sprintf("q-%d", i))
			gaveUp <- err
		}()
	}
	go func() { // A: queued at the gate, gives up
		_, err := c.Lock(giveUp, "w")
		gaveUp <- err
	}()
	until(t, ctx, "the q- and w acquires to queue in the call gate", func() bool { q, _ := gateQueued(c); return q == n+1 })
	waiter := make(chan lockResult, 1)
	go func() { // B: waits behind A in the name's local queue, does not give up
		h, err := c.Lock(ctx, "w")
		waiter <- lockResult{h, err}
	}()
	until(t, ctx, "B to wait behind A", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		q, _ := c.handles["w"].(*lockQueue)
		return q != nil && len(q.waiters) == 1
	})

	giveUpNow()
	for range n + 1 {
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock whose ctx ended = %v, want context.Canceled", err)
		}
	}
	loopBarrier(t, c) // every stop stepped, and every drop it asked for

	// fill-0's acquire runs on its caller's goroutine (a cancel-only ctx may run its own
	// call), which this backend holds whatever the ctx says: its Lock returns once hold is
	// closed, with the grant or with its ctx's error, whichever it sees first (both are ready
	// then; CI's first run of this test saw the grant). Either way the grant is released:
	// by its Unlock below, or by the engine after the withdrawal.
	close(b.hold)
	for range maxCallsInFlight {
		r := <-filled
		if r.err != nil {
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("fill Lock = %v", r.err)
			}
			continue
		}
		if err := r.h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := <-waiter
	if r.err != nil {
		t.Fatalf("B's Lock of w = %v, want the lock", r.err)
	}
	if err := r.h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Quiet: no call queued or running, and fill-0's grant (sent before its caller gave up)
	// released.
	until(t, ctx, "the client's calls to end and fill-0's grant to be released", func() bool {
		q, running := gateQueued(c)
		b.mu.Lock()
		rel := b.releases["fill-0"]
		b.mu.Unlock()
		return q == 0 && running == 0 && rel > 0
	})
	if info, ok, err := b.InspectLease(ctx, "fill-0"); err != nil {
		t.Fatal(err)
	} else if ok && info.Holder != "" {
		t.Errorf("fill-0 (acquire sent before its caller gave up) still held after its release: %+v", info)
	}
	acq, grants := b.counts("q-")
	t.Logf("acquires of the %d Locks that gave up while queued: %d sent, %d granted", n, acq, grants)
	if acq != 0 || grants != 0 {
		t.Errorf("%d acquires (%d granted) of Locks whose ctx ended while they were queued reached the backend, want 0", acq, grants)
	}
	if a, g := b.counts("w"); a != 1 || g != 1 {
		t.Errorf("w: %d acquires, %d granted at the backend, want 1 and 1 (B's only: A gave up while queued)", a, g)
	}
	if a, g := b.counts("fill-0"); a != 1 || g != 1 {
		t.Errorf("fill-0: %d acquires, %d granted, want 1 and 1 (sent before its caller gave up)", a, g)
	}
}

// quiet waits until c has no call queued or running.
func quiet(t *testing.T, ctx context.Context, c *Client) {
	t.Helper()
	until(t, ctx, "the client's calls to end", func() bool { q, running := gateQueued(c); return q == 0 && running == 0 })
}

// unlockAll unlocks the fill- locks that come on filled (n of them) that were granted.
func unlockAll(t *testing.T, ctx context.Context, filled chan lockResult, n int) {
	t.Helper()
	for range n {
		r := <-filled
		if r.err != nil {
			continue
		}
		if err := r.h.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

// TestElectionStoppedWhileQueuedSendsNoAcquire: an election stopped (or stepped down) while
// its acquire waits for a call slot sends none: on the old code each of the 20 acquires went
// out once a slot was free and was granted to the stopped election, then released (and the
// stop's withdrawal sent too).
func TestElectionStoppedWhileQueuedSendsNoAcquire(t *testing.T) {
	b := newHoldingBackend()
	c, err := New(b, WithTTL(30*time.Second), WithOwner("queued-stop"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer func() {
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	filled := fillGate(t, ctx, c, b, nil)
	const n = 20
	es := make([]*Election, n)
	for i := range es {
		e, err := c.NewElection(fmt.Sprintf("e-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		es[i] = e
	}
	until(t, ctx, "the elections' acquires to queue in the call gate", func() bool { q, _ := gateQueued(c); return q == n })
	// With an ended ctx: each returns once its event is posted (the old code's stops waited
	// for their withdrawals, queued behind the held calls).
	for i, e := range es {
		stop := e.Stop
		if i%2 == 1 {
			stop = e.StepDown
		}
		if err := stop(cancelled); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("stop of e-%d = %v", i, err)
		}
	}
	loopBarrier(t, c)
	close(b.hold)
	unlockAll(t, ctx, filled, maxCallsInFlight)
	quiet(t, ctx, c)
	for i := 1; i < n; i += 2 { // stepped down: stop them for good
		if err := es[i].Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	acq, grants := b.counts("e-")
	t.Logf("acquires of the %d elections stopped while queued: %d sent, %d granted", n, acq, grants)
	if acq != 0 {
		t.Errorf("%d acquires (%d granted) of elections stopped while they were queued reached the backend, want 0", acq, grants)
	}
}

// TestCloseSendsNoQueuedAcquire: Close with Locks waiting for a call slot sends none of their
// acquires, even while the session's close is still in flight. On the old code the close ended
// the Locks (ErrClosed) but left their acquires queued; each went out once a slot was free —
// until the session's close was answered, after which the rest were skipped — and took its
// lease for nobody until the close landed: here, with the session's close held back until the
// call slots were free, 40 of 40 reached the backend and were granted.
func TestCloseSendsNoQueuedAcquire(t *testing.T) {
	b := newHoldingBackend()
	b.holdClose = make(chan struct{})
	c, err := New(b, WithTTL(30*time.Second), WithOwner("queued-close"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	filled := fillGate(t, ctx, c, b, nil)
	const n = 40
	ended := make(chan error, n)
	for i := range n {
		go func() {
			_, err := c.Lock(ctx, fmt.Sprintf("q-%d", i))
			ended <- err
		}()
	}
	until(t, ctx, "the q- acquires to queue in the call gate", func() bool { q, _ := gateQueued(c); return q == n })
	closed := make(chan error, 1)
	go func() { closed <- c.Close(ctx) }()
	for range n {
		if err := <-ended; !errors.Is(err, ErrClosed) {
			t.Fatalf("Lock ended by Close = %v, want ErrClosed", err)
		}
	}
	close(b.hold)
	unlockAll(t, ctx, filled, maxCallsInFlight) // ended by the close: none was granted
	quiet(t, ctx, c)
	close(b.holdClose)
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v", err)
	}
	acq, grants := b.counts("q-")
	t.Logf("acquires of the %d Locks queued when Close came: %d sent, %d granted", n, acq, grants)
	if acq != 0 {
		t.Errorf("%d acquires (%d granted) of Locks queued when Close came reached the backend, want 0", acq, grants)
	}
}

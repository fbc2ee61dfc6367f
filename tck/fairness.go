package tck

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// FairnessSpec checks the waiter queue of a backend that implements spi.Queuer: a free lease goes to the longest-waiting live waiter before anyone else, a waiter
// keeps its place while it re-attempts, a dead waiter drops out with its session, and Acquire
// (TryLock) never queues. On a backend that says its entries live with their session
// (spi.SessionQueue), Queue/WaiterKeepsPlaceWithSession checks the claim: a waiter keeps its
// place without re-attempting for longer than its TTL while its session is kept alive (it is
// not run on other backends, which the suite logs). Its client scenario is the starvation scenario of a holder that
// re-locks in a loop of short sections while another client waits: the waiter must enter after
// at most one more section of the looping holder. Every backend of this module runs it; a
// backend without spi.Queuer fails it at once.
//
// It checks the order while the server answers. Across a server outage the bound holds only
// for waiters whose entries outlive it (see spi.Queuer): an outage longer than an entry's
// remaining time (as of the waiter's latest attempt, on a backend without spi.SessionQueue) or
// than the session's local deadline (on every backend) takes the waiter's place, and the queue
// forms again in the order the waiters come back; no scenario here injects an outage.
func FairnessSpec(t *testing.T, f Factory) {
	h := newHarness(t, f)
	if _, ok := h.backend(t).Backend.(spi.Queuer); !ok {
		t.Fatal("tck: FairnessSpec: the backend does not implement spi.Queuer")
	}
	t.Run("Queue", func(t *testing.T) {
		t.Run("FreeLeaseGoesToFirstWaiter", h.fairFirstWaiter)
		t.Run("WaitersAreServedInArrivalOrder", h.fairOrder)
		t.Run("AcquireNeverQueues", h.fairTryNeverQueues)
		t.Run("DeadWaiterDropsOut", h.fairDeadWaiter)
		if spi.EntriesLiveWithSession(h.backend(t).Backend) {
			t.Run("WaiterKeepsPlaceWithSession", h.fairSessionWaiter)
		} else {
			t.Log("tck: the backend does not report spi.SessionQueue: Queue/WaiterKeepsPlaceWithSession is not run")
		}
	})
	c := newClientHarness(h)
	t.Run("Client", func(t *testing.T) {
		t.Run("LoopingHolderLetsWaiterIn", c.fairLoopingHolder)
	})
}

func (h *harness) queuer(t testing.TB) (*client, spi.Queuer) {
	t.Helper()
	b := h.backend(t)
	return b, b.Backend.(spi.Queuer)
}

func (h *harness) acquireQueued(t testing.TB, q spi.Queuer, s spi.SessionID, name string) spi.Acquire {
	t.Helper()
	r, err := q.AcquireQueued(ctx(t), s, name)
	if err != nil {
		t.Fatalf("AcquireQueued(%s, %q): %v", s, name, err)
	}
	return r
}

// waitBehind makes s a waiter for name and checks the reply names holder.
func (h *harness) waitBehind(t testing.TB, q spi.Queuer, s spi.SessionID, name string, holder spi.SessionID) {
	t.Helper()
	r := h.acquireQueued(t, q, s, name)
	if r.Kind != spi.HeldBy || r.Holder != holder {
		t.Fatalf("AcquireQueued(%s, %q) = %s (holder %q), want held by %s", s, name, r.Kind, r.Holder, holder)
	}
	if !r.RemainingUnknown && (r.Remaining <= 0 || r.Remaining > h.long) {
		t.Fatalf("AcquireQueued(%s, %q) = held by %s with remaining %v, want in (0, %v]", s, name, holder, r.Remaining, h.long)
	}
}

// fairFirstWaiter: once the holder releases, the lease is reserved for the waiter: neither the
// old holder nor a late comer gets it, with a plain or a queued acquire, until the waiter does.
func (h *harness) fairFirstWaiter(t *testing.T) {
	name := h.name("first")
	ba, qa := h.queuer(t)
	bb, qb := h.queuer(t)
	bc, _ := h.queuer(t)
	a, b, c := h.open(t, ba, h.long), h.open(t, bb, h.long), h.open(t, bc, h.long)
	tok := h.grant(t, ba, a, name)
	h.waitBehind(t, qb, b, name, a)
	h.release(t, ba, a, name, tok)
	h.heldBy(t, ba, a, name, b) // the old holder's own next acquire does not win
	h.heldBy(t, bc, c, name, b) // nor does a late comer's
	h.waitBehind(t, qa, a, name, b)
	r := h.acquireQueued(t, qb, b, name)
	if r.Kind != spi.Granted || r.Token <= tok {
		t.Fatalf("the waiter's AcquireQueued after the release = %s token %d, want granted with a token above %d", r.Kind, r.Token, tok)
	}
	h.heldBy(t, bc, c, name, b)
	h.release(t, bb, b, name, r.Token)
	h.heldBy(t, bc, c, name, a) // a queued behind b: now first
	if got := h.grant(t, ba, a, name); got <= r.Token {
		t.Fatalf("the second waiter was granted token %d, want above %d", got, r.Token)
	}
}

// fairOrder: three waiters are served in the order they first queued, though the later ones
// re-attempt in between (a waiter keeps its place).
func (h *harness) fairOrder(t *testing.T) {
	name := h.name("order")
	bh, _ := h.queuer(t)
	holder := h.open(t, bh, h.long)
	tok := h.grant(t, bh, holder, name)
	type w struct {
		b  *client
		q  spi.Queuer
		id spi.SessionID
	}
	ws := make([]w, 3)
	for i := range ws {
		b, q := h.queuer(t)
		ws[i] = w{b, q, h.open(t, b, h.long)}
		h.waitBehind(t, q, ws[i].id, name, holder)
	}
	for i := len(ws) - 1; i >= 0; i-- { // re-attempts in reverse order change nothing
		h.waitBehind(t, ws[i].q, ws[i].id, name, holder)
	}
	h.release(t, bh, holder, name, tok)
	for i := range ws {
		for j := len(ws) - 1; j > i; j-- { // those behind are refused, naming the first
			h.waitBehind(t, ws[j].q, ws[j].id, name, ws[i].id)
		}
		r := h.acquireQueued(t, ws[i].q, ws[i].id, name)
		if r.Kind != spi.Granted || r.Token <= tok {
			t.Fatalf("waiter %d: AcquireQueued = %s token %d, want granted with a token above %d", i, r.Kind, r.Token, tok)
		}
		tok = r.Token
		h.release(t, ws[i].b, ws[i].id, name, tok)
	}
	if got := h.grant(t, bh, holder, name); got <= tok {
		t.Fatalf("after the queue emptied, a plain acquire was granted token %d, want above %d", got, tok)
	}
}

// fairTryNeverQueues: a plain Acquire (TryLock) that finds the lease held leaves no trace: once
// the holder releases, anyone may take it.
func (h *harness) fairTryNeverQueues(t *testing.T) {
	name := h.name("try")
	ba, bb, bc := h.backend(t), h.backend(t), h.backend(t)
	a, b, c := h.open(t, ba, h.long), h.open(t, bb, h.long), h.open(t, bc, h.long)
	tok := h.grant(t, ba, a, name)
	h.heldBy(t, bb, b, name, a)
	h.release(t, ba, a, name, tok)
	if got := h.grant(t, bc, c, name); got <= tok {
		t.Fatalf("granted token %d, want above %d", got, tok)
	}
}

// fairDeadWaiter: a waiter whose session expired (its TTL ran out: not by the expiry hook,
// since a backend may only know the session's expiry as of the waiter's last attempt) no
// longer holds the lease back.
func (h *harness) fairDeadWaiter(t *testing.T) {
	name := h.name("dead")
	ba, _ := h.queuer(t)
	bb, qb := h.queuer(t)
	a := h.open(t, ba, h.long)
	b := h.open(t, bb, h.short)
	tok := h.grant(t, ba, a, name)
	h.waitBehind(t, qb, b, name, a)
	h.wait(t, h.expiryWait(h.short))
	h.live(t, ba, a, h.long)
	h.release(t, ba, a, name, tok)
	if got := h.grant(t, ba, a, name); got <= tok {
		t.Fatalf("granted token %d after the waiter died, want above %d", got, tok)
	}
}

// fairSessionWaiter checks the claim of spi.SessionQueue: a waiter that queued once and then
// does not attempt again for well over its TTL (its session, of the short TTL, kept alive by
// KeepAlive alone) keeps its place: once the holder releases, a late comer's Acquire and
// AcquireQueued and the old holder's Acquire are HeldBy the waiter, and the waiter's next
// AcquireQueued is granted (then the late comer, queued behind it, is next). Where entries
// lapse with the session's expiry as of the latest attempt, the late comer would be granted.
// FairnessSpec runs it only for a backend that reports spi.SessionQueue true.
func (h *harness) fairSessionWaiter(t *testing.T) {
	ba, _ := h.queuer(t)
	name := h.name("session")
	bw, qw := h.queuer(t)
	a, w := h.open(t, ba, h.long), h.open(t, bw, h.short)
	tok := h.grant(t, ba, a, name)
	h.waitBehind(t, qw, w, name, a)
	// Past the waiter's TTL (and the server's expiry lag) by half a TTL, with keep-alives only.
	step := h.short / 4
	for waited := time.Duration(0); waited < h.expiryWait(h.short)+h.short/2; waited += step {
		h.wait(t, step)
		h.live(t, bw, w, h.short)
		h.live(t, ba, a, h.long)
	}
	h.release(t, ba, a, name, tok)
	bc, qc := h.queuer(t)
	c := h.open(t, bc, h.long)
	h.heldBy(t, bc, c, name, w) // the entry kept its place: the free lease is reserved for w
	h.waitBehind(t, qc, c, name, w)
	h.heldBy(t, ba, a, name, w)
	r := h.acquireQueued(t, qw, w, name)
	if r.Kind != spi.Granted || r.Token <= tok {
		t.Fatalf("the waiter's AcquireQueued after the release = %s token %d (holder %q), want granted with a token above %d", r.Kind, r.Token, r.Holder, tok)
	}
	h.release(t, bw, w, name, r.Token)
	if r2 := h.acquireQueued(t, qc, c, name); r2.Kind != spi.Granted || r2.Token <= r.Token {
		t.Fatalf("the late comer's AcquireQueued after the waiter's release = %s token %d (holder %q), want granted with a token above %d", r2.Kind, r2.Token, r2.Holder, r.Token)
	}
}

// Starvation scenario: the looping holder's sections and their length.
const (
	fairSections = 60
	fairSection  = 200 * time.Millisecond
)

// fairLoopingHolder is the starvation scenario through real clients: one locks, works for a
// section and unlocks, in a loop of up to 60 sections of 200 ms; two starts waiting during
// one's second section and must get the lock after at most one more section of one. The
// count is what the test asserts; the wait is logged.
//
// Counted from the backend's answer, not from two's call: the sections one has entered are
// read when the backend answers two's first acquire (a call observer of two's), by when two
// waits in the queue (or holds the lease). One section of one may have been granted before
// and counted after; none may be granted after. (They were read before two called Lock, and
// a Lock that reached the backend a section later, on a loaded machine, found one a section
// further on: a fair backend would have failed at two more sections.)
func (c *clientHarness) fairLoopingHolder(t *testing.T) {
	name := c.name("starve")
	var sections atomic.Int64 // sections one has entered
	var answered atomic.Int64 // sections when the backend first answered two's acquire, -1 before
	answered.Store(-1)
	one := c.client(t, "one", c.steady)
	two := c.client(t, "two", c.steady, simba.WithCallObserver(func(ci simba.CallInfo) {
		if ci.Op == simba.OpAcquire && ci.Name == name && ci.Err == nil {
			answered.CompareAndSwap(-1, sections.Load())
		}
	}))
	stop := make(chan struct{})
	started := make(chan struct{}, fairSections)
	loopDone := make(chan error, 1)
	go func() {
		for range fairSections {
			held, err := one.Lock(ctx(t), name)
			if err != nil {
				loopDone <- err
				return
			}
			sections.Add(1)
			started <- struct{}{}
			time.Sleep(fairSection)
			if err := held.Unlock(ctx(t)); err != nil {
				loopDone <- err
				return
			}
			select {
			case <-stop:
				loopDone <- nil
				return
			default:
			}
		}
		loopDone <- nil
	}()
	for range 2 {
		receive(t, started, c.patience, "one to enter a section")
	}
	time.Sleep(fairSection / 4) // two starts well inside one's second section
	called := sections.Load()
	begun := time.Now()
	lctx, cancel := context.WithTimeout(context.Background(), c.patience)
	defer cancel()
	held, err := two.Lock(lctx, name)
	waited := time.Since(begun)
	after := sections.Load()
	close(stop)
	if err != nil {
		t.Fatalf("two: Lock while one loops: %v (one entered %d sections meanwhile)", err, after-called)
	}
	before := answered.Load()
	if before < 0 {
		t.Fatal("two got the lock, and no acquire of its was answered")
	}
	more := after - before
	t.Logf("starvation scenario: two entered after %d more section(s) of one (%d-section loop of %v), waiting %v",
		more, fairSections, fairSection, waited)
	if more > 1 {
		t.Errorf("two entered after %d more sections of one, want at most 1", more)
	}
	if !held.IsValid() {
		t.Errorf("two's term %v is not valid", held.Term)
	}
	if err := held.Unlock(ctx(t)); err != nil {
		t.Fatalf("two: Unlock: %v", err)
	}
	select {
	case err := <-loopDone:
		if err != nil {
			t.Fatalf("one: %v", err)
		}
	case <-time.After(c.patience):
		t.Fatal("one's loop did not end after two's turn")
	}
}

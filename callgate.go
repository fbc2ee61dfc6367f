package simba

import (
	"errors"
	"sync"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/spi"
)

// maxCallsInFlight bounds the backend calls of one client in flight at once, the session's own
// calls (open, keep-alive, close) excepted: those never wait for a slot nor behind queued calls.
// Joining a group of P partitions asks for P acquires in one step (up to wire.MaxPartitions,
// 65,536); started all at once they filled the backend's connection pool (SQLite has one
// connection, go-redis 10 per CPU) and its server, the keep-alive queued behind them past its
// timeout of one renewal interval, the session expired and every partition was lost, again
// and again (one member, TTL 5 s: SQLite held 1 of 4,096 partitions after 10 s; Redis lost two
// sessions in 10 s with 65,536). 32 keeps a pool of up to 32 connections busy — a round trip's
// worth of calls per connection is all a pool can run at once — while a keep-alive waits
// behind at most 32 calls: 32 ms at 1 ms a call, a fifth of the shortest renewal interval
// even at 5 ms a call on a backend that runs one call at a time (SQLite). The backends that
// bound their connections keep the keep-alive from queueing behind those calls at their pool
// too (keepAliveConn in backend/sql and backend/redis, SQLite's turns), which holds for all the
// clients sharing one backend value.
const maxCallsInFlight = 32

// call is one backend call an engine effect asks for, as a call worker runs it.
type call struct {
	ef engine.Effect
	// gated: the call holds a slot of the client's callGate, which whoever finishes it passes
	// on (Client.nextCall).
	gated bool
	// skip: an acquire of a session lost while the call was queued: it is not sent (the engine
	// ignores its reply, and sending it could only take a lease for a dead session).
	skip bool
	// also are the requests of identical releases queued after this one: its outcome is
	// theirs (a release is idempotent by token).
	also []engine.ReqID
	// cancelled: a queued acquire the engine no longer wants (engine.EfCancel), dropped
	// unsent (callGate.cancel): it stays in its queue until popped, and is skipped then.
	cancelled bool
	// turn is the call's turn on a settling clock (callturn.go; 0 until it has one).
	turn uint64
}

// errNotSent is the error replied to a queued acquire of a lost session, which is not sent.
var errNotSent = spi.Unavailable("acquire", errors.New("not sent: its session was lost while it waited for a call slot"))

// callGate bounds the calls in flight (maxCallsInFlight) and queues the rest in two queues, in
// the order the engine asked for them: calls a caller waits for — locks', elections' and
// groups' own calls — go ahead of the acquires, releases and withdrawals of group partitions,
// so that a Lock does not wait behind tens of thousands of partition acquires. A queued call's
// timeout (one renewal interval) starts when it starts, and so does the time it reports as
// sent (EvReply.SentAt): the engine dates a grant from then, no earlier than the backend
// received the call, so a term's deadline is as safe for a call that waited as for one that
// did not. Every slot is passed on by the goroutine that finishes its call, so the queue
// drains as long as calls end, which their timeouts make sure of. A queued acquire the engine
// cancels (engine.EfCancel: its election, lock or partition stopped — a Lock or TryLock whose
// ctx ended, a Stop or StepDown, a Close, a Leave or a new view) is dropped unsent (cancel).
type callGate struct {
	mu      sync.Mutex
	running int // gated calls in flight
	waited  callFIFO
	bulk    callFIFO
	// releases are the queued releases by what they release: an identical release queued
	// meanwhile (the engine's keep-alives release again a lease nobody wants) joins the queued
	// one instead of queueing again.
	releases map[releaseKey]*call
	// acquires are the queued acquires by request, for cancel to find.
	acquires map[engine.ReqID]*call
	// dead are the latest sessions lost or closed: their queued acquires are not sent.
	dead  [4]spi.SessionID
	deadN int
}

type releaseKey struct {
	sess  spi.SessionID
	name  string
	token int64
}

// callFIFO is a queue of calls.
type callFIFO struct {
	q    []*call
	head int
}

func (f *callFIFO) len() int { return len(f.q) - f.head }

func (f *callFIFO) push(c *call) {
	if f.head > 0 && f.head >= len(f.q)/2 && len(f.q) == cap(f.q) {
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	f.q = append(f.q, c)
}

func (f *callFIFO) pop() *call {
	if f.head == len(f.q) {
		return nil
	}
	c := f.q[f.head]
	f.q[f.head] = nil
	f.head++
	if f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	}
	return c
}

// gatedOp reports whether a call of op needs a slot: every call but the session's own.
func gatedOp(op engine.Op) bool {
	return op != engine.OpOpenSession && op != engine.OpKeepAlive && op != engine.OpCloseSession
}

// tryEnter takes a slot if one is free and no call is queued.
func (g *callGate) tryEnter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running < maxCallsInFlight && g.waited.len()+g.bulk.len() == 0 {
		g.running++
		return true
	}
	return false
}

// enterOrQueue takes a slot for ef, or queues it (bulk: in the partitions' queue); it reports
// whether ef got a slot.
func (g *callGate) enterOrQueue(ef engine.Effect, bulk bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running < maxCallsInFlight && g.waited.len()+g.bulk.len() == 0 {
		g.running++
		return true
	}
	if ef.Op == engine.OpRelease {
		k := releaseKey{ef.Session, ef.Name, ef.Token}
		if q := g.releases[k]; q != nil {
			q.also = append(q.also, ef.Req)
			return false
		}
		cl := &call{ef: ef, gated: true}
		if g.releases == nil {
			g.releases = make(map[releaseKey]*call)
		}
		g.releases[k] = cl
		g.queue(cl, bulk)
		return false
	}
	cl := &call{ef: ef, gated: true}
	if ef.Op == engine.OpAcquire {
		if g.acquires == nil {
			g.acquires = make(map[engine.ReqID]*call)
		}
		g.acquires[ef.Req] = cl
	}
	g.queue(cl, bulk)
	return false
}

// cancel drops the queued acquire req, which the engine no longer wants (engine.EfCancel), so
// that it is never sent: it returns the call, or nil if req is not queued (it was sent, or
// runs on its caller's goroutine). The caller steps its NotSent reply and ends its settling.
func (g *callGate) cancel(req engine.ReqID) *call {
	g.mu.Lock()
	defer g.mu.Unlock()
	cl := g.acquires[req]
	if cl == nil {
		return nil
	}
	delete(g.acquires, req)
	cl.cancelled = true
	return cl
}

func (g *callGate) queue(cl *call, bulk bool) {
	if bulk {
		g.bulk.push(cl)
	} else {
		g.waited.push(cl)
	}
}

// next passes a finished call's slot on: it returns the next queued call, which keeps the
// slot, or frees the slot if none is queued. stopped (the client's loop has exited) drops
// every queued call instead, returning them for their settling to end.
func (g *callGate) next(stopped bool) (next *call, dropped []*call) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if stopped {
		for _, q := range [...]*callFIFO{&g.waited, &g.bulk} {
			for cl := q.pop(); cl != nil; cl = q.pop() {
				if !cl.cancelled { // a cancelled one was settled when it was cancelled
					dropped = append(dropped, cl)
				}
			}
		}
		g.releases, g.acquires = nil, nil
		g.running--
		return nil, dropped
	}
	for {
		next = g.waited.pop()
		if next == nil {
			next = g.bulk.pop()
		}
		if next == nil || !next.cancelled {
			break
		}
	}
	if next == nil {
		g.running--
		return nil, nil
	}
	switch next.ef.Op {
	case engine.OpRelease:
		delete(g.releases, releaseKey{next.ef.Session, next.ef.Name, next.ef.Token})
	case engine.OpAcquire:
		delete(g.acquires, next.ef.Req)
		for _, s := range g.dead[:g.deadN] {
			if s == next.ef.Session {
				next.skip = true
			}
		}
	}
	return next, nil
}

// sessionGone notes that session sid was lost or closed (loop goroutine).
func (g *callGate) sessionGone(sid spi.SessionID) {
	if sid == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	copy(g.dead[1:], g.dead[:len(g.dead)-1])
	g.dead[0] = sid
	g.deadN = min(g.deadN+1, len(g.dead))
}

// bulkCall reports whether ef is a call about a partition of a group: an acquire, release
// or withdrawal of a partition name that no election or lock of this client has.
func (c *Client) bulkCall(ef engine.Effect) bool {
	switch ef.Op {
	case engine.OpAcquire, engine.OpRelease, engine.OpWithdraw:
	default:
		return false
	}
	if _, _, ok := wire.ParsePartition(ef.Name); !ok {
		return false
	}
	return c.handle(ef.Name) == nil
}

// admit takes a slot for ef, or queues it; it reports whether ef may start now (loop goroutine).
func (c *Client) admit(ef engine.Effect) bool {
	if c.gate.tryEnter() {
		return true
	}
	return c.gate.enterOrQueue(ef, c.bulkCall(ef))
}

// nextCall passes on the slot of a gated call that ended: it returns the next queued call to
// run, if any. Once the client's loop has exited, queued calls are dropped unsent: nobody
// would hear of their replies. The caller holds a count of c.calls.
func (c *Client) nextCall() (call, bool) {
	next, dropped := c.gate.next(c.baseCtx.Err() != nil)
	for _, cl := range dropped {
		for range 1 + len(cl.also) {
			c.settle.end()
		}
	}
	if next == nil {
		return call{}, false
	}
	return *next, true
}

// cancelCall drops the acquire ef.Req (an engine.EfCancel) if it still waits for a slot, so that
// it is never sent, and steps its NotSent reply right after the current step (loop
// goroutine); a call already sent goes on, and its reply comes as usual. A group left while it
// was still taking its partitions had most of their acquires queued here: each went out after
// the Leave, took its partition for nobody, and was released after it (trial29: 3,999 of
// 4,096 partitions still held when Leave returned). So did the acquires of Locks whose callers
// gave up while queued, of elections stopped, and of every candidate when the client closed
// (TestLockWhoseCtxEndsWhileQueuedIsNotSent: 50 of 50 sent and granted for nobody).
func (c *Client) cancelCall(ef engine.Effect) {
	cl := c.gate.cancel(ef.Req)
	if cl == nil {
		return
	}
	ev := engine.ReplyTo(cl.ef)
	ev.SentAt, ev.NotSent = c.cfg.clock.Now(), true
	c.postSelf(func() { c.step(ev) })
	c.settle.end() // the call's, begun by startCall
}

// passOn hands the next queued call, if any, to a call worker once a gated call that ran on a
// caller's goroutine ended. The caller holds a count of c.calls.
func (c *Client) passOn() {
	if next, ok := c.nextCall(); ok {
		c.dispatchCall(next)
	}
}

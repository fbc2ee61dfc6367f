package simba

import "github.com/simba-go/simba/internal/engine"

// MaxCallsInFlight is maxCallsInFlight, for the tests of package simba_test: the most backend
// calls other than the session's own that a client has in flight at once.
const MaxCallsInFlight = maxCallsInFlight

// QueuedCall reports where c's call gate has queued a call for name: in the queue of calls a
// caller waits for (waited) or in group partitions' (bulk), at which place, and how many calls
// that queue holds in all; ok is false if no call for name is queued.
func QueuedCall(c *Client, name string) (waited bool, at, queued int, ok bool) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	for _, q := range []struct {
		f      *callFIFO
		waited bool
	}{{&c.gate.waited, true}, {&c.gate.bulk, false}} {
		for i, cl := range q.f.q[q.f.head:] {
			if cl.ef.Name == name {
				return q.waited, i, q.f.len(), true
			}
		}
	}
	return false, 0, 0, false
}

// QueuedCalls reports how many calls c's call gate has queued: calls a caller waits for
// (waited) and group partitions' (bulk).
func QueuedCalls(c *Client) (waited, bulk int) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	return c.gate.waited.len(), c.gate.bulk.len()
}

// OnRequest makes c run hook, with the kind and the name of the request's event ("start",
// "stop", "step-down", "join", "leave", as transcripts print them), at the start of every
// request (Start, Stop, StepDown, JoinGroup, Leave, Lock, Unlock) on the requesting goroutine,
// before the event is posted to the loop; a nil hook removes it.
func OnRequest(c *Client, hook func(kind, name string)) {
	if hook == nil {
		c.testHookRequest.Store(nil)
		return
	}
	h := func(ev engine.Event) { hook(ev.Kind.String(), ev.Name) }
	c.testHookRequest.Store(&h)
}

// OnHop makes c run hook at each hop of a hand-over on the waiter's side: hop 0 a Released
// hint read from the backend, 1 an acquire sent, 2 its reply back, 3 the reply's step begun,
// 4 a grant stepped; a nil hook removes it.
func OnHop(c *Client, hook func(hop int, name string)) {
	if hook == nil {
		c.testHookHop.Store(nil)
		return
	}
	h := func(p hop, name string) { hook(int(p), name) }
	c.testHookHop.Store(&h)
}

// OnReply makes c run hook, with the operation of a backend call ("release", "close-session",
// as CallInfo.Op says) and the name it is about, right after the step of the call's reply,
// where the engine is stepped: a reply posted after hook returns is stepped after this one; a
// nil hook removes it.
func OnReply(c *Client, hook func(op, name string)) {
	if hook == nil {
		c.testHookReply.Store(nil)
		return
	}
	h := func(op engine.Op, name string) { hook(publicOp(op), name) }
	c.testHookReply.Store(&h)
}

// GoroutineIDsTaken is how many times the package has taken the id of a goroutine (goid, a
// stack trace each) so far, in every client.
func GoroutineIDsTaken() uint64 { return goidCalls.Load() }

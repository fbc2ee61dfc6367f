package simba

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

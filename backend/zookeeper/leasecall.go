package zookeeper

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
)

// leaseReq is one multi-op of an acquire (createLease) or a release (deleteOwn), with all that
// the request is made of: its arguments, the parts of the multi-op (go-zookeeper's Multi takes
// pointers to its request structs, which it encodes on its send goroutine), its outcome, and
// the hand-off to a hop worker (see call). They come from a pool: an uncontended acquire and
// release otherwise allocated a closure and a result channel per call (and a closure for the
// hop), and each part of the multi-op, per request; with the node paths that pathsOf now keeps,
// that was 17 of the 89 allocations of an SPI Acquire and Release with a deadline, 11 of the 83
// with context.Background (TestAcquireReleaseAllocations). The bytes sent are the same: the
// parts hold the same values, set whole for each request.
//
// A leaseReq goes back to the pool only once go-zookeeper is surely done with it: the server
// answered its request (or it was never sent). A request cut short by its context, or one
// that failed without the server's answer (a closed connection: go-zookeeper's Multi may return
// while its send goroutine still encodes the parts), is left to the garbage collector.
type leaseReq struct {
	s       *session
	name    string
	path    string // the lease node's
	queue   string // the name's waiter queue node's (an acquire's)
	q       queueState
	release bool  // deleteOwn, else createLease
	version int32 // deleteOwn's expected data version
	// early: a release whose claim of its name ends as soon as its multi-op is written to the
	// session's connection (see tap.releaseWritten), not when it is answered. claimEnded is
	// set (under the tap's lock) when that happened: the caller no longer holds the claim.
	early      bool
	claimEnded bool

	// The outcome, written by whoever runs the request (the caller or a hop worker) before
	// done is sent.
	token    int64
	err      error
	answered bool // the server answered the multi-op, or it was not sent: go-zookeeper is done with the parts

	// state is 0 while a hop worker has the request, then reqOver when the worker is done,
	// or reqGivenUp when the caller gave up first (atomic: both sides set it by CAS).
	state int32

	done chan struct{} // buffered: the hop worker's run is over
	run  func()        // r.hop, made once per leaseReq

	ops                 [3]any
	create, createQueue zk.CreateRequest
	del, delQueue       zk.DeleteRequest
	set                 zk.SetDataRequest
	check               zk.CheckVersionRequest
}

var leaseReqs = sync.Pool{New: func() any {
	r := &leaseReq{done: make(chan struct{}, 1)}
	r.run = r.hop
	return r
}}

// newLeaseReq returns a leaseReq of s for the lease node of name at path (and, for an acquire,
// the name's queue node at queue).
func newLeaseReq(s *session, name string, p leasePaths) *leaseReq {
	r := leaseReqs.Get().(*leaseReq)
	r.s, r.name, r.path, r.queue = s, name, p.lease, p.queue
	return r
}

// exec runs the request on the calling goroutine.
func (r *leaseReq) exec() {
	r.answered = true
	if r.release {
		r.err = r.s.deleteOwn(r)
	} else {
		r.token, r.err = r.s.createLease(r)
	}
}

// The states of a leaseReq handed to a hop worker (leaseReq.state).
const (
	reqOver    = 1 // the worker has run it: the caller takes the outcome
	reqGivenUp = 2 // the caller gave up first: the worker ends the request's claim
)

// hop runs the request on a hop worker and tells the caller. A request whose caller gave up
// before it started is not sent: the caller's outcome is unknown either way. Once the caller
// has given up, the request's claim of its name (see session.claim) is the worker's to end,
// when the request is over: after an acquire's create that was sent, having marked the name
// uncertain, since no caller records the create's outcome.
func (r *leaseReq) hop() {
	if atomic.LoadInt32(&r.state) == reqGivenUp {
		r.answered, r.err = true, context.Canceled // not sent
	} else {
		r.exec()
	}
	if atomic.CompareAndSwapInt32(&r.state, 0, reqOver) {
		r.done <- struct{}{}
		return
	}
	if !r.release && r.err != context.Canceled {
		r.s.markUncertain(r.name)
	}
	if !r.claimEnded { // else the tap ended it as the multi-op was written
		r.s.unclaim(r.name)
	}
	// r is left to the garbage collector
}

// do runs the request as call runs a request (on the caller's goroutine when ctx cannot end,
// else on a hop worker, given up when ctx ends) and returns its outcome. The caller holds the
// session's claim of r.name (see session.claim); kept reports whether it still does: it does
// unless it gave up on the request while a hop worker had it, and the worker then ends the
// claim when the request is over, or an early release's claim ended when its multi-op was
// written (see tap.releaseWritten). A request that ended before the caller could give up
// returns its outcome. r must not be used after: it goes back to the pool when go-zookeeper is
// done with it.
func (r *leaseReq) do(ctx context.Context) (token int64, kept bool, err error) {
	if ctx.Done() == nil {
		r.exec()
	} else {
		if err := ctx.Err(); err != nil {
			r.put()
			return 0, true, err
		}
		r.s.b.hops.run(r.run)
		select {
		case <-r.done:
		case <-ctx.Done():
			if atomic.CompareAndSwapInt32(&r.state, 0, reqGivenUp) {
				return 0, false, ctx.Err() // the worker still has r: it is not put back
			}
			<-r.done // the request is over: its outcome is in
		}
	}
	token, err, kept = r.token, r.err, !r.claimEnded
	if r.answered {
		r.put()
	}
	return token, kept, err
}

// put clears r and puts it back in the pool.
func (r *leaseReq) put() {
	done, run := r.done, r.run
	*r = leaseReq{done: done, run: run}
	leaseReqs.Put(r)
}

// leasePaths are the node paths of a lease name: its lease node and its waiter queue node.
type leasePaths struct{ lease, queue string }

// maxLeasePaths bounds each session's memory of lease paths (see pathsOf).
const maxLeasePaths = 4096

// pathsOf returns name's node paths, made once for the session's recent names: an acquire and
// a release each built them anew, a string concatenation each.
func (s *session) pathsOf(name string) leasePaths {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.paths[name]; ok {
		return p
	}
	if len(s.paths) >= maxLeasePaths {
		clear(s.paths)
	}
	p := leasePaths{lease: s.b.lay.lease(name), queue: s.b.lay.queue(name)}
	s.paths[name] = p
	return p
}

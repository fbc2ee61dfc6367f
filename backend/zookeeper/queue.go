package zookeeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// The waiter queue of a name (spec/zk.yaml, nodes queue and waiter) is a container queue node
// with one ephemeral sequential waiter node per waiting session: the lowest sequence number is
// the first waiter, and a waiter whose session expires drops out with its node. The server
// deletes the queue node once its last waiter node is gone (on its container check), so names
// no one waits for any more leave no node behind. ZooKeeper's multi-op cannot check a node's
// children, so every add or remove of a waiter node also writes the queue node (empty data) in
// the same multi-op, bumping its data version. An acquire creates the lease node in one
// multi-op with a check that the queue lets the session in, as it read it:
//   - no queue node: a create and delete of it, which succeed only while there is none (the
//     node is created persistent: it exists for no time, and go-zookeeper cannot read the
//     reply of a multi-op that creates a container);
//   - an empty queue node: a delete of it, which succeeds only while it has no children. A
//     check of the version read would not do: the server may delete the queue and a waiter
//     create it again, whose version starts over at 0 and can reach the one read again with
//     waiters in it (ABA), and the acquire would pass ahead of them;
//   - the session's own waiter node first: a write of the queue at the version read and a
//     delete of that node, which pins the queue read (the server deletes no container that
//     has a child, and only this session creates its waiter nodes);
//   - otherwise (children that are not waiter nodes of Simba's, skipped): a check of the
//     version read; the server deletes no queue while they are there.
//
// A waiter node that vanishes with its session does not bump the version, but that only
// shortens the queue: a check that the queue had no one ahead of a session stays true.
//
// Each session remembers, per name, the queue state its last grant check passed with, so an
// acquire without waiters stays one round trip (the multi-op), as a bare create was.

// errQueueChanged reports that the waiter queue is not as the acquire's multi-op expected.
var errQueueChanged = errors.New("zookeeper: the waiter queue changed")

// maxQueueStates bounds each session's memory of queue states (names it acquired).
const maxQueueStates = 4096

// queueState is what a session knows of a name's waiter queue: absent (the zero value), or
// present at version with no one ahead of this session, whose own first waiter node is mine
// (or none); empty when it has no children at all (the acquire deletes it).
type queueState struct {
	exists  bool
	version int32
	mine    string
	empty   bool
}

// AcquireQueued implements spi.Queuer: Acquire for a session that waits for name. Unless the
// reply is Granted or SessionExpired, the session has a waiter node for name when it returns
// (one created now, or the one it had). A free lease with waiters is HeldBy the first waiter
// (RemainingUnknown), and the reply's read of the waiter's node leaves a watch, so its
// deletion (a grant, a withdrawal or its session's expiry) yields a Released hint.
//
// A withdrawal of name by the session still in flight (a keep-alive's retry, or a Withdraw
// whose caller gave up) is let end first, so that it cannot delete the node this call keeps or
// makes (see awaitWithdrawals).
func (b *Backend) AcquireQueued(ctx context.Context, sid spi.SessionID, name string) (spi.Acquire, error) {
	if s, _ := b.lookup(sid); s != nil { // an error, or none, is acquire's to report
		if err := s.awaitWithdrawals(ctx, name); err != nil {
			return spi.Acquire{}, s.fail("acquire", err)
		}
	}
	return b.acquire(ctx, sid, name, true)
}

// awaitWithdrawals is called by an AcquireQueued of name before it sends anything: it waits,
// bounded by ctx, until no request of name by the session is in flight (its claim, see
// session.claim), then forgets a failed withdrawal of name (the session waits again: its
// node, if the withdrawal left one, is its place).
//
// A withdrawal holds the name's claim from before it looks for the session's waiter node until
// its delete is answered (or was never sent), and records its failure before it lets the claim
// go; a keep-alive's retry takes the claim in the same hold of s.mu in which it takes the
// withdrawal off the pending ones (retryWithdrawals). So an AcquireQueued either forgot the
// withdrawal before the retry read it, or waits for the delete and then makes a new node.
// Without this, a retry read as pending and sent after the AcquireQueued's enqueue, or a
// Withdraw whose caller gave up before its delete was sent, deleted the node the AcquireQueued
// had kept as its place: the waiter, told HeldBy, waited on without a place, and a late comer
// was granted the lease it was owed when the holder released.
func (s *session) awaitWithdrawals(ctx context.Context, name string) error {
	return s.whenUnclaimed(ctx, name, func() { delete(s.withdrawals, name) })
}

// setWithdrawal records (pending) or forgets a withdrawal for the next keep-alive to retry.
func (s *session) setWithdrawal(name string, pending bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pending {
		s.withdrawals[name] = struct{}{}
	} else {
		delete(s.withdrawals, name)
	}
}

// retryWithdrawals runs again, after a keep-alive, the withdrawals of the session that failed
// (best effort: one that fails again stays pending for the next keep-alive). Each is taken off
// the pending ones and claimed in one hold of s.mu before it is sent (see awaitWithdrawals); one
// of a name with a request in flight is left for the next keep-alive, which does not wait.
func (b *Backend) retryWithdrawals(ctx context.Context, s *session) {
	s.mu.Lock()
	var names []string
	for n := range s.withdrawals {
		if _, busy := s.claims[n]; busy {
			continue
		}
		delete(s.withdrawals, n)
		s.claims[n] = nil
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		if h := testHookRetryWithdrawal.Load(); h != nil {
			(*h)(n)
		}
		b.doneWaiting(s.id, n)
		_ = s.withdrawClaimed(ctx, n) // a failure is recorded again
	}
}

// EndWait implements spi.WaitEnder: sid no longer waits for name (a TryLock that found it held
// gave up). It sends no request: the backend stops hinting the name to the session, and its
// watcher drops the watch on the lease node once no session of the backend waits for it.
func (b *Backend) EndWait(sid spi.SessionID, name string) {
	b.doneWaiting(sid, name)
}

// Withdraw implements spi.Queuer: it deletes the session's waiter node for name, if any, in a
// multi-op that bumps the queue's version. It waits first, bounded by ctx, for a request of
// name by the session in flight (session.claim). When ctx ends before the delete is answered,
// Withdraw returns and the withdrawal goes on; an AcquireQueued of the name waits for its end
// (awaitWithdrawals). One that fails runs again after the session's next keep-alive.
func (b *Backend) Withdraw(ctx context.Context, sid spi.SessionID, name string) error {
	if err := wire.ValidateName(name); err != nil {
		return err
	}
	s, err := b.lookup(sid)
	if err != nil || s == nil {
		return err
	}
	b.doneWaiting(sid, name)
	if err := s.claim(ctx, name); err != nil {
		s.setWithdrawal(name, true) // nothing sent: the next keep-alive withdraws
		return s.fail("withdraw", err)
	}
	return s.withdrawClaimed(ctx, name)
}

// withdrawClaimed is Withdraw with the name's claim taken, which it lets go once the withdrawal
// is over, after recording whether it failed (see awaitWithdrawals). When ctx can end, the
// requests run on a hop without it and the call returns when ctx ends: the withdrawal then
// goes on, and keeps the claim, until its delete is answered.
func (s *session) withdrawClaimed(ctx context.Context, name string) error {
	qp := s.b.lay.queue(name)
	if ctx.Done() == nil {
		return s.withdrawn(name, s.withdraw(ctx, qp, name))
	}
	if err := ctx.Err(); err != nil {
		return s.withdrawn(name, s.fail("withdraw", err))
	}
	done := make(chan error, 1)
	bg := context.WithoutCancel(ctx)
	s.b.hops.run(func() { done <- s.withdrawn(name, s.withdraw(bg, qp, name)) })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return s.fail("withdraw", ctx.Err()) // recorded by the hop when it is over
	}
}

// withdrawn ends a claimed withdrawal of name with its outcome err, which it returns.
func (s *session) withdrawn(name string, err error) error {
	s.setWithdrawal(name, err != nil)
	s.unclaim(name)
	return err
}

// withdraw is Withdraw on the session's own connection.
func (s *session) withdraw(ctx context.Context, qp, name string) error {
	for attempt := 0; attempt < 4; attempt++ {
		p, err := s.ownWaiter(ctx, name)
		if err == nil && p == "" {
			return nil
		}
		if err == nil {
			err = callErr(ctx, s.b, func() error {
				if h := testHookWithdrawSend.Load(); h != nil {
					(*h)(name)
				}
				_, err := s.conn.Multi(&zk.DeleteRequest{Path: p, Version: -1}, &zk.SetDataRequest{Path: qp, Version: -1})
				if h := testHookWithdrawSent.Load(); h != nil {
					(*h)(name)
				}
				return err
			})
			s.forgetQueue(name)
			if err == nil {
				return nil
			}
			if errors.Is(err, zk.ErrNoNode) {
				continue // gone already (or the queue node was): look again
			}
		}
		if s.expiredBy(err) {
			return nil
		}
		return s.fail("withdraw", err)
	}
	return spi.Contended("zookeeper: withdraw", fmt.Errorf("the waiter queue %s kept changing", qp))
}

// queueGuess returns the state of name's queue the session last passed a grant check with.
func (s *session) queueGuess(name string) queueState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues[name]
}

// setQueue records q as name's queue state.
func (s *session) setQueue(name string, q queueState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queues) >= maxQueueStates {
		clear(s.queues)
	}
	s.queues[name] = q
}

// granted records a grant checked against q: a grant that deleted the session's waiter node
// changed the queue's version, and one that deleted the empty queue node left none.
func (s *session) granted(name string, q queueState) {
	if q.mine == "" && !q.empty {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.queues, name)
	delete(s.waiters, name)
}

// forgetQueue drops what the session knows of name's queue and of its own waiter node there,
// after a request whose outcome is unknown: the next attempt reads them again.
func (s *session) forgetQueue(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.queues, name)
	delete(s.waiters, name)
}

// createLease creates r.name's lease node at r.path in one multi-op with the check that the
// queue (r.queue) is still as r.q says, and returns the new node's czxid (the multi-op's zxid,
// which the tap reads). It fails with ErrNodeExists when the lease node exists,
// errQueueChanged when the queue is not as r.q says, ErrNoNode when the roots are missing.
func (s *session) createLease(r *leaseReq) (int64, error) {
	name, path, qp, q := r.name, r.path, r.queue, r.q
	r.create = zk.CreateRequest{Path: path, Data: s.owner, Acl: s.leaseACL, Flags: wire.LeaseNodeFlags}
	ops := append(r.ops[:0], &r.create)
	switch {
	case !q.exists:
		// Persistent, not a container: the node exists for no time, and go-zookeeper cannot
		// read the reply of a multi-op that creates a container (the server answers it with a
		// create2 result).
		r.createQueue = zk.CreateRequest{Path: qp, Acl: s.b.acls.queue, Flags: wire.ZKFlagPersistent}
		r.delQueue = zk.DeleteRequest{Path: qp, Version: -1}
		ops = append(ops, &r.createQueue, &r.delQueue)
	case q.mine != "":
		r.set = zk.SetDataRequest{Path: qp, Version: q.version}
		r.delQueue = zk.DeleteRequest{Path: q.mine, Version: -1}
		ops = append(ops, &r.set, &r.delQueue)
	case q.empty:
		// At any version: the delete fails while the queue has a child, whichever queue node
		// it is (one the server deleted and a waiter created again has its versions anew).
		r.delQueue = zk.DeleteRequest{Path: qp, Version: -1}
		ops = append(ops, &r.delQueue)
	default:
		r.check = zk.CheckVersionRequest{Path: qp, Version: q.version}
		ops = append(ops, &r.check)
	}
	mr, err := s.conn.Multi(ops...)
	r.answered = err == nil || isAPIError(err)
	if err == nil {
		token, ok := s.tap.takeCreated(path)
		if !ok {
			// The tap always sees the reply before Multi returns; this is a guard only.
			s.markUncertain(name)
			return 0, errors.New("create reply without zxid")
		}
		return token, nil
	}
	if !isAPIError(err) {
		return 0, err
	}
	for i, part := range mr {
		if part.Error == nil || !isAPIError(part.Error) {
			continue
		}
		switch {
		case i == 0:
			return 0, part.Error
		case !q.exists && errors.Is(part.Error, zk.ErrNoNode):
			return 0, part.Error // the waiters root is missing
		}
		break
	}
	return 0, errQueueChanged
}

// readQueue reads name's waiter queue. If it lets this session have the lease (no waiter
// node ahead of the session's own), it records the state for the next createLease and
// returns nil; otherwise it returns the HeldBy reply naming the first waiter, whose node it
// read with a watch (its deletion is a hint). A child that is not a waiter node of the
// session its name says (a node Simba did not create) is skipped with a warning, as it would
// otherwise hold the lease back for as long as it stays. errQueueChanged asks the caller to
// try again.
func (s *session) readQueue(ctx context.Context, name string) (*spi.Acquire, error) {
	qp := s.b.lay.queue(name)
	type got struct {
		children []string
		stat     *zk.Stat
	}
	g, err := call(ctx, s.b, func() (got, error) {
		ch, st, err := s.conn.Children(qp)
		return got{ch, st}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		s.setQueue(name, queueState{})
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ws := s.scanQueue(name, g.children)
	foreign := len(g.children) - len(ws) // children not named as waiter nodes
	for _, w := range ws {
		if w.sid == string(s.id) {
			s.setQueue(name, queueState{exists: true, version: g.stat.Version, mine: w.path})
			return nil, nil
		}
		type node struct {
			data []byte
			stat *zk.Stat
		}
		n, err := call(ctx, s.b, func() (node, error) {
			data, stat, _, err := s.getData(w.path)
			return node{data, stat}, err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue // its session ended (a grant or withdrawal also changed the version)
		case err != nil:
			return nil, err
		case SessionIDString(n.stat.EphemeralOwner) != spi.SessionID(w.sid):
			s.b.warnOnce(w.path, "simba: ZooKeeper: skipping a child of a waiter queue that is not an ephemeral node of the session its name gives; it was not created by Simba and is neither used nor deleted",
				"name", name, "node", w.path)
			foreign++
			continue
		}
		owner := string(n.data)
		if wire.ValidateOwner(owner) != nil {
			owner = ForeignOwner
		}
		return &spi.Acquire{Kind: spi.HeldBy, Holder: spi.SessionID(w.sid), HolderOwner: owner, RemainingUnknown: true}, nil
	}
	// No waiter node ahead: the queue is empty (waiter nodes listed but gone since are
	// gone), unless children that are not Simba's waiter nodes stay.
	s.setQueue(name, queueState{exists: true, version: g.stat.Version, empty: foreign == 0})
	return nil, nil
}

// waiterNode is a child of a queue node named as a waiter node.
type waiterNode struct {
	path, sid string
	seq       int64
}

// scanQueue returns the children of name's queue node that are named as waiter nodes, in
// queue order (by sequence number), and records (or forgets) the session's own first one.
func (s *session) scanQueue(name string, children []string) []waiterNode {
	qp := s.b.lay.queue(name)
	ws := make([]waiterNode, 0, len(children))
	for _, c := range children {
		p := qp + "/" + c
		if n, sid, seq, ok := s.b.lay.waiterOf(p); ok && n == name {
			ws = append(ws, waiterNode{p, sid, seq})
		}
	}
	slices.SortFunc(ws, func(a, b waiterNode) int { return cmp.Compare(a.seq, b.seq) })
	s.mu.Lock()
	delete(s.waiters, name)
	for _, w := range ws {
		if w.sid == string(s.id) {
			s.waiters[name] = w.path
			break
		}
	}
	s.mu.Unlock()
	return ws
}

// ownWaiter returns the path of the session's waiter node for name, or "" if it has none:
// the one it remembers, else the one found among the queue's children (an earlier attempt's
// reply may have been lost).
func (s *session) ownWaiter(ctx context.Context, name string) (string, error) {
	s.mu.Lock()
	p := s.waiters[name]
	s.mu.Unlock()
	if p != "" {
		return p, nil
	}
	ch, err := call(ctx, s.b, func() ([]string, error) {
		ch, _, err := s.conn.Children(s.b.lay.queue(name))
		return ch, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, w := range s.scanQueue(name, ch) {
		if w.sid == string(s.id) {
			return w.path, nil
		}
	}
	return "", nil
}

// ensureWaiter makes sure the session has a waiter node for name: it keeps the one it has
// (its place in the queue) or appends one, in a multi-op that writes the queue node at the
// version it listed the queue at (so it knows whether its node is the first). When the
// session's node is the first, it records the queue's state, so that the attempt after the
// Released hint is one request.
//
// The queue node is a container: when there is none, the session creates it and adds its node
// at the version a new node has (0), without listing it again; when the add finds the queue
// gone (the server deleted it, empty, since it was listed, or an acquire did), the session
// creates it again and adds its node once more.
func (s *session) ensureWaiter(ctx context.Context, name string) error {
	s.mu.Lock()
	have := s.waiters[name] != ""
	s.mu.Unlock()
	if have {
		return nil
	}
	qp := s.b.lay.queue(name)
	type listed struct {
		children []string
		stat     *zk.Stat
	}
	// create creates the queue node; it reports whether this session created it (false:
	// another one did first, list it).
	create := func() (bool, error) {
		_, err := call(ctx, s.b, func() (string, error) {
			return s.conn.CreateContainer(qp, nil, wire.QueueNodeFlags, s.b.acls.queue)
		})
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, zk.ErrNodeExists):
			return false, nil
		case errors.Is(err, zk.ErrNoNode):
			s.b.rootsMissing()
			return false, s.b.ensureRoots(ctx, s)
		default:
			return false, s.fail("queue: create "+qp, err)
		}
	}
	type added struct {
		path    string
		version int32
	}
	add := func(version int32) (added, error) {
		return call(ctx, s.b, func() (added, error) {
			mr, err := s.conn.Multi(
				&zk.CreateRequest{Path: s.b.lay.waiter(name, string(s.id)), Data: s.owner, Acl: s.b.acls.waiter, Flags: wire.WaiterNodeFlags},
				&zk.SetDataRequest{Path: qp, Version: version})
			if err != nil {
				return added{}, err
			}
			return added{mr[0].String, mr[1].Stat.Version}, nil
		})
	}
	for attempt := 0; attempt < 4; attempt++ {
		l, err := call(ctx, s.b, func() (listed, error) {
			ch, st, err := s.conn.Children(qp)
			return listed{ch, st}, err
		})
		var version int32
		first := true // no waiter node ahead of the one to add
		switch {
		case errors.Is(err, zk.ErrNoNode):
			// No queue node: create it (the first waiter of name), and the roots if needed.
			made, err := create()
			if err != nil {
				return err
			}
			if !made {
				continue
			}
		case err != nil:
			return s.fail("queue: read "+qp, err)
		default:
			ws := s.scanQueue(name, l.children)
			for i, w := range ws {
				if w.sid == string(s.id) {
					if i == 0 {
						s.setQueue(name, queueState{exists: true, version: l.stat.Version, mine: w.path})
					}
					return nil
				}
			}
			version, first = l.stat.Version, len(ws) == 0
			if h := testHookQueueListed.Load(); h != nil {
				(*h)(name)
			}
		}
		a, err := add(version)
		if errors.Is(err, zk.ErrNoNode) {
			// The queue node is gone since it was listed or created: create it again and
			// add this session's node once more, the first of a new queue.
			made, cerr := create()
			if cerr != nil {
				return cerr
			}
			if !made {
				continue
			}
			version, first = 0, true
			a, err = add(version)
		}
		switch {
		case err == nil:
			s.mu.Lock()
			s.waiters[name] = a.path
			delete(s.queues, name)
			s.mu.Unlock()
			if first {
				s.setQueue(name, queueState{exists: true, version: a.version, mine: a.path})
			}
			return nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			continue // the queue changed since it was listed
		default:
			if outcomeUnknown(err) {
				s.forgetQueue(name) // a node may have been created: look for it next time
			}
			return s.fail("queue: add a waiter to "+qp, err)
		}
	}
	return spi.Contended("zookeeper: queue", fmt.Errorf("the waiter queue %s kept changing", qp))
}

// testHookRetryWithdrawal, when set, runs when a keep-alive is about to send the retried
// withdrawal of name (claimed); testHookWithdrawSend when a withdrawal's delete of the session's
// waiter node of name is about to be sent, and testHookWithdrawSent when it is answered.
var testHookRetryWithdrawal, testHookWithdrawSend, testHookWithdrawSent atomic.Pointer[func(name string)]

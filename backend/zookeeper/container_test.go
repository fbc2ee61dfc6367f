package zookeeper

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/spi"
)

// eventually polls cond until it holds, failing the test with what cond last said if that
// takes more than 30 s. It bounds the wait for the server's container check (every 100 ms in
// the tests that use it), and asserts no duration.
func eventually(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, what := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noChildren is a condition for eventually: the node at path has no children (or does not
// exist).
func noChildren(t *testing.T, c *zk.Conn, path string) func() (bool, string) {
	return func() (bool, string) {
		ch, _, err := c.Children(path)
		if errors.Is(err, zk.ErrNoNode) || err == nil && len(ch) == 0 {
			return true, ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return false, fmt.Sprintf("%d nodes left under %s: %v", len(ch), path, ch)
	}
}

// TestQueueNodesGoWithTheirWaiters: the waiter queue of a name is a container node, which the
// server deletes once its last waiter node is gone, so names that are each waited for once
// (lock "job-<id>") leave no queue node behind, whether the waiter was granted or withdrew;
// a name is waited for again after its queue went. A private server runs the container check
// every 100 ms (znode.container.checkIntervalMs, a system property); with persistent queue
// nodes, all of them stayed.
func TestQueueNodesGoWithTheirWaiters(t *testing.T) {
	z := startPrivateZKJVM(t, "-Dznode.container.checkIntervalMs=100")
	b := openBackend(t, "zk://"+z.addr+"/containers")
	c := rawClient(t, b, "")
	// The server honours the interval: a container of the test's own goes once emptied (with
	// the default, 60 s, the wait below would fail).
	acl := zk.WorldACL(zk.PermAll)
	if _, err := c.CreateContainer("/probe", nil, zk.FlagContainer, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/probe/child", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("/probe/child", -1); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() (bool, string) {
		ok, _, err := c.Exists("/probe")
		if err != nil {
			t.Fatal(err)
		}
		return !ok, "the emptied container /probe is still there: the server ignores znode.container.checkIntervalMs"
	})

	holder, w := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	const n = 20
	tokens := map[string]int64{}
	for i := range n {
		name := fmt.Sprintf("job-%d", i)
		tok := mustGrant(t, b, holder, name)
		queued(t, b, w, name, spi.HeldBy)
		if i%2 == 1 {
			if err := b.Withdraw(testCtx(t), w, name); err != nil {
				t.Fatal(err)
			}
			if err := b.Release(testCtx(t), holder, name, tok); err != nil {
				t.Fatal(err)
			}
			tokens[name] = tok
			continue
		}
		if err := b.Release(testCtx(t), holder, name, tok); err != nil {
			t.Fatal(err)
		}
		r := queued(t, b, w, name, spi.Granted)
		if err := b.Release(testCtx(t), w, name, r.Token); err != nil {
			t.Fatal(err)
		}
		tokens[name] = r.Token
	}
	eventually(t, noChildren(t, c, b.lay.waitersRoot()))

	// Waiting again for a name whose queue went: the queue comes back, in order.
	name := "job-0"
	tok := mustGrant(t, b, holder, name)
	if tok <= tokens[name] {
		t.Fatalf("token %d, want above %d", tok, tokens[name])
	}
	queued(t, b, w, name, spi.HeldBy)
	if got := waiterNodes(t, c, b, name); len(got) != 1 {
		t.Fatalf("waiter nodes = %v, want the waiter's one", got)
	}
	if err := b.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(testCtx(t), holder, name); err != nil || r.Kind != spi.HeldBy || r.Holder != w {
		t.Fatalf("the former holder's Acquire = %+v, %v; want held by the waiter %s", r, err, w)
	}
	if r := queued(t, b, w, name, spi.Granted); r.Token <= tok {
		t.Fatalf("token %d, want above %d", r.Token, tok)
	}
}

// sweepless returns a backend on a private server whose container check runs once an hour, so
// that it deletes no queue that a test needs empty between its steps: the tests that use it
// delete the queue themselves where the server would.
func sweepless(t *testing.T) *Backend {
	t.Helper()
	z := startPrivateZKJVM(t, "-Dznode.container.checkIntervalMs=3600000")
	return openBackend(t, "zk://"+z.addr+"/sweepless")
}

// emptyQueueAt2 leaves name's waiter queue empty at data version 2, the way a wait leaves it: a
// waiter queued (its add: version 1) and was granted (its node's delete: version 2).
func emptyQueueAt2(t *testing.T, b *Backend, c *zk.Conn, name string) {
	t.Helper()
	d, x := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, d, name)
	queued(t, b, x, name, spi.HeldBy)
	if err := b.Release(testCtx(t), d, name, tok); err != nil {
		t.Fatal(err)
	}
	r := queued(t, b, x, name, spi.Granted)
	if err := b.Release(testCtx(t), x, name, r.Token); err != nil {
		t.Fatal(err)
	}
	ch, st, err := c.Children(b.lay.queue(name))
	if err != nil || len(ch) != 0 || st.Version != 2 {
		t.Fatalf("queue of %q: children %v, stat %+v, %v; want empty at version 2", name, ch, st, err)
	}
}

// requeueAt2 makes name's queue again as a waiter creates it after the server deleted it: a
// new node, version 0, and two waiters, b1 and b2 (versions 1 and 2), while d holds the lease;
// then d releases it, so the lease is free and reserved for b1. It returns b1.
func requeueAt2(t *testing.T, b *Backend, c *zk.Conn, name string) spi.SessionID {
	t.Helper()
	d, b1, b2 := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, d, name)
	queued(t, b, b1, name, spi.HeldBy)
	queued(t, b, b2, name, spi.HeldBy)
	if err := b.Release(testCtx(t), d, name, tok); err != nil {
		t.Fatal(err)
	}
	ch, st, err := c.Children(b.lay.queue(name))
	if err != nil || len(ch) != 2 || st.Version != 2 {
		t.Fatalf("queue of %q: children %v, stat %+v, %v; want two waiters at version 2", name, ch, st, err)
	}
	return b1
}

// TestQueueCreatedAgainDoesNotPassForTheOneRead: an acquire that found a name's queue empty
// must not pass a check against a queue that the server deleted and waiters created again
// since, whose data version starts over and here reaches the one read again with two waiters
// in it (ABA). Here the session's memory of the queue spans the deletion: its next acquire is
// HeldBy the first waiter, not Granted ahead of both (which a check of the version read did).
func TestQueueCreatedAgainDoesNotPassForTheOneRead(t *testing.T) {
	b := sweepless(t)
	c := rawClient(t, b, "")
	a := openSession(t, b, 10*time.Second)
	emptyQueueAt2(t, b, c, "aba")
	tok := mustGrant(t, b, a, "aba") // found the queue empty at version 2
	if err := b.Release(testCtx(t), a, "aba", tok); err != nil {
		t.Fatal(err)
	}
	// The server's container check deletes the empty queue (done here by hand, at once, if
	// the acquire left it).
	if err := c.Delete(b.lay.queue("aba"), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	first := requeueAt2(t, b, c, "aba")
	if r, err := b.Acquire(testCtx(t), a, "aba"); err != nil || r.Kind != spi.HeldBy || r.Holder != first {
		t.Fatalf("Acquire after the queue was created again = %+v, %v; want held by the first waiter %s", r, err, first)
	}
	queued(t, b, first, "aba", spi.Granted)
}

// TestAcquireRacingQueueDeletion: the same ABA between an acquire's read of the queue and its
// multi-op: the read finds the queue empty at version 2, then (the test hook) the server
// deletes it and two waiters create it again up to version 2 and the lease is released. The
// acquire is HeldBy the first of them, not Granted.
func TestAcquireRacingQueueDeletion(t *testing.T) {
	b := sweepless(t)
	c := rawClient(t, b, "")
	a := openSession(t, b, 10*time.Second)
	emptyQueueAt2(t, b, c, "race")
	var first spi.SessionID
	var ran atomic.Bool
	hook := func(name string) {
		if name != "race" || !ran.CompareAndSwap(false, true) {
			return
		}
		if err := c.Delete(b.lay.queue(name), -1); err != nil {
			t.Errorf("deleting the empty queue: %v", err)
			return
		}
		first = requeueAt2(t, b, c, name)
	}
	testHookQueueRead.Store(&hook)
	defer testHookQueueRead.Store(nil)
	r, err := b.Acquire(testCtx(t), a, "race")
	if !ran.Load() {
		t.Fatalf("the acquire did not read the queue (reply %+v, %v)", r, err)
	}
	if err != nil || r.Kind != spi.HeldBy || r.Holder != first {
		t.Fatalf("Acquire = %+v, %v; want held by the first waiter %s of the queue created again", r, err, first)
	}
	queued(t, b, first, "race", spi.Granted)
}

// TestWaiterAddRacingQueueDeletion: a waiter that listed the (empty) queue and finds it gone
// when it adds its node (the server deleted it in between: here each time the waiter lists
// it) creates it again and adds its node once more, without listing it again; it was listing
// it again, finding it gone each time, and gave up.
func TestWaiterAddRacingQueueDeletion(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	c := rawClient(t, b, "")
	d, w := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, d, "gone")
	if _, err := c.CreateContainer(b.lay.queue("gone"), nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var listed atomic.Int32
	hook := func(name string) {
		if name != "gone" {
			return
		}
		listed.Add(1)
		if err := c.Delete(b.lay.queue(name), -1); err != nil {
			t.Errorf("deleting the queue: %v", err)
		}
	}
	testHookQueueListed.Store(&hook)
	defer testHookQueueListed.Store(nil)
	if r := queued(t, b, w, "gone", spi.HeldBy); r.Holder != d {
		t.Fatalf("AcquireQueued = %+v, want held by %s", r, d)
	}
	if n := listed.Load(); n != 1 {
		t.Fatalf("the waiter listed the queue %d times, want once", n)
	}
	if got := waiterNodes(t, c, b, "gone"); len(got) != 1 {
		t.Fatalf("waiter nodes = %v, want the waiter's one", got)
	}
	testHookQueueListed.Store(nil)
	if err := b.Release(testCtx(t), d, "gone", tok); err != nil {
		t.Fatal(err)
	}
	if r := queued(t, b, w, "gone", spi.Granted); r.Token <= tok {
		t.Fatalf("token %d, want above %d", r.Token, tok)
	}
}

// TestPersistentQueueOfEarlierClient: a queue node that a client of an earlier release created
// (persistent) keeps working: waiters queue in it and are served in order, and an acquire that
// finds it empty deletes it (the server would keep it: it is no container).
func TestPersistentQueueOfEarlierClient(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	c := rawClient(t, b, "")
	holder, w, late := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, holder, "old")
	qp := b.lay.queue("old")
	if _, err := c.Create(qp, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	queued(t, b, w, "old", spi.HeldBy)
	if got := waiterNodes(t, c, b, "old"); len(got) != 1 {
		t.Fatalf("waiter nodes = %v, want the waiter's one", got)
	}
	if err := b.Release(testCtx(t), holder, "old", tok); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(testCtx(t), late, "old"); err != nil || r.Kind != spi.HeldBy || r.Holder != w {
		t.Fatalf("a late comer's Acquire = %+v, %v; want held by the waiter %s", r, err, w)
	}
	r := queued(t, b, w, "old", spi.Granted)
	if err := b.Release(testCtx(t), w, "old", r.Token); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c.Exists(qp); err != nil || !ok {
		t.Fatalf("the persistent queue node is gone before an acquire found it empty (%v)", err)
	}
	if got := mustGrant(t, b, late, "old"); got <= r.Token {
		t.Fatalf("token %d, want above %d", got, r.Token)
	}
	if ok, _, err := c.Exists(qp); err != nil || ok {
		t.Fatalf("the empty persistent queue node is still there after an acquire (%v), want it deleted", err)
	}
}

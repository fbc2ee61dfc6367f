package zookeeper

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// withdrawRace is the fixture of the tests of a withdrawal racing a wait begun meanwhile: a
// holder of "n", a waiter queued behind it, and a late comer.
type withdrawRace struct {
	b                    *Backend
	ctx                  context.Context
	holder, waiter, late spi.SessionID
	tok                  int64

	replied chan withdrawRaceReply
	busy    chan struct{} // closed when the waiter's AcquireQueued waits for a request of n
}

type withdrawRaceReply struct {
	r   spi.Acquire
	err error
}

func newWithdrawRace(t *testing.T) *withdrawRace {
	b := openBackend(t, serverDSN(t, ""))
	f := &withdrawRace{b: b, ctx: testCtx(t), replied: make(chan withdrawRaceReply, 1), busy: make(chan struct{})}
	f.holder, f.waiter, f.late = openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	f.tok = mustGrant(t, b, f.holder, "n")
	queued(t, b, f.waiter, "n", spi.HeldBy)
	var once sync.Once
	busy := func(string) { once.Do(func() { close(f.busy) }) }
	testHookNameBusy.Store(&busy)
	t.Cleanup(func() { testHookNameBusy.Store(nil) })
	return f
}

// comeBack sends the waiter's AcquireQueued of n (it waits for the name again) and returns
// once it has replied or waits for a request of the name in flight.
func (f *withdrawRace) comeBack() {
	go func() {
		r, err := f.b.AcquireQueued(f.ctx, f.waiter, "n")
		f.replied <- withdrawRaceReply{r, err}
	}()
	select {
	case rep := <-f.replied: // it made or kept its node before the withdrawal was sent
		f.replied <- rep
	case <-f.busy: // it waits for the withdrawal
	}
}

// check checks that the waiter, which waits again, kept a place: its AcquireQueued was HeldBy
// the holder, it has one waiter node, and the free lease is reserved for it.
func (f *withdrawRace) check(t *testing.T) {
	t.Helper()
	rep := <-f.replied
	if rep.err != nil || rep.r.Kind != spi.HeldBy || rep.r.Holder != f.holder {
		t.Fatalf("AcquireQueued(waiter) = %+v, %v; want HeldBy the holder", rep.r, rep.err)
	}
	nodes := waiterNodes(t, rawClient(t, f.b, ""), f.b, "n")
	if len(nodes) != 1 || nodes[keys(nodes)[0]] != f.waiter {
		t.Fatalf("waiter nodes of n: %v, want one of the waiter %s", nodes, f.waiter)
	}
	if err := f.b.Release(f.ctx, f.holder, "n", f.tok); err != nil {
		t.Fatal(err)
	}
	if r, err := f.b.Acquire(f.ctx, f.late, "n"); err != nil || r.Kind != spi.HeldBy || r.Holder != f.waiter {
		t.Fatalf("late comer's Acquire = %+v, %v; want HeldBy the waiter %s", r, err, f.waiter)
	}
}

// TestRetriedWithdrawalLeavesFreshNode: a withdrawal that failed runs again after the session's
// next keep-alive, unless the session waits for the name again first. The keep-alive read the
// pending withdrawals, then sent each; an AcquireQueued of the same session and name made in
// between (the waiter came back: a new Lock) cleared the withdrawal too late and kept its
// waiter node as its place, which the retried withdrawal then deleted: the waiter, told
// HeldBy, waited on without a place, and a late comer was granted the lease it was owed when
// the holder released. The AcquireQueued is made at that instant by a hook, not by timing.
func TestRetriedWithdrawalLeavesFreshNode(t *testing.T) {
	f := newWithdrawRace(t)
	dead, cancel := context.WithCancel(f.ctx)
	cancel()
	if err := f.b.Withdraw(dead, f.waiter, "n"); err == nil {
		t.Fatal("Withdraw with a cancelled context succeeded")
	}
	retry := func(string) {
		testHookRetryWithdrawal.Store(nil)
		f.comeBack() // as the keep-alive is about to withdraw the waiter from n
	}
	testHookRetryWithdrawal.Store(&retry)
	t.Cleanup(func() { testHookRetryWithdrawal.Store(nil) })
	if ka, err := f.b.KeepAlive(f.ctx, f.waiter, nil, nil); err != nil || ka.Expired {
		t.Fatalf("KeepAlive = %+v, %v", ka, err)
	}
	f.check(t)
}

// TestAbandonedWithdrawalLeavesFreshNode: a Withdraw whose caller gave up with its delete not
// yet sent (the request runs on, on another goroutine) sent it after an AcquireQueued of the
// same session and name that came back meanwhile had kept the waiter node as its place: the
// waiter lost it, as above, and nothing withdrew again (the AcquireQueued had cleared the
// failed withdrawal). The caller gives up and the AcquireQueued is made, by a hook, just
// before the delete is sent.
func TestAbandonedWithdrawalLeavesFreshNode(t *testing.T) {
	f := newWithdrawRace(t)
	ctx, cancel := context.WithCancel(f.ctx)
	returned, sent := make(chan struct{}), make(chan struct{})
	send := func(string) {
		testHookWithdrawSend.Store(nil)
		cancel()
		<-returned // the caller has given up
		f.comeBack()
	}
	done := func(string) {
		testHookWithdrawSent.Store(nil)
		close(sent)
	}
	testHookWithdrawSend.Store(&send)
	testHookWithdrawSent.Store(&done)
	t.Cleanup(func() { testHookWithdrawSend.Store(nil); testHookWithdrawSent.Store(nil) })
	if err := f.b.Withdraw(ctx, f.waiter, "n"); err == nil {
		t.Fatal("Withdraw whose context ended succeeded")
	}
	close(returned)
	<-sent // the delete is answered
	f.check(t)
}

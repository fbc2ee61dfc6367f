package redis

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/spi"
)

// queuedReply is the outcome of an AcquireQueued made by a hook.
type queuedReply struct {
	r   spi.Acquire
	err error
}

// queueAgainAt makes, once, the AcquireQueued of sid for name that a hook of be's withdrawal
// calls for (the waiter came back for the name while its withdrawal ran), and returns the hook
// and a function that returns the AcquireQueued's reply once the Withdraw's body has ended too.
// The AcquireQueued either replies or starts waiting for the withdrawal before the hook
// returns. first runs before it, once.
func queueAgainAt(be *Backend, sid spi.SessionID, name string, first func()) (hook func(spi.SessionID, string), reply func() queuedReply) {
	got, out := make(chan queuedReply, 1), make(chan queuedReply, 1)
	waiting, ended := make(chan struct{}), make(chan struct{})
	var waitOnce, endOnce, once sync.Once
	be.withdrawHooks.waiting = func() { waitOnce.Do(func() { close(waiting) }) }
	be.withdrawHooks.ended = func(s spi.SessionID, n string) {
		if s == sid && n == name {
			endOnce.Do(func() { close(ended) })
		}
	}
	hook = func(s spi.SessionID, n string) {
		if s != sid || n != name {
			return
		}
		once.Do(func() {
			if first != nil {
				first()
			}
			go func() {
				r, err := be.AcquireQueued(context.Background(), sid, name)
				got <- queuedReply{r, err}
			}()
			select {
			case rep := <-got: // sent and answered at once
				out <- rep
			case <-waiting: // waits for the withdrawal to end
				go func() { out <- <-got }()
			}
		})
	}
	return hook, func() queuedReply {
		<-ended
		return <-out
	}
}

// TestAbandonedWithdrawKeepsNewerWaitTracked: a Withdraw whose caller gave up (ctx cancelled
// while its script was answered) goes on to its end, and there the backend forgot the
// session's wait for the name (waitSet). An AcquireQueued of the same session and name made
// in between (the waiter came back: a new Lock) made an entry the backend then forgot, so the
// session's CloseSession did not withdraw it: the lease, once free, stayed reserved for the
// closed session until the entry's expiry (up to a TTL), and a late comer was told HeldBy
// naming it. The AcquireQueued is made at that instant by a hook (answered: after the
// withdraw's reply, before its bookkeeping), not by timing. Now an AcquireQueued waits for a
// withdrawal of its session and name in flight, including one whose caller gave up.
func TestAbandonedWithdrawKeepsNewerWaitTracked(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		be := newBackend(t, newClient(t))
		holder, a, late := open(t, be, time.Minute), open(t, be, time.Minute), open(t, be, time.Minute)
		name := uniq(t, "wdafter")
		g := mustGrant(t, be, holder, name)
		queueBehind(t, be, a, name, holder)

		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		returned := make(chan error, 1)
		var gaveUp error
		hook, reply := queueAgainAt(be, a, name, func() {
			cancel() // the caller gives up as the reply comes
			gaveUp = <-returned
		})
		be.withdrawHooks.answered = hook
		go func() { returned <- be.Withdraw(wctx, a, name) }()
		rep := reply()
		if !errors.Is(gaveUp, context.Canceled) {
			t.Fatalf("Withdraw with its ctx cancelled = %v; want the caller's cancellation", gaveUp)
		}
		if rep.err != nil || rep.r.Kind != spi.HeldBy || rep.r.Holder != holder {
			t.Fatalf("AcquireQueued(a) = %+v, %v; want HeldBy the holder", rep.r, rep.err)
		}

		if err := be.Release(ctx, holder, name, g.Token); err != nil {
			t.Fatal(err)
		}
		heldByOf(t, be, late, name, a) // free, reserved for A, its first waiter
		if err := be.CloseSession(ctx, a); err != nil {
			t.Fatal(err)
		}
		if r, err := be.Acquire(ctx, late, name); err != nil || r.Kind != spi.Granted {
			t.Fatalf("a late comer's Acquire after A's close = %+v, %v; want Granted: A's close did not withdraw the wait A began "+
				"while its abandoned withdrawal ran, so the lease stays reserved for a closed session until the entry lapses (a TTL, %v)",
				r, err, time.Minute)
		}
	})
}

// TestWithdrawInFlightLeavesNewerEntry: the reverse order at the server. A Withdraw's script
// still on its way (a call whose caller gave up goes on to its end) deleted the entry of an
// AcquireQueued of the same session and name answered before it: the waiter, told HeldBy, waited
// on without a place (and without its hints), and a late comer was granted the lease it was
// owed when the holder released. The AcquireQueued is made by a hook as the withdraw is about to
// be sent. Now it waits for the withdrawal to end, so its entry is made after the deletion.
func TestWithdrawInFlightLeavesNewerEntry(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		be := newBackend(t, newClient(t))
		holder, a, late := open(t, be, time.Minute), open(t, be, time.Minute), open(t, be, time.Minute)
		name := uniq(t, "wdbefore")
		g := mustGrant(t, be, holder, name)
		queueBehind(t, be, a, name, holder)

		hook, reply := queueAgainAt(be, a, name, nil)
		be.withdrawHooks.sending = hook
		if err := be.Withdraw(ctx, a, name); err != nil {
			t.Fatal(err)
		}
		rep := reply()
		if rep.err != nil || rep.r.Kind != spi.HeldBy || rep.r.Holder != holder {
			t.Fatalf("AcquireQueued(a) = %+v, %v; want HeldBy the holder", rep.r, rep.err)
		}

		if err := be.Release(ctx, holder, name, g.Token); err != nil {
			t.Fatal(err)
		}
		// A waits again: the free lease is reserved for it.
		heldByOf(t, be, late, name, a)
	})
}

// heldByOf checks that s's Acquire of n on be is HeldBy want.
func heldByOf(t *testing.T, be *Backend, s spi.SessionID, n string, want spi.SessionID) {
	t.Helper()
	r, err := be.Acquire(context.Background(), s, n)
	if err != nil || r.Kind != spi.HeldBy || r.Holder != want {
		t.Fatalf("Acquire(%s) = %+v, %v; want HeldBy %s", n, r, err, want)
	}
}

// TestWithdrawNeverSentEndsItsWithdrawal: a Withdraw whose ctx ended before it was sent (its
// body never runs) ends its withdrawal all the same, so that a later AcquireQueued of the
// session and name does not wait for it.
func TestWithdrawNeverSentEndsItsWithdrawal(t *testing.T) {
	be := newBackend(t, standaloneClient(t))
	sid := open(t, be, time.Minute)
	name := uniq(t, "wdnever")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := be.Withdraw(ctx, sid, name); !errors.Is(err, context.Canceled) {
		t.Fatalf("Withdraw with its ctx ended = %v; want context.Canceled", err)
	}
	if n := be.withdrawing.n.Load(); n != 0 {
		t.Fatalf("%d withdrawals in flight after a Withdraw that was never sent; want 0", n)
	}
	if r, err := be.AcquireQueued(context.Background(), sid, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("AcquireQueued = %+v, %v; want Granted", r, err)
	}
}

// mustGrant has s acquire the free lease n and returns the grant, failing the test otherwise.
func mustGrant(t *testing.T, be *Backend, s spi.SessionID, n string) spi.Acquire {
	t.Helper()
	g, err := be.Acquire(context.Background(), s, n)
	if err != nil || g.Kind != spi.Granted {
		t.Fatalf("Acquire(%s) = %+v, %v; want Granted", s, g, err)
	}
	return g
}

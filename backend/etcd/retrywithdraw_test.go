package etcd

import (
	"context"
	"testing"

	"github.com/simba-go/simba/spi"
)

// TestRetriedWithdrawalLeavesFreshKey: a withdrawal that failed runs again with the session's
// next keep-alive, unless the session waits for the name again first. The keep-alive read the
// pending withdrawals, then sent each; an AcquireQueued of the same session and name made in
// between (the waiter came back: a new Lock) found the withdrawal still to run, cleared it too
// late and made its waiter key, which the retried withdrawal then deleted: the waiter, told
// HeldBy, waited on without a place, and a late comer was granted the lease it was owed when
// the holder released. The AcquireQueued is made at that instant by a hook, not by timing.
// Now the retry claims its withdrawal before sending it, and an AcquireQueued of the same
// session and name waits for a withdrawal in flight.
func TestRetriedWithdrawalLeavesFreshKey(t *testing.T) {
	f := newQueueFixture(t)
	holder, w, late := f.open(t, "holder"), f.open(t, "waiter"), f.open(t, "late")
	tok := f.acquire(t, false, holder, "n", spi.Granted).Token
	f.acquire(t, true, w, "n", spi.HeldBy)
	dead, cancel := context.WithCancel(f.ctx)
	cancel()
	if err := f.b.Withdraw(dead, w, "n"); err == nil {
		t.Fatal("Withdraw with a cancelled context succeeded")
	}

	type reply struct {
		r   spi.Acquire
		err error
	}
	replied := make(chan reply, 1)
	awaiting := make(chan struct{})
	f.b.awaiting = func() { close(awaiting) }
	f.b.beforeRetry = func(string) {
		f.b.beforeRetry = nil
		// The waiter comes back for n as the keep-alive is about to withdraw it.
		go func() {
			r, err := f.b.AcquireQueued(f.ctx, w, "n")
			replied <- reply{r, err}
		}()
		select {
		case rep := <-replied: // made its key before the retry was sent
			replied <- rep
		case <-awaiting: // waits for the retry
		}
	}
	if ka, err := f.b.KeepAlive(f.ctx, w, nil, nil); err != nil || ka.Expired {
		t.Fatalf("KeepAlive = %+v, %v", ka, err)
	}
	rep := <-replied
	if rep.err != nil || rep.r.Kind != spi.HeldBy || rep.r.Holder != holder {
		t.Fatalf("AcquireQueued(waiter) = %+v, %v; want HeldBy the holder", rep.r, rep.err)
	}
	if got := f.waiters(t, "n"); len(got) != 1 || got[w] == [2]int64{} {
		t.Fatalf("waiter keys of n: %v, want the waiter's", got)
	}
	if err := f.b.Release(f.ctx, holder, "n", tok); err != nil {
		t.Fatal(err)
	}
	if r := f.acquire(t, false, late, "n", spi.HeldBy); r.Holder != w {
		t.Fatalf("late comer's acquire: HeldBy %s, want the waiter %s", r.Holder, w)
	}
}

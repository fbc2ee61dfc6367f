package sql

import (
	"testing"

	"github.com/simba-go/simba/spi"
)

// TestRetriedWithdrawalLeavesFreshEntry: a withdrawal that failed runs again with the
// session's next keep-alive, unless the session waits for the name again first. The keep-alive
// read the pending withdrawals, then sent each; an AcquireQueued of the same session and name
// made in between (the waiter came back: a new Lock) found the withdrawal still to run, cleared
// it too late and made its entry, which the retried withdrawal then deleted: the waiter, told
// HeldBy, waited on without a place, and a late comer was granted the lease it was owed when
// the holder released. The AcquireQueued is made at that instant by a hook, not by timing.
// Now the retry claims its withdrawal before sending it and an AcquireQueued of the same
// session and name waits for a withdrawal in flight, so the entry it makes is after the
// deletion.
func TestRetriedWithdrawalLeavesFreshEntry(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b, f := failingWithdrawBackend(t, d.dsn(t))
			ctx := testCtx(t)
			name := "sessq-retry-" + unique(t)
			holder, late, waiter := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
			tok := grant(t, b, holder, name)
			queueBehind(t, b, waiter, name, holder)
			f.fail.Store(true)
			if err := b.Withdraw(ctx, waiter, name); err == nil {
				t.Fatal("Withdraw succeeded; want the cut")
			}
			f.fail.Store(false)

			type reply struct {
				r   spi.Acquire
				err error
			}
			replied := make(chan reply, 1)
			waiting := make(chan struct{})
			b.withdrawn.waiting = func() { close(waiting) }
			b.withdrawn.beforeRetry = func(n string) {
				b.withdrawn.beforeRetry = nil
				// The waiter comes back for name as the keep-alive is about to withdraw it.
				go func() {
					r, err := b.AcquireQueued(ctx, waiter, name)
					replied <- reply{r, err}
				}()
				select {
				case rep := <-replied: // made its entry before the retry was sent
					replied <- rep
				case <-waiting: // waits for the retry
				}
			}
			if ka, err := b.KeepAlive(ctx, waiter, nil, nil); err != nil || ka.Expired {
				t.Fatalf("KeepAlive(waiter) = %+v, %v", ka, err)
			}
			rep := <-replied
			if rep.err != nil || rep.r.Kind != spi.HeldBy || rep.r.Holder != holder {
				t.Fatalf("AcquireQueued(waiter) = %+v, %v; want HeldBy the holder", rep.r, rep.err)
			}
			if err := b.Release(ctx, holder, name, tok); err != nil {
				t.Fatal(err)
			}
			// The waiter waits again: the free lease is reserved for it.
			heldByOf(t, b, late, name, waiter)
		})
	}
}

package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// TestWithdrawOfFirstWaiterWakesNext is backend/sql's TestPostgresWithdrawOfFirstWaiterWakesNext
// on Redis: a free lease owed to its first waiter, which withdraws, left the next waiter
// unhinted (lua/withdraw.lua was ZREM only, no PUBLISH): told HeldBy by the first waiter with
// that entry's time left (about a TTL), its engine tried again only then. In a partition group's
// start that is a whole TTL (bench/cmd/groupstart). Now the withdraw publishes the name on the
// lease's channel when the lease was owed to the withdrawn entry, and the next waiter's backend
// hints Released. On a Cluster the withdraw's lease, waiter keys and channel share one slot.
//
// Standalone also checks that a withdraw from a held lease, and of a waiter behind a live first
// waiter, publishes nothing: the hints of one standalone server come in order, so once a later
// release of another lease (a sentinel) is hinted, a publish made by the withdraw would have
// been hinted before it. (A Cluster's nodes forward publishes in no common order.)
func TestWithdrawOfFirstWaiterWakesNext(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		standalone := t.Name() == "TestWithdrawOfFirstWaiterWakesNext/standalone"
		other := newBackend(t, newClient(t)) // the holder's and the first waiters' backend
		c, hints := hinted(t, newClient, nil)
		holder, first, third, second := open(t, other, time.Minute), open(t, other, time.Minute),
			open(t, other, time.Minute), open(t, c, time.Minute)
		name, held := uniq(t, "owed"), uniq(t, "heldw")
		sentinels := []string{uniq(t, "sentinel-a"), uniq(t, "sentinel-b")}
		toks := map[string]int64{}
		for _, n := range append([]string{name, held}, sentinels...) {
			r, err := other.Acquire(ctx, holder, n)
			if err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire(%s) = %+v, %v", n, r, err)
			}
			toks[n] = r.Token
		}
		queue := func(b *Backend, s spi.SessionID, n string, want spi.SessionID) {
			t.Helper()
			r, err := b.AcquireQueued(ctx, s, n)
			if err != nil || r.Kind != spi.HeldBy || r.Holder != want {
				t.Fatalf("AcquireQueued(%s) = %+v, %v; want HeldBy %s", n, r, err, want)
			}
		}
		queue(other, first, name, holder)
		queue(other, first, held, holder)
		queue(other, third, name, holder) // between first and second
		for _, n := range append([]string{name, held}, sentinels...) {
			queue(c, second, n, holder)
			awaitNumsub(t, c.c, wire.ReleasedChannel(n), 1)
		}
		// hintedBefore releases sentinel i and reports whether a Released hint of n came
		// before the sentinel's.
		hintedBefore := func(n string, i int) bool {
			t.Helper()
			if err := other.Release(ctx, holder, sentinels[i], toks[sentinels[i]]); err != nil {
				t.Fatal(err)
			}
			saw := false
			timeout := time.After(20 * time.Second)
			for {
				select {
				case h := <-hints:
					if h == (spi.Hint{Kind: spi.Released, Name: sentinels[i]}) {
						return saw
					}
					saw = saw || h == spi.Hint{Kind: spi.Released, Name: n}
				case <-timeout:
					t.Fatalf("no hint of %s's release", sentinels[i])
				}
			}
		}

		// A withdraw from a lease a live session holds: nothing is owed, nothing published.
		if err := other.Withdraw(ctx, first, held); err != nil {
			t.Fatal(err)
		}
		if standalone && hintedBefore(held, 0) {
			t.Fatalf("the withdraw from %q, which a live session holds, published its name", held)
		}

		if err := other.Release(ctx, holder, name, toks[name]); err != nil {
			t.Fatal(err)
		}
		awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: name})
		queue(c, second, name, first) // free, owed to first
		// A withdraw of a waiter behind first: still owed to first, nothing published.
		if err := other.Withdraw(ctx, third, name); err != nil {
			t.Fatal(err)
		}
		if standalone && hintedBefore(name, 1) {
			t.Fatalf("the withdraw of a waiter behind a live first waiter of %q published its name", name)
		}
		if err := other.Withdraw(ctx, first, name); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(20 * time.Second)
		for done := false; !done; {
			select {
			case h := <-hints:
				done = h == spi.Hint{Kind: spi.Released, Name: name}
			case <-timeout:
				t.Fatalf("first's withdraw left %q free and owed to second, but no hint came within 20 s: "+
					"second's engine tries again only at first's remaining time (about a TTL)", name)
			}
		}
		// And the attempt the hint brings is granted.
		if r, err := c.AcquireQueued(ctx, second, name); err != nil || r.Kind != spi.Granted {
			t.Fatalf("AcquireQueued after the withdraw = %+v, %v; want Granted", r, err)
		}
	})
}

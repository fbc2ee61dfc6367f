//go:build pgstart

package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// TestWithdrawOfFirstWaiterWakesNext is backend/sql's TestPostgresWithdrawOfFirstWaiterWakesNext
// on Redis (standalone): a free lease owed to its first waiter, which withdraws
// (lua/withdraw.lua: ZREM, no PUBLISH), leaves the next waiter unhinted, told HeldBy by the
// first waiter with that entry's time left (about a TTL). The hints of one standalone server
// come in order: once a later release of another lease (sentinel) is hinted, a PUBLISH made by
// the withdraw would have been hinted before it.
//
// Built only with -tags pgstart: it stands for a wire change not yet made.
func TestWithdrawOfFirstWaiterWakesNext(t *testing.T) {
	ctx := context.Background()
	other := newBackend(t, standaloneClient(t)) // the holder's and the first waiter's backend
	c, hints := hinted(t, func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }, nil)
	open := func(b *Backend) spi.SessionID {
		s, err := b.OpenSession(ctx, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.CloseSession(context.Background(), s.ID) })
		return s.ID
	}
	holder, first, second := open(other), open(other), open(c)
	id := fmt.Sprint(time.Now().UnixNano())
	name, sentinel := "owed-"+id, "sentinel-"+id
	toks := map[string]int64{}
	for _, n := range []string{name, sentinel} {
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
	for _, n := range []string{name, sentinel} {
		queue(c, second, n, holder)
		awaitNumsub(t, c.c, wire.ReleasedChannel(n), 1)
	}
	if err := other.Release(ctx, holder, name, toks[name]); err != nil {
		t.Fatal(err)
	}
	awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: name})
	queue(c, second, name, first) // free, owed to first
	if err := other.Withdraw(ctx, first, name); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(ctx, holder, sentinel, toks[sentinel]); err != nil {
		t.Fatal(err)
	}
	saw := false
	timeout := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case h := <-hints:
			saw = saw || h == spi.Hint{Kind: spi.Released, Name: name}
			done = h == spi.Hint{Kind: spi.Released, Name: sentinel}
		case <-timeout:
			t.Fatalf("no hint of %s's release", sentinel)
		}
	}
	if !saw {
		t.Fatalf("first's withdraw left %q free and owed to second, but no hint came before the later release's", name)
	}
}

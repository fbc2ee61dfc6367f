package redis

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// closeWakeBound is how long the close tests wait for the next waiter's hint: far below the
// sessions' TTL (a minute), which is how long the next waiter slept before.
const closeWakeBound = 10 * time.Second

// TestCloseOfFirstWaiterWakesNext is TestWithdrawOfFirstWaiterWakesNext with a close in place
// of the withdraw (backend/sql's TestPostgresCloseOfFirstWaiterWakesNext on Redis): session A,
// the first waiter of a free lease (reserved for it), closes without withdrawing first; B, the
// second waiter, told HeldBy naming A with A's entry's time left (about a TTL), must be hinted.
// close_session touches no waiter queue and Redis keeps no per-session set of waited names, so
// A's entry stayed, the lease reserved for a closed session until the entry's expiry, and no
// hint came (this failed on both modes). Now CloseSession withdraws the names its session
// queued for (withdraw.lua, which publishes when the lease was owed to the entry) first. A's
// backend has no Hints subscriber, so what it knows of A's waits does not come from the hub.
func TestCloseOfFirstWaiterWakesNext(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		other := newBackend(t, newClient(t)) // the holder's and A's backend: no Hints
		c, hints := hinted(t, newClient, nil)
		holder, a, b := open(t, other, time.Minute), open(t, other, time.Minute), open(t, c, time.Minute)
		name := uniq(t, "closeowed")
		r := mustGrant(t, other, holder, name)
		queueBehind(t, other, a, name, holder)
		queueBehind(t, c, b, name, holder)
		awaitNumsub(t, c.c, wire.ReleasedChannel(name), 1)
		if err := other.Release(ctx, holder, name, r.Token); err != nil {
			t.Fatal(err)
		}
		awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: name})
		queueBehind(t, c, b, name, a) // free, reserved for A

		if err := other.CloseSession(ctx, a); err != nil { // no Withdraw first
			t.Fatal(err)
		}
		if !hintWithin(hints, spi.Hint{Kind: spi.Released, Name: name}, closeWakeBound) {
			t.Fatalf("A's close left %q free and reserved for a closed session, and B got no hint within %v: "+
				"B tries again only at A's entry's expiry (about a TTL, %v)", name, closeWakeBound, time.Minute)
		}
		if r, err := c.AcquireQueued(ctx, b, name); err != nil || r.Kind != spi.Granted {
			t.Fatalf("B's AcquireQueued after A's close = %+v, %v; want Granted", r, err)
		}
	})
}

// TestCloseWithdrawFailureStillCloses: a close whose withdraw of one name fails (its waiting
// key written over with a string: WRONGTYPE) still closes the session, releases what it holds,
// withdraws its other names (the next waiter there is hinted) and says at WARN which name it
// could not withdraw from.
func TestCloseWithdrawFailureStillCloses(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		var logs testenv.LogBuffer
		admin := newClient(t)
		other := newBackend(t, newClient(t), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		c, hints := hinted(t, newClient, nil)
		holder, a, b := open(t, other, time.Minute), open(t, other, time.Minute), open(t, c, time.Minute)
		good, bad, held := uniq(t, "closegood"), uniq(t, "closebad"), uniq(t, "closeheld")
		toks := map[string]int64{}
		for _, n := range []string{good, bad} {
			r, err := other.Acquire(ctx, holder, n)
			if err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire(%s) = %+v, %v", n, r, err)
			}
			toks[n] = r.Token
			queueBehind(t, other, a, n, holder)
		}
		if r, err := other.Acquire(ctx, a, held); err != nil || r.Kind != spi.Granted {
			t.Fatalf("Acquire(%s) = %+v, %v", held, r, err)
		}
		queueBehind(t, c, b, good, holder)
		awaitNumsub(t, c.c, wire.ReleasedChannel(good), 1)
		if err := other.Release(ctx, holder, good, toks[good]); err != nil {
			t.Fatal(err)
		}
		awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: good})
		queueBehind(t, c, b, good, a)
		if err := admin.Set(ctx, wire.WaitingKey(bad), "not a zset", 0).Err(); err != nil {
			t.Fatal(err)
		}

		if err := other.CloseSession(ctx, a); err != nil {
			t.Fatalf("CloseSession with one withdraw failing = %v; want the close to succeed", err)
		}
		if !hintWithin(hints, spi.Hint{Kind: spi.Released, Name: good}, closeWakeBound) {
			t.Fatalf("no hint for %q within %v after A's close", good, closeWakeBound)
		}
		if v, err := admin.HGet(ctx, wire.LeaseKey(held), wire.LeaseFieldSession).Result(); err != goredis.Nil {
			t.Fatalf("%s's holder after the close = %q, %v; want released", held, v, err)
		}
		if n, err := admin.Exists(ctx, wire.SessionKey(string(a))).Result(); err != nil || n != 0 {
			t.Fatalf("A's session key after the close: exists %d, %v", n, err)
		}
		if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, bad) || strings.Contains(out, good) {
			t.Fatalf("the log does not name (only) %s at WARN:\n%s", bad, out)
		}
	})
}

// queueBehind queues s for n on be and checks that the reply is HeldBy want.
func queueBehind(t *testing.T, be *Backend, s spi.SessionID, n string, want spi.SessionID) {
	t.Helper()
	r, err := be.AcquireQueued(context.Background(), s, n)
	if err != nil || r.Kind != spi.HeldBy || r.Holder != want {
		t.Fatalf("AcquireQueued(%s) = %+v, %v; want HeldBy %s", n, r, err, want)
	}
}

// hintWithin reports whether want came on hints within d (others are skipped).
func hintWithin(hints <-chan spi.Hint, want spi.Hint, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case h := <-hints:
			if h == want {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

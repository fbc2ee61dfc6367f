package sql

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/spi"
)

// TestPostgresHintAfterRelisten: a release that happens while the hint listener's connection is
// cut (its NOTIFY reaches nobody here) still reaches the waiting backend as a Released hint
// once the link heals and the listener LISTENs again: the listener hints every name a session
// still waits for once its LISTENs are in on the new connection (syncListens). The waiter's
// session has a TTL of 30 s and the backend retries nothing, so only that hint can bring it
// within the test's 30 s. A guard, written for trial25's hypothesis (hand-overs lost across a
// PostgreSQL restart): it passes on the code it was written against, and fails (no hint within
// 30 s) with the catch-up hints of syncListens turned off.
func TestPostgresHintAfterRelisten(t *testing.T) {
	direct := pgDSN(t)
	dsn, p := proxyPgDSN(t, direct, map[string]string{"connect_timeout": "2"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	other := migrated(t, direct, WithHousekeepingInterval(-1))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, b)
	holder := openSession(t, other, longTTL)
	waiter := openSession(t, b, longTTL)
	name := "relisten-" + unique(t)
	tok := grant(t, other, holder, name)
	if r, err := b.Acquire(testCtx(t), waiter, name); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("Acquire = %+v, %v; want HeldBy", r, err)
	}
	waitListening(t, b) // LISTENs on name's channel (and hints it once)
	drain := time.After(200 * time.Millisecond)
	for draining := true; draining; {
		select {
		case <-hints:
		case <-drain:
			draining = false
		}
	}
	p.Set(faultproxy.Fault{Cut: true})
	if err := other.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case h := <-hints:
			if h.Kind == spi.Released && h.Name == name {
				return
			}
		case <-timeout:
			t.Fatalf("no Released hint of %s within 30 s of the heal", name)
		}
	}
}

// recordListenBackoffs makes the hint listener's retry waits 1 ms long and sends the backoff
// each was drawn from on the returned channel (dropping what does not fit), so tests count
// attempts, not time. Set it up before the backend: cleanups run last first, so the real wait
// comes back after the backend closed.
func recordListenBackoffs(t *testing.T) <-chan time.Duration {
	t.Helper()
	bounds := make(chan time.Duration, 64)
	saved := listenRetryWait
	listenRetryWait = func(backoff time.Duration) time.Duration {
		select {
		case bounds <- backoff:
		default:
		}
		return time.Millisecond
	}
	t.Cleanup(func() { listenRetryWait = saved })
	return bounds
}

// TestPostgresHintListenerBacksOffWhileDown: while the server stays unreachable the hint
// listener does not reconnect in a loop: the backoff it draws its waits from doubles from
// listenBackoffMin after each failed connect, up to a third of the shortest TTL opened (1 s
// here), and it LISTENs again once the link heals. Its waits are made 1 ms long here (their
// bounds are recorded), so the test counts attempts, not time.
func TestPostgresHintListenerBacksOffWhileDown(t *testing.T) {
	bounds := recordListenBackoffs(t)
	dsn, p := proxiedPgDSN(t, map[string]string{"connect_timeout": "2"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	openSession(t, b, 3*time.Second) // the backoff's cap: a third of the TTL
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	waitListening(t, b)
	p.Set(faultproxy.Fault{Cut: true})
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second, time.Second}
	for i, w := range want {
		select {
		case got := <-bounds:
			if got != w {
				t.Fatalf("wait %d after the cut drawn from a backoff of %v, want %v", i+1, got, w)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the listener made %d waits after the cut, want %d", i, len(want))
		}
	}
	p.Heal()
	waitListening(t, b)
}

// TestPostgresHintListenerBacksOffWhenConnectionsDie: a connection that connects, LISTENs and
// dies at once (here the proxy cuts it as soon as the listener reports listening, and lets the
// next connect through) is a failure like a failed connect: the backoff the listener's waits
// are drawn from keeps doubling. The old listener started its backoff over at 50 ms after
// every connection that got as far as listening, and so reconnected about 20 times a second
// for as long as the server accepted and dropped it. Waits are made 1 ms long (their bounds
// recorded), so the test counts attempts, not time.
func TestPostgresHintListenerBacksOffWhenConnectionsDie(t *testing.T) {
	bounds := recordListenBackoffs(t)
	dsn, p := proxiedPgDSN(t, map[string]string{"connect_timeout": "2"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	const cycles = 6
	var got []time.Duration
	for i := 0; i < cycles; i++ {
		waitListening(t, b)
		p.Set(faultproxy.Fault{Cut: true}) // the listener's connection dies...
		p.Heal()                           // ...and the next connect goes through
		select {
		case d := <-bounds:
			got = append(got, d)
		case <-time.After(30 * time.Second):
			t.Fatalf("the listener did not back off after its connection %d died", i+1)
		}
	}
	// Each connection lived for far less than the backoff (the cut follows its LISTEN at
	// once): 50, 100, 200, 400, 800 ms, 1.6 s. A cut held up past the backoff by a busy
	// machine starts it over, legitimately, so only the growth is asserted.
	if top := slices.Max(got); top < 400*time.Millisecond {
		t.Fatalf("the listener's waits after %d connections that died at once were drawn from backoffs of %v, want them doubling (to at least 400 ms)", cycles, got)
	}
	t.Logf("backoffs after connections that died at once: %v", got)
}

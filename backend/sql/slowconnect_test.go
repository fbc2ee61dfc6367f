package sql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
)

// opensUnderSlowConnects makes p hold every new connection for delay before it reaches the
// server (a server slow to set connections up), runs reset (which empties b's pool, so that
// every call needs a new connection) and opens sessions of TTL 1 s with calls of 333 ms (a
// renewal interval at that TTL), each started 50 ms after the last ended, until one succeeds
// or attempts were made. It returns the number of attempts that failed before the first
// success, or -1.
func opensUnderSlowConnects(t *testing.T, b *Backend, p *faultproxy.Proxy, reset func(), delay time.Duration, attempts int) int {
	t.Helper()
	reset()
	p.Set(faultproxy.Fault{ConnectDelay: delay})
	defer p.Heal()
	for i := range attempts {
		ctx, cancel := context.WithTimeout(testCtx(t), 333*time.Millisecond)
		s, err := b.OpenSession(ctx, "slow", time.Second)
		cancel()
		if err == nil {
			if err := b.CloseSession(testCtx(t), s.ID); err != nil {
				t.Fatal(err)
			}
			return i
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

// TestPostgresConnectsToASlowServer: a server that takes 1.5 s to set each connection up,
// against calls of 333 ms (TTL 1 s). pgxpool runs a connect apart from its call and pools it
// when it completes, but Open bounded every connect by twice its call's time (666 ms), so none
// ever completed: 0 of 20 opens succeeded in a trial at 800 ms, as in a chaos run where a
// loaded PostgreSQL served nobody for 80 s. Now one connect at a time may run longer while
// connects fail (connectPatience), and an open succeeds after a few.
func TestPostgresConnectsToASlowServer(t *testing.T) {
	dsn, p := proxiedPgDSN(t, nil) // the default connect timeout, 5 s
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	const attempts = 60 // about 23 s of calls; the patient connects reach 2.7 s after 2 s
	failed := opensUnderSlowConnects(t, b, p, func() { b.d.(*pgDialect).pool.Reset() }, 1500*time.Millisecond, attempts)
	if failed < 0 {
		t.Fatalf("no session opened in %d attempts against a server that sets connections up in 1.5 s (%d connections made)", attempts, len(p.Conns()))
	}
	t.Logf("the first open succeeded after %d failed, %d connections made", failed, len(p.Conns()))
}

// TestConnectPatience: while connects fail, one at a time gets twice the last patient one's
// bound, up to the connect timeout; a completed connect starts over.
func TestConnectPatience(t *testing.T) {
	const scaled, configured = 600 * time.Millisecond, 5 * time.Second
	var p connectPatience
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, c := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{0, scaled},                            // the first since a completed connect
		{10 * time.Millisecond, 2 * scaled},    // one failing: patient
		{20 * time.Millisecond, scaled},        // a patient one may still run
		{1300 * time.Millisecond, 4 * scaled},  // the last patient one ran out: doubled
		{4000 * time.Millisecond, 8 * scaled},  // and again
		{9000 * time.Millisecond, configured},  // capped
		{9100 * time.Millisecond, scaled},      // the capped one may still run
		{14100 * time.Millisecond, configured}, // capped again
	} {
		if got := p.bound(at(c.at), scaled, configured); got != c.want {
			t.Fatalf("at %v: bound %v, want %v", c.at, got, c.want)
		}
	}
	p.connected()
	if got := p.bound(at(14200*time.Millisecond), scaled, configured); got != scaled {
		t.Fatalf("after a completed connect: bound %v, want %v", got, scaled)
	}
	// The capped patient connect may still run: the next is not patient until it has run out.
	if got := p.bound(at(14300*time.Millisecond), scaled, configured); got != scaled {
		t.Fatalf("while a patient connect may run: bound %v, want %v", got, scaled)
	}
	if got := p.bound(at(19200*time.Millisecond), scaled, configured); got != 2*scaled {
		t.Fatalf("after it ran out: bound %v, want %v (started over)", got, 2*scaled)
	}
}

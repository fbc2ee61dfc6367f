package sql

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
)

// TestPostgresKeepAliveAfterSilentOutage: once a link that went silent (a blackhole: the open
// connections get no byte, close or reset, for good) heals, the first keep-alive succeeds. A
// call that ran out of time during the outage closes the pool's idle connections that have
// been silent since it began, so the keep-alive after the heal goes out on a new connection.
// Before, pgxpool handed each of the silenced idle connections out again without a round trip
// (it pings only one idle over a second), each failing one call at its timeout: the
// keep-alive's round trip and its retries alike, so that a client lost its session to a
// blackhole of 0.2 to 1.2 s at a TTL of 3 s after a burst of calls (5 of 10; now 0 of 10).
func TestPostgresKeepAliveAfterSilentOutage(t *testing.T) {
	dsn, p := proxyPgDSN(t, pgDSN(t), nil)
	keepAliveAfterSilentOutage(t, migrated(t, dsn, WithHousekeepingInterval(-1)), p)
}

// TestMySQLKeepAliveAfterSilentOutage is TestPostgresKeepAliveAfterSilentOutage on
// MySQL/MariaDB: database/sql too hands an idle connection out again without a round trip, and
// a client lost its session to every blackhole of 0.2 to 1.2 s at a TTL of 3 s after a burst
// of calls (10 of 10; now 0 of 10).
func TestMySQLKeepAliveAfterSilentOutage(t *testing.T) {
	dsn, p := proxyDSN(t, myDSN(t), "3306")
	keepAliveAfterSilentOutage(t, migrated(t, dsn, WithHousekeepingInterval(-1)), p)
}

// keepAliveAfterSilentOutage fills b's pool with several connections (calls at once), takes
// p's link silent, runs a keep-alive that runs out of time in it, heals the link and checks
// that the next keep-alive succeeds with every lease held.
func keepAliveAfterSilentOutage(t *testing.T, b *Backend, p *faultproxy.Proxy) {
	t.Helper()
	ctx := testCtx(t)
	s := openSession(t, b, 30*time.Second)
	names := make([]string, 8)
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i := range names {
		names[i] = fmt.Sprintf("silentpool-%s.%d", unique(t), i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Acquire(ctx, s, names[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(p.Conns()); n < 3 {
		t.Fatalf("the pool holds %d connections; the test needs several", n)
	}
	p.Set(faultproxy.Fault{Blackhole: true})
	kctx, kcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := b.KeepAlive(kctx, s, names, nil)
	kcancel()
	if err == nil {
		t.Fatal("a keep-alive through a blackhole succeeded")
	}
	p.Heal()
	kctx, kcancel = context.WithTimeout(ctx, 5*time.Second)
	ka, err := b.KeepAlive(kctx, s, names, nil)
	kcancel()
	if err != nil {
		t.Fatalf("the first keep-alive after the link healed: %v", err)
	}
	if ka.Expired || len(ka.Held) != len(names) {
		t.Fatalf("keep-alive after the heal: expired %v, %d of %d leases held", ka.Expired, len(ka.Held), len(names))
	}
	if err := b.CloseSession(ctx, s); err != nil {
		t.Fatal(err)
	}
}

package sql

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestMySQLConnectsToASlowServer: as TestPostgresConnectsToASlowServer for MySQL/MariaDB.
// database/sql connects within the call, with its context, and go-sql-driver gives the
// handshake up when that ends: no open ever succeeded (0 of 20 in a trial at a delay of
// only 500 ms). Open's connector now connects apart from the call and keeps the connection
// its call gave up on for the next.
func TestMySQLConnectsToASlowServer(t *testing.T) {
	dsn, p := proxyDSN(t, myDSN(t), "3306")
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	db := b.d.(*stdDialect).db
	reset := func() { db.SetMaxIdleConns(0); db.SetMaxIdleConns(2) } // closes the idle connections
	const attempts = 60
	failed := opensUnderSlowConnects(t, b, p, reset, 1500*time.Millisecond, attempts)
	if failed < 0 {
		t.Fatalf("no session opened in %d attempts against a server that sets connections up in 1.5 s (%d connections made)", attempts, len(p.Conns()))
	}
	t.Logf("the first open succeeded after %d failed, %d connections made", failed, len(p.Conns()))
}

// TestMySQLConnectorCloseEndsConnectsApart: the connection a call gave up on is handed to the
// next Connect; Close ends a connect still running apart from its call and closes the spare
// connections (goleak, in TestMain, finds a goroutine left behind).
func TestMySQLConnectorCloseEndsConnectsApart(t *testing.T) {
	_, cfg := myDatabase(t, "simba_sqlbe_")
	p := faultproxy.StartTest(t, cfg.Addr)
	cfg.Addr = p.Addr()
	dc, err := MySQLConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dc.(*mysqlConnector)
	giveUp := func(delay time.Duration) {
		t.Helper()
		p.Set(faultproxy.Fault{ConnectDelay: delay})
		ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
		defer cancel()
		if _, err := c.Connect(ctx); err == nil {
			t.Fatalf("a connect of 50 ms succeeded through a delay of %v", delay)
		}
	}
	spares := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.spares)
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 30 s", what)
			}
		}
	}

	// A connection set up 300 ms after its call of 50 ms gave up is the next call's.
	giveUp(300 * time.Millisecond)
	eventually("the connection its call gave up on kept", func() bool { return spares() == 1 })
	p.Heal()
	conn, err := c.Connect(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Conns()); n != 1 {
		t.Fatalf("%d connections made, want 1: the spare not handed out", n)
	}
	conn.Close()

	// A connect apart held for an hour, and a spare, when Close comes.
	giveUp(time.Hour)
	giveUp(300 * time.Millisecond)
	eventually("the second connection its call gave up on kept", func() bool { return spares() == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := spares(); n != 0 {
		t.Fatalf("%d spare connections left after Close", n)
	}
	eventually("the spare connection closed", p.Conns()[2].ClientClosed)
}

// TestPostgresHintListenerConnectsToASlowServer: once a session of TTL 1 s opened, the hint
// listener's connects are bounded by one TTL; a server that takes 1.5 s to set each
// connection up was never listened to again after the listener lost its connection (the
// pool's connects, patient, went through: sessions worked, hints had stopped for good). Its
// connects now have the pool's patience (connectPatience): 1 s, then 2 s, which reaches it.
func TestPostgresHintListenerConnectsToASlowServer(t *testing.T) {
	dsn, p := proxiedPgDSN(t, nil) // the default connect timeout, 5 s
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	openSession(t, b, time.Second)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	hub := &b.d.(*pgDialect).hub
	waitListening := func(what string) {
		t.Helper()
		select {
		case <-hub.listening:
		case <-time.After(30 * time.Second):
			t.Fatalf("the listener did not %s within 30 s (%d connections made)", what, len(p.Conns()))
		}
	}
	waitListening("connect")
	// The listener's connection closed, and every new connection held 1.5 s before it
	// reaches the server. 30 s tells "after two connects" (about 3.5 s) from never.
	before := len(p.Conns())
	p.Set(faultproxy.Fault{Cut: true})
	p.Set(faultproxy.Fault{ConnectDelay: 1500 * time.Millisecond})
	defer p.Heal()
	waitListening("reconnect to a server that sets connections up in 1.5 s")
	t.Logf("listening again after %d connections", len(p.Conns())-before)
}

// TestConnectPatienceStartsOverAfterAnyConnect: a completed connect starts the patience
// over whatever its bound, a patient one capped at the connect timeout and one started with
// no call's deadline included: the hook that tells the patience was set only on connects
// given a bound below the connect timeout.
func TestConnectPatienceStartsOverAfterAnyConnect(t *testing.T) {
	cfg, err := PostgresPoolConfig(pgDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	timeout := cfg.ConnConfig.ConnectTimeout // DefaultConnectTimeout
	call, cancel := context.WithTimeout(testCtx(t), timeout*2/5)
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{
		// A call of 2 s: scaled to 4 s, patient at twice that, capped at the connect timeout.
		{"a patient connect capped at the connect timeout", withCallDeadline(call)},
		{"a connect with no call's deadline", testCtx(t)},
	} {
		pat := &connectPatience{pending: true} // a scaled connect failed: the next is patient
		cc := cfg.ConnConfig.Copy()
		if err := patientPgConnects(cc.DialFunc, pat, nil)(c.ctx, cc); err != nil {
			t.Fatal(err)
		}
		if cc.ConnectTimeout != timeout {
			t.Fatalf("%s: bound %v, want the connect timeout %v", c.name, cc.ConnectTimeout, timeout)
		}
		conn, err := pgx.ConnectConfig(testCtx(t), cc)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		conn.Close(testCtx(t))
		pat.mu.Lock()
		pending := pat.pending
		pat.mu.Unlock()
		if pending {
			t.Errorf("%s completed, and the patience did not start over", c.name)
		}
	}
}

// tenantKey is a context key of the caller's, which a driver hook reads.
type tenantKey struct{}

// TestMySQLConnectApartKeepsTheCallersValues: a connect runs apart from its call, with the
// call's context's values (not its deadline): a dial function of the user's that reads a
// value from the context (a tracing span, a tenant's key) sees the caller's. The connect had
// a fresh context, and the dial saw nothing.
func TestMySQLConnectApartKeepsTheCallersValues(t *testing.T) {
	_, cfg := myDatabase(t, "simba_sqlbe_")
	var (
		mu   sync.Mutex
		seen []any
	)
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		seen = append(seen, ctx.Value(tenantKey{}))
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	dc, err := MySQLConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dc.(*mysqlConnector)
	defer c.Close()
	conn, err := c.Connect(context.WithValue(testCtx(t), tenantKey{}, "tenant-7"))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "tenant-7" {
		t.Fatalf("the dial saw %v as the tenant, want [tenant-7]", seen)
	}
}

package sql

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/spi"
)

// proxiedPgDSN is a DSN of the PostgreSQL test database (a schema of the test's own) through a
// fault proxy, with params added.
func proxiedPgDSN(t *testing.T, params map[string]string) (string, *faultproxy.Proxy) {
	t.Helper()
	return proxyPgDSN(t, pgDSN(t), params)
}

// proxyPgDSN is dsn through a fault proxy, with params added.
func proxyPgDSN(t *testing.T, dsn string, params map[string]string) (string, *faultproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Hostname()
	if host == "" {
		host = "127.0.0.1"
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	p := faultproxy.StartTest(t, net.JoinHostPort(host, port))
	u.Host = p.Addr()
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String(), p
}

// untilUp runs DatabaseNow with a call timeout of its own until one succeeds, for at most
// within; it returns how long that took, failing the test after within.
func untilUp(t *testing.T, b *Backend, call, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	for time.Since(start) < within {
		ctx, cancel := context.WithTimeout(testCtx(t), call)
		_, err := b.DatabaseNow(ctx)
		cancel()
		if err == nil {
			return time.Since(start)
		}
		last = err
		time.Sleep(50 * time.Millisecond) // what a call that failed at once waits before the next
	}
	t.Fatalf("no call succeeded within %v after the heal; last error: %v", within, last)
	return 0
}

// TestPostgresRecoversAfterDroppedHandshake: a connection the pool starts while the server's
// bytes are lost waits for a startup reply that never comes. Without a connect timeout it
// waited forever and held its pool slot (a trial: no session for the 60 s watched after a 3 s
// loss, pgxpool stuck in pgconn.connectOne); Open gives the pool a connect timeout when the DSN
// has none, so calls succeed again soon after the heal. The pool has one connection, so that
// one stuck connect is all it takes.
func TestPostgresRecoversAfterDroppedHandshake(t *testing.T) {
	dsn, p := proxiedPgDSN(t, map[string]string{"pool_max_conns": "1"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	// The server's bytes are lost on every connection until the heal (the sockets stay open),
	// for a second after the call: its startup reply is lost for good. A connect timeout of the
	// default 5 s frees the slot at most 5 s after the connect began.
	connectDuringFault(t, b, p, faultproxy.Fault{Down: faultproxy.Drop}, time.Second)
}

// connectDuringFault makes the one slot of b's pool (pool_max_conns=1) start a connection
// while p has fault f, which a call of 0.5 s must fail under; heals it lostFor after that call,
// and checks that calls succeed again: pgxpool makes a connection apart from the call that
// wanted it, bounded only by its connect timeout, and until that ends the pool makes no call.
// It waits up to 30 s, far beyond any bound under test on a loaded machine, which still tells
// "recovers" from "never".
func connectDuringFault(t *testing.T, b *Backend, p *faultproxy.Proxy, f faultproxy.Fault, lostFor time.Duration) {
	t.Helper()
	b.d.(*pgDialect).pool.Reset() // the next call starts a connection, during the fault
	p.Set(f)
	ctx, cancel := context.WithTimeout(testCtx(t), 500*time.Millisecond)
	_, err := b.DatabaseNow(ctx)
	cancel()
	if err == nil {
		t.Fatalf("a call succeeded under %+v", f)
	}
	time.Sleep(lostFor)
	p.Heal()
	took := untilUp(t, b, time.Second, 30*time.Second)
	t.Logf("first successful call %v after the heal", took.Round(time.Millisecond))
}

// TestPostgresBrokenConnectionFreesItsSlot: a statement cut short by its deadline on a
// connection whose bytes are lost for good (orphaned: no reply, no close) leaves pgconn
// cleaning the connection up (a cancel request, then reading until the server closes), and the
// pool keeps the connection's slot until that ends: up to 15 s in pgconn, which held every slot
// of a trial's pool for 11 s after the network healed. Open bounds that cleanup by the connect
// timeout (1 s here, the DSN's), so the next call finds the slot free soon.
func TestPostgresBrokenConnectionFreesItsSlot(t *testing.T) {
	dsn, p := proxiedPgDSN(t, map[string]string{"pool_max_conns": "1", "connect_timeout": "1"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	if _, err := b.DatabaseNow(testCtx(t)); err != nil { // one live pooled connection
		t.Fatal(err)
	}
	p.Orphan()
	// The pooled connection is used at once (no ping: idle for less than a second).
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	_, err := b.DatabaseNow(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call on the orphaned connection: %v, want a deadline exceeded", err)
	}
	// pgconn's own bound is 15 s; the connect timeout's is 1 s. 10 s tells them apart on a
	// loaded machine.
	took := untilUp(t, b, time.Second, 10*time.Second)
	t.Logf("first successful call %v after the broken one", took.Round(time.Millisecond))
}

// TestPostgresHintListenerLeavesADeadConnection: the hint listener's connection, orphaned by
// the network (no byte either way, no close), sends no notification and no error. The listener
// waited on it forever and hints stopped for good; it now pings after listenProbeEvery without
// a notification, and reconnects when the ping gets no reply within the connect timeout, and
// LISTENs again on the channel of the name its session waits for.
func TestPostgresHintListenerLeavesADeadConnection(t *testing.T) {
	saved := listenProbeEvery
	listenProbeEvery = 500 * time.Millisecond
	t.Cleanup(func() { listenProbeEvery = saved }) // after the backends close (cleanups run last first)
	direct := pgDSN(t)
	dsn, p := proxyPgDSN(t, direct, map[string]string{"connect_timeout": "1"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	other := migrated(t, direct, WithHousekeepingInterval(-1))
	heard := hearing(b)
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
			t.Fatalf("the listener did not %s within 30 s", what)
		}
	}
	waitListening("connect")
	// A session of b waits for name (before the orphaning: b's pool goes through the proxy).
	s := openSession(t, other, longTTL)
	name := "orphan-" + unique(t)
	tok := grant(t, other, s, name)
	if r, err := b.Acquire(testCtx(t), openSession(t, b, longTTL), name); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("Acquire = %+v, %v; want HeldBy", r, err)
	}
	waitListening("LISTEN on the waited name's channel")
	p.Orphan()
	// 0.5 s of silence, then a ping that times out, then a reconnection: 30 s tells that from
	// never.
	waitListening("reconnect after its connection was orphaned")
	if err := other.Release(testCtx(t), s, name, tok); err != nil {
		t.Fatal(err)
	}
	// The server's notification (the listener also hints the name once after its LISTEN).
	timeout := time.After(30 * time.Second)
	for {
		select {
		case n := <-heard:
			if n.payload == name {
				return
			}
		case <-timeout:
			t.Fatalf("no notification of %s's release after the listener reconnected", name)
		}
	}
}

// TestPostgresHintsAfterSilentOutage: a backend whose link to the server goes silent for a
// second (a blackhole: the open connections get no byte, close or reset, for good; new ones
// are taken and never answered) hears releases again soon after the link heals. Once a
// session of TTL 3 s opened, the listener pings after 500 ms without a notification, gives
// the connection up when the ping has no reply within 1 s, and connects within a TTL. With
// the default connect timeout (5 s) the old listener pinged only after listenProbeEvery
// (15 s): every release in those 20 s went unheard, and a waiter learnt of each only at its
// retry. Another backend, on a direct link, takes and releases a lease until the hint of a
// release arrives: within 10 s (about 1.5 s expected).
func TestPostgresHintsAfterSilentOutage(t *testing.T) {
	direct := pgDSN(t)
	dsn, p := proxyPgDSN(t, direct, nil)
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	other := migrated(t, direct, WithHousekeepingInterval(-1))
	heard := hearing(b)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	openSession(t, b, 3*time.Second) // paces the listener
	holder := openSession(t, other, longTTL)
	// A session of b (whose waits last two of its TTLs: a minute) waits for both names, from
	// before the outage (b's pool goes through the proxy), so that the listener LISTENs on
	// their channels, and again after its reconnect.
	waiter := openSession(t, b, longTTL)
	before, after := "before-"+unique(t), "after-"+unique(t)
	for _, name := range []string{before, after} {
		tok := grant(t, other, holder, name)
		if r, err := b.Acquire(testCtx(t), waiter, name); err != nil || r.Kind != spi.HeldBy {
			t.Fatalf("Acquire = %+v, %v; want HeldBy", r, err)
		}
		if err := other.Release(testCtx(t), holder, name, tok); err != nil {
			t.Fatal(err)
		}
	}
	// released takes and releases name on the direct link every 200 ms until the listener
	// hears the server's notification of a release of it (not only the hint it gives each name
	// once its LISTEN is in), for up to within; it reports whether it did.
	released := func(name string, within time.Duration) bool {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			tok := grant(t, other, holder, name)
			if err := other.Release(testCtx(t), holder, name, tok); err != nil {
				t.Fatal(err)
			}
			wait := time.After(200 * time.Millisecond)
			for waiting := true; waiting; {
				select {
				case n := <-heard:
					if n.payload == name {
						return true
					}
				case <-wait:
					waiting = false
				}
			}
		}
		return false
	}
	if !released(before, 30*time.Second) {
		t.Fatal("no released hint before the outage")
	}
	p.Set(faultproxy.Fault{Blackhole: true})
	time.Sleep(time.Second)
	p.Heal()
	if !released(after, 10*time.Second) {
		t.Fatal("no released hint within 10 s after a silent outage of 1 s healed")
	}
}

// proxyDSN is dsn (a URL whose host has no port: defPort) through a fault proxy.
func proxyDSN(t *testing.T, dsn, defPort string) (string, *faultproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = defPort
	}
	p := faultproxy.StartTest(t, net.JoinHostPort(u.Hostname(), port))
	u.Host = p.Addr()
	return u.String(), p
}

// TestMySQLWakerStatementOnDeadConnectionEnds: the MySQL waker's statements run with contexts
// that last as long as the waker, so one on a connection the network dropped without a word
// (no reply, no close) waited forever, and the marker (or a wait) with it. Each is now bounded
// (mysqlStmtTimeout beyond what the server may wait in it).
func TestMySQLWakerStatementOnDeadConnectionEnds(t *testing.T) {
	dsn, p := proxyDSN(t, myDSN(t), "3306")
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	w := b.waker.(*mysqlWaker)
	conn, err := w.conn(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.put(conn)
	p.Orphan()
	done := make(chan error, 1)
	go func() { done <- w.release(context.Background(), conn, "orphan-"+unique(t)) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("RELEASE_LOCK on an orphaned connection succeeded")
		}
	case <-time.After(30 * time.Second): // the bound is 5 s
		p.Close() // ends the statement (its connection closes), so that the test ends
		<-done
		t.Fatal("RELEASE_LOCK on an orphaned connection still waiting after 30 s")
	}
}

// TestOpenConnectTimeoutDefaults: Open gives a PostgreSQL pool DefaultConnectTimeout, and a
// MySQL/MariaDB configuration a dial timeout of DefaultConnectTimeout, when the DSN sets none;
// a DSN's own (0 included: no timeout) wins.
func TestOpenConnectTimeoutDefaults(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "")
	os.Unsetenv("PGCONNECT_TIMEOUT")
	for _, c := range []struct {
		dsn  string
		want time.Duration
	}{
		{"postgres://u@127.0.0.1:1/db", DefaultConnectTimeout},
		{"postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", 2 * time.Second},
		{"postgres://u@127.0.0.1:1/db?connect_timeout=0", 0},
	} {
		b, err := Open(testCtx(t), c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		got := b.d.(*pgDialect).pool.Config().ConnConfig.ConnectTimeout
		b.Close()
		if got != c.want {
			t.Errorf("%s: connect timeout %v, want %v", c.dsn, got, c.want)
		}
	}
	for _, c := range []struct {
		dsn  string
		want time.Duration
	}{
		{"mysql://u@127.0.0.1:1/db", DefaultConnectTimeout},
		{"mysql://u@127.0.0.1:1/db?timeout=2s", 2 * time.Second},
		{"mysql://u@127.0.0.1:1/db?timeout=0", 0},
	} {
		cfg, err := MySQLConfig(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Timeout != c.want {
			t.Errorf("%s: timeout %v, want %v", c.dsn, cfg.Timeout, c.want)
		}
	}
}

// TestPostgresHintsRideOutStalls: a link that stalls for a few hundred milliseconds (a server
// busy with a checkpoint's fsync, a loaded client; the bytes held, then delivered) is not taken
// for a silent one: the listener gives its ping at least minttl.MinReply (500 ms) for the
// reply. With the shortest TTL at 300 ms it pings after 50 ms without a notification, and gave
// the connection up when the ping had no reply within 100 ms, so each stall of 300 ms cost a
// reconnect (and LISTEN again); now five stalls cost none.
func TestPostgresHintsRideOutStalls(t *testing.T) {
	dsn, p := proxyPgDSN(t, pgDSN(t), nil)
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	// The TTL that paces the listener is noted as OpenSession would: no session's keep-alive
	// or acquire uses p, so any new connection is the listener's.
	b.minTTL.Note(300 * time.Millisecond)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.d.(*pgDialect).hub.listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the listener did not connect within 30 s")
	}
	if n := outagetest.Stalls(p, 5, 300*time.Millisecond); n != 0 {
		t.Fatalf("five stalls of 300 ms at TTL 300 ms: %d new connections, want none", n)
	}
}

// TestPostgresHintListenerBackOnHeal: a hint listener that backs off after its connection was
// cut tries again as soon as a session's call succeeds, not when its backoff ends: the
// backoff is made an hour long here, and the listener must LISTEN again after the link heals
// and a session opens, having waited for its backoff once (the wait the open cut short). The
// old listener slept its backoff out (up to a third of the TTL, or 5 s before any session,
// after a long outage), deaf to releases while the sessions worked again.
func TestPostgresHintListenerBackOnHeal(t *testing.T) {
	var waits atomic.Int32
	backingOff := make(chan struct{}, 1)
	saved := listenRetryWait
	listenRetryWait = func(time.Duration) time.Duration {
		waits.Add(1)
		select {
		case backingOff <- struct{}{}:
		default:
		}
		return time.Hour
	}
	t.Cleanup(func() { listenRetryWait = saved }) // after the backend closes (cleanups run last first)
	dsn, p := proxiedPgDSN(t, map[string]string{"connect_timeout": "2"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	hub := &b.d.(*pgDialect).hub
	waitFor := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("the listener did not %s within 30 s", what)
		}
	}
	waitFor(hub.listening, "connect")
	// The outage: every connection is cut, the listener's included; it backs off.
	p.Set(faultproxy.Fault{Cut: true})
	waitFor(backingOff, "back off after its connection was cut")
	if n := waits.Load(); n != 1 {
		t.Fatalf("the listener backed off %d times, want 1 (its first wait is an hour)", n)
	}
	p.Heal()
	// A session of the backend opens through the healed link (the pool's first call may meet
	// a connection the cut closed: retried).
	for {
		cctx, ccancel := context.WithTimeout(testCtx(t), 5*time.Second)
		_, err := b.OpenSession(cctx, "heal", longTTL)
		ccancel()
		if err == nil {
			break
		}
		if testCtx(t).Err() != nil {
			t.Fatalf("no session opened after the heal: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // what a call that failed at once waits before the next
	}
	waitFor(hub.listening, "LISTEN again once a session opened, an hour before its backoff ended")
	if n := waits.Load(); n != 1 {
		t.Errorf("the listener backed off %d times, want 1", n)
	}
}

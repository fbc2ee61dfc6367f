package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
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

// TestMySQLConnectorKeepAliveAfterSilentOutage is TestMySQLKeepAliveAfterSilentOutage on a
// pool of the user's own, made on MySQLConnector: a pool made on go-sql-driver's own connector
// was left as it was, and lost the session to every blackhole of 0.2 to 1.2 s at a TTL of 3 s
// after a burst of calls (10 of 10). The connections the outage silenced are discarded without
// a word from the driver: closed under it, as they were, go-sql-driver's liveness check logged
// "closing bad idle connection: ... use of closed network connection" (and two lines more) for
// each one taken from the pool after the heal.
func TestMySQLConnectorKeepAliveAfterSilentOutage(t *testing.T) {
	dsn, p := proxyDSN(t, myDSN(t), "3306")
	cfg, err := MySQLConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	logged := &driverLog{}
	cfg.Logger = logged
	conn, err := MySQLConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	b, err := NewMySQL(db, WithHousekeepingInterval(-1), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	keepAliveAfterSilentOutage(t, b, p)
	if lines := logged.all(); len(lines) > 0 {
		t.Fatalf("go-sql-driver logged %d lines, e.g. %q", len(lines), lines[0])
	}
}

// driverLog keeps what go-sql-driver logs (mysql.Logger).
type driverLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *driverLog) Print(v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(v...))
}

func (l *driverLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// TestUnstampedPoolWarns: a backend on a pool of the user's own whose connections do not note
// when they last read and wrote (pgxpool.New; sql.Open) cannot tell which of them a silent link
// left, and says so once, when a call first runs out of time, naming what gives the pool that
// (PostgresPoolConfig, MySQLConnector). Nothing said so before: such a pool lost the session to
// every blackhole of 0.2 to 1.2 s at TTL 3 s after a burst of calls, in silence.
func TestUnstampedPoolWarns(t *testing.T) {
	for _, tc := range []struct {
		dialect, want string
		backend       func(t *testing.T, dsn string, opts ...Option) *Backend
		dsn           func(t *testing.T) (string, *faultproxy.Proxy)
	}{
		{"postgres", "build the pool from PostgresPoolConfig",
			func(t *testing.T, dsn string, opts ...Option) *Backend {
				pool, err := pgxpool.New(testCtx(t), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				b, err := NewPostgres(pool, opts...)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			func(t *testing.T) (string, *faultproxy.Proxy) { return proxyPgDSN(t, pgDSN(t), nil) }},
		{"mysql", "make the pool on MySQLConnector",
			func(t *testing.T, dsn string, opts ...Option) *Backend {
				cfg, err := MySQLConfig(dsn)
				if err != nil {
					t.Fatal(err)
				}
				db := sql.OpenDB(mustConnector(t, cfg))
				t.Cleanup(func() { db.Close() })
				b, err := NewMySQL(db, opts...)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			func(t *testing.T) (string, *faultproxy.Proxy) { return proxyDSN(t, myDSN(t), "3306") }},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			dsn, p := tc.dsn(t)
			var logs testenv.LogBuffer
			b := tc.backend(t, dsn, WithHousekeepingInterval(-1), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			t.Cleanup(func() { b.Close() })
			ctx := testCtx(t)
			if err := b.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			s := openSession(t, b, 30*time.Second)
			name := "unstamped-" + unique(t)
			if _, err := b.Acquire(ctx, s, name); err != nil {
				t.Fatal(err)
			}
			p.Set(faultproxy.Fault{Blackhole: true})
			kctx, kcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err := b.KeepAlive(kctx, s, []string{name}, nil)
			kcancel()
			if err == nil {
				t.Fatal("a keep-alive through a blackhole succeeded")
			}
			p.Heal()
			if !strings.Contains(logs.String(), tc.want) {
				t.Fatalf("the backend logged %q; want a warning saying to %s", logs.String(), tc.want)
			}
		})
	}
}

// mustConnector is go-sql-driver's own connector on cfg (not MySQLConnector).
func mustConnector(t *testing.T, cfg *mysqldriver.Config) driver.Connector {
	t.Helper()
	c, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

package sql

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/internal/faultproxy"
)

// TestPostgresConnectDuringOutageFreesItsSlot: a connect started by a call of 0.5 s while the
// server's replies are lost is bounded by twice the call's time, not by the connect timeout
// (60 s here; DefaultConnectTimeout, 5 s, is longer than a short TTL's whole session), so the
// pool makes calls again soon after the network heals.
func TestPostgresConnectDuringOutageFreesItsSlot(t *testing.T) {
	dsn, p := proxiedPgDSN(t, map[string]string{"pool_max_conns": "1", "connect_timeout": "60"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	// Every byte lost, both ways (a stall would deliver the startup after the heal, and the
	// connect would end then whatever its bound). The connect is bounded by twice the 0.5 s its
	// call had: the slot is free about 1 s after the connect began, against 60 s (the DSN's
	// connect timeout) or pgxpool's 2 min (none).
	connectDuringFault(t, b, p, faultproxy.Fault{Up: faultproxy.Drop, Down: faultproxy.Drop}, 0)
}

// TestPostgresUserPoolFromPostgresPoolConfig: a pool of the user's own, built from
// PostgresPoolConfig with a DSN that sets no connect timeout, gets Open's bounds. One built
// from pgxpool.ParseConfig alone has none: its connect waits pgxpool's 2 min.
func TestPostgresUserPoolFromPostgresPoolConfig(t *testing.T) {
	dsn, p := proxiedPgDSN(t, map[string]string{"pool_max_conns": "1"})
	cfg, err := PostgresPoolConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConnConfig.ConnectTimeout != DefaultConnectTimeout {
		t.Fatalf("connect timeout %v, want %v", cfg.ConnConfig.ConnectTimeout, DefaultConnectTimeout)
	}
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the backend's Close (cleanups run last first)
	b, err := NewPostgres(pool, WithHousekeepingInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// As in TestPostgresConnectDuringOutageFreesItsSlot: bounded by twice the call's time.
	connectDuringFault(t, b, p, faultproxy.Fault{Up: faultproxy.Drop, Down: faultproxy.Drop}, 0)
}

// TestNewPostgresWarnsWithoutConnectTimeout: NewPostgres warns about a pool with no connect
// timeout, and only about such a pool.
func TestNewPostgresWarnsWithoutConnectTimeout(t *testing.T) {
	const dsn = "postgres://u@127.0.0.1:1/db?sslmode=disable"
	t.Setenv("PGCONNECT_TIMEOUT", "") // restored after the test
	os.Unsetenv("PGCONNECT_TIMEOUT")
	for _, c := range []struct {
		name string
		cfg  func() (*pgxpool.Config, error)
		warn bool
	}{
		{"pgxpool.ParseConfig", func() (*pgxpool.Config, error) { return pgxpool.ParseConfig(dsn) }, true},
		{"connect_timeout=3", func() (*pgxpool.Config, error) { return pgxpool.ParseConfig(dsn + "&connect_timeout=3") }, false},
		{"PostgresPoolConfig", func() (*pgxpool.Config, error) { return PostgresPoolConfig(dsn) }, false},
	} {
		cfg, err := c.cfg()
		if err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(testCtx(t), cfg) // no I/O: connections are made on use
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		b, err := NewPostgres(pool, WithHousekeepingInterval(-1), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		pool.Close()
		warned := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "no connect timeout")
		if warned != c.warn {
			t.Errorf("%s: warned %v, want %v; log: %q", c.name, warned, c.warn, buf.String())
		}
	}
}

package sql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestLockWaitTimeoutIsNoOutage: an acquire that waits for a lease row another transaction
// keeps locked, until the server gives up on the wait (MySQL/MariaDB 1205 after
// innodb_lock_wait_timeout, 1 s here; PostgreSQL 55P03 after lock_timeout, 500 ms here), got
// an answer from a server that is up: contention, not an outage. Its error matches
// ErrContended (and still ErrUnavailable: the Lock retries it), and the client's log has no
// WARN "simba backend error" and no "reachable again" for it, as for ZooKeeper's contended
// acquires. It had both: the outage log took every such answer for an outage of the server.
// (A deadlock victim after retryRolledBack's last attempt and a serialization failure are
// classified the same way: TestErrorClassification.)
func TestLockWaitTimeoutIsNoOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		dsn  func(t *testing.T) string
		lock string
	}{
		{"postgres", func(t *testing.T) string { return withParam(t, pgDSN(t), "lock_timeout", "500") },
			"SELECT token FROM simba_lease WHERE name = $1 FOR UPDATE"},
		{"mysql", func(t *testing.T) string { return withParam(t, myDSN(t), "innodb_lock_wait_timeout", "1") },
			"SELECT token FROM simba_lease WHERE name = ? FOR UPDATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := migrated(t, tc.dsn(t), WithHousekeepingInterval(-1))
			var logs testenv.LogBuffer
			var failed, contended, other atomic.Int32
			var otherErr atomic.Value
			c, err := simba.New(b, simba.WithOwner("contender"), simba.WithTTL(6*time.Second),
				simba.WithLogger(logs.Logger()),
				simba.WithListener(func(ev simba.Event) {
					if ev.Kind != simba.EventBackendError || ev.Err == nil {
						return
					}
					failed.Add(1)
					if errors.Is(ev.Err, simba.ErrContended) {
						contended.Add(1)
					} else {
						other.Add(1)
						otherErr.Store(ev.Err.Error())
					}
				}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Minute)
			defer cancel()
			const name = "contended.row"
			h, err := c.Lock(ctx, name) // the lease row exists from now on
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			// Another transaction locks the lease row and keeps it.
			commit := holdRowLock(t, b, tc.lock, name)
			locked := make(chan error, 1)
			go func() {
				h, err := c.Lock(ctx, name)
				if err == nil {
					err = h.Unlock(ctx)
				}
				locked <- err
			}()
			for failed.Load() < 2 {
				select {
				case err := <-locked:
					t.Fatalf("Lock returned (%v) while the lease row was locked", err)
				case <-ctx.Done():
					t.Fatalf("%d backend errors while the lease row was locked, want 2\nlog:\n%s", failed.Load(), logs.String())
				case <-time.After(10 * time.Millisecond):
				}
			}
			commit()
			if err := <-locked; err != nil {
				t.Fatalf("Lock after the row lock went: %v\nlog:\n%s", err, logs.String())
			}
			if n := other.Load(); n != 0 {
				t.Errorf("%d of %d backend errors do not match ErrContended, the last: %v", n, failed.Load(), otherErr.Load())
			}
			var loud []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "reachable again") {
					loud = append(loud, line)
				}
			}
			if len(loud) > 0 {
				t.Errorf("%d WARN/ERROR or \"reachable again\" lines after %d lock wait timeouts, want none (contention is no outage):\n%s", len(loud), failed.Load(), strings.Join(loud, "\n"))
			}
		})
	}
}

// holdRowLock begins a transaction on a connection of b's pool, runs lock (a locking read of
// the lease row name) in it, and returns the commit that ends it.
func holdRowLock(t *testing.T, b *Backend, lock, name string) (commit func()) {
	t.Helper()
	ctx := testCtx(t)
	switch d := b.d.(type) {
	case *pgDialect:
		conn, err := d.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, lock, name); err != nil {
			t.Fatal(err)
		}
		var once atomic.Bool
		commit = func() {
			if once.Swap(true) {
				return
			}
			defer conn.Release()
			if _, err := conn.Exec(context.Background(), "COMMIT"); err != nil {
				t.Error(err)
			}
		}
	case *stdDialect:
		conn, err := d.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.idleTx != "" {
			// The blocker stands for another application's transaction, not bounded by Simba's
			// idle-transaction timeout, which a connection of the pool may carry.
			if _, err := conn.ExecContext(ctx, d.idleTx, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, lock, name); err != nil {
			t.Fatal(err)
		}
		var once atomic.Bool
		commit = func() {
			if once.Swap(true) {
				return
			}
			defer conn.Close()
			if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
				t.Error(err)
			}
		}
	default:
		t.Fatalf("unknown dialect %T", b.d)
	}
	t.Cleanup(commit)
	return commit
}

// TestContendedAndReadOnlyClassification: the driver errors that prove the server answered
// but the statement lost to concurrent transactions match spi.ErrContended (and
// ErrUnavailable); a write refused by a read-only server is ErrUnavailable, not contended, and
// its message says read-only and what to check.
func TestContendedAndReadOnlyClassification(t *testing.T) {
	pg := &Backend{name: "postgres"}
	pg.d = &pgDialect{b: pg}
	my := &Backend{name: "mysql"}
	my.d = &stdDialect{b: my, classifyErr: classifyMySQL}
	check := func(what string, err error, contended, readOnly bool) {
		t.Helper()
		if !errors.Is(err, spi.ErrUnavailable) || spi.Classify(err) != spi.Retryable {
			t.Errorf("%s: %v, want retryable ErrUnavailable", what, err)
		}
		if got := errors.Is(err, spi.ErrContended); got != contended {
			t.Errorf("%s: %v matches ErrContended: %v, want %v", what, err, got, contended)
		}
		if got := strings.Contains(err.Error(), "read-only") && strings.Contains(err.Error(), "check SELECT"); got != readOnly {
			t.Errorf("%s: %v names read-only and what to check: %v, want %v", what, err, got, readOnly)
		}
	}
	for _, code := range []string{"40P01", "40001", "55P03"} {
		check("PostgreSQL "+code, pg.fail("op", pgErr(code)), true, false)
	}
	check("PostgreSQL 25006", pg.fail("op", pgErr("25006")), false, true)
	check("PostgreSQL 08006", pg.fail("op", pgErr("08006")), false, false)
	for _, num := range []uint16{1213, 1205} {
		check(fmt.Sprint("MySQL ", num), my.fail("op", myErr(num, "m")), true, false)
	}
	check("MySQL 1290", my.fail("op", myErr(1290, "The MariaDB server is running with the --read-only option so it cannot execute this statement")), false, true)
	check("MySQL 1836", my.fail("op", myErr(1836, "Running in read-only mode")), false, true)
	check("MySQL 1792", my.fail("op", myErr(1792, "Cannot execute statement in a READ ONLY transaction")), false, true)
	check("MySQL 1290 (another option)", my.fail("op", myErr(1290, "The MySQL server is running with the --skip-grant-tables option so it cannot execute this statement")), false, false)
	check("MySQL 1040", my.fail("op", myErr(1040, "Too many connections")), false, false)
}

func pgErr(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }

func myErr(num uint16, msg string) error { return &mysqldriver.MySQLError{Number: num, Message: msg} }

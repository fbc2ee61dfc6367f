package sqlcheck

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	sqlbe "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/generated/sqlc/mysql"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
)

// myDB opens the MySQL/MariaDB test server, on database dbName when it is not empty.
func myDB(t *testing.T, dbName string) *sql.DB {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatalf("bad MySQL DSN: %v", err)
	}
	if dbName != "" {
		cfg.DBName = dbName
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(testCtx(t)); err != nil {
		testenv.Unavailable(t, "MySQL/MariaDB", err.Error())
	}
	return db
}

// myConn pins one connection of db with the dialect's session setup applied.
func myConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	ctx := testCtx(t)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, st := range dialect(t, wire.SQLMySQL).SessionSetup {
		if _, err := conn.ExecContext(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// myShared returns a connection to the shared test database with the schema applied (twice).
func myShared(t *testing.T) *sql.Conn {
	t.Helper()
	conn := myConn(t, myDB(t, ""))
	ctx := testCtx(t)
	applyTwice(t, wire.SQLMySQL, func(st string) error { _, err := conn.ExecContext(ctx, st); return err })
	return conn
}

func TestMySQLMigrationAppliesTwiceOnFreshDatabase(t *testing.T) {
	t.Parallel()
	admin := myDB(t, "")
	ctx := testCtx(t)
	name := "simba_check_" + unique(t)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	conn := myConn(t, myDB(t, name))
	q := mysql.New(conn)
	if _, err := q.SchemaVersion(ctx); err == nil {
		t.Fatal("reading the schema version of an empty database succeeded")
	}
	applyTwice(t, wire.SQLMySQL, func(st string) error { _, err := conn.ExecContext(ctx, st); return err })
	v, err := q.SchemaVersion(ctx)
	if want := lastVersion("mysql"); err != nil || v != want { // every migration applied
		t.Fatalf("schema version %d, %v; want %d", v, err, lastVersion("mysql"))
	}
}

func TestMySQLEveryQueryPrepares(t *testing.T) {
	t.Parallel()
	conn := myShared(t)
	ctx := testCtx(t)
	for _, q := range generatedQueries(t, wire.SQLMySQL) {
		st, err := conn.PrepareContext(ctx, q.SQL)
		if err != nil {
			t.Errorf("%s does not prepare on MySQL/MariaDB: %v", q.Name, err)
			continue
		}
		st.Close()
	}
}

func TestMySQLOperationsNameGeneratedMethods(t *testing.T) {
	checkOperations(t, wire.SQLMySQL, reflect.TypeOf(&mysql.Queries{}))
}

func TestMySQLBehaviour(t *testing.T) {
	t.Parallel()
	myShared(t) // the schema
	behave(t, myOps(t, myDB(t, "")))
}

// TestMySQLClockIgnoresTimeZone: the now-expression and every remaining time it yields stay
// put when the connection's time zone changes.
func TestMySQLClockIgnoresTimeZone(t *testing.T) {
	t.Parallel()
	myShared(t) // the schema
	db := myDB(t, "")
	db.SetMaxOpenConns(1) // the backend runs on the connection whose time zone is set
	ctx := testCtx(t)
	o := myOps(t, db)
	sid := unique(t) + "tz"
	if err := o.open(ctx, sid, "tz", 60_000); err != nil {
		t.Fatal(err)
	}
	zones := []string{"+00:00", "+05:30", "-08:00", "+13:00", "SYSTEM"}
	// Named zones with DST need the server's time zone tables; use them when loaded.
	for _, z := range []string{"Europe/Berlin", "America/New_York"} {
		if _, err := db.ExecContext(ctx, "SET time_zone = ?", z); err == nil {
			zones = append(zones, z)
		}
	}
	start := time.Now()
	for _, z := range zones {
		if _, err := db.ExecContext(ctx, "SET time_zone = ?", z); err != nil {
			t.Fatalf("SET time_zone = %s: %v", z, err)
		}
		var got string
		if err := db.QueryRowContext(ctx, "SELECT @@session.time_zone").Scan(&got); err != nil || got != z {
			t.Fatalf("the connection's time zone is %q (%v), want %s", got, err, z)
		}
		checkClock(t, ctx, o)
		sessions, err := o.liveSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rem := sessions[sid]
		elapsed := time.Since(start).Milliseconds()
		if rem > 60_000 || rem < 60_000-elapsed-2000 {
			t.Fatalf("time zone %s: remaining %d ms after %d ms of a 60000 ms session", z, rem, elapsed)
		}
	}
	if _, err := db.ExecContext(ctx, "SET time_zone = DEFAULT"); err != nil {
		t.Fatal(err)
	}
	if err := o.closeSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
}

// myBackend is the production backend on db, with no background housekeeping.
func myBackend(t *testing.T, db *sql.DB) *sqlbe.Backend {
	t.Helper()
	b, err := sqlbe.NewMySQL(db, sqlbe.WithHousekeepingInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// dbCount runs a test-only count query on db.
func dbCount(db *sql.DB) func(ctx context.Context, query string, args ...any) (int, error) {
	return func(ctx context.Context, query string, args ...any) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, query, args...).Scan(&n)
		return n, err
	}
}

// myOps drives the production MySQL/MariaDB backend on db.
func myOps(t *testing.T, db *sql.DB) ops { return newBackendOps(myBackend(t, db), dbCount(db)) }

func TestMySQLContention(t *testing.T) {
	t.Parallel()
	myShared(t) // the schema
	db := myDB(t, "")
	be := myBackend(t, db)
	contend(t, func(t *testing.T) ops { return newBackendOps(be, dbCount(db)) }, 8, 3*time.Second)
}

func TestMySQLRenewalBeatsTakeover(t *testing.T) {
	t.Parallel()
	myShared(t) // the schema
	renewer := myConn(t, myDB(t, ""))
	d := dialect(t, wire.SQLMySQL)
	o := myOps(t, myDB(t, ""))
	renewalBeatsTakeover(t, o, func(ctx context.Context, sid string) (func(bool) error, bool, error) {
		if _, err := renewer.ExecContext(ctx, d.Begin); err != nil {
			return nil, false, err
		}
		end := func(commit bool) error {
			stmt := "ROLLBACK"
			if commit {
				stmt = "COMMIT"
			}
			_, err := renewer.ExecContext(ctx, stmt)
			return err
		}
		q := mysql.New(renewer)
		if err := q.KeepAliveRenewNoReturn(ctx, sid); err != nil {
			return nil, false, errors.Join(err, end(false))
		}
		// The renewal's own write is visible in its transaction: time left means it renewed.
		left, err := q.SessionRemaining(ctx, sid)
		if errors.Is(err, sql.ErrNoRows) {
			return end, false, nil
		}
		if err != nil {
			return nil, false, errors.Join(err, end(false))
		}
		return end, left > 0, nil
	})
}

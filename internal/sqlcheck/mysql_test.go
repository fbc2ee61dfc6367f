package sqlcheck

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

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
	if err != nil || v != wire.SQLFenceVersion { // every migration applied, the fence table's last
		t.Fatalf("schema version %d, %v; want %d", v, err, wire.SQLFenceVersion)
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
	conn := myShared(t)
	behave(t, &myOps{conn: conn, q: mysql.New(conn), d: dialect(t, wire.SQLMySQL)})
}

// TestMySQLClockIgnoresTimeZone: the now-expression and every remaining time it yields stay
// put when the connection's time zone changes.
func TestMySQLClockIgnoresTimeZone(t *testing.T) {
	t.Parallel()
	conn := myShared(t)
	ctx := testCtx(t)
	o := &myOps{conn: conn, q: mysql.New(conn), d: dialect(t, wire.SQLMySQL)}
	sid := unique(t) + "tz"
	if err := o.open(ctx, sid, "tz", 60_000); err != nil {
		t.Fatal(err)
	}
	zones := []string{"+00:00", "+05:30", "-08:00", "+13:00", "SYSTEM"}
	// Named zones with DST need the server's time zone tables; use them when loaded.
	for _, z := range []string{"Europe/Berlin", "America/New_York"} {
		if _, err := conn.ExecContext(ctx, "SET time_zone = ?", z); err == nil {
			zones = append(zones, z)
		}
	}
	start := time.Now()
	for _, z := range zones {
		if _, err := conn.ExecContext(ctx, "SET time_zone = ?", z); err != nil {
			t.Fatalf("SET time_zone = %s: %v", z, err)
		}
		checkClock(t, ctx, o)
		rem, err := o.q.SessionRemaining(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start).Milliseconds()
		if rem > 60_000 || rem < 60_000-elapsed-2000 {
			t.Fatalf("time zone %s: remaining %d ms after %d ms of a 60000 ms session", z, rem, elapsed)
		}
	}
	if _, err := conn.ExecContext(ctx, "SET time_zone = DEFAULT"); err != nil {
		t.Fatal(err)
	}
	if err := o.closeSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
}

// myOps drives the mysql package. Acquire and close run in a transaction; every reply is told
// from values read, never from affected-row counts.
type myOps struct {
	conn *sql.Conn
	q    *mysql.Queries
	d    wire.SQLDialect
}

// tx runs fn between the dialect's Begin and COMMIT (ROLLBACK on error).
func (o *myOps) tx(ctx context.Context, fn func() error) error {
	return inTx(ctx, o.conn, o.d.Begin, fn)
}

// inTx runs fn in a transaction opened with begin on conn.
func inTx(ctx context.Context, conn *sql.Conn, begin string, fn func() error) error {
	if _, err := conn.ExecContext(ctx, begin); err != nil {
		return err
	}
	if err := fn(); err != nil {
		_, rbErr := conn.ExecContext(context.Background(), "ROLLBACK")
		return errors.Join(err, rbErr)
	}
	_, err := conn.ExecContext(ctx, "COMMIT")
	return err
}

func (o *myOps) open(ctx context.Context, id, owner string, ttl int64) error {
	return o.q.OpenSession(ctx, mysql.OpenSessionParams{ID: id, Owner: owner, TtlMs: ttl})
}

func (o *myOps) acquire(ctx context.Context, sid, name string) (acquireReply, error) {
	var r acquireReply
	err := o.tx(ctx, func() error {
		mine, err := o.q.AcquireLockSession(ctx, sid)
		if errors.Is(err, sql.ErrNoRows) {
			r = acquireReply{Kind: "expired"}
			return nil
		}
		if err != nil {
			return err
		}
		if err := o.q.AcquireEnsureLease(ctx, name); err != nil {
			return err
		}
		l, err := o.q.AcquireReadLease(ctx, name)
		if err != nil {
			return err
		}
		switch {
		case l.Token < 0:
			return fmt.Errorf("%w: %s holds token %d", errCorruptToken, name, l.Token)
		case l.HolderID == sid:
			r = acquireReply{Kind: "granted", Token: l.Token, Remaining: mine}
		case l.HolderID == "" || l.HolderRemainingMs <= 0:
			if l.NextToken <= l.Token {
				return fmt.Errorf("%w: %s holds token %d", errTokenOverflow, name, l.Token)
			}
			if err := o.q.AcquireTake(ctx, mysql.AcquireTakeParams{NextToken: l.NextToken, SessionID: sid, Name: name}); err != nil {
				return err
			}
			r = acquireReply{Kind: "granted", Token: l.NextToken, Remaining: mine}
		default:
			r = acquireReply{Kind: "held", Holder: l.HolderID, Owner: l.HolderOwner, Remaining: l.HolderRemainingMs}
		}
		return nil
	})
	return r, err
}

func (o *myOps) release(ctx context.Context, sid, name string, token int64) error {
	return o.q.ReleaseNoNotify(ctx, mysql.ReleaseNoNotifyParams{SessionID: sid, Name: name, Token: token})
}

// remaining tells whether a session is live by the value session_remaining reads.
func remaining(rem int64, err error) (int64, bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return rem, rem > 0, nil
}

func (o *myOps) keepAlive(ctx context.Context, sid string, groups []string) (keepAliveReply, error) {
	if err := o.q.KeepAliveRenewNoReturn(ctx, sid); err != nil {
		return keepAliveReply{}, err
	}
	rem, live, err := remaining(o.q.SessionRemaining(ctx, sid))
	if err != nil || !live {
		return keepAliveReply{Expired: !live}, err
	}
	held, err := o.q.KeepAliveHeld(ctx, sid)
	if err != nil {
		return keepAliveReply{}, err
	}
	members, err := o.q.KeepAliveMembers(ctx, groups)
	if err != nil {
		return keepAliveReply{}, err
	}
	r := keepAliveReply{Remaining: rem, Held: map[string]int64{}, Members: map[string][]string{}}
	for _, h := range held {
		r.Held[h.Name] = h.Token
	}
	for _, m := range members {
		r.Members[m.GroupName] = append(r.Members[m.GroupName], m.SessionID)
	}
	return r, nil
}

func (o *myOps) join(ctx context.Context, sid, group string) (bool, error) {
	if err := o.q.JoinInsert(ctx, mysql.JoinInsertParams{SessionID: sid, GroupName: group}); err != nil {
		return false, err
	}
	_, live, err := remaining(o.q.SessionRemaining(ctx, sid))
	return live, err
}

func (o *myOps) leave(ctx context.Context, sid, group string) (bool, error) {
	if err := o.q.LeaveDelete(ctx, mysql.LeaveDeleteParams{SessionID: sid, GroupName: group}); err != nil {
		return false, err
	}
	_, live, err := remaining(o.q.SessionRemaining(ctx, sid))
	return live, err
}

func (o *myOps) members(ctx context.Context, group string) ([]string, error) {
	return o.q.Members(ctx, group)
}

func (o *myOps) closeSession(ctx context.Context, sid string) error {
	return o.tx(ctx, func() error {
		if err := o.q.CloseSessionRelease(ctx, sid); err != nil {
			return err
		}
		if err := o.q.CloseSessionLeave(ctx, sid); err != nil {
			return err
		}
		return o.q.CloseSessionDelete(ctx, sid)
	})
}

func (o *myOps) housekeeping(ctx context.Context) error {
	if err := o.q.HousekeepingMembers(ctx); err != nil {
		return err
	}
	return o.q.HousekeepingSessions(ctx)
}

func (o *myOps) leases(ctx context.Context) (map[string]leaseRow, error) {
	rows, err := o.q.InspectLeases(ctx)
	out := map[string]leaseRow{}
	for _, r := range rows {
		out[r.Name] = leaseRow{Holder: r.HolderID, Owner: r.Owner, Token: r.Token, Remaining: r.RemainingMs}
	}
	return out, err
}

func (o *myOps) liveSessions(ctx context.Context) (map[string]int64, error) {
	rows, err := o.q.InspectSessions(ctx)
	out := map[string]int64{}
	for _, r := range rows {
		out[r.ID] = r.RemainingMs
	}
	return out, err
}

func (o *myOps) schemaVersion(ctx context.Context) (int64, error) { return o.q.SchemaVersion(ctx) }
func (o *myOps) now(ctx context.Context) (int64, error)           { return o.q.DatabaseNow(ctx) }

func (o *myOps) sessionRows(ctx context.Context, sid string) (int, error) {
	var n int
	err := o.conn.QueryRowContext(ctx, "SELECT count(*) FROM simba_session WHERE id = ?", sid).Scan(&n)
	return n, err
}

func TestMySQLContention(t *testing.T) {
	t.Parallel()
	myShared(t) // the schema
	db := myDB(t, "")
	contend(t, func(t *testing.T) ops {
		c := myConn(t, db)
		return &myOps{conn: c, q: mysql.New(c), d: dialect(t, wire.SQLMySQL)}
	}, 8, 3*time.Second)
}

func TestMySQLRenewalBeatsTakeover(t *testing.T) {
	t.Parallel()
	conn := myShared(t)
	renewer := myConn(t, myDB(t, ""))
	d := dialect(t, wire.SQLMySQL)
	o := &myOps{conn: conn, q: mysql.New(conn), d: d}
	renewalBeatsTakeover(t, o, func(ctx context.Context, sid string) (func() error, error) {
		if _, err := renewer.ExecContext(ctx, d.Begin); err != nil {
			return nil, err
		}
		if err := mysql.New(renewer).KeepAliveRenewNoReturn(ctx, sid); err != nil {
			return nil, err
		}
		return func() error { _, err := renewer.ExecContext(ctx, "COMMIT"); return err }, nil
	})
}

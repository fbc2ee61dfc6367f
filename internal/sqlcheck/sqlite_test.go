package sqlcheck

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/simba-go/simba/generated/sqlc/sqlite"
	"github.com/simba-go/simba/generated/wire"
)

// liteConn opens a SQLite database file and pins one connection with the dialect's session
// setup applied.
func liteConn(t *testing.T, path string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := testCtx(t)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, st := range dialect(t, wire.SQLSQLite).SessionSetup {
		if _, err := conn.ExecContext(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	return conn
}

// liteFresh returns a connection to a new database file with the schema applied twice.
func liteFresh(t *testing.T) *sql.Conn {
	t.Helper()
	conn := liteConn(t, filepath.Join(t.TempDir(), "simba.db"))
	ctx := testCtx(t)
	q := sqlite.New(conn)
	if _, err := q.SchemaVersion(ctx); err == nil {
		t.Fatal("reading the schema version of an empty database succeeded")
	}
	applyTwice(t, wire.SQLSQLite, func(st string) error { _, err := conn.ExecContext(ctx, st); return err })
	v, err := q.SchemaVersion(ctx)
	if err != nil || v != wire.SQLFenceVersion { // every migration applied, the fence table's last
		t.Fatalf("schema version %d, %v; want %d", v, err, wire.SQLFenceVersion)
	}
	return conn
}

func TestSQLiteMigrationAppliesTwice(t *testing.T) {
	t.Parallel()
	liteFresh(t)
}

func TestSQLiteEveryQueryPrepares(t *testing.T) {
	t.Parallel()
	conn := liteFresh(t)
	ctx := testCtx(t)
	for _, q := range generatedQueries(t, wire.SQLSQLite) {
		st, err := conn.PrepareContext(ctx, q.SQL)
		if err != nil {
			t.Errorf("%s does not prepare on SQLite: %v", q.Name, err)
			continue
		}
		st.Close()
	}
}

func TestSQLiteOperationsNameGeneratedMethods(t *testing.T) {
	checkOperations(t, wire.SQLSQLite, reflect.TypeOf(&sqlite.Queries{}))
}

func TestSQLiteClock(t *testing.T) {
	t.Parallel()
	conn := liteFresh(t)
	checkClock(t, testCtx(t), &liteOps{conn: conn, q: sqlite.New(conn), d: dialect(t, wire.SQLSQLite)})
}

func TestSQLiteBehaviour(t *testing.T) {
	t.Parallel()
	conn := liteFresh(t)
	behave(t, &liteOps{conn: conn, q: sqlite.New(conn), d: dialect(t, wire.SQLSQLite)})
}

// liteOps drives the mysql package. Acquire and close run under BEGIN IMMEDIATE.
type liteOps struct {
	conn *sql.Conn
	q    *sqlite.Queries
	d    wire.SQLDialect
}

// tx runs fn between the dialect's Begin and COMMIT (ROLLBACK on error).
func (o *liteOps) tx(ctx context.Context, fn func() error) error {
	return inTx(ctx, o.conn, o.d.Begin, fn)
}

func (o *liteOps) open(ctx context.Context, id, owner string, ttl int64) error {
	return o.q.OpenSession(ctx, sqlite.OpenSessionParams{ID: id, Owner: owner, TtlMs: ttl})
}

func (o *liteOps) acquire(ctx context.Context, sid, name string) (acquireReply, error) {
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
			if err := o.q.AcquireTake(ctx, sqlite.AcquireTakeParams{NextToken: l.NextToken, SessionID: sid, Name: name}); err != nil {
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

func (o *liteOps) release(ctx context.Context, sid, name string, token int64) error {
	return o.q.ReleaseNoNotify(ctx, sqlite.ReleaseNoNotifyParams{SessionID: sid, Name: name, Token: token})
}

func (o *liteOps) keepAlive(ctx context.Context, sid string, groups []string) (keepAliveReply, error) {
	rem, err := o.q.KeepAliveRenew(ctx, sid)
	if errors.Is(err, sql.ErrNoRows) {
		return keepAliveReply{Expired: true}, nil
	}
	if err != nil {
		return keepAliveReply{}, err
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

func (o *liteOps) join(ctx context.Context, sid, group string) (bool, error) {
	if err := o.q.JoinInsert(ctx, sqlite.JoinInsertParams{SessionID: sid, GroupName: group}); err != nil {
		return false, err
	}
	_, live, err := remaining(o.q.SessionRemaining(ctx, sid))
	return live, err
}

func (o *liteOps) leave(ctx context.Context, sid, group string) (bool, error) {
	if err := o.q.LeaveDelete(ctx, sqlite.LeaveDeleteParams{SessionID: sid, GroupName: group}); err != nil {
		return false, err
	}
	_, live, err := remaining(o.q.SessionRemaining(ctx, sid))
	return live, err
}

func (o *liteOps) members(ctx context.Context, group string) ([]string, error) {
	return o.q.Members(ctx, group)
}

func (o *liteOps) closeSession(ctx context.Context, sid string) error {
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

func (o *liteOps) housekeeping(ctx context.Context) error {
	if err := o.q.HousekeepingMembers(ctx); err != nil {
		return err
	}
	return o.q.HousekeepingSessions(ctx)
}

func (o *liteOps) leases(ctx context.Context) (map[string]leaseRow, error) {
	rows, err := o.q.InspectLeases(ctx)
	out := map[string]leaseRow{}
	for _, r := range rows {
		out[r.Name] = leaseRow{Holder: r.HolderID, Owner: r.Owner, Token: r.Token, Remaining: r.RemainingMs}
	}
	return out, err
}

func (o *liteOps) liveSessions(ctx context.Context) (map[string]int64, error) {
	rows, err := o.q.InspectSessions(ctx)
	out := map[string]int64{}
	for _, r := range rows {
		out[r.ID] = r.RemainingMs
	}
	return out, err
}

func (o *liteOps) schemaVersion(ctx context.Context) (int64, error) { return o.q.SchemaVersion(ctx) }
func (o *liteOps) now(ctx context.Context) (int64, error)           { return o.q.DatabaseNow(ctx) }

func (o *liteOps) sessionRows(ctx context.Context, sid string) (int, error) {
	var n int
	err := o.conn.QueryRowContext(ctx, "SELECT count(*) FROM simba_session WHERE id = ?", sid).Scan(&n)
	return n, err
}

// TestSQLiteContention: several connections share one database file.
func TestSQLiteContention(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "simba.db")
	first := liteConn(t, path)
	ctx := testCtx(t)
	applyTwice(t, wire.SQLSQLite, func(st string) error { _, err := first.ExecContext(ctx, st); return err })
	contend(t, func(t *testing.T) ops {
		c := liteConn(t, path)
		return &liteOps{conn: c, q: sqlite.New(c), d: dialect(t, wire.SQLSQLite)}
	}, 6, 3*time.Second)
}

package sqlcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/generated/sqlc/postgres"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
)

// pgPool connects to the PostgreSQL test database, in schema when it is not empty, and runs the
// dialect's session setup on every connection.
func pgPool(t *testing.T, schemaName string) *pgxpool.Pool {
	t.Helper()
	dsn := testenv.Postgres(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("bad PostgreSQL DSN: %v", err)
	}
	if schemaName != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = schemaName
	}
	setup := dialect(t, wire.SQLPostgres).SessionSetup
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, st := range setup {
			if _, err := c.Exec(ctx, st); err != nil {
				return err
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(testCtx(t)); err != nil {
		testenv.Unavailable(t, "PostgreSQL", err.Error())
	}
	return pool
}

// pgFreshSchema creates an empty schema for one test and drops it afterwards.
func pgFreshSchema(t *testing.T) *pgxpool.Pool {
	t.Helper()
	admin := pgPool(t, "")
	name := "simba_check_" + unique(t)
	if _, err := admin.Exec(testCtx(t), "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return pgPool(t, name)
}

// pgShared returns a pool on the shared test database with the schema applied (twice).
func pgShared(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgPool(t, "")
	ctx := testCtx(t)
	applyTwice(t, wire.SQLPostgres, func(st string) error { _, err := pool.Exec(ctx, st); return err })
	return pool
}

func TestPostgresMigrationAppliesTwiceOnFreshSchema(t *testing.T) {
	t.Parallel()
	pool := pgFreshSchema(t)
	ctx := testCtx(t)
	applyTwice(t, wire.SQLPostgres, func(st string) error { _, err := pool.Exec(ctx, st); return err })
	v, err := postgres.New(pool).SchemaVersion(ctx)
	if err != nil || v != wire.SQLFenceVersion { // every migration applied, the fence table's last
		t.Fatalf("schema version %d, %v; want %d", v, err, wire.SQLFenceVersion)
	}
}

func TestPostgresSchemaMissingIsAnError(t *testing.T) {
	t.Parallel()
	pool := pgFreshSchema(t)
	if _, err := postgres.New(pool).SchemaVersion(testCtx(t)); err == nil {
		t.Fatal("reading the schema version of an empty schema succeeded")
	}
}

func TestPostgresEveryQueryPrepares(t *testing.T) {
	t.Parallel()
	pool := pgShared(t)
	ctx := testCtx(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range generatedQueries(t, wire.SQLPostgres) {
		if _, err := conn.Conn().Prepare(ctx, "", q.SQL); err != nil {
			t.Errorf("%s does not prepare on PostgreSQL: %v", q.Name, err)
		}
	}
}

func TestPostgresOperationsNameGeneratedMethods(t *testing.T) {
	checkOperations(t, wire.SQLPostgres, reflect.TypeOf(&postgres.Queries{}))
}

func TestPostgresClock(t *testing.T) {
	t.Parallel()
	pool := pgShared(t)
	checkClock(t, testCtx(t), &pgOps{pool: pool, q: postgres.New(pool)})
}

func TestPostgresBehaviour(t *testing.T) {
	t.Parallel()
	pool := pgShared(t)
	behave(t, &pgOps{pool: pool, q: postgres.New(pool)})
}

// TestPostgresReleaseNotifies: a release NOTIFYs the release channel with the lease name, and
// a release that does not match notifies nothing.
func TestPostgresReleaseNotifies(t *testing.T) {
	t.Parallel()
	pool := pgShared(t)
	ctx := testCtx(t)
	listener, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{wire.SQLReleaseChannel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	o := &pgOps{pool: pool, q: postgres.New(pool)}
	p := unique(t)
	sid, n := p+"s", "sqlcheck-"+p+".notify"
	if err := o.open(ctx, sid, "o", longTTL); err != nil {
		t.Fatal(err)
	}
	r, err := o.acquire(ctx, sid, n)
	if err != nil || r.Kind != "granted" {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	if err := o.release(ctx, sid, n, r.Token+1); err != nil { // wrong token: no notification
		t.Fatal(err)
	}
	if err := o.release(ctx, sid, n, r.Token); err != nil {
		t.Fatal(err)
	}
	for {
		note, err := listener.Conn().WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		if note.Channel != wire.SQLReleaseChannel {
			t.Fatalf("notification on %q", note.Channel)
		}
		if note.Payload == n {
			break
		}
		// Another parallel test's release; keep waiting for ours.
	}
	if err := o.closeSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
}

// pgOps drives the postgres package: every operation is one statement except keep-alive
// (renew, then list leases, then members) and housekeeping.
type pgOps struct {
	pool *pgxpool.Pool
	q    *postgres.Queries
}

func (o *pgOps) open(ctx context.Context, id, owner string, ttl int64) error {
	return o.q.OpenSession(ctx, postgres.OpenSessionParams{ID: id, Owner: owner, TtlMs: ttl})
}

func (o *pgOps) acquire(ctx context.Context, sid, name string) (acquireReply, error) {
	r, err := o.q.Acquire(ctx, postgres.AcquireParams{SessionID: sid, Name: name})
	switch {
	case err != nil:
		return acquireReply{}, err
	case !r.SessionLive:
		return acquireReply{Kind: "expired"}, nil
	case r.Granted:
		return acquireReply{Kind: "granted", Token: r.Token, Remaining: r.RemainingMs}, nil
	case r.StoredToken < 0:
		return acquireReply{}, fmt.Errorf("%w: %s holds token %d", errCorruptToken, name, r.StoredToken)
	case r.StoredToken == math.MaxInt64 && (r.HolderID == "" || r.RemainingMs <= 0):
		return acquireReply{}, fmt.Errorf("%w: %s holds token %d", errTokenOverflow, name, r.StoredToken)
	}
	return acquireReply{Kind: "held", Holder: r.HolderID, Owner: r.HolderOwner, Remaining: r.RemainingMs}, nil
}

func (o *pgOps) release(ctx context.Context, sid, name string, token int64) error {
	return o.q.Release(ctx, postgres.ReleaseParams{SessionID: sid, Name: name, Token: token})
}

func (o *pgOps) keepAlive(ctx context.Context, sid string, groups []string) (keepAliveReply, error) {
	rem, err := o.q.KeepAliveRenew(ctx, sid)
	if errors.Is(err, pgx.ErrNoRows) {
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

func (o *pgOps) join(ctx context.Context, sid, group string) (bool, error) {
	r, err := o.q.Join(ctx, postgres.JoinParams{SessionID: sid, GroupName: group})
	return r.SessionLive, err
}

func (o *pgOps) leave(ctx context.Context, sid, group string) (bool, error) {
	r, err := o.q.Leave(ctx, postgres.LeaveParams{SessionID: sid, GroupName: group})
	return r.SessionLive, err
}

func (o *pgOps) members(ctx context.Context, group string) ([]string, error) {
	return o.q.Members(ctx, group)
}

func (o *pgOps) closeSession(ctx context.Context, sid string) error {
	return o.q.CloseSession(ctx, sid)
}

func (o *pgOps) housekeeping(ctx context.Context) error {
	if err := o.q.HousekeepingMembers(ctx); err != nil {
		return err
	}
	return o.q.HousekeepingSessions(ctx)
}

func (o *pgOps) leases(ctx context.Context) (map[string]leaseRow, error) {
	rows, err := o.q.InspectLeases(ctx)
	out := map[string]leaseRow{}
	for _, r := range rows {
		out[r.Name] = leaseRow{Holder: r.HolderID, Owner: r.Owner, Token: r.Token, Remaining: r.RemainingMs}
	}
	return out, err
}

func (o *pgOps) liveSessions(ctx context.Context) (map[string]int64, error) {
	rows, err := o.q.InspectSessions(ctx)
	out := map[string]int64{}
	for _, r := range rows {
		out[r.ID] = r.RemainingMs
	}
	return out, err
}

func (o *pgOps) schemaVersion(ctx context.Context) (int64, error) { return o.q.SchemaVersion(ctx) }
func (o *pgOps) now(ctx context.Context) (int64, error)           { return o.q.DatabaseNow(ctx) }

func (o *pgOps) sessionRows(ctx context.Context, sid string) (int, error) {
	var n int
	err := o.pool.QueryRow(ctx, "SELECT count(*) FROM simba_session WHERE id = $1", sid).Scan(&n)
	return n, err
}

// checkOperations checks that every query generated/wire names for dialect d is a method of
// the generated Queries type, and that every operation has at least one.
func checkOperations(t *testing.T, d string, queries reflect.Type) {
	t.Helper()
	sd := dialect(t, d)
	if len(sd.Operations) == 0 {
		t.Fatalf("%s: no operations", d)
	}
	for op, spec := range sd.Operations {
		if len(spec.Queries) == 0 {
			t.Errorf("%s.%s: no queries", d, op)
		}
		for _, q := range spec.Queries {
			if _, ok := queries.MethodByName(q); !ok {
				t.Errorf("%s.%s: query %s is not a method of %v", d, op, q, queries)
			}
		}
	}
}

func TestPostgresContention(t *testing.T) {
	t.Parallel()
	pool := pgShared(t)
	contend(t, func(t *testing.T) ops { return &pgOps{pool: pool, q: postgres.New(pool)} }, 8, 3*time.Second)
}

func TestPostgresRenewalBeatsTakeover(t *testing.T) {
	t.Parallel()
	pool := pgShared(t)
	o := &pgOps{pool: pool, q: postgres.New(pool)}
	renewalBeatsTakeover(t, o, func(ctx context.Context, sid string) (func() error, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := postgres.New(tx).KeepAliveRenew(ctx, sid); err != nil {
			tx.Rollback(ctx)
			return nil, err
		}
		return func() error { return tx.Commit(ctx) }, nil
	})
}

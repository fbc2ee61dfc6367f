package sqlcheck

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	sqlbe "github.com/simba-go/simba/backend/sql"
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
	if want := lastVersion("postgres"); err != nil || v != want { // every migration applied
		t.Fatalf("schema version %d, %v; want %d", v, err, lastVersion("postgres"))
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
	checkClock(t, testCtx(t), pgOps(t, pool))
}

func TestPostgresBehaviour(t *testing.T) {
	t.Parallel()
	pool := pgShared(t)
	behave(t, pgOps(t, pool))
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
	o := pgOps(t, pool)
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
	be := pgBackend(t, pool)
	contend(t, func(t *testing.T) ops { return newBackendOps(be, pgCount(pool)) }, 8, 3*time.Second)
}

func TestPostgresRenewalBeatsTakeover(t *testing.T) {
	t.Parallel()
	pool := pgShared(t)
	o := pgOps(t, pool)
	renewalBeatsTakeover(t, o, func(ctx context.Context, sid string) (func(bool) error, bool, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, false, err
		}
		end := func(commit bool) error {
			if commit {
				return tx.Commit(ctx)
			}
			return tx.Rollback(ctx)
		}
		// The renewal returns no row when the session had already expired.
		if _, err := postgres.New(tx).KeepAliveRenew(ctx, sid); errors.Is(err, pgx.ErrNoRows) {
			return end, false, nil
		} else if err != nil {
			return nil, false, errors.Join(err, end(false))
		}
		return end, true, nil
	})
}

// pgBackend is the production backend on pool, with no background housekeeping.
func pgBackend(t *testing.T, pool *pgxpool.Pool) *sqlbe.Backend {
	t.Helper()
	b, err := sqlbe.NewPostgres(pool, sqlbe.WithHousekeepingInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// pgCount runs a test-only count query on pool ("?" placeholders).
func pgCount(pool *pgxpool.Pool) func(ctx context.Context, query string, args ...any) (int, error) {
	return func(ctx context.Context, query string, args ...any) (int, error) {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", fmt.Sprintf("$%d", i), 1)
		}
		var n int
		err := pool.QueryRow(ctx, query, args...).Scan(&n)
		return n, err
	}
}

// pgOps drives the production PostgreSQL backend on pool.
func pgOps(t *testing.T, pool *pgxpool.Pool) ops {
	return newBackendOps(pgBackend(t, pool), pgCount(pool))
}

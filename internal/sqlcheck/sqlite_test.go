package sqlcheck

import (
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	sqlbe "github.com/simba-go/simba/backend/sql"
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

// liteFreshPath returns the path of a new database file with the schema applied twice.
func liteFreshPath(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "simba.db")
	liteFreshAt(t, path)
	return path
}

// liteDB opens the database file at path.
func liteDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// liteBackend is the production backend on db, with no background housekeeping.
func liteBackend(t *testing.T, db *sql.DB) *sqlbe.Backend {
	t.Helper()
	b, err := sqlbe.NewSQLite(db, sqlbe.WithHousekeepingInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// liteOps drives the production SQLite backend on the database file at path.
func liteOps(t *testing.T, path string) ops {
	db := liteDB(t, path)
	return newBackendOps(liteBackend(t, db), dbCount(db))
}

// liteFresh returns a connection to a new database file with the schema applied twice.
func liteFresh(t *testing.T) *sql.Conn {
	t.Helper()
	return liteFreshAt(t, filepath.Join(t.TempDir(), "simba.db"))
}

// liteFreshAt applies the schema twice to the database file at path and returns a connection.
func liteFreshAt(t *testing.T, path string) *sql.Conn {
	t.Helper()
	conn := liteConn(t, path)
	ctx := testCtx(t)
	q := sqlite.New(conn)
	if _, err := q.SchemaVersion(ctx); err == nil {
		t.Fatal("reading the schema version of an empty database succeeded")
	}
	applyTwice(t, wire.SQLSQLite, func(st string) error { _, err := conn.ExecContext(ctx, st); return err })
	v, err := q.SchemaVersion(ctx)
	if want := lastVersion("sqlite"); err != nil || v != want { // every migration applied
		t.Fatalf("schema version %d, %v; want %d", v, err, lastVersion("sqlite"))
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
	checkClock(t, testCtx(t), liteOps(t, liteFreshPath(t)))
}

func TestSQLiteBehaviour(t *testing.T) {
	t.Parallel()
	behave(t, liteOps(t, liteFreshPath(t)))
}

// TestSQLiteContention: several connections share one database file.
func TestSQLiteContention(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "simba.db")
	first := liteConn(t, path)
	ctx := testCtx(t)
	applyTwice(t, wire.SQLSQLite, func(st string) error { _, err := first.ExecContext(ctx, st); return err })
	db := liteDB(t, path)
	be := liteBackend(t, db)
	contend(t, func(t *testing.T) ops { return newBackendOps(be, dbCount(db)) }, 6, 3*time.Second)
}

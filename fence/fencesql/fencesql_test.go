package fencesql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencesql"
	"github.com/simba-go/simba/fence/internal/fencetest"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/sql/schema"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func unique(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// database is one fresh database of a dialect: its Simba DSN (for backends and migrations)
// and a database/sql handle on it (for the fence and the test's own table).
type database struct {
	dialect string
	dsn     string
	db      *sql.DB
}

// bind rewrites "?" placeholders to $n on PostgreSQL.
func (d database) bind(q string) string {
	if d.dialect != "postgres" {
		return q
	}
	for i := 1; strings.Contains(q, "?"); i++ {
		q = strings.Replace(q, "?", fmt.Sprintf("$%d", i), 1)
	}
	return q
}

func postgresDB(t testing.TB) database {
	base := testenv.Postgres(t)
	ctx := testCtx(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if err := admin.PingContext(ctx); err != nil {
		testenv.Unavailable(t, "PostgreSQL", err.Error())
	}
	schema := "simba_fence_" + unique(t)
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return database{"postgres", u.String(), db}
}

func mysqlDB(t testing.TB) database {
	cfg, err := mysqldriver.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if err := admin.PingContext(ctx); err != nil {
		testenv.Unavailable(t, "MySQL/MariaDB", err.Error())
	}
	name := "simba_fence_" + unique(t)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + name}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	cfg.DBName = name
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return database{"mysql", u.String(), db}
}

func sqliteDB(t testing.TB) database {
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(20000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return database{"sqlite", "sqlite://" + path, db}
}

var dialects = []struct {
	name string
	open func(t testing.TB) database
}{
	{"postgres", postgresDB},
	{"mysql", mysqlDB},
	{"sqlite", sqliteDB},
}

// backend opens a Simba SQL backend on d, applying the migrations (0001_init and 0002_fence).
func backend(t testing.TB, d database) *simbasql.Backend {
	t.Helper()
	b, err := simbasql.Open(testCtx(t), d.dsn, simbasql.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Migrate(testCtx(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return b
}

// ledger is the test's own fenced table: one row per resource, holding the last value written.
func ledger(t testing.TB, d database) {
	t.Helper()
	if _, err := d.db.ExecContext(testCtx(t), "CREATE TABLE ledger (resource VARCHAR(128) PRIMARY KEY, value VARCHAR(255) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
}

// writer returns a fenced write of value to resource's ledger row, and a read of it.
func writer(t testing.TB, d database, f *fencesql.Fence, resource string) (fencetest.WriteFunc, fencetest.ReadFunc) {
	t.Helper()
	if _, err := d.db.ExecContext(testCtx(t), d.bind("INSERT INTO ledger (resource, value) VALUES (?, '')"), resource); err != nil {
		t.Fatal(err)
	}
	write := func(ctx context.Context, token int64, value string) error {
		return f.Write(ctx, resource, token, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, d.bind("UPDATE ledger SET value = ? WHERE resource = ?"), value, resource)
			return err
		})
	}
	read := func(ctx context.Context) (string, error) {
		var v string
		err := d.db.QueryRowContext(ctx, d.bind("SELECT value FROM ledger WHERE resource = ?"), resource).Scan(&v)
		return v, err
	}
	return write, read
}

// TestPausedHolderRejected: holder A locks a name through Simba and writes; A pauses, its
// session expires, B locks the name and writes; A's write with its old token is refused, on
// each real database.
func TestPausedHolderRejected(t *testing.T) {
	for _, dl := range dialects {
		t.Run(dl.name, func(t *testing.T) {
			d := dl.open(t)
			a, b := backend(t, d), backend(t, d)
			ledger(t, d)
			f, err := fencesql.New(d.db, d.dialect)
			if err != nil {
				t.Fatal(err)
			}
			write, read := writer(t, d, f, "invoice-42")
			_, tokenB := fencetest.PausedHolder(t, a, b, "invoice-42", write, read)
			if h, ok, err := f.Highest(testCtx(t), "invoice-42"); err != nil || !ok || h != tokenB {
				t.Fatalf("Highest = %d, %v, %v; want B's token %d", h, ok, err, tokenB)
			}
		})
	}
}

// TestInterleavedWriters: many goroutines write one resource with interleaved tokens; the
// resource ends with the highest token's value, on each real database.
func TestInterleavedWriters(t *testing.T) {
	for _, dl := range dialects {
		t.Run(dl.name, func(t *testing.T) {
			d := dl.open(t)
			backend(t, d) // migrations
			ledger(t, d)
			f, err := fencesql.New(d.db, d.dialect)
			if err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				resource := fmt.Sprintf("account-%d", round)
				write, read := writer(t, d, f, resource)
				fencetest.Interleaved(t, fencetest.Seed(t), 16, 8, write, read)
			}
		})
	}
}

// TestEqualTokenAdmitted: one holder writes many times within one term.
func TestEqualTokenAdmitted(t *testing.T) {
	d := sqliteDB(t)
	backend(t, d)
	ledger(t, d)
	f, _ := fencesql.New(d.db, "sqlite3")
	write, read := writer(t, d, f, "r")
	ctx := testCtx(t)
	for _, v := range []string{"one", "two"} {
		if err := write(ctx, 7, v); err != nil {
			t.Fatalf("write %s with token 7: %v", v, err)
		}
	}
	if v, _ := read(ctx); v != "two" {
		t.Fatalf("value %q, want two", v)
	}
	if err := write(ctx, 6, "stale"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 6 after 7: %v", err)
	}
}

// TestWriteErrorRollsBack: a failing write leaves neither its changes nor its token.
func TestWriteErrorRollsBack(t *testing.T) {
	d := sqliteDB(t)
	backend(t, d)
	f, _ := fencesql.New(d.db, "sqlite")
	boom := errors.New("boom")
	err := f.Write(testCtx(t), "r", 9, func(context.Context, *sql.Tx) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the write's error", err)
	}
	if _, ok, err := f.Highest(testCtx(t), "r"); ok || err != nil {
		t.Fatalf("a rolled-back write left a highest token (%v, %v)", ok, err)
	}
}

// TestCheckInOwnTransaction: Check fences a transaction the caller opened.
func TestCheckInOwnTransaction(t *testing.T) {
	for _, dl := range dialects {
		t.Run(dl.name, func(t *testing.T) {
			d := dl.open(t)
			backend(t, d)
			f, _ := fencesql.New(d.db, d.dialect)
			ctx := testCtx(t)
			tx, err := d.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Check(ctx, tx, "job", 10); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			tx, err = d.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var stale *fence.StaleTokenError
			if err := f.Check(ctx, tx, "job", 3); !errors.As(err, &stale) || stale.Highest != 10 || stale.Resource != "job" {
				t.Fatalf("Check with token 3 after 10: %v", err)
			}
		})
	}
}

// TestMissingTable: without migration 0002 the fence names it.
func TestMissingTable(t *testing.T) {
	for _, dl := range dialects {
		t.Run(dl.name, func(t *testing.T) {
			d := dl.open(t)
			f, _ := fencesql.New(d.db, d.dialect)
			err := f.Write(testCtx(t), "r", 1, func(context.Context, *sql.Tx) error { return nil })
			var missing *fencesql.SchemaMissingError
			if !errors.As(err, &missing) || !errors.Is(err, spi.ErrSchemaMissing) || !strings.Contains(err.Error(), "0002_fence.sql") {
				t.Fatalf("Write without the fence table: %v", err)
			}
			if err := f.CheckSchema(testCtx(t)); !errors.Is(err, spi.ErrSchemaMissing) {
				t.Fatalf("CheckSchema without the table: %v", err)
			}
			backend(t, d)
			if err := f.CheckSchema(testCtx(t)); err != nil {
				t.Fatalf("CheckSchema after migrating: %v", err)
			}
		})
	}
}

// TestInvalidInput: bad resources, tokens and dialects fail before any I/O.
func TestInvalidInput(t *testing.T) {
	if _, err := fencesql.New(&sql.DB{}, "oracle"); !errors.Is(err, spi.ErrInvalidOption) {
		t.Fatalf("New(oracle): %v", err)
	}
	f, err := fencesql.New(&sql.DB{}, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"", "a b", "{x}", strings.Repeat("x", 129), "é"} {
		if err := f.Write(context.Background(), r, 1, nil); !errors.Is(err, fence.ErrInvalidResource) {
			t.Errorf("resource %q: %v", r, err)
		}
	}
	if err := f.Write(context.Background(), "r", -1, nil); !errors.Is(err, fence.ErrInvalidResource) {
		t.Errorf("token -1: %v", err)
	}
}

// TestLeaseSchemaWithoutFence: a database with only the lease schema (0001_init, 0003_waiters)
// keeps working with the lease backend — the fence migration is not required by it — while the
// fence names the migration it lacks.
func TestLeaseSchemaWithoutFence(t *testing.T) {
	for _, dl := range dialects {
		t.Run(dl.name, func(t *testing.T) {
			d := dl.open(t)
			ctx := testCtx(t)
			ms := schema.Migrations(d.dialect)
			if len(ms) < 2 || ms[len(ms)-1].Version < schema.LatestVersion || !slices.ContainsFunc(ms, func(m schema.Migration) bool { return m.Version == schema.FenceVersion }) {
				t.Fatalf("migrations %+v: want the lease schema up to %d and the fence at %d", ms, schema.LatestVersion, schema.FenceVersion)
			}
			for _, m := range ms {
				if m.Version == schema.FenceVersion {
					continue // every migration but the fence's
				}
				for _, st := range m.Statements {
					if _, err := d.db.ExecContext(ctx, st); err != nil {
						t.Fatalf("%s: %v", st, err)
					}
				}
			}
			b, err := simbasql.Open(ctx, d.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.CheckSchema(ctx); err != nil {
				t.Fatalf("the lease backend on a database without the fence table: %v", err)
			}
			if _, err := b.OpenSession(ctx, "o", time.Minute); err != nil {
				t.Fatalf("OpenSession without the fence table: %v", err)
			}
			f, _ := fencesql.New(d.db, d.dialect)
			err = f.Write(ctx, "r", 1, func(context.Context, *sql.Tx) error { return nil })
			var missing *fencesql.SchemaMissingError
			if !errors.As(err, &missing) || missing.Migration != d.dialect+"/0002_fence.sql" {
				t.Fatalf("fence without its table: %v", err)
			}
			// Apply the migration the error names (Migrate applies only versions above the
			// database's, 3 here, as the migrations are meant to be applied in order).
			for _, m := range ms {
				if m.Path != missing.Migration {
					continue
				}
				for _, st := range m.Statements {
					if _, err := d.db.ExecContext(ctx, st); err != nil {
						t.Fatalf("%s: %v", st, err)
					}
				}
			}
			if err := f.Write(ctx, "r", 1, func(context.Context, *sql.Tx) error { return nil }); err != nil {
				t.Fatalf("fence after applying %s: %v", missing.Migration, err)
			}
		})
	}
}

// TestHostileTokensRefused: with Verify = fence.LeaseVerifier on the lease backend of the same
// database, tokens the lease never granted (the int64 maximum, another lease's) write nothing
// and leave simba_fence alone, so the holders after them are not locked out — on each real
// database.
func TestHostileTokensRefused(t *testing.T) {
	for _, dl := range dialects {
		t.Run(dl.name, func(t *testing.T) {
			d := dl.open(t)
			b := backend(t, d)
			ledger(t, d)
			f, err := fencesql.New(d.db, d.dialect)
			if err != nil {
				t.Fatal(err)
			}
			f.Verify = fence.LeaseVerifier(b, nil)
			write, read := writer(t, d, f, "invoice-42")
			fencetest.HostileTokens(t, b, "invoice-42", write, read)
		})
	}
}

// TestCheckVerifies: Check, on the caller's own transaction, asks Verify about a token that
// would raise the highest and returns its refusal, and asks nothing for the holder's token.
func TestCheckVerifies(t *testing.T) {
	d := sqliteDB(t)
	backend(t, d)
	f, err := fencesql.New(d.db, d.dialect)
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	f.Verify = func(ctx context.Context, resource string, token int64) error {
		calls++
		if token != 5 {
			return &fence.UnverifiedTokenError{Resource: resource, Lease: resource, Token: token}
		}
		return nil
	}
	ctx := testCtx(t)
	check := func(token int64) error {
		tx, err := d.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Check(ctx, tx, "r", token); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	if err := check(9); !errors.Is(err, fence.ErrUnverifiedToken) {
		t.Fatalf("Check(9) = %v, want fence.ErrUnverifiedToken", err)
	}
	if _, ok, err := f.Highest(ctx, "r"); err != nil || ok {
		t.Fatalf("Highest after a refused token: ok=%v, %v; want none", ok, err)
	}
	for range 3 {
		if err := check(5); err != nil {
			t.Fatal(err)
		}
	}
	if err := check(4); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("Check(4) = %v, want fence.ErrStaleToken", err)
	}
	if calls != 2 {
		t.Fatalf("Verify called %d times, want 2 (token 9, then token 5 once)", calls)
	}
}

// TestForgedLowerFenceRow: a simba_fence row written over with a token lower than the highest
// it had seen (by hand, a restored backup) cannot be told from a resource that saw only that
// token: the row is the fence's whole memory of the resource. Without Verify, a stale holder's
// token above the forged value is admitted, once (its write raises the row again, and the
// current holder's next write raises it past). With Verify = fence.LeaseVerifier the stale
// token is above the row, so it is checked with the lease service first, and refused
// (ErrUnverifiedToken): the current holder's token is the lease's, and admitted. Pins both,
// on each real database. On SQLite the forged value may also be one no BIGINT holds (a text
// or a blob, which SQLite compares above every number, or a real): see
// TestForgedNonIntegerFenceRow.
func TestForgedLowerFenceRow(t *testing.T) {
	for _, dl := range dialects {
		t.Run(dl.name, func(t *testing.T) {
			d := dl.open(t)
			b := backend(t, d)
			ledger(t, d)
			ctx := testCtx(t)
			const name = "invoice-42"
			tokenA, tokenB := staleAndCurrent(t, d, b, name)
			verified, err := fencesql.New(d.db, d.dialect)
			if err != nil {
				t.Fatal(err)
			}
			verified.Verify = fence.LeaseVerifier(b, nil)
			plain, _ := fencesql.New(d.db, d.dialect)
			write, read := writer(t, d, verified, name)
			if err := write(ctx, tokenB, "B"); err != nil {
				t.Fatalf("B's write: %v", err)
			}
			forge := func() {
				t.Helper()
				if _, err := d.db.ExecContext(ctx, d.bind("UPDATE simba_fence SET token = 1 WHERE resource = ?"), name); err != nil {
					t.Fatal(err)
				}
			}
			forge()
			if err := write(ctx, tokenA, "A"); !errors.Is(err, fence.ErrUnverifiedToken) {
				t.Errorf("with Verify, the stale token %d after the row was forged to 1: %v; want ErrUnverifiedToken", tokenA, err)
			}
			if v, err := read(ctx); err != nil || v != "B" {
				t.Errorf("ledger = %q, %v; want B's", v, err)
			}
			if err := write(ctx, tokenB, "B2"); err != nil {
				t.Errorf("with Verify, the current token after the forgery: %v", err)
			}
			if h, ok, err := verified.Highest(ctx, name); err != nil || !ok || h != tokenB {
				t.Errorf("Highest = %d, %v, %v; want %d", h, ok, err, tokenB)
			}

			forge()
			err = plain.Write(ctx, name, tokenA, func(ctx context.Context, tx *sql.Tx) error { return nil })
			if err != nil {
				t.Errorf("without Verify, the stale token %d above the forged row: %v; the row is the fence's only memory, so it is admitted", tokenA, err)
			}
			if err := plain.Write(ctx, name, tokenB, func(ctx context.Context, tx *sql.Tx) error { return nil }); err != nil {
				t.Errorf("the current token after it: %v", err)
			}
			if err := plain.Write(ctx, name, tokenA, func(ctx context.Context, tx *sql.Tx) error { return nil }); !errors.Is(err, fence.ErrStaleToken) {
				t.Errorf("the stale token once the current one wrote again: %v; want ErrStaleToken", err)
			}
		})
	}
}

// staleAndCurrent makes two tenures of name on b: A's (its session then expired by hand) and
// B's, which holds the lease when it returns; their tokens, A's below B's.
func staleAndCurrent(t *testing.T, d database, b *simbasql.Backend, name string) (tokenA, tokenB int64) {
	t.Helper()
	ctx := testCtx(t)
	sa, err := b.OpenSession(ctx, "holder-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := b.Acquire(ctx, sa.ID, name)
	if err != nil || ra.Kind != spi.Granted {
		t.Fatalf("A's Acquire = %+v, %v", ra, err)
	}
	if _, err := d.db.ExecContext(ctx, d.bind("UPDATE simba_session SET expiry_ms = 0 WHERE id = ?"), string(sa.ID)); err != nil {
		t.Fatal(err)
	}
	sb, err := b.OpenSession(ctx, "holder-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Acquire(ctx, sb.ID, name)
	if err != nil || rb.Kind != spi.Granted || rb.Token <= ra.Token {
		t.Fatalf("B's Acquire = %+v, %v (A's token %d)", rb, err, ra.Token)
	}
	return ra.Token, rb.Token
}

// TestForgedNonIntegerFenceRow: on SQLite, which keeps any value in any column, a simba_fence
// row whose token another program set to a text or a blob (compared above every number by
// MAX, read as 0 by the CAST) admitted every write, a stale holder's included, for as long as
// the row stayed so. Such a row is corrupt and now reads as the int64 maximum: every write is
// refused as stale and the row is left as it is (fail closed, as a real such as 1e300 already
// was), with or without Verify.
func TestForgedNonIntegerFenceRow(t *testing.T) {
	for _, v := range []struct{ name, sql string }{{"text", "'x'"}, {"blob", "x'ff'"}, {"real", "1e300"}} {
		t.Run(v.name, func(t *testing.T) {
			d := sqliteDB(t)
			b := backend(t, d)
			ledger(t, d)
			ctx := testCtx(t)
			const name = "invoice-42"
			tokenA, tokenB := staleAndCurrent(t, d, b, name)
			f, err := fencesql.New(d.db, d.dialect)
			if err != nil {
				t.Fatal(err)
			}
			write, read := writer(t, d, f, name)
			if err := write(ctx, tokenB, "B"); err != nil {
				t.Fatalf("B's write: %v", err)
			}
			if _, err := d.db.ExecContext(ctx, "UPDATE simba_fence SET token = "+v.sql+" WHERE resource = ?", name); err != nil {
				t.Fatal(err)
			}
			for _, verify := range []bool{false, true} {
				f.Verify = nil
				if verify {
					f.Verify = fence.LeaseVerifier(b, nil)
				}
				for _, tok := range []int64{tokenA, tokenB} {
					var stale *fence.StaleTokenError
					if err := write(ctx, tok, "after"); !errors.As(err, &stale) || stale.Highest != math.MaxInt64 {
						t.Errorf("verify %v: write with token %d on a %s row: %v; want ErrStaleToken, highest the int64 maximum", verify, tok, v.name, err)
					}
				}
			}
			if v, err := read(ctx); err != nil || v != "B" {
				t.Errorf("ledger = %q, %v; want B's", v, err)
			}
			var typ string
			if err := d.db.QueryRowContext(ctx, "SELECT typeof(token) FROM simba_fence WHERE resource = ?", name).Scan(&typ); err != nil || typ == "integer" {
				t.Errorf("the row's token is now of type %q (%v); want it left as written", typ, err)
			}
		})
	}
}

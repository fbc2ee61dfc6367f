package sql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

func TestMain(m *testing.M) {
	if child() || wakeChild() || gateChild() || migrateChild() || idleChild() || writerChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

// testCtx returns a context that ends with the test (or after two minutes).
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// unique returns a fresh lowercase-hex string, for names no other test uses.
func unique(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// pgDSN returns a DSN of the PostgreSQL test database whose search_path is a fresh schema,
// created for the test and dropped after it (parallel tests of other packages share the
// database's public schema).
func pgDSN(t testing.TB) string {
	t.Helper()
	base := testenv.Postgres(t)
	ctx := testCtx(t)
	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatalf("bad PostgreSQL DSN: %v", err)
	}
	t.Cleanup(admin.Close)
	if err := admin.Ping(ctx); err != nil {
		testenv.Unavailable(t, "PostgreSQL", err.Error())
	}
	name := "simba_sqlbe_" + unique(t)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return withParam(t, base, "search_path", name)
}

func withParam(t testing.TB, dsn, k, v string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

// myDSN returns a mysql:// DSN of a fresh database on the MySQL/MariaDB test server, created for
// the test and dropped after it.
func myDSN(t testing.TB) string {
	t.Helper()
	dsn, _ := myDatabase(t, "simba_sqlbe_")
	return dsn
}

// myDatabase creates a database prefix<random> on the MySQL/MariaDB test server, dropped when the
// test ends, and returns its mysql:// DSN and its go-sql-driver configuration.
func myDatabase(t testing.TB, prefix string) (string, *mysqldriver.Config) {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatalf("bad MySQL DSN: %v", err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx := testCtx(t)
	if err := admin.PingContext(ctx); err != nil {
		testenv.Unavailable(t, "MySQL/MariaDB", err.Error())
	}
	name := prefix + unique(t)
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
	return u.String(), cfg
}

// liteDSN returns a sqlite:// DSN of a new file in a temporary directory.
func liteDSN(t testing.TB) string {
	t.Helper()
	return "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
}

// dialects are the three dialects with the DSN maker of each.
var dialects = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{"postgres", pgDSN},
	{"mysql", myDSN},
	{"sqlite", liteDSN},
}

// open opens a backend on dsn, closed when the test ends.
func open(t testing.TB, dsn string, opts ...Option) *Backend {
	t.Helper()
	b, err := Open(testCtx(t), dsn, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dsnutil.Redact(dsn), err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// migrated opens a backend on dsn and applies the schema.
func migrated(t testing.TB, dsn string, opts ...Option) *Backend {
	t.Helper()
	b := open(t, dsn, opts...)
	if err := b.Migrate(testCtx(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return b
}

// exec runs test-only SQL through the backend's pool (placeholders written "?": rewritten to
// $n on PostgreSQL).
func exec(t testing.TB, b *Backend, query string, args ...any) {
	t.Helper()
	ctx := testCtx(t)
	switch d := b.d.(type) {
	case *pgDialect:
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", fmt.Sprintf("$%d", i), 1)
		}
		if _, err := d.pool.Exec(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	case *stdDialect:
		if _, err := d.db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	default:
		t.Fatalf("unknown dialect %T", b.d)
	}
}

// expire makes a session expire now by the database clock (test-only SQL: sets its expiry to
// the database's now minus one millisecond).
func expire(t testing.TB, b *Backend, id spi.SessionID) {
	t.Helper()
	now, err := b.DatabaseNow(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	exec(t, b, "UPDATE simba_session SET expiry_ms = ? WHERE id = ?", now-1, string(id))
}

// startChild starts this test binary with env added (the variable that makes TestMain run a
// child's part), with pipes to its stdin and from its stdout.
func startChild(t testing.TB, env ...string) (*osexec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, stdout
}

// Command sqlcvet runs `sqlc vet` over sql/sqlc-vet.yaml (generated from spec/sql.yaml) with
// sqlc's db-prepare rule: every generated statement must prepare on a real server of its
// dialect. It first loads each dialect's migrations into a scratch place of its own (the
// PostgreSQL schema and the MySQL/MariaDB database named scratch below; SQLite in memory,
// which sqlc loads itself), re-created on every run so that a changed table definition is
// seen, and holds a lock per server while it does and while sqlc runs, so that concurrent
// runs do not drop each other's scratch. `make verify` runs it from tools/:
//
//	go -C tools run ./cmd/sqlcvet -root ..
//
// The servers come from SIMBA_TEST_POSTGRES and SIMBA_TEST_MYSQL (the test suites' variables,
// with the same defaults); `make services` starts local ones.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// scratch names the PostgreSQL schema and the MySQL/MariaDB database the migrations are
// loaded into, and the locks that guard them.
const scratch = "simba_sqlc_vet"

func main() {
	root := flag.String("root", "..", "the repository root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "sqlcvet:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(root string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	pgURI, pgDone, err := postgres(ctx, root, env("SIMBA_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"))
	if err != nil {
		return fmt.Errorf("PostgreSQL (is it running? make services): %w", err)
	}
	defer pgDone()
	myURI, myDone, err := mysql(ctx, root, env("SIMBA_TEST_MYSQL", "root@tcp(127.0.0.1:3306)/test"))
	if err != nil {
		return fmt.Errorf("MySQL/MariaDB (is it running? make services): %w", err)
	}
	defer myDone()

	cmd := exec.CommandContext(ctx, "go", "run", "github.com/sqlc-dev/sqlc/cmd/sqlc", "vet", "-f", filepath.Join(root, "sql", "sqlc-vet.yaml"))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"SIMBA_SQLC_VET_POSTGRES="+pgURI,
		"SIMBA_SQLC_VET_MYSQL="+myURI,
		"SIMBA_SQLC_VET_SQLITE=:memory:")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("sqlc vet: %w", err)
	}
	return nil
}

// migrations returns the statements of dialect d's migrations, in order. The generated files
// end every statement with ";" and a newline.
func migrations(root, d string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "sql", "schema", d, "*.sql"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no migrations under sql/schema/%s", d)
	}
	sort.Strings(files)
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, st := range strings.Split(string(b), ";\n") {
			if strings.TrimSpace(stripComments(st)) != "" {
				out = append(out, st)
			}
		}
	}
	return out, nil
}

func stripComments(st string) string {
	var b strings.Builder
	for _, line := range strings.Split(st, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// postgres re-creates the scratch schema in the given database, loads the migrations into it
// and returns the URI that selects it (search_path), with the function that releases the lock.
func postgres(ctx context.Context, root, dsn string) (string, func(), error) {
	sts, err := migrations(root, "postgres")
	if err != nil {
		return "", nil, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	done := func() { conn.Close(context.Background()) } // the session-level lock goes with it
	ident := pgx.Identifier{scratch}.Sanitize()
	for _, st := range append([]string{
		"SELECT pg_advisory_lock(hashtext('" + scratch + "'))",
		"DROP SCHEMA IF EXISTS " + ident + " CASCADE",
		"CREATE SCHEMA " + ident,
		"SET search_path TO " + ident,
	}, sts...) {
		if _, err := conn.Exec(ctx, st); err != nil {
			done()
			return "", nil, fmt.Errorf("%s: %w", strings.TrimSpace(stripComments(st)), err)
		}
	}
	u, err := url.Parse(dsn)
	if err != nil {
		done()
		return "", nil, fmt.Errorf("SIMBA_TEST_POSTGRES must be a URL for sqlc: %w", err)
	}
	q := u.Query()
	q.Set("search_path", scratch)
	u.RawQuery = q.Encode()
	return u.String(), done, nil
}

// mysql re-creates the scratch database, loads the migrations into it and returns its DSN,
// with the function that releases the lock.
func mysql(ctx context.Context, root, dsn string) (string, func(), error) {
	sts, err := migrations(root, "mysql")
	if err != nil {
		return "", nil, err
	}
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return "", nil, err
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	lock, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return "", nil, err
	}
	done := func() { lock.Close(); db.Close() } // GET_LOCK's lock goes with its connection
	var got sql.NullInt64
	if err := lock.QueryRowContext(ctx, "SELECT GET_LOCK('"+scratch+"', 120)").Scan(&got); err != nil || got.Int64 != 1 {
		done()
		return "", nil, errors.Join(errors.New("could not take the scratch database's lock"), err)
	}
	for _, st := range append([]string{
		"DROP DATABASE IF EXISTS " + scratch,
		"CREATE DATABASE " + scratch,
		"USE " + scratch,
	}, sts...) {
		if _, err := lock.ExecContext(ctx, st); err != nil {
			done()
			return "", nil, fmt.Errorf("%s: %w", strings.TrimSpace(stripComments(st)), err)
		}
	}
	cfg.DBName = scratch
	return cfg.FormatDSN(), done, nil
}

package sql

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/sql/schema"
)

// driftDB is a database of its own for a schema-drift test: dsn for Open, and tamper to run
// statements on one admin connection of that database (PRAGMA and SET statements stick).
type driftDB struct {
	dsn    string
	tamper func(t *testing.T, stmts ...string)
}

// pgDriftDB creates a PostgreSQL database simba_drift_<random>, dropped when the test ends.
func pgDriftDB(t *testing.T) driftDB {
	t.Helper()
	base := testenv.Postgres(t)
	ctx := testCtx(t)
	admin, err := pgxpool.New(ctx, withParam(t, base, "pool_max_conns", "1"))
	if err != nil {
		t.Fatalf("bad PostgreSQL DSN: %v", err)
	}
	t.Cleanup(admin.Close)
	if err := admin.Ping(ctx); err != nil {
		testenv.Unavailable(t, "PostgreSQL", err.Error())
	}
	name := "simba_drift_" + unique(t)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	dsn := withParam(t, u.String(), "pool_max_conns", "2")
	db, err := pgxpool.New(ctx, withParam(t, u.String(), "pool_max_conns", "1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return driftDB{dsn: dsn, tamper: func(t *testing.T, stmts ...string) {
		t.Helper()
		for _, st := range stmts {
			if _, err := db.Exec(testCtx(t), st); err != nil {
				t.Fatalf("%s: %v", st, err)
			}
		}
	}}
}

// myDriftDB creates a MySQL/MariaDB database simba_drift_<random>, dropped when the test ends.
func myDriftDB(t *testing.T) driftDB {
	t.Helper()
	dsn, cfg := myDatabase(t, "simba_drift_")
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	return driftDB{dsn: dsn, tamper: execOn(t, db)}
}

// liteDriftDB is a SQLite file in a temporary directory.
func liteDriftDB(t *testing.T) driftDB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "drift.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	return driftDB{dsn: "sqlite://" + path, tamper: execOn(t, db)}
}

// execOn keeps db to one connection (PRAGMA and SET statements stick), closes it when the test
// ends and returns a tamper function that runs statements on it.
func execOn(t *testing.T, db *sql.DB) func(t *testing.T, stmts ...string) {
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return func(t *testing.T, stmts ...string) {
		t.Helper()
		for _, st := range stmts {
			if _, err := db.ExecContext(testCtx(t), st); err != nil {
				t.Fatalf("%s: %v", st, err)
			}
		}
	}
}

// driftCases tamper with a migrated schema the way an operator (or a tool) might; each must be
// reported at open as schema drift naming what is wrong.
var driftCases = []struct {
	name    string
	db      func(t *testing.T) driftDB
	tamper  []string
	mention []string // substrings the error must hold
	// migrations are the files the error names (the default: 0001_init.sql alone); a file
	// of the dialect's that is not listed must not be named.
	migrations []string
}{
	{
		// Without the foreign key, a lease can point at a deleted session, which PostgreSQL's
		// one-statement acquire reads as a live one: the name is blocked forever.
		name: "postgres dropped lease foreign key", db: pgDriftDB,
		tamper:  []string{"ALTER TABLE simba_lease DROP CONSTRAINT simba_lease_session_fk"},
		mention: []string{"simba_lease_session_fk", "is missing"},
	},
	{
		name: "postgres foreign key without ON DELETE CASCADE", db: pgDriftDB,
		tamper: []string{
			"ALTER TABLE simba_member DROP CONSTRAINT simba_member_session_fk",
			"ALTER TABLE simba_member ADD CONSTRAINT simba_member_session_fk FOREIGN KEY (session_id) REFERENCES simba_session (id)",
		},
		mention: []string{"simba_member_session_fk", "ON DELETE NO ACTION"},
	},
	{
		name: "postgres lease name with the default collation", db: pgDriftDB,
		tamper:  []string{`ALTER TABLE simba_lease ALTER COLUMN name TYPE VARCHAR(128) COLLATE pg_catalog."default"`},
		mention: []string{"column simba_lease.name has collation default, want C"},
	},
	{
		name: "postgres missing column", db: pgDriftDB,
		tamper:  []string{"ALTER TABLE simba_session DROP COLUMN owner"},
		mention: []string{"column simba_session.owner is missing"},
	},
	{
		name: "postgres missing primary key", db: pgDriftDB,
		tamper:  []string{"ALTER TABLE simba_member DROP CONSTRAINT simba_member_pkey"},
		mention: []string{"table simba_member has primary key none, want (group_name, session_id)"},
	},
	{
		// A case-insensitive collation makes "a" and "A" one lease, and MariaDB then reads the
		// holder's own id back differently: every term is revoked as taken over.
		name: "mysql lease name case-insensitive", db: myDriftDB,
		tamper:  []string{"ALTER TABLE simba_lease MODIFY name VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL"},
		mention: []string{"column simba_lease.name has collation utf8mb4_general_ci, want ascii_bin"},
	},
	{
		// MariaDB refuses to change the collation of a foreign key's column, so a table created
		// by hand with the database's case-insensitive default is the way this happens.
		name: "mysql lease table recreated case-insensitive", db: myDriftDB,
		tamper: []string{
			"DROP TABLE simba_lease",
			"CREATE TABLE simba_lease (name VARCHAR(128) NOT NULL, session_id VARCHAR(64), token BIGINT NOT NULL, PRIMARY KEY (name)) " +
				"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
		},
		mention: []string{
			"column simba_lease.name has collation utf8mb4_general_ci, want ascii_bin",
			"column simba_lease.session_id has collation utf8mb4_general_ci, want ascii_bin",
			"simba_lease_session_fk", "is missing",
		},
	},
	{
		name: "mysql missing column", db: myDriftDB,
		tamper:  []string{"ALTER TABLE simba_session DROP COLUMN owner"},
		mention: []string{"column simba_session.owner is missing"},
	},
	{
		name: "mysql dropped foreign key", db: myDriftDB,
		tamper:  []string{"ALTER TABLE simba_lease DROP FOREIGN KEY simba_lease_session_fk"},
		mention: []string{"simba_lease_session_fk", "is missing"},
	},
	{
		name: "mysql narrower token", db: myDriftDB,
		tamper:  []string{"ALTER TABLE simba_lease MODIFY token INT NOT NULL"},
		mention: []string{"column simba_lease.token has type int, want BIGINT"},
	},
	{
		name: "sqlite missing column", db: liteDriftDB,
		tamper:  []string{"ALTER TABLE simba_session DROP COLUMN owner"},
		mention: []string{"column simba_session.owner is missing"},
	},
	{
		name: "sqlite lease name case-insensitive", db: liteDriftDB,
		tamper: []string{
			"DROP TABLE simba_lease",
			`CREATE TABLE simba_lease (
			    -- the name compares without case
			    "name" TEXT COLLATE NOCASE NOT NULL,
			    session_id TEXT COLLATE BINARY,
			    token INTEGER NOT NULL,
			    PRIMARY KEY (name),
			    CONSTRAINT simba_lease_session_fk FOREIGN KEY (session_id) REFERENCES simba_session (id) ON DELETE SET NULL
			)`,
		},
		mention: []string{"column simba_lease.name has collation NOCASE, want BINARY"},
	},
	{
		name: "sqlite dropped foreign key", db: liteDriftDB,
		tamper: []string{
			"DROP TABLE simba_lease",
			"CREATE TABLE simba_lease (name TEXT COLLATE BINARY NOT NULL PRIMARY KEY, session_id TEXT, token INTEGER NOT NULL)",
		},
		mention: []string{"simba_lease_session_fk", "is missing"},
	},
	{
		name: "sqlite missing table", db: liteDriftDB,
		tamper:  []string{"DROP TABLE simba_member"},
		mention: []string{"table simba_member is missing"},
	},
	// The waiter table comes with 0003_waiters.sql: a difference there names that file, not
	// 0001_init.sql (which does not create it), and one in each names both.
	{
		name: "postgres missing waiter table", db: pgDriftDB,
		tamper:     []string{"DROP TABLE simba_waiter"},
		mention:    []string{"table simba_waiter is missing"},
		migrations: []string{"0003_waiters.sql"},
	},
	{
		name: "mysql waiter column missing", db: myDriftDB,
		tamper:     []string{"ALTER TABLE simba_waiter DROP COLUMN expiry_ms"},
		mention:    []string{"column simba_waiter.expiry_ms is missing"},
		migrations: []string{"0003_waiters.sql"},
	},
	{
		name: "sqlite missing waiter and member tables", db: liteDriftDB,
		tamper:     []string{"DROP TABLE simba_waiter", "DROP TABLE simba_member"},
		mention:    []string{"table simba_member is missing", "table simba_waiter is missing"},
		migrations: []string{"0001_init.sql", "0003_waiters.sql"},
	},
}

// TestSchemaDriftDetectedAtOpen: a schema with the right version but changed by hand (a dropped
// foreign key, a case-insensitive collation, a missing column, ...) makes the backend's first
// operation, CheckSchema and Open(WithAutoMigrate) fail with a permanent error matching
// ErrSchemaDrift and ErrSchemaMissing that names the table, the column, what is wrong and the
// migration; each case runs in a database of its own.
func TestSchemaDriftDetectedAtOpen(t *testing.T) {
	for _, c := range driftCases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			db := c.db(t)
			migrated(t, db.dsn)
			db.tamper(t, c.tamper...)

			b := open(t, db.dsn)
			files := c.migrations
			if files == nil {
				files = []string{"0001_init.sql"}
			}
			_, err := b.OpenSession(testCtx(t), "o", longTTL)
			if !errors.Is(err, spi.ErrSchemaDrift) || !errors.Is(err, spi.ErrSchemaMissing) {
				t.Fatalf("OpenSession on a drifted schema: %v; want ErrSchemaDrift", err)
			}
			if spi.Classify(err) != spi.Permanent {
				t.Fatalf("schema drift classified %v", spi.Classify(err))
			}
			for _, m := range c.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			for _, m := range schema.Migrations(b.Dialect()) {
				named := strings.Contains(err.Error(), "sql/schema/"+m.Path)
				if want := slices.Contains(files, path.Base(m.Path)); named != want {
					t.Errorf("error %q names sql/schema/%s: %v, want %v", err, m.Path, named, want)
				}
			}
			if err := b.CheckSchema(testCtx(t)); !errors.Is(err, spi.ErrSchemaDrift) {
				t.Fatalf("CheckSchema on a drifted schema: %v", err)
			}
			// Migrate does not alter existing tables: it reports the drift too.
			if _, err := Open(testCtx(t), db.dsn, WithAutoMigrate()); !errors.Is(err, spi.ErrSchemaDrift) {
				t.Fatalf("Open(WithAutoMigrate) on a drifted schema: %v", err)
			}
		})
	}
}

// TestSchemaCheckPassesTheMigration: the shipped migration passes the check on every dialect,
// in a database of its own (the other tests use a schema of the shared database on PostgreSQL).
func TestSchemaCheckPassesTheMigration(t *testing.T) {
	for _, d := range []struct {
		name string
		db   func(t *testing.T) driftDB
	}{{"postgres", pgDriftDB}, {"mysql", myDriftDB}, {"sqlite", liteDriftDB}} {
		t.Run(d.name, func(t *testing.T) {
			db := d.db(t)
			migrated(t, db.dsn)
			b := open(t, db.dsn)
			if err := b.CheckSchema(testCtx(t)); err != nil {
				t.Fatalf("CheckSchema on the migrated schema: %v", err)
			}
			grant(t, b, openSession(t, b, longTTL), "checked")
		})
	}
}

// TestSchemaProblems checks the comparison itself on hand-made catalog rows: a wider type and
// extra columns are fine; every other difference is listed.
func TestSchemaProblems(t *testing.T) {
	want, _ := wire.SQLSchemaCheckByName(wire.SQLPostgres)
	good := catalogSnapshot{
		columns: [][]string{
			{"simba_schema_version", "version", "int8", "-1", "", "0"},
			{"simba_session", "id", "text", "-1", "C", "0"}, // text holds any varchar(64)
			{"simba_session", "owner", "varchar", "255", "default", "0"},
			{"simba_session", "ttl_ms", "int8", "-1", "", "0"},
			{"simba_session", "expiry_ms", "int8", "-1", "", "0"},
			{"simba_session", "extra", "int4", "-1", "", "1"},
			{"simba_lease", "name", "varchar", "200", "C", "0"},
			{"simba_lease", "session_id", "varchar", "64", "C", "1"},
			{"simba_lease", "token", "int8", "-1", "", "0"},
			{"simba_member", "group_name", "varchar", "128", "C", "0"},
			{"simba_member", "session_id", "varchar", "64", "C", "0"},
			{"simba_waiter", "name", "varchar", "128", "C", "0"},
			{"simba_waiter", "session_id", "varchar", "64", "C", "0"},
			{"simba_waiter", "arrival_us", "int8", "-1", "", "0"},
			{"simba_waiter", "expiry_ms", "int8", "-1", "", "0"},
		},
		primaryKeys: [][]string{
			{"simba_schema_version", "version"}, {"simba_session", "id"}, {"simba_lease", "name"},
			{"simba_member", "group_name"}, {"simba_member", "session_id"},
			{"simba_waiter", "name"}, {"simba_waiter", "session_id"},
		},
		foreignKeys: [][]string{
			{"simba_lease", "session_id", "simba_session", "id", "SET NULL", "x"},
			{"simba_member", "session_id", "simba_session", "id", "CASCADE", "y"},
			{"simba_waiter", "session_id", "simba_session", "id", "CASCADE", "z"},
		},
	}
	if p := schemaProblems(want, good); len(p) != 0 {
		t.Fatalf("problems in a compatible schema: %q", p)
	}
	bad := good
	bad.columns = [][]string{
		{"simba_schema_version", "version", "int8", "-1", "", "0"},
		{"simba_session", "id", "varchar", "32", "C", "0"},
		{"simba_session", "ttl_ms", "int4", "-1", "", "0"},
		{"simba_session", "expiry_ms", "int8", "-1", "", "1"},
		{"simba_lease", "name", "varchar", "128", "en_US", "0"},
		{"simba_lease", "session_id", "varchar", "64", "C", "1"},
		{"simba_lease", "token", "int8", "-1", "", "0"},
	}
	bad.primaryKeys = [][]string{{"simba_schema_version", "version"}, {"simba_session", "id"}, {"simba_lease", "token"}}
	bad.foreignKeys = [][]string{{"simba_lease", "session_id", "simba_session", "id", "RESTRICT", "x"}}
	got := schemaProblems(want, bad)
	wantProblems := []string{
		"column simba_session.id holds 32 characters, want VARCHAR(64) COLLATE \"C\"",
		"column simba_session.owner is missing (want VARCHAR(255))",
		"column simba_session.ttl_ms has type int4, want BIGINT",
		"column simba_session.expiry_ms accepts NULL, want NOT NULL",
		"column simba_lease.name has collation en_US, want C (bytewise comparison: VARCHAR(128) COLLATE \"C\")",
		"table simba_lease has primary key (token), want (name)",
		"foreign key simba_lease_session_fk (simba_lease.session_id references simba_session.id ON DELETE SET NULL) has ON DELETE RESTRICT",
		"table simba_member is missing",
		"table simba_waiter is missing",
	}
	if strings.Join(got, "\n") != strings.Join(wantProblems, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantProblems, "\n"))
	}
}

// TestColumnCollations reads COLLATE clauses from CREATE TABLE text as SQLite keeps it: quoted
// names, comments, nested parentheses, table constraints and a COLLATE inside a CHECK.
func TestColumnCollations(t *testing.T) {
	got := columnCollations(`CREATE TABLE "t" (
		"Name" TEXT COLLATE NOCASE NOT NULL, -- a comment, with COLLATE RTRIM
		[b] VARCHAR(10, 2) /* COLLATE x, */ collate binary,
		c TEXT CHECK (c COLLATE NOCASE <> 'x, y'),
		` + "`d`" + ` TEXT DEFAULT 'COLLATE z',
		e,
		CONSTRAINT k PRIMARY KEY ("Name"),
		UNIQUE (c COLLATE NOCASE)
	)`)
	want := map[string]string{"name": "NOCASE", "b": "binary"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// Package fencesql fences a SQL resource: it runs a write only if its fencing token is at least
// the highest token the resource has seen, in one transaction with the check, on PostgreSQL,
// MySQL/MariaDB or SQLite through database/sql (any driver: pgx's stdlib, go-sql-driver/mysql,
// modernc.org/sqlite, ...). A program on a pgxpool.Pool gets a *sql.DB on the same pool with
// github.com/jackc/pgx/v5/stdlib.OpenDBFromPool.
//
// The highest token of each resource lives in the table simba_fence, created by the migration
// sql/schema/<dialect>/0002_fence.sql (embedded in github.com/simba-go/simba/sql/schema;
// `simba migrate`, the SQL backend's Migrate and WithAutoMigrate apply it, in version order, after
// 0001_init.sql). The resource's database need not hold the leases: apply the migrations there
// too. Without the table, every call fails with a *SchemaMissingError naming the migration.
//
// How a write is fenced (the statements are generated from spec/fence.yaml): the transaction
// first raises the resource's row to max(highest, token), which locks the row until the
// transaction ends, then reads the highest token; if it exceeds the write's token the
// transaction rolls back and the write fails with a *fence.StaleTokenError
// (errors.Is(err, fence.ErrStaleToken)). Otherwise the write runs in the same transaction and
// commits with the new highest token. Writers of one resource therefore serialise on its row
// and no lower token can land between the check and the write; writers of different resources
// do not wait for each other.
//
// A writer paused inside Write (by GC or SIGSTOP, or stuck in write, once the row is raised)
// keeps the row locked, and the resource's other writers wait for it, newer holders included,
// until it resumes and commits or its connection ends: bound their waits with ctx, and have the
// server end a transaction left idle (PostgreSQL: idle_in_transaction_session_timeout, e.g. in
// the paused writer's DSN; its commit then fails and the waiter proceeds; MySQL/MariaDB:
// innodb_lock_wait_timeout bounds the waiter). Safety does not depend on it: a paused writer's
// transaction that commits does so before the newer writer's, with the token it was admitted
// with, the order the row lock gave them.
//
// The simba_fence row is the fence's whole memory of a resource: a row written over with a
// lower token (by hand, a restored backup) admits a stale holder's token above it, once,
// unless Verify is set (that token is then above the row, so it is checked with the lock
// service, and refused). On SQLite, which keeps any value in any column, a row whose token is
// not an integer (a text, a blob, a real: no BIGINT holds one) is corrupt: it reads as the
// int64 maximum, so every write is refused as stale and the row is left as it is until an
// operator repairs it (a text or a blob admitted every write before).
//
// The highest token is stored with the data, so a token that is not the lease's (another lease
// name's, or the int64 maximum) would lock the resource's holders out for good: set
// Fence.Verify (fence.LeaseVerifier) and a token above the stored highest is checked with the
// lock service first, at the cost of one primary-key SELECT per write.
package fencesql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/internal/raise"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// SchemaMissingError is the error when the database has no fence table. It names the
// migration to apply and matches spi.ErrSchemaMissing (simba.ErrSchemaMissing) with
// errors.Is.
type SchemaMissingError struct {
	// Dialect is the database's dialect: postgres, mysql or sqlite.
	Dialect string
	// Migration is the migration that creates the table, within sql/schema.
	Migration string
	// Err is the database's error for the statement that failed.
	Err error
}

// Error names the missing table and the migration to apply.
func (e *SchemaMissingError) Error() string {
	return fmt.Sprintf("%v: fencesql: table %s is missing on %s: apply sql/schema/%s (embedded in github.com/simba-go/simba/sql/schema; `simba migrate -dsn …` applies it): %v",
		spi.ErrSchemaMissing, wire.SQLFenceTable, e.Dialect, e.Migration, e.Err)
}

// Is makes errors.Is(err, spi.ErrSchemaMissing) true.
func (e *SchemaMissingError) Is(target error) bool { return target == spi.ErrSchemaMissing }

// Unwrap returns the database's error.
func (e *SchemaMissingError) Unwrap() error { return e.Err }

// Tx is what Check needs of a transaction: *sql.Tx has it.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Fence fences the resources of one database. It is safe for concurrent use (set Verify
// before the first write).
type Fence struct {
	// Verify, when set, is asked about a write's token before it may raise its resource's
	// highest token (a resource's first token included): Write and Check first read the
	// resource's highest token (one primary-key SELECT, outside the write's transaction) and
	// call Verify only if the token is above it, so once per tenure. A refusal is returned as
	// it is (errors.Is(err, fence.ErrUnverifiedToken) for a token the lease never granted)
	// and nothing is written. fence.LeaseVerifier is the ready-made one. Nil trusts every
	// token: a token of another lease or a made-up one (the int64 maximum) raises the
	// resource's highest for good, stored with the data, and every legitimate holder after it
	// is refused as stale.
	Verify fence.Verifier

	db      *sql.DB
	dialect string
	st      wire.SQLFence
}

// dialects maps the names New accepts to the generated dialect names.
var dialects = map[string]string{
	"postgres": wire.SQLPostgres, "postgresql": wire.SQLPostgres, "pgx": wire.SQLPostgres,
	"mysql": wire.SQLMySQL, "mariadb": wire.SQLMySQL,
	"sqlite": wire.SQLSQLite, "sqlite3": wire.SQLSQLite,
}

// New returns the fence of db, whose dialect is "postgres", "mysql" (MySQL 8, MariaDB) or
// "sqlite" ("postgresql", "pgx", "mariadb" and "sqlite3" are accepted too). It does no I/O;
// an unknown dialect fails with an error matching spi.ErrInvalidOption.
func New(db *sql.DB, dialect string) (*Fence, error) {
	name, ok := dialects[dialect]
	if !ok {
		return nil, fmt.Errorf("%w: fencesql: unknown dialect %q (want postgres, mysql or sqlite)", spi.ErrInvalidOption, dialect)
	}
	if db == nil {
		return nil, fmt.Errorf("%w: fencesql: nil *sql.DB", spi.ErrInvalidOption)
	}
	st, _ := wire.SQLFenceByName(name)
	return &Fence{db: db, dialect: name, st: st}, nil
}

// Write runs write in a transaction if token is at least the highest token resource has seen,
// and commits it with token as the resource's highest. Otherwise it writes nothing and returns
// a *fence.StaleTokenError (errors.Is(err, fence.ErrStaleToken)). An error from write rolls the
// transaction back (the highest token with it) and is returned as it is; write must do all
// its work through tx. An error from the commit ("fencesql: commit: …") leaves the outcome
// unknown, as any database client's: the COMMIT may have reached the server and committed (a
// writer paused by SIGSTOP while its COMMIT was in flight, whose ctx had ended when it ran
// again, was told "timeout: context deadline exceeded" of a row that was in the table). Make
// the write idempotent, or read back, before retrying it.
//
// On PostgreSQL the transaction runs at READ COMMITTED; elsewhere at the connection's level.
// On SQLite set a busy timeout on the connection (e.g. _pragma=busy_timeout(10000)): writers
// of the database file wait for each other.
func (f *Fence) Write(ctx context.Context, resource string, token int64, write func(ctx context.Context, tx *sql.Tx) error) (err error) {
	if err := validate(resource, token); err != nil {
		return err
	}
	// Verify before the transaction: it then needs no second connection, and holds no lock
	// while the lock service answers.
	if err := f.verify(ctx, resource, token); err != nil {
		return err
	}
	var opts *sql.TxOptions
	if f.dialect == wire.SQLPostgres {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := f.db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("fencesql: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := f.check(ctx, tx, resource, token); err != nil {
		return err
	}
	if err := write(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fencesql: commit: %w", err)
	}
	return nil
}

// Check fences the caller's own transaction: it records token as resource's highest if it is
// at least the highest seen, and locks resource's row until tx ends, so the caller's writes
// that follow in tx are fenced; otherwise it returns a *fence.StaleTokenError and the caller
// must roll tx back. Make it tx's first statement: on SQLite a transaction that has read
// before it may fail to take the write lock, and on PostgreSQL a transaction above READ
// COMMITTED may fail with a serialization error where Write would wait. With Verify set,
// Check reads the highest token on a connection of its own (not tx's) first, so db's pool
// needs a second connection (on SQLite too: do not limit it to one).
func (f *Fence) Check(ctx context.Context, tx Tx, resource string, token int64) error {
	if err := validate(resource, token); err != nil {
		return err
	}
	if err := f.verify(ctx, resource, token); err != nil {
		return err
	}
	return f.check(ctx, tx, resource, token)
}

// verify asks Verify about token unless the resource's committed highest is at least token
// (raise.Check; read outside the write's transaction, which is sound: it only grows).
func (f *Fence) verify(ctx context.Context, resource string, token int64) error {
	return raise.Check(ctx, f.Verify, f.Highest, resource, token)
}

// check raises resource's row to token in tx, or reports the higher token found there.
func (f *Fence) check(ctx context.Context, tx Tx, resource string, token int64) error {
	var highest int64
	if f.st.AdvanceReturns {
		err := tx.QueryRowContext(ctx, f.st.Advance.SQL, f.args(f.st.Advance, resource, token)...).Scan(&highest)
		if err != nil {
			return f.fail(ctx, "advance", err)
		}
	} else {
		if _, err := tx.ExecContext(ctx, f.st.Advance.SQL, f.args(f.st.Advance, resource, token)...); err != nil {
			return f.fail(ctx, "advance", err)
		}
		if err := tx.QueryRowContext(ctx, f.st.Highest.SQL, f.args(f.st.Highest, resource, token)...).Scan(&highest); err != nil {
			return f.fail(ctx, "highest", err)
		}
	}
	if highest > token {
		return &fence.StaleTokenError{Resource: resource, Token: token, Highest: highest}
	}
	return nil
}

// Highest returns the highest token resource has seen, and false if it has seen none.
func (f *Fence) Highest(ctx context.Context, resource string) (int64, bool, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return 0, false, err
	}
	var highest int64
	err := f.db.QueryRowContext(ctx, f.st.Highest.SQL, f.args(f.st.Highest, resource, 0)...).Scan(&highest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, f.fail(ctx, "highest", err)
	}
	return highest, true, nil
}

// CheckSchema returns nil if the fence table exists, a *SchemaMissingError if not.
func (f *Fence) CheckSchema(ctx context.Context) error {
	var n int64
	if err := f.db.QueryRowContext(ctx, f.st.TableExists.SQL).Scan(&n); err != nil {
		return fmt.Errorf("fencesql: looking for table %s: %w", wire.SQLFenceTable, err)
	}
	if n == 0 {
		return &SchemaMissingError{Dialect: f.dialect, Migration: f.st.Migration, Err: fmt.Errorf("no table %s", wire.SQLFenceTable)}
	}
	return nil
}

func validate(resource string, token int64) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	return fence.ValidateToken(token)
}

// args binds a statement's arguments in the order the spec gives.
func (f *Fence) args(st wire.SQLFenceStatement, resource string, token int64) []any {
	out := make([]any, len(st.Args))
	for i, a := range st.Args {
		switch a {
		case "resource":
			out[i] = resource
		case "token":
			out[i] = token
		}
	}
	return out
}

// fail explains a failed statement: a *SchemaMissingError when the table is missing (asked on
// a connection of its own: the failed transaction may be unusable), else the error wrapped.
func (f *Fence) fail(ctx context.Context, what string, err error) error {
	if ctx.Err() == nil {
		var n int64
		if qerr := f.db.QueryRowContext(ctx, f.st.TableExists.SQL).Scan(&n); qerr == nil && n == 0 {
			return &SchemaMissingError{Dialect: f.dialect, Migration: f.st.Migration, Err: err}
		}
	}
	return fmt.Errorf("fencesql: %s: %w", what, err)
}

package sql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/sql/schema"
)

// NewPostgres returns a PostgreSQL backend on the user's pool. Every connection of the pool must
// run at READ COMMITTED, PostgreSQL's default: when the server or role default is stricter, set
// PostgresAfterConnect as the pool's AfterConnect. NewPostgres does no I/O; the schema is checked
// (or migrated, WithAutoMigrate) before the first operation. Close does not close pool. The hint
// listener opens its own connection with the pool's connection settings.
func NewPostgres(pool *pgxpool.Pool, opts ...Option) (*Backend, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: sql postgres: nil pool", spi.ErrInvalidOption)
	}
	wd, _ := wire.SQLDialectByName(wire.SQLPostgres)
	d := &pgDialect{pool: pool, q: sqlq.Postgres(pool), begin: wd.Begin, hub: pgHub{listening: make(chan struct{}, 1)}}
	b, err := newBackend(wire.SQLPostgres, d, opts)
	if err != nil {
		return nil, err
	}
	d.b = b
	return b, nil
}

// PostgresAfterConnect runs the PostgreSQL session setup (wire.SQLDialectByName("postgres")
// .SessionSetup: READ COMMITTED) on a new connection. Use it as pgxpool.Config.AfterConnect for a
// pool you pass to NewPostgres; Open sets it itself.
func PostgresAfterConnect(ctx context.Context, c *pgx.Conn) error {
	d, _ := wire.SQLDialectByName(wire.SQLPostgres)
	for _, st := range d.SessionSetup {
		if _, err := c.Exec(ctx, st); err != nil {
			return fmt.Errorf("simba session setup %q: %w", st, err)
		}
	}
	return nil
}

type pgDialect struct {
	b     *Backend
	pool  *pgxpool.Pool
	q     sqlq.Queries // the adapter on the pool (generated/sqlq)
	begin string
	hub   pgHub
}

// with runs fn on the pool, statement by statement (each in its own implicit transaction, at
// READ COMMITTED), or, when tx, on one connection between the dialect's begin and COMMIT. A
// run PostgreSQL rolled back to break a deadlock (or a serialization failure) is run again.
func (d *pgDialect) with(ctx context.Context, tx bool, fn func(q sqlq.Queries) error) error {
	return retryRolledBack(ctx, pgRolledBack, func() error {
		if !tx {
			return fn(d.q)
		}
		conn, err := d.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, d.begin); err != nil {
			return err
		}
		if err := fn(sqlq.Postgres(conn)); err != nil {
			d.rollback(ctx, conn)
			return err
		}
		if _, err := conn.Exec(ctx, wire.SQLCommit); err != nil {
			d.rollback(ctx, conn)
			return err
		}
		return nil
	})
}

// rollback ends a failed transaction; if even that fails the connection is closed, never
// returned to the pool inside a transaction.
func (d *pgDialect) rollback(ctx context.Context, conn *pgxpool.Conn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(rctx, wire.SQLRollback); err != nil {
		conn.Conn().Close(rctx)
	}
}

func (d *pgDialect) catalog(ctx context.Context, query string, ncols int) ([][]string, error) {
	rows, err := d.pool.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		if len(vals) != ncols {
			return nil, fmt.Errorf("catalog query returned %d columns, want %d", len(vals), ncols)
		}
		row := make([]string, ncols)
		for i, v := range vals {
			if v != nil {
				row[i] = fmt.Sprint(v)
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func (d *pgDialect) migrate(ctx context.Context, ms []schema.Migration) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	wd, _ := wire.SQLDialectByName(wire.SQLPostgres) // the advisory lock on wire.SQLMigrateLockKey
	if _, err := conn.Exec(ctx, wd.MigrateLock); err != nil {
		return err
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), wd.MigrateUnlock); err != nil {
			conn.Conn().Close(context.Background()) // the lock goes with the connection
		}
	}()
	current, err := sqlq.Postgres(conn).SchemaVersion(ctx)
	if err != nil {
		if !isPgUndefined(err) {
			return err
		}
		current = 0
	}
	for _, m := range ms {
		if int64(m.Version) <= current {
			continue
		}
		for _, st := range m.Statements {
			if _, err := conn.Exec(ctx, st); err != nil {
				return fmt.Errorf("applying %s: %w", m.Path, err)
			}
		}
	}
	return nil
}

// pgRolledBack reports deadlock_detected (40P01) and serialization_failure (40001):
// PostgreSQL rolled the statement, and the implicit transaction it ran in, back.
func pgRolledBack(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// pgTLSRefused reports pgconn's "server refused TLS connection" (sslmode=require or stricter
// against a server without TLS): pgconn has no exported error for it, so its text is matched.
func pgTLSRefused(err error) bool {
	return strings.Contains(err.Error(), "server refused TLS connection")
}

func isPgUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42703" || pe.Code == "42883")
}

// classify: serialization failures, deadlocks, lock timeouts, connection and resource errors,
// server shutdown and network errors are retryable; a missing table or column is
// ErrSchemaMissing; authentication, privileges, a missing database, statement errors and TLS
// failures (a certificate that does not verify with sslmode=verify-ca/verify-full, a server
// that refuses TLS with sslmode=require) are permanent.
func (d *pgDialect) classify(op string, err error) error {
	if spi.IsTLSError(err) || pgTLSRefused(err) {
		return spi.TLSFailure(op, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case isPgUndefined(err):
			return d.b.schemaMissing(fmt.Sprintf("%s: %s", op, pe.Message), err)
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "55P03", pe.Code == "57014",
			strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"),
			strings.HasPrefix(pe.Code, "57P"), strings.HasPrefix(pe.Code, "58"),
			pe.Code == "25006" /* read-only transaction: a standby during failover */ :
			return spi.Unavailable(op, err)
		case strings.HasPrefix(pe.Code, "28"), pe.Code == "42501", pe.Code == "3D000",
			strings.HasPrefix(pe.Code, "42"), strings.HasPrefix(pe.Code, "22"):
			return spi.AsPermanent(fmt.Errorf("%s: %w", op, err))
		}
		return spi.Unavailable(op, err)
	}
	var ne net.Error
	if errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return spi.Unavailable(op, err)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		var pe2 *pgconn.PgError
		if errors.As(ce, &pe2) && (strings.HasPrefix(pe2.Code, "28") || pe2.Code == "3D000") {
			return spi.AsPermanent(fmt.Errorf("%s: %w", op, err))
		}
		return spi.Unavailable(op, err)
	}
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		return fmt.Errorf("%w: %s: %w", spi.ErrInvalidOption, op, err)
	}
	return spi.Unavailable(op, err)
}

// Package resource is the fenced resource of a chaos run: a table on a SQL database and a key
// on Redis, each written through the library's fence helpers (fence/fencesql: the write runs in
// one transaction with the token check against simba_fence; fence/fenceredis: one Lua script
// sets the key and the resource's highest token). Both accept a write only when its token is
// at least the highest they have accepted for the resource, which is what a user of fencing
// tokens does; the checkers then verify what they accepted, so a chaos run also exercises the
// fence helpers under the same faults (the SQL backends' own database is reached through the
// worker's fault proxy).
package resource

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fenceredis"
	"github.com/simba-go/simba/fence/fencesql"
	"github.com/simba-go/simba/generated/wire"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// Resource takes fenced writes.
type Resource interface {
	// Label names the resource in the history ("pg", "redis", "own").
	Label() string
	// Setup creates what the resource needs (idempotent).
	Setup(ctx context.Context) error
	// Write stores token for name if it is at least the highest stored; it reports whether
	// the write was accepted.
	Write(ctx context.Context, name string, token int64, writer string) (bool, error)
	// Drop removes what Setup created and every write.
	Drop(ctx context.Context) error
	// Close releases the connections.
	Close() error
}

// Open opens a resource from its spec, "label|driver|dsn|table": driver pgx, mysql or sqlite
// (a table, and the fence's simba_fence table in the same database), or redis (dsn host:port,
// table a key prefix).
func Open(spec string) (Resource, error) {
	parts := strings.SplitN(spec, "|", 4)
	if len(parts) != 4 {
		return nil, fmt.Errorf("resource spec %q: want label|driver|dsn|table", spec)
	}
	label, driver, dsn, table := parts[0], parts[1], parts[2], parts[3]
	if driver == "redis" {
		c := redis.NewClient(&redis.Options{Addr: dsn, MaxRetries: -1})
		return &redisKey{label: label, prefix: table, c: c, f: fenceredis.New(c)}, nil
	}
	dialect, ok := map[string]string{"pgx": "postgres", "mysql": "mysql", "sqlite": "sqlite"}[driver]
	if !ok {
		return nil, fmt.Errorf("resource %s: unknown driver %q (want pgx, mysql, sqlite or redis)", label, driver)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", label, err)
	}
	if driver == "sqlite" {
		db.SetMaxOpenConns(1)
	}
	f, err := fencesql.New(db, dialect)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("resource %s: %w", label, err)
	}
	return &sqlTable{label: label, driver: driver, dsn: dsn, table: table, db: db, f: f}, nil
}

// resourceName is the fence resource of a lease name's writes: one per table (a run's own)
// and name, so runs sharing a server never share a highest token.
func resourceName(table, name string) string { return table + "/" + name }

type sqlTable struct {
	label, driver, dsn, table string
	db                        *sql.DB
	f                         *fencesql.Fence
}

func (t *sqlTable) Label() string { return t.label }

func (t *sqlTable) Close() error { return t.db.Close() }

// Setup applies Simba's migrations (the fence's simba_fence table among them) the way a user
// does, through the SQL backend's Migrate, and creates the data table the fenced writes go to.
func (t *sqlTable) Setup(ctx context.Context) error {
	if err := t.migrate(ctx); err != nil {
		return fmt.Errorf("resource %s: migrate: %w", t.label, err)
	}
	_, err := t.db.ExecContext(ctx, fmt.Sprintf(
		`CREATE TABLE IF NOT EXISTS %s (name VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL, writer VARCHAR(200) NOT NULL)`, t.table))
	if err != nil {
		return fmt.Errorf("resource %s: create %s: %w", t.label, t.table, err)
	}
	return t.f.CheckSchema(ctx)
}

func (t *sqlTable) migrate(ctx context.Context) error {
	var b *simbasql.Backend
	switch t.driver {
	case "pgx":
		cfg, err := simbasql.PostgresPoolConfig(t.dsn) // Open's bounds, and no warning of their lack
		if err != nil {
			return err
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer pool.Close()
		if b, err = simbasql.NewPostgres(pool); err != nil {
			return err
		}
	case "mysql":
		var err error
		if b, err = simbasql.NewMySQL(t.db); err != nil {
			return err
		}
	default:
		var err error
		if b, err = simbasql.NewSQLite(t.db); err != nil {
			return err
		}
	}
	defer b.Close()
	return b.Migrate(ctx)
}

// Drop removes the data table and the run's rows of simba_fence (a table the library owns and
// other programs on the server may use: only this table's resources go).
func (t *sqlTable) Drop(ctx context.Context) error {
	// The run's resources are exactly those from table+"/" up to (not including) table+"0",
	// '0' following '/' in ASCII.
	q := fmt.Sprintf("DELETE FROM %s WHERE resource >= %s AND resource < %s", wire.SQLFenceTable, t.ph(1), t.ph(2))
	_, ferr := t.db.ExecContext(ctx, q, resourceName(t.table, ""), t.table+"0")
	_, err := t.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t.table)
	return errors.Join(ferr, err)
}

func (t *sqlTable) ph(i int) string {
	if t.driver == "pgx" {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

// Write stores (token, writer) as the name's row through fencesql.Write: the row changes only
// in the transaction that found token at least the resource's highest, and a lower token is
// rejected (fence.ErrStaleToken) with nothing written.
func (t *sqlTable) Write(ctx context.Context, name string, token int64, writer string) (bool, error) {
	upd := fmt.Sprintf(`UPDATE %s SET token = %s, writer = %s WHERE name = %s`, t.table, t.ph(1), t.ph(2), t.ph(3))
	ins := fmt.Sprintf(`INSERT INTO %s (name, token, writer) VALUES (%s, %s, %s)`, t.table, t.ph(1), t.ph(2), t.ph(3))
	err := t.f.Write(ctx, resourceName(t.table, name), token, func(ctx context.Context, tx *sql.Tx) error {
		// The fence holds the resource's row lock until the transaction ends, so no other
		// writer of this name runs between the UPDATE and the INSERT.
		res, err := tx.ExecContext(ctx, upd, token, writer, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, ins, name, token, writer)
		return err
	})
	return verdict(t.label, err)
}

type redisKey struct {
	label, prefix string
	c             *redis.Client
	f             *fenceredis.Fence
}

func (r *redisKey) Label() string { return r.label }

// base is the run's part of the resource names: the key prefix without its final colon.
func (r *redisKey) base() string { return strings.TrimSuffix(r.prefix, ":") }

func (r *redisKey) Close() error { return r.c.Close() }

func (r *redisKey) Setup(ctx context.Context) error { return r.c.Ping(ctx).Err() }

// Drop removes the run's data keys and fence keys.
func (r *redisKey) Drop(ctx context.Context) error {
	var all []string
	for _, m := range []string{r.prefix + "*", wire.FenceKey(resourceName(r.base(), "*"))} {
		keys, err := r.c.Keys(ctx, m).Result()
		if err != nil {
			return err
		}
		all = append(all, keys...)
	}
	if len(all) == 0 {
		return nil
	}
	return r.c.Del(ctx, all...).Err()
}

// Write sets the name's key to the writer through fenceredis.Set: the key and the resource's
// highest token change together in one script, and a lower token is rejected.
func (r *redisKey) Write(ctx context.Context, name string, token int64, writer string) (bool, error) {
	res := resourceName(r.base(), name)
	err := r.f.Set(ctx, res, token, r.prefix+"{"+res+"}", writer)
	return verdict(r.label, err)
}

// verdict is a fenced write's outcome: accepted (no error), rejected as stale (not an error:
// the resource did its job), or failed.
func verdict(label string, err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fence.ErrStaleToken):
		return false, nil
	}
	return false, fmt.Errorf("resource %s: %w", label, err)
}

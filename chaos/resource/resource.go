// Package resource is the fenced resource of a chaos run: a table on a SQL database written with
// a conditional statement, and a Redis key written by a check-and-set script. Both accept a
// write only when its token is at least the highest they have accepted for the name, which is
// what a user of fencing tokens does; the checkers then verify what they accepted.
//
// The statements here are the harness's own (not Simba's wire protocol). When the library's
// fence package lands, the harness can write through it instead.
package resource

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

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
// (a table), or redis (dsn host:port, table a key prefix).
func Open(spec string) (Resource, error) {
	parts := strings.SplitN(spec, "|", 4)
	if len(parts) != 4 {
		return nil, fmt.Errorf("resource spec %q: want label|driver|dsn|table", spec)
	}
	label, driver, dsn, table := parts[0], parts[1], parts[2], parts[3]
	if driver == "redis" {
		return &redisKey{label: label, prefix: table, c: redis.NewClient(&redis.Options{Addr: dsn, MaxRetries: -1})}, nil
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", label, err)
	}
	if driver == "sqlite" {
		db.SetMaxOpenConns(1)
	}
	return &sqlTable{label: label, driver: driver, table: table, db: db}, nil
}

type sqlTable struct {
	label, driver, table string
	db                   *sql.DB
}

func (t *sqlTable) Label() string { return t.label }

func (t *sqlTable) Close() error { return t.db.Close() }

func (t *sqlTable) Setup(ctx context.Context) error {
	_, err := t.db.ExecContext(ctx, fmt.Sprintf(
		`CREATE TABLE IF NOT EXISTS %s (name VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL, writer VARCHAR(200) NOT NULL)`, t.table))
	if err != nil {
		return fmt.Errorf("resource %s: create %s: %w", t.label, t.table, err)
	}
	return nil
}

func (t *sqlTable) Drop(ctx context.Context) error {
	_, err := t.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t.table)
	return err
}

func (t *sqlTable) ph(i int) string {
	if t.driver == "pgx" {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

func (t *sqlTable) Write(ctx context.Context, name string, token int64, writer string) (bool, error) {
	ins := fmt.Sprintf(`INSERT INTO %s (name, token, writer) VALUES (%s, 0, '') ON CONFLICT (name) DO NOTHING`, t.table, t.ph(1))
	if t.driver == "mysql" {
		ins = fmt.Sprintf(`INSERT IGNORE INTO %s (name, token, writer) VALUES (?, 0, '')`, t.table)
	}
	if _, err := t.db.ExecContext(ctx, ins, name); err != nil {
		return false, fmt.Errorf("resource %s: %w", t.label, err)
	}
	// The conditional write: it lands only if no higher token was accepted before.
	upd := fmt.Sprintf(`UPDATE %s SET token = %s, writer = %s WHERE name = %s AND token <= %s`,
		t.table, t.ph(1), t.ph(2), t.ph(3), t.ph(4))
	res, err := t.db.ExecContext(ctx, upd, token, writer, name, token)
	if err != nil {
		return false, fmt.Errorf("resource %s: %w", t.label, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("resource %s: %w", t.label, err)
	}
	return n == 1, nil
}

type redisKey struct {
	label, prefix string
	c             *redis.Client
}

// casScript sets the key to the token if the token is at least the stored one.
var casScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local tok = tonumber(ARGV[1])
if tok >= cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0`)

func (r *redisKey) Label() string { return r.label }

func (r *redisKey) Close() error { return r.c.Close() }

func (r *redisKey) Setup(ctx context.Context) error { return r.c.Ping(ctx).Err() }

func (r *redisKey) Drop(ctx context.Context) error {
	keys, err := r.c.Keys(ctx, r.prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		return err
	}
	return r.c.Del(ctx, keys...).Err()
}

func (r *redisKey) Write(ctx context.Context, name string, token int64, _ string) (bool, error) {
	n, err := casScript.Run(ctx, r.c, []string{r.prefix + name}, token).Int()
	if err != nil {
		return false, fmt.Errorf("resource %s: %w", r.label, err)
	}
	return n == 1, nil
}

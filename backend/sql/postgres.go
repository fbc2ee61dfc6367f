package sql

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/generated/sqlc/postgres"
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
	d := &pgDialect{pool: pool, q: postgres.New(pool), hub: pgHub{listening: make(chan struct{}, 1)}}
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
	b    *Backend
	pool *pgxpool.Pool
	q    *postgres.Queries
	hub  pgHub
}

func (d *pgDialect) openSession(ctx context.Context, id, owner string, ttlMs int64) error {
	return d.q.OpenSession(ctx, postgres.OpenSessionParams{ID: id, Owner: owner, TtlMs: ttlMs})
}

// captured is one statement as a generated method sends it, recorded without I/O.
type captured struct {
	sql  string
	args []any
}

var errCaptured = errors.New("statement captured")

// capture is a postgres.DBTX that records the statement instead of sending it, so that the
// keep-alive can pipeline the generated statements in one pgx.Batch.
type capture struct{ c captured }

func (c *capture) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.c = captured{sql, args}
	return pgconn.CommandTag{}, errCaptured
}

func (c *capture) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.c = captured{sql, args}
	return nil, errCaptured
}

func (c *capture) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	c.c = captured{sql, args}
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errCaptured }

// statement returns what call sends through the generated queries.
func statement(call func(q *postgres.Queries) error) captured {
	c := &capture{}
	_ = call(postgres.New(c))
	return c.c
}

// keepAlive pipelines KeepAliveRenew, KeepAliveHeld and KeepAliveMembers (the last only when
// groups are asked) in one batch: one round trip, run by the server in order (in one implicit
// transaction, so a deadlock rolls the whole batch back and it is sent again).
func (d *pgDialect) keepAlive(ctx context.Context, sid string, groups []string) (ka spi.KeepAlive, err error) {
	err = retryRolledBack(ctx, pgRolledBack, func() (err error) {
		ka, err = d.keepAliveBatch(ctx, sid, groups)
		return err
	})
	return ka, err
}

func (d *pgDialect) keepAliveBatch(ctx context.Context, sid string, groups []string) (spi.KeepAlive, error) {
	renew := statement(func(q *postgres.Queries) error { _, err := q.KeepAliveRenew(ctx, sid); return err })
	held := statement(func(q *postgres.Queries) error { _, err := q.KeepAliveHeld(ctx, sid); return err })
	var batch pgx.Batch
	var (
		live      = true
		remaining int64
		ka        spi.KeepAlive
	)
	batch.Queue(renew.sql, renew.args...).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&remaining)
		if errors.Is(err, pgx.ErrNoRows) {
			live = false
			return nil
		}
		return err
	})
	batch.Queue(held.sql, held.args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var h postgres.KeepAliveHeldRow
			if err := rows.Scan(&h.Name, &h.Token); err != nil {
				return err
			}
			ka.Held = append(ka.Held, spi.Held{Name: h.Name, Token: h.Token})
		}
		return rows.Err()
	})
	if len(groups) > 0 {
		members := statement(func(q *postgres.Queries) error { _, err := q.KeepAliveMembers(ctx, groups); return err })
		ka.Members = memberMap(len(groups))
		batch.Queue(members.sql, members.args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var m postgres.SimbaMember
				if err := rows.Scan(&m.GroupName, &m.SessionID); err != nil {
					return err
				}
				ka.Members[m.GroupName] = append(ka.Members[m.GroupName], spi.SessionID(m.SessionID))
			}
			return rows.Err()
		})
	}
	if err := d.pool.SendBatch(ctx, &batch).Close(); err != nil {
		return spi.KeepAlive{}, err
	}
	if !live {
		return spi.KeepAlive{Expired: true}, nil
	}
	ka.Remaining = millis(remaining)
	return ka, nil
}

func (d *pgDialect) closeSession(ctx context.Context, sid string) error {
	return retryRolledBack(ctx, pgRolledBack, func() error { return d.q.CloseSession(ctx, sid) })
}

// pgAcquireAttempts bounds how often acquire re-runs the Acquire statement after a race.
const pgAcquireAttempts = 3

// acquire runs the one-statement Acquire. After a race the statement may report neither a grant
// nor a live holder: its final SELECT reads the statement's snapshot, taken before the
// concurrent winner it waited for committed, so the holder is empty, the caller itself or the
// expired previous holder, with 0 remaining. The statement is then run again (at most
// pgAcquireAttempts times in all; the new snapshot sees the winner): re-running is safe, as an
// acquire by the caller is idempotent. If the race persists the reply is HeldBy with remaining 0
// ("retry soon"), never a grant. A stored token the statement refused to take (negative, or at
// the int64 maximum for a new tenure) is ErrCorruptToken / ErrTokenOverflow: nothing was written.
func (d *pgDialect) acquire(ctx context.Context, sid, name string) (spi.Acquire, error) {
	for attempt := 1; ; attempt++ {
		var r postgres.AcquireRow
		err := retryRolledBack(ctx, pgRolledBack, func() (err error) {
			r, err = d.q.Acquire(ctx, postgres.AcquireParams{Name: name, SessionID: sid})
			return err
		})
		switch {
		case err != nil:
			return spi.Acquire{}, err
		case !r.SessionLive:
			return spi.Acquire{Kind: spi.SessionExpired}, nil
		case r.Granted:
			return spi.Acquire{Kind: spi.Granted, Token: r.Token, Remaining: millis(r.RemainingMs)}, nil
		case r.StoredToken < 0:
			return spi.Acquire{}, corruptToken(name, r.StoredToken)
		}
		stale := r.HolderID == "" || r.HolderID == sid || r.RemainingMs <= 0
		if stale && r.StoredToken == math.MaxInt64 && r.HolderID != sid {
			return spi.Acquire{}, tokenOverflow(name, r.StoredToken)
		}
		if stale && attempt < pgAcquireAttempts {
			continue
		}
		rem := max(r.RemainingMs, 0)
		if stale {
			rem = 0
		}
		return spi.Acquire{Kind: spi.HeldBy, Holder: spi.SessionID(r.HolderID), HolderOwner: r.HolderOwner, Remaining: millis(rem)}, nil
	}
}

func (d *pgDialect) release(ctx context.Context, sid, name string, token int64) error {
	return retryRolledBack(ctx, pgRolledBack, func() error {
		return d.q.Release(ctx, postgres.ReleaseParams{Name: name, SessionID: sid, Token: token})
	})
}

func (d *pgDialect) join(ctx context.Context, sid, group string) (bool, error) {
	var r postgres.JoinRow
	err := retryRolledBack(ctx, pgRolledBack, func() (err error) {
		r, err = d.q.Join(ctx, postgres.JoinParams{SessionID: sid, GroupName: group})
		return err
	})
	return r.SessionLive, err
}

func (d *pgDialect) leave(ctx context.Context, sid, group string) (bool, error) {
	var r postgres.LeaveRow
	err := retryRolledBack(ctx, pgRolledBack, func() (err error) {
		r, err = d.q.Leave(ctx, postgres.LeaveParams{SessionID: sid, GroupName: group})
		return err
	})
	return r.SessionLive, err
}

func (d *pgDialect) members(ctx context.Context, group string) ([]string, error) {
	return d.q.Members(ctx, group)
}

func (d *pgDialect) housekeeping(ctx context.Context) error {
	return retryRolledBack(ctx, pgRolledBack, func() error {
		if err := d.q.HousekeepingMembers(ctx); err != nil {
			return err
		}
		return d.q.HousekeepingSessions(ctx)
	})
}

func (d *pgDialect) inspect(ctx context.Context) (spi.Snapshot, error) {
	leases, err := d.q.InspectLeases(ctx)
	if err != nil {
		return spi.Snapshot{}, err
	}
	sessions, err := d.q.InspectSessions(ctx)
	if err != nil {
		return spi.Snapshot{}, err
	}
	members, err := d.q.InspectMembers(ctx)
	if err != nil {
		return spi.Snapshot{}, err
	}
	s := spi.Snapshot{Groups: memberMap(0)}
	for _, l := range leases {
		s.Leases = append(s.Leases, leaseInfo(l.Name, l.HolderID, l.Owner, l.Token, l.RemainingMs))
	}
	for _, x := range sessions {
		s.Sessions = append(s.Sessions, spi.SessionInfo{ID: spi.SessionID(x.ID), Owner: x.Owner, Remaining: millis(x.RemainingMs)})
	}
	for _, m := range members {
		s.Groups[m.GroupName] = append(s.Groups[m.GroupName], spi.SessionID(m.SessionID))
	}
	return s, nil
}

func (d *pgDialect) clearForeignHolder(ctx context.Context, name, holder string) error {
	return retryRolledBack(ctx, pgRolledBack, func() error {
		return d.q.ClearForeignHolder(ctx, postgres.ClearForeignHolderParams{Name: name, SessionID: holder})
	})
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

func (d *pgDialect) schemaVersion(ctx context.Context) (int64, error) { return d.q.SchemaVersion(ctx) }
func (d *pgDialect) databaseNow(ctx context.Context) (int64, error)   { return d.q.DatabaseNow(ctx) }

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
	current, err := postgres.New(conn).SchemaVersion(ctx)
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

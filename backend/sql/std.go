package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/silent"
	"github.com/simba-go/simba/internal/sqlitebusy"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/sql/schema"
)

// dbtx is what the generated database/sql query packages run on: a *sql.DB or a *sql.Conn.
type dbtx interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	PrepareContext(context.Context, string) (*sql.Stmt, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// stdDialect runs the MySQL/MariaDB and SQLite statements on database/sql: a transaction
// opened with the dialect's begin statement on one pinned connection; the reply always told
// from values read, never from affected-row counts.
type stdDialect struct {
	b     *Backend
	db    *sql.DB
	q     func(dbtx) sqlq.Queries // the dialect's adapter (generated/sqlq)
	begin string
	// setup is run once on every driver connection before its first use when the pool is the
	// user's (NewSQLite): Open puts it in the DSN instead.
	setup []string
	// idleTx is the dialect's IdleTxTimeout statement (MySQL/MariaDB; "": none), run once on
	// each connection conn pins once a session opened, with idleTxBound of the backend's
	// shortest TTL; idleTxUnknown reports the server's refusal of it as an unknown variable
	// (MySQL 8), after which idleTxOff stops trying.
	idleTx        string
	idleTxUnknown func(error) bool
	idleTxOff     atomic.Bool

	seenMu sync.Mutex
	seen   map[any]struct{} // driver connections that ran setup (and idleTx, when it ran)

	// conns are the connections of a pool on MySQLConnector (Open's too), for dropSilent;
	// nil otherwise.
	conns *silent.Registry
	// server and user name the MySQL/MariaDB server and user in an error of refused access
	// (a pool made on MySQLConnector); "" otherwise.
	server, user string
	// unstamped is the warning, once, for a MySQL/MariaDB pool not made on MySQLConnector.
	unstamped sync.Once

	classifyErr func(b *Backend, op string, err error) error
	// rolledBack reports an error by which the database says it rolled the whole transaction
	// (or autocommit statement) back to break a deadlock: nothing of it took effect, so it is
	// run again (see retryRolledBack). nil: the dialect has none.
	rolledBack func(error) bool
	// lockMigrate takes the lock that serialises Migrate on conn and returns its release.
	lockMigrate func(ctx context.Context, conn *sql.Conn) (func(), error)
	// ddlInTx: the migration's statements run in one transaction (SQLite).
	ddlInTx bool
	// migrateBusy: Migrate starts again after SQLITE_BUSY (sqlitebusy.Retry; nothing of a
	// migration that failed took effect: it runs in one transaction), which a new connection's
	// PRAGMA journal_mode=wal returns at once, without waiting in the busy handler, while
	// another process sets a new file up (SQLite).
	migrateBusy bool
	// gate, when set, is entered around every operation (SQLite: see fileGate).
	gate *fileGate
	// wal, when set, puts the database in WAL mode before the first operation that may write
	// (SQLite opened by Open without a journal_mode in the DSN: see walSwitch).
	wal *walSwitch
	// spare keeps one connection of a user's bounded MySQL/MariaDB pool for keep-alives
	// (keepAliveConn; its slots are the waker's too, see NewMySQL); the zero keepAliveConn
	// (SQLite, whose gate runs keep-alives first, and unbounded pools) takes none.
	spare keepAliveConn
}

// idleTxBound is how long a connection may sit idle inside a transaction before the server
// ends it, for a backend whose shortest session TTL is ttl (0: no session opened yet, and no
// bound): a third of it, the renewal interval that bounds every call (the client's call
// timeout), at least minIdleTx. A transaction idle for longer is one whose client gave up on
// it or is stopped (SIGSTOP, a GC pause, a VM frozen) while it holds row locks.
func idleTxBound(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	return max(ttl/3, minIdleTx)
}

// minIdleTx is the least idleTxBound (MariaDB counts whole seconds).
const minIdleTx = time.Second

// maxSeen bounds the set of connections known to have run setup; when it is exceeded the set
// is forgotten (setup is idempotent, and the pool has replaced most of those connections).
const maxSeen = 4096

func (d *stdDialect) classify(op string, err error) error { return d.classifyErr(d.b, op, err) }

// conn pins a connection of the pool with the session setup applied.
func (d *stdDialect) conn(ctx context.Context) (*sql.Conn, error) {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var idle time.Duration
	if d.idleTx != "" && d.b != nil && !d.idleTxOff.Load() {
		idle = idleTxBound(d.b.minTTL.Get())
	}
	if len(d.setup) == 0 && idle == 0 {
		return c, nil
	}
	var key any
	if err := c.Raw(func(dc any) error { key = dc; return nil }); err != nil {
		c.Close()
		return nil, err
	}
	d.seenMu.Lock()
	_, ok := d.seen[key]
	d.seenMu.Unlock()
	if ok {
		return c, nil
	}
	for _, st := range d.setup {
		if _, err := c.ExecContext(ctx, st); err != nil {
			c.Close()
			return nil, fmt.Errorf("session setup %q: %w", st, err)
		}
	}
	if idle > 0 {
		if _, err := c.ExecContext(ctx, d.idleTx, idle.Milliseconds()); err != nil {
			if d.idleTxUnknown == nil || !d.idleTxUnknown(err) {
				c.Close()
				return nil, fmt.Errorf("session setup %q: %w", d.idleTx, err)
			}
			d.idleTxOff.Store(true) // MySQL 8: no such variable; wait_timeout is all there is
		}
	}
	d.seenMu.Lock()
	if d.seen == nil || len(d.seen) >= maxSeen {
		d.seen = map[any]struct{}{}
	}
	d.seen[key] = struct{}{}
	d.seenMu.Unlock()
	return c, nil
}

// run runs fn on the pool, or on a pinned connection when connections need setup. Every fn
// given to run is a sequence of autocommit statements each safe to repeat, so run repeats fn
// when the database rolled one of them back to break a deadlock.
func (d *stdDialect) run(ctx context.Context, fn func(q sqlq.Queries) error) error {
	return retryRolledBack(ctx, d.rolledBack, func() error {
		if len(d.setup) == 0 {
			return fn(d.q(d.db))
		}
		c, err := d.conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(d.q(c))
	})
}

// tx runs fn between the dialect's begin statement and COMMIT on one connection. On any
// failure, including a failed COMMIT (SQLite keeps the transaction open after a busy COMMIT),
// it rolls back; if even that fails the connection is discarded, never returned to the pool
// inside a transaction. A transaction the database rolled back to break a deadlock is run
// again.
func (d *stdDialect) tx(ctx context.Context, fn func(q sqlq.Queries) error) error {
	return retryRolledBack(ctx, d.rolledBack, func() error {
		c, err := d.conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		return d.txOn(ctx, c, fn)
	})
}

func (d *stdDialect) rollback(ctx context.Context, c *sql.Conn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.ExecContext(rctx, wire.SQLRollback); err != nil {
		// Discard the connection: returning driver.ErrBadConn from Raw closes it.
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// with runs fn in a transaction (tx) or statement by statement (run), inside the dialect's
// gate if it has one.
func (d *stdDialect) with(ctx context.Context, tx bool, fn func(q sqlq.Queries) error) error {
	leave, err := d.spare.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	if d.conns == nil {
		err = d.with1(ctx, tx, fn)
		if err != nil && d.b != nil && d.b.name == wire.SQLMySQL && silent.TimedOut(err) {
			d.unstamped.Do(func() {
				d.b.log().Warn("simba: sql mysql: a call ran out of time, and the pool's connections do not note when they last read and wrote: those a silent link left are handed out again after it heals, each failing a call at its timeout, the session's keep-alive too; make the pool on MySQLConnector")
			})
		}
		return err
	}
	t0 := silent.Now()
	err = d.with1(ctx, tx, fn)
	if err != nil && silent.TimedOut(err) {
		d.dropSilent(t0)
	}
	return err
}

// dropSilent closes every connection of the pool that has neither read nor begun a write
// since t0, when a call that began at t0 ran out of time: that is evidence of a link gone
// silent (a blackhole), and the pool's idle connections were silenced with it. database/sql
// hands an idle connection out again without a round trip, so each of them would fail one
// call more, at its timeout, once the link heals: the keep-alive and its retry alike, which
// lost the session to every outage of 0.2 to 1.2 s at a TTL of 3 s after a burst of calls.
// The connections are marked rather than closed: database/sql asks (mysqlConn's ResetSession)
// when it takes one from the pool, discards it (closing it through the driver) and takes
// another or dials a new one. A connection closed under it instead was found by
// go-sql-driver's liveness check, which logged "closing bad idle connection" for each.
func (d *stdDialect) dropSilent(t0 int64) { d.conns.MarkSilent(t0) }

func (d *stdDialect) with1(ctx context.Context, tx bool, fn func(q sqlq.Queries) error) error {
	if d.gate != nil {
		leave, err := d.gate.enter(ctx)
		if err != nil {
			return err
		}
		defer leave()
	}
	if d.wal != nil && !readOnly(ctx) {
		if err := d.wal.ensure(ctx, d); err != nil {
			return err
		}
	}
	var err error
	if tx {
		err = d.tx(ctx, fn)
	} else {
		err = d.run(ctx, fn)
	}
	if d.gate != nil && (errors.Is(err, context.DeadlineExceeded) || sqliteWriteBusy(err)) {
		err = d.gate.writeLockHeld(err)
	}
	return err
}

func (d *stdDialect) catalog(ctx context.Context, query string, ncols int) ([][]string, error) {
	var db dbtx = d.db
	if len(d.setup) > 0 {
		c, err := d.conn(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		db = c
	}
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if len(names) != ncols {
		return nil, fmt.Errorf("catalog query returned %d columns, want %d", len(names), ncols)
	}
	var out [][]string
	vals := make([]sql.NullString, ncols)
	ptrs := make([]any, ncols)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, ncols)
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func (d *stdDialect) migrate(ctx context.Context, ms []schema.Migration) error {
	if !d.migrateBusy {
		return d.migrateOnce(ctx, ms)
	}
	return sqlitebusy.Retry(ctx, func() error {
		if d.wal != nil {
			if err := d.wal.ensure(ctx, d); err != nil {
				return err
			}
		}
		return d.migrateOnce(ctx, ms)
	})
}

func (d *stdDialect) migrateOnce(ctx context.Context, ms []schema.Migration) error {
	c, err := d.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	unlock, err := d.lockMigrate(ctx, c)
	if err != nil {
		return err
	}
	defer unlock()
	current, err := d.q(c).SchemaVersion(ctx)
	if err != nil {
		if !errors.Is(d.classify("schema version", err), spi.ErrSchemaMissing) {
			return err
		}
		current = 0
	}
	if int64(ms[len(ms)-1].Version) <= current {
		return nil // nothing to apply (ms is in order)
	}
	apply := func(m schema.Migration) error {
		for _, st := range m.Statements {
			if _, err := c.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("applying %s: %w", m.Path, err)
			}
		}
		return nil
	}
	if d.ddlInTx {
		// Every missing migration in one transaction: another process never sees the schema
		// half made (tables there, but an old version), which it would report as
		// ErrSchemaMissing — permanent — and `simba lock` on a new SQLite file as "run simba
		// migrate".
		return d.txOn(ctx, c, func(sqlq.Queries) error {
			for _, m := range ms {
				if int64(m.Version) > current {
					if err := apply(m); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	for _, m := range ms {
		if int64(m.Version) > current {
			if err := apply(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// txOn is tx on an already pinned connection.
func (d *stdDialect) txOn(ctx context.Context, c *sql.Conn, fn func(q sqlq.Queries) error) error {
	if _, err := c.ExecContext(ctx, d.begin); err != nil {
		d.rollback(ctx, c)
		return err
	}
	if err := fn(d.q(c)); err != nil {
		d.rollback(ctx, c)
		return err
	}
	if _, err := c.ExecContext(ctx, wire.SQLCommit); err != nil {
		d.rollback(ctx, c)
		return err
	}
	return nil
}

package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/generated/wire"
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

// readLease is step 3 of the four-step acquire.
type readLease struct {
	holder      string
	token       int64
	nextToken   int64 // max(token + 1, the database clock in µs); -1 when token < 0 or at the maximum
	owner       string
	remainingMs int64
}

// member is one (group, session) row.
type member struct{ group, session string }

// lease is one inspected lease row.
type lease struct {
	name, holder, owner string
	token, remainingMs  int64
}

// session is one inspected session row.
type session struct {
	id, owner   string
	remainingMs int64
}

// stdQueries adapts the generated MySQL or SQLite queries (which differ only in their types) to
// one interface, so that both dialects share the operation logic of stdDialect.
type stdQueries interface {
	openSession(ctx context.Context, id, owner string, ttlMs int64) error
	// renew renews the session and tells whether it is live and its time left: SQLite's
	// KeepAliveRenew, MySQL's KeepAliveRenewNoReturn then SessionRemaining.
	renew(ctx context.Context, sid string) (remainingMs int64, live bool, err error)
	held(ctx context.Context, sid string) ([]spi.Held, error)
	keepAliveMembers(ctx context.Context, groups []string) ([]member, error)
	closeRelease(ctx context.Context, sid string) error
	closeLeave(ctx context.Context, sid string) error
	closeDelete(ctx context.Context, sid string) error
	lockSession(ctx context.Context, sid string) (int64, error)
	ensureLease(ctx context.Context, name string) error
	readLease(ctx context.Context, name string) (readLease, error)
	take(ctx context.Context, sid, name string, token int64) error
	release(ctx context.Context, sid, name string, token int64) error
	joinInsert(ctx context.Context, sid, group string) error
	leaveDelete(ctx context.Context, sid, group string) error
	sessionRemaining(ctx context.Context, sid string) (int64, error)
	members(ctx context.Context, group string) ([]string, error)
	housekeepingMembers(ctx context.Context) error
	housekeepingSessions(ctx context.Context) error
	inspectLeases(ctx context.Context) ([]lease, error)
	inspectSessions(ctx context.Context) ([]session, error)
	inspectMembers(ctx context.Context) ([]member, error)
	schemaVersion(ctx context.Context) (int64, error)
	databaseNow(ctx context.Context) (int64, error)
	clearForeignHolder(ctx context.Context, name, holder string) error
}

// stdDialect runs the MySQL/MariaDB and SQLite operations on database/sql: multi-statement
// operations in a transaction opened with the dialect's begin statement on one pinned
// connection; the reply always told from values read, never from affected-row counts.
type stdDialect struct {
	b     *Backend
	db    *sql.DB
	q     func(dbtx) stdQueries
	begin string
	// setup is run once on every driver connection before its first use when the pool is the
	// user's (NewSQLite): Open puts it in the DSN instead.
	setup []string

	seenMu sync.Mutex
	seen   map[any]struct{} // driver connections that ran setup

	classifyErr func(b *Backend, op string, err error) error
	// rolledBack reports an error by which the database says it rolled the whole transaction
	// (or autocommit statement) back to break a deadlock: nothing of it took effect, so it is
	// run again (see retryRolledBack). nil: the dialect has none.
	rolledBack func(error) bool
	// lockMigrate takes the lock that serialises Migrate on conn and returns its release.
	lockMigrate func(ctx context.Context, conn *sql.Conn) (func(), error)
	// ddlInTx: the migration's statements run in one transaction (SQLite).
	ddlInTx bool
}

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
	if len(d.setup) == 0 {
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
func (d *stdDialect) run(ctx context.Context, fn func(q stdQueries) error) error {
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
func (d *stdDialect) tx(ctx context.Context, fn func(q stdQueries) error) error {
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

func (d *stdDialect) openSession(ctx context.Context, id, owner string, ttlMs int64) error {
	return d.run(ctx, func(q stdQueries) error { return q.openSession(ctx, id, owner, ttlMs) })
}

// keepAlive renews first, then lists the held leases and (when groups are asked) the groups'
// members: a fixed number of autocommit statements whatever the number of leases.
func (d *stdDialect) keepAlive(ctx context.Context, sid string, groups []string) (spi.KeepAlive, error) {
	var ka spi.KeepAlive
	err := d.run(ctx, func(q stdQueries) error {
		rem, live, err := q.renew(ctx, sid)
		if err != nil {
			return err
		}
		if !live {
			ka = spi.KeepAlive{Expired: true}
			return nil
		}
		ka.Remaining = millis(rem)
		if ka.Held, err = q.held(ctx, sid); err != nil {
			return err
		}
		if len(groups) == 0 {
			return nil
		}
		ms, err := q.keepAliveMembers(ctx, groups)
		if err != nil {
			return err
		}
		ka.Members = memberMap(len(groups))
		for _, m := range ms {
			ka.Members[m.group] = append(ka.Members[m.group], spi.SessionID(m.session))
		}
		return nil
	})
	return ka, err
}

func (d *stdDialect) closeSession(ctx context.Context, sid string) error {
	return d.tx(ctx, func(q stdQueries) error {
		if err := q.closeRelease(ctx, sid); err != nil {
			return err
		}
		if err := q.closeLeave(ctx, sid); err != nil {
			return err
		}
		return q.closeDelete(ctx, sid)
	})
}

// acquire is one transaction of four steps (DESIGN.md §5, spec/sql.yaml): lock the caller's
// live session row, ensure the lease row exists (locking it), read the holder with its session
// row share-locked and the next token (max(token + 1, the database clock in µs)), and take the
// lease with that token when it is free or its holder expired. A negative stored token, or one
// with no successor, rolls back with ErrCorruptToken / ErrTokenOverflow: nothing is written.
func (d *stdDialect) acquire(ctx context.Context, sid, name string) (spi.Acquire, error) {
	var r spi.Acquire
	err := d.tx(ctx, func(q stdQueries) error {
		mine, err := q.lockSession(ctx, sid)
		if errors.Is(err, sql.ErrNoRows) {
			r = spi.Acquire{Kind: spi.SessionExpired}
			return nil
		}
		if err != nil {
			return err
		}
		if err := q.ensureLease(ctx, name); err != nil {
			return err
		}
		l, err := q.readLease(ctx, name)
		if err != nil {
			return err
		}
		switch {
		case l.token < 0:
			return corruptToken(name, l.token)
		case l.holder == sid:
			r = spi.Acquire{Kind: spi.Granted, Token: l.token, Remaining: millis(mine)}
		case l.holder == "" || l.remainingMs <= 0:
			if l.nextToken <= l.token {
				return tokenOverflow(name, l.token)
			}
			if err := q.take(ctx, sid, name, l.nextToken); err != nil {
				return err
			}
			r = spi.Acquire{Kind: spi.Granted, Token: l.nextToken, Remaining: millis(mine)}
		default:
			r = spi.Acquire{Kind: spi.HeldBy, Holder: spi.SessionID(l.holder), HolderOwner: l.owner, Remaining: millis(l.remainingMs)}
		}
		return nil
	})
	if err != nil {
		return spi.Acquire{}, err
	}
	return r, nil
}

func (d *stdDialect) release(ctx context.Context, sid, name string, token int64) error {
	return d.run(ctx, func(q stdQueries) error { return q.release(ctx, sid, name, token) })
}

// live tells from session_remaining whether the session is live: no row or ≤ 0 is expired.
func live(rem int64, err error) (bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return rem > 0, nil
}

func (d *stdDialect) join(ctx context.Context, sid, group string) (ok bool, err error) {
	err = d.run(ctx, func(q stdQueries) error {
		if err := q.joinInsert(ctx, sid, group); err != nil {
			return err
		}
		ok, err = live(q.sessionRemaining(ctx, sid))
		return err
	})
	return ok, err
}

func (d *stdDialect) leave(ctx context.Context, sid, group string) (ok bool, err error) {
	err = d.run(ctx, func(q stdQueries) error {
		if err := q.leaveDelete(ctx, sid, group); err != nil {
			return err
		}
		ok, err = live(q.sessionRemaining(ctx, sid))
		return err
	})
	return ok, err
}

func (d *stdDialect) members(ctx context.Context, group string) (ids []string, err error) {
	err = d.run(ctx, func(q stdQueries) error {
		ids, err = q.members(ctx, group)
		return err
	})
	return ids, err
}

func (d *stdDialect) housekeeping(ctx context.Context) error {
	return d.run(ctx, func(q stdQueries) error {
		if err := q.housekeepingMembers(ctx); err != nil {
			return err
		}
		return q.housekeepingSessions(ctx)
	})
}

func (d *stdDialect) inspect(ctx context.Context) (spi.Snapshot, error) {
	s := spi.Snapshot{Groups: memberMap(0)}
	err := d.run(ctx, func(q stdQueries) error {
		leases, err := q.inspectLeases(ctx)
		if err != nil {
			return err
		}
		sessions, err := q.inspectSessions(ctx)
		if err != nil {
			return err
		}
		members, err := q.inspectMembers(ctx)
		if err != nil {
			return err
		}
		for _, l := range leases {
			s.Leases = append(s.Leases, leaseInfo(l.name, l.holder, l.owner, l.token, l.remainingMs))
		}
		for _, x := range sessions {
			s.Sessions = append(s.Sessions, spi.SessionInfo{ID: spi.SessionID(x.id), Owner: x.owner, Remaining: millis(x.remainingMs)})
		}
		for _, m := range members {
			s.Groups[m.group] = append(s.Groups[m.group], spi.SessionID(m.session))
		}
		return nil
	})
	return s, err
}

func (d *stdDialect) schemaVersion(ctx context.Context) (v int64, err error) {
	err = d.run(ctx, func(q stdQueries) error {
		v, err = q.schemaVersion(ctx)
		return err
	})
	return v, err
}

func (d *stdDialect) databaseNow(ctx context.Context) (v int64, err error) {
	err = d.run(ctx, func(q stdQueries) error {
		v, err = q.databaseNow(ctx)
		return err
	})
	return v, err
}

func (d *stdDialect) clearForeignHolder(ctx context.Context, name, holder string) error {
	return d.run(ctx, func(q stdQueries) error { return q.clearForeignHolder(ctx, name, holder) })
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
	current, err := d.q(c).schemaVersion(ctx)
	if err != nil {
		if !errors.Is(d.classify("schema version", err), spi.ErrSchemaMissing) {
			return err
		}
		current = 0
	}
	for _, m := range ms {
		if int64(m.Version) <= current {
			continue
		}
		apply := func(q stdQueries) error {
			for _, st := range m.Statements {
				if _, err := c.ExecContext(ctx, st); err != nil {
					return fmt.Errorf("applying %s: %w", m.Path, err)
				}
			}
			return nil
		}
		if d.ddlInTx {
			err = d.txOn(ctx, c, apply)
		} else {
			err = apply(nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// txOn is tx on an already pinned connection.
func (d *stdDialect) txOn(ctx context.Context, c *sql.Conn, fn func(q stdQueries) error) error {
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

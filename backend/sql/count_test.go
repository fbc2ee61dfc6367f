package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"modernc.org/sqlite"

	"github.com/simba-go/simba/spi"
)

// counter counts the statements a backend sends and the round trips they take (a pipelined
// pgx batch is one round trip for all its statements).
type counter struct {
	mu     sync.Mutex
	stmts  int64
	trips  int64
	log    []string
	record bool
}

func (c *counter) add(sql string, trip bool) {
	if strings.HasPrefix(sql, "-- ping") {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stmts++
	if trip {
		c.trips++
	}
	if c.record {
		c.log = append(c.log, firstLine(sql))
	}
}

// firstLine names a statement by its sqlc name or its first words.
func firstLine(sql string) string {
	if name, ok := strings.CutPrefix(sql, "-- name: "); ok {
		return strings.Fields(name)[0]
	}
	return strings.Join(strings.Fields(sql), " ")
}

// reset zeroes the counts and returns the previous ones.
func (c *counter) reset() (stmts, trips int64, log []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stmts, trips, log = c.stmts, c.trips, c.log
	c.stmts, c.trips, c.log = 0, 0, nil
	return
}

// pgx tracer: every Query/QueryRow/Exec is one statement and one round trip; every query of a
// batch one statement, the batch one round trip.
func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(d.SQL, true)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.mu.Lock()
	c.trips++
	c.mu.Unlock()
	return ctx
}
func (c *counter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.add(d.SQL, false)
}
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countingConnector wraps a database/sql driver so that every statement is counted.
type countingConnector struct {
	connect func(ctx context.Context) (driver.Conn, error)
	drv     driver.Driver
	c       *counter
}

func (cc *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: cc.c}, nil
}

func (cc *countingConnector) Driver() driver.Driver { return cc.drv }

type countingConn struct {
	driver.Conn
	c *counter
}

func (cn *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := cn.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := e.ExecContext(ctx, query, args)
	if err != driver.ErrSkip {
		cn.c.add(query, true)
	}
	return r, err
}

func (cn *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := cn.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := q.QueryContext(ctx, query, args)
	if err != driver.ErrSkip {
		cn.c.add(query, true)
	}
	return r, err
}

func (cn *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := cn.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = cn.Conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, c: cn.c, query: query}, nil
}

func (cn *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := cn.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (cn *countingConn) IsValid() bool {
	if v, ok := cn.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (cn *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := cn.Conn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// countingStmt counts the executions of a prepared statement (go-sql-driver without
// interpolateParams prepares every statement with arguments).
type countingStmt struct {
	driver.Stmt
	c     *counter
	query string
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.add(s.query, true)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.add(s.query, true)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// countedBackend opens a backend of dialect on dsn whose every statement c counts: PostgreSQL
// with a pgx tracer, MySQL and SQLite through a counting database/sql driver.
func countedBackend(t testing.TB, dialect, dsn string, c *counter) *Backend {
	t.Helper()
	var b *Backend
	var err error
	switch dialect {
	case "postgres":
		cfg, perr := pgxpool.ParseConfig(dsn)
		if perr != nil {
			t.Fatal(perr)
		}
		cfg.AfterConnect = PostgresAfterConnect
		cfg.ConnConfig.Tracer = c
		pool, perr := pgxpool.NewWithConfig(testCtx(t), cfg)
		if perr != nil {
			t.Fatal(perr)
		}
		t.Cleanup(pool.Close)
		b, err = NewPostgres(pool, WithHousekeepingInterval(-1))
	case "mysql":
		cfg, merr := MySQLConfig(dsn)
		if merr != nil {
			t.Fatal(merr)
		}
		inner, merr := mysqldriver.NewConnector(cfg)
		if merr != nil {
			t.Fatal(merr)
		}
		db := sql.OpenDB(&countingConnector{connect: inner.Connect, drv: inner.Driver(), c: c})
		t.Cleanup(func() { db.Close() })
		b, err = NewMySQL(db, WithHousekeepingInterval(-1))
	case "sqlite":
		name, lerr := SQLiteDSN(dsn)
		if lerr != nil {
			t.Fatal(lerr)
		}
		drv := &sqlite.Driver{}
		db := sql.OpenDB(&countingConnector{
			connect: func(context.Context) (driver.Conn, error) { return drv.Open(name) },
			drv:     drv, c: c})
		t.Cleanup(func() { db.Close() })
		b, err = newSQLite(db, nil, "", false, nil, []Option{WithHousekeepingInterval(-1)})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return b
}

// holdMany makes session s hold n leases named prefix-00000... with test-only bulk inserts (the
// acquire path is not what is being measured).
func holdMany(t testing.TB, b *Backend, s spi.SessionID, prefix string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	const chunk = 500
	for i := 0; i < n; i += chunk {
		part := names[i:min(i+chunk, n)]
		var sb strings.Builder
		args := make([]any, 0, 2*len(part))
		sb.WriteString("INSERT INTO simba_lease (name, session_id, token) VALUES ")
		for j, name := range part {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, 1)")
			args = append(args, name, string(s))
		}
		exec(t, b, sb.String(), args...)
	}
	return names
}

// statementsOf runs f and returns the statements and round trips it took.
func statementsOf(t testing.TB, c *counter, f func() error) (int64, int64, []string) {
	t.Helper()
	c.reset()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	return c.reset()
}

// TestStatementCounts: every operation runs the fixed statements generated/wire lists, and a
// keep-alive costs the same whether the session holds 1 lease or 10,000 (counted by a pgx
// tracer / a wrapping database/sql driver, not timed).
func TestStatementCounts(t *testing.T) {
	type want struct{ stmts, trips int64 }
	wants := map[string]map[string]want{
		"postgres": {"keep-alive": {4, 1}, "keep-alive-no-groups": {3, 1}, "acquire": {1, 1}, "release": {1, 1}, "join": {1, 1}, "close": {1, 1}},
		"mysql":    {"keep-alive": {4, 4}, "keep-alive-no-groups": {3, 3}, "acquire": {6, 6}, "release": {1, 1}, "join": {2, 2}, "close": {5, 5}},
		"sqlite":   {"keep-alive": {3, 3}, "keep-alive-no-groups": {2, 2}, "acquire": {6, 6}, "release": {1, 1}, "join": {2, 2}, "close": {5, 5}},
	}
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			c := &counter{record: true}
			b := countedBackend(t, d.name, d.dsn(t), c)
			ctx := testCtx(t)
			s := openSession(t, b, longTTL)
			check := func(op string, f func() error) {
				t.Helper()
				n, trips, log := statementsOf(t, c, f)
				if w := wants[d.name][op]; n != w.stmts || trips != w.trips {
					t.Errorf("%s: %d statements in %d round trips %q, want %d in %d", op, n, trips, log, w.stmts, w.trips)
				}
			}
			var tok int64
			check("acquire", func() error {
				r, err := b.Acquire(ctx, s, "count")
				tok = r.Token
				return err
			})
			check("release", func() error { return b.Release(ctx, s, "count", tok) })
			check("join", func() error { _, err := b.Join(ctx, s, "count-group"); return err })
			for _, n := range []int{1, 10_000} {
				names := holdMany(t, b, s, fmt.Sprintf("count%d", n), n)
				check("keep-alive", func() error {
					ka, err := b.KeepAlive(ctx, s, names, []string{"count-group"})
					if err == nil && (len(ka.Held) < n || len(ka.Members["count-group"]) != 1) {
						err = fmt.Errorf("keep-alive listed %d leases and %v", len(ka.Held), ka.Members)
					}
					return err
				})
				check("keep-alive-no-groups", func() error { _, err := b.KeepAlive(ctx, s, names, nil); return err })
			}
			check("close", func() error { return b.CloseSession(ctx, s) })
		})
	}
}

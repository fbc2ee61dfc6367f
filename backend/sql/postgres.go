package sql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/silent"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/sql/schema"
)

// NewPostgres returns a PostgreSQL backend on the user's pool. The backend's transactions each
// set idle_in_transaction_session_timeout for themselves alone (see the package doc): the
// pool's connections keep their own setting. Every connection of the pool must
// run at READ COMMITTED, PostgreSQL's default: when the server or role default is stricter, set
// PostgresAfterConnect as the pool's AfterConnect. NewPostgres does no I/O; the schema is checked
// (or migrated, WithAutoMigrate) before the first operation. Close does not close pool. The hint
// listener opens its own connection with the pool's connection settings.
//
// Build the pool from PostgresPoolConfig to get what Open's pool has: a connect timeout and
// bounds on what a connection holds its pool slot for while the server's replies are lost
// (without them, a server that stopped answering for 3 s at a TTL of 3 s left a trial's pool
// unable to make a call for 14 s after the network healed). A pool with no connect timeout is
// logged as a warning (WithLogger), once, by NewPostgres: pgxpool then waits 2 min for a
// connection whose startup reply the network lost, holding its slot.
//
// The pool stays yours, and so does the wait of its Close. The backend's Close does not close
// it and cannot cut its connections' cleanups short, as it does on Open's pool: on a link gone
// silent, or a server gone, your pool.Close waits for the cleanup of every connection that broke
// (a cancel request on a new connection, then Terminate, each waiting for the server to close
// its connection), up to 15 s on a plain pgxpool (pgconn's own bound), and up to twice the
// connect timeout (5 s by default; once for each) on a pool built from PostgresPoolConfig. To
// wait less, build the pool from PostgresPoolConfig with a shorter connect_timeout, or close it
// on a goroutine of its own and do not wait: the server drops the connections it finds gone
// either way.
func NewPostgres(pool *pgxpool.Pool, opts ...Option) (*Backend, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: sql postgres: nil pool", spi.ErrInvalidOption)
	}
	wd, _ := wire.SQLDialectByName(wire.SQLPostgres)
	d := &pgDialect{pool: pool, q: sqlq.Postgres(callPool{pool}), begin: wd.Begin, idleTx: wd.IdleTxTimeout, hub: pgHub{listening: make(chan struct{}, 1), reached: make(chan struct{}, 1)},
		spare: newKeepAliveConn(int(pool.Config().MaxConns))}
	b, err := newBackend(wire.SQLPostgres, d, opts)
	if err != nil {
		return nil, err
	}
	d.b = b
	b.notes, b.groupsN = &d.hub, &d.hub
	if pool.Config().ConnConfig.ConnectTimeout <= 0 {
		log := b.cfg.logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("simba: sql postgres: the pool has no connect timeout: a connection started while the server's replies are lost holds its pool slot for pgxpool's 2 min; set connect_timeout, or build the pool from PostgresPoolConfig")
	}
	return b, nil
}

// DefaultConnectTimeout is the connect timeout of a pool Open makes from a DSN that sets none:
// PostgreSQL's connect_timeout, MySQL/MariaDB's timeout (go-sql-driver's dial timeout). It is
// the default call timeout (the default TTL's renewal interval, 15 s / 3), and several times
// what a connection takes over a slow link (TCP, TLS and SCRAM authentication are about seven
// round trips: 2 s at 300 ms). Without it, a PostgreSQL connection started while the network
// lost the server's replies waited for its startup reply forever after the network healed,
// holding a slot of the pool: a few of them and the backend made no call again.
const DefaultConnectTimeout = 5 * time.Second

// PostgresAfterConnect runs the PostgreSQL session setup (wire.SQLDialectByName("postgres")
// .SessionSetup: READ COMMITTED) on a new connection. Use it as pgxpool.Config.AfterConnect for a
// pool you pass to NewPostgres; Open sets it itself. pgxpool runs it with a context that has no
// deadline, so it bounds the setup by the connection's connect timeout (DefaultConnectTimeout
// when there is none).
func PostgresAfterConnect(ctx context.Context, c *pgx.Conn) error {
	timeout := c.Config().ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d, _ := wire.SQLDialectByName(wire.SQLPostgres)
	for _, st := range d.SessionSetup {
		if _, err := c.Exec(ctx, st); err != nil {
			return fmt.Errorf("simba session setup %q: %w", st, err)
		}
	}
	return nil
}

// boundPgConnects bounds what a connection of cfg's pool may hold its pool slot for while
// the server's replies are lost: its connect, and the cleanup after it broke. Both are bounded
// by the connect timeout, or by twice the time the call that started the connect had left,
// whichever is less (scaledConnectTimeout); while connects keep failing, one at a time gets a
// longer bound (connectPatience). With no connect timeout (connect_timeout=0, which pgxpool
// makes 2 min) nothing is bounded.
//
// pgxpool makes a connection apart from the call that wanted one, bounded by the connect
// timeout alone, and keeps its slot until then: a call that gives up at its deadline leaves
// the connect running. In a trial (TTL 3 s, calls of 1 s, a pool of 4, the server's replies
// lost for 3 s) the failed calls of the outage left four connects and cleanups of 5 s each
// holding every slot, and the pool made no call until 4.2 s after the network healed; bounded
// by twice the call's time, a slot is free again at most 2 s after its connect began.
//
// The cleanup of a connection that broke (a statement cut short by its context, a read that
// failed) sends a cancel request on a new connection and waits for the server to close that
// one, then sends Terminate and reads until the server closes the broken one, for up to 15 s
// in pgconn, and pgxpool keeps the slot until then: in a trial, connections whose bytes were
// lost for good (orphaned by the network) held every slot of a pool for 11 s after the network
// healed. Nothing is lost by cutting the cleanup short: the cancel request and Terminate only
// spare the server work it does anyway when it finds the connection gone.
//
// It returns the connCut of the pool's connections (nil when nothing is bounded).
func boundPgConnects(cfg *pgxpool.Config) *connCut {
	cc := &cfg.ConnConfig.Config
	if cc.ConnectTimeout <= 0 {
		return nil
	}
	cut := &connCut{conns: make(map[*boundedConn]struct{})}
	dial := cut.dial(cc.DialFunc)
	cc.DialFunc = boundedDial(dial, cc.ConnectTimeout, cut)
	after := cc.AfterNetConnect
	cc.AfterNetConnect = func(ctx context.Context, cfg *pgconn.Config, c net.Conn) (net.Conn, error) {
		if after != nil {
			var err error
			if c, err = after(ctx, cfg, c); err != nil {
				return nil, err
			}
		}
		if err := c.SetDeadline(time.Time{}); err != nil {
			return nil, err
		}
		return c, nil
	}
	// pgxpool passes BeforeConnect a copy of the connection configuration (and a context with
	// the values of the acquire's, not its deadline): what it sets holds for that one connection,
	// its cancel requests included.
	cfg.BeforeConnect = patientPgConnects(dial, &connectPatience{}, cut)
	return cut
}

// patientPgConnects is the pool's BeforeConnect of boundPgConnects: a connect started by a
// call is bounded by twice the call's time (scaledConnectTimeout), or longer while connects
// keep failing (pat), and every connect that completes, whatever its bound, tells pat so
// (connectPatience.connected). dial is the pool's dial before boundPgConnects wrapped it.
//
// The hook that tells pat was set only on connects given a bound below the connect timeout:
// a patient connect capped at the connect timeout, or one started with no call's deadline,
// completed without starting the patience over. Against a server slow to set connections up,
// the next connect after the capped one had run out was patient again at once, at the full
// connect timeout: a link that then lost the server's replies held a slot for the connect
// timeout, not twice its call's time, until a scaled connect happened to complete.
func patientPgConnects(dial pgconn.DialFunc, pat *connectPatience, cut *connCut) func(context.Context, *pgx.ConnConfig) error {
	return func(ctx context.Context, c *pgx.ConnConfig) error {
		// pgconn runs its AfterConnect once the startup is done, on success only.
		after := c.AfterConnect
		c.AfterConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
			if after != nil {
				if err := after(ctx, pc); err != nil {
					return err
				}
			}
			pat.connected()
			return nil
		}
		bound, ok := scaledConnectTimeout(ctx, c.ConnectTimeout)
		if !ok {
			return nil
		}
		if bound = pat.bound(time.Now(), bound, c.ConnectTimeout); bound < c.ConnectTimeout {
			c.ConnectTimeout = bound
			c.DialFunc = boundedDial(dial, bound, cut)
		}
		return nil
	}
}

// connectPatience lets a pool's connects outgrow the bound of twice their call's time
// (scaledConnectTimeout) while they keep failing, one connect at a time: that bound alone
// meant a server that takes longer than it to set a connection up (forking and
// authenticating under load) was never connected to. In a trial through a proxy that held
// each new connection 800 ms (TTL 1 s, calls of 333 ms, so connects bounded at 666 ms), 0 of
// 20 session opens succeeded, and as many connections were set up by the server for nobody;
// a connect that outlives its call still serves the next one from the pool.
//
// After a scaled connect is started and none has completed since, the next connect started
// while no patient one may still run is patient: its bound is twice the last patient one's
// (at first twice its own scaled bound), up to the connect timeout. A completed connect
// starts over. So a server slower than the calls is reached after a few connects of doubling
// bounds, while a link that loses the server's replies has one slot of the pool held by a
// connect for at most the connect timeout, the other slots' connects still freed at twice
// their calls' time. A pool of one connection waits that one connect out after the heal: after
// 3 s of lost replies under calls of 333 ms, its first call succeeded 1.9-2.1 s after the heal
// (0.17-0.20 s with the scaled bound alone); a pool of 4 (pgxpool's default up to 4 CPUs), 30-69 ms
// (18-34 ms).
type connectPatience struct {
	mu      sync.Mutex
	pending bool          // a scaled connect started since the last that completed
	last    time.Duration // the last patient connect's bound; 0 since a connect completed
	until   time.Time     // the last patient connect may run until then
}

// bound returns the bound of a connect starting at now whose scaled bound is scaled, under a
// connect timeout of configured.
func (p *connectPatience) bound(now time.Time, scaled, configured time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.pending {
		p.pending = true
		return scaled
	}
	if now.Before(p.until) {
		return scaled
	}
	b := min(max(2*p.last, 2*scaled), configured)
	p.last, p.until = b, now.Add(b)
	return b
}

// connected notes a connect that completed.
func (p *connectPatience) connected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending, p.last = false, 0
}

// boundedDial dials with dial and gives every connection a deadline of bound at once: a
// regular connection has it lifted when it reaches AfterNetConnect (TLS done; its startup is
// bounded by the connect timeout's context), a cancel request's keeps it (pgconn runs no
// AfterNetConnect there). Every later deadline is capped at bound from when it is set: pgconn
// sets none itself but the cleanup's 15 s and the instant one that ends a statement whose
// context ended.
//
// Every connection is tracked by cut (nil: none), which can end what it waits for.
func boundedDial(dial pgconn.DialFunc, bound time.Duration, cut *connCut) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		bc := &boundedConn{Conn: c, bound: bound, cut: cut}
		if err := bc.SetDeadline(time.Now().Add(bound)); err != nil {
			c.Close()
			return nil, err
		}
		if cut != nil && !cut.add(bc) {
			c.Close()
			return nil, errPoolCut
		}
		return bc, nil
	}
}

// errPoolCut is the error of a dial through a pool whose connections were cut (connCut).
var errPoolCut = errors.New("sql postgres: the backend that owns the pool is closed")

// connCut tracks the connections of a pool that Open made, so that the backend's Close ends
// what they wait for (cutAll) before it closes the pool. pgxpool's Close waits for every
// connection's cleanup: a connection whose statement was cut short by its context sends a
// cancel request on a new connection and waits for the server to close it, then sends
// Terminate and reads until the server closes the broken one, each bounded by the connect
// timeout (boundedConn) but not shorter. On a link gone silent that made the backend's Close
// take 4 to 8 s at a TTL of 3 s (calls of 1 s, connect timeout 5 s), after the client's own
// Close had taken 1 s: `simba run` exited 5.2 s after the blackhole instead of at the term's
// validity. Nothing is lost by cutting them: the server drops a connection it finds gone.
type connCut struct {
	mu   sync.Mutex
	done bool
	// stop ends when cutAll runs: it ends the dials in progress (nil until the first dial).
	stop     context.Context
	stopDone context.CancelFunc
	conns    map[*boundedConn]struct{}
}

// dial is dial (pgconn's default when nil) with its context ended by cutAll too: a cancel
// request's dial to a server that never answers the SYN waits for the cleanup's 15 s
// otherwise. The cut reaches each dial through context.AfterFunc, registered for the dial's
// time only: no goroutine per dial (there was one, watching for the cut, while the dial lasted).
func (k *connCut) dial(dial pgconn.DialFunc) pgconn.DialFunc {
	if dial == nil {
		d := &net.Dialer{KeepAlive: 5 * time.Minute}
		dial = d.DialContext
	}
	k.mu.Lock()
	if k.stop == nil {
		k.stop, k.stopDone = context.WithCancel(context.Background())
	}
	stop := k.stop
	k.mu.Unlock()
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(stop, cancel)()
		return dial(ctx, network, addr)
	}
}

// add tracks c, and reports false once cutAll ran (c is then not tracked).
func (k *connCut) add(c *boundedConn) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return false
	}
	k.conns[c] = struct{}{}
	return true
}

// remove stops tracking c (closed).
func (k *connCut) remove(c *boundedConn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.conns, c)
}

// cutAll ends every read of every tracked connection at once, and every later one (a read
// deadline in the past, which boundedConn keeps: pgconn's cleanup sets its own afterwards),
// and every dial in progress or to come. Writes go on, so that the pool's Close still sends
// Terminate on its healthy connections. Safe on nil and more than once.
func (k *connCut) cutAll() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return
	}
	k.done = true
	if k.stopDone != nil {
		k.stopDone()
	}
	// Under the lock, which every deadline set on a tracked connection takes (set): none set
	// after this one can move it back.
	for c := range k.conns {
		_ = c.Conn.SetReadDeadline(cutDeadline)
	}
}

// cutDeadline is a read deadline already passed.
var cutDeadline = time.Unix(1, 0)

// set runs fn, which sets a deadline of a connection k tracks (k may be nil), telling it
// whether cutAll ran; cutAll does not run meanwhile.
func (k *connCut) set(fn func(cut bool) error) error {
	if k == nil {
		return fn(false)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return fn(k.done)
}

// minScaledConnect is the least a connect started by a call is given, however little time the
// call had left: a connect over TLS takes a few round trips.
const minScaledConnect = 250 * time.Millisecond

// callDeadlineKey is the context key under which the backend's PostgreSQL calls carry their
// deadline (withCallDeadline) to the pool's BeforeConnect, which sees the acquire's values but
// not its deadline.
type callDeadlineKey struct{}

// withCallDeadline is ctx carrying its deadline as a value, for scaledConnectTimeout.
func withCallDeadline(ctx context.Context) context.Context {
	if d, ok := ctx.Deadline(); ok {
		return context.WithValue(ctx, callDeadlineKey{}, d)
	}
	return ctx
}

// scaledConnectTimeout is the connect timeout of a connection started by a call whose deadline
// ctx carries (withCallDeadline): twice the time the call has left (at least
// minScaledConnect), when that is less than configured. A connect that outlasts its call still
// serves the next one (the reason pgxpool runs it apart), so it gets more than its call's time,
// but not a connect timeout of 5 s at a call of 1 s (a TTL of 3 s): a connect whose replies the
// network lost then holds its slot past the session's life.
func scaledConnectTimeout(ctx context.Context, configured time.Duration) (time.Duration, bool) {
	d, ok := ctx.Value(callDeadlineKey{}).(time.Time)
	if !ok {
		return 0, false
	}
	bound := max(2*time.Until(d), minScaledConnect)
	if bound >= configured {
		return 0, false
	}
	return bound, true
}

// boundedConn caps every deadline set on it at bound from when it is set; the zero time (no
// deadline) stays. It wraps the connection pgconn dials, under TLS, so that pgconn still sees
// the *tls.Conn it needs for SCRAM channel binding.
type boundedConn struct {
	net.Conn
	bound time.Duration
	cut   *connCut // nil: not tracked
}

func (c *boundedConn) capped(t time.Time) time.Time {
	if !t.IsZero() {
		if limit := time.Now().Add(c.bound); t.After(limit) {
			return limit
		}
	}
	return t
}

// NetConn returns the connection wrapped.
func (c *boundedConn) NetConn() net.Conn { return c.Conn }

// SetDeadline sets the deadline, at most bound from now; once cut, the read deadline stays
// passed.
func (c *boundedConn) SetDeadline(t time.Time) error {
	return c.cut.set(func(cut bool) error {
		if cut {
			if err := c.Conn.SetWriteDeadline(c.capped(t)); err != nil {
				return err
			}
			return c.Conn.SetReadDeadline(cutDeadline)
		}
		return c.Conn.SetDeadline(c.capped(t))
	})
}

// SetReadDeadline sets the read deadline, at most bound from now; once cut, it stays passed.
func (c *boundedConn) SetReadDeadline(t time.Time) error {
	return c.cut.set(func(cut bool) error {
		if cut {
			return c.Conn.SetReadDeadline(cutDeadline)
		}
		return c.Conn.SetReadDeadline(c.capped(t))
	})
}

// Close closes the connection and stops tracking it.
func (c *boundedConn) Close() error {
	if c.cut != nil {
		c.cut.remove(c)
	}
	return c.Conn.Close()
}

// SetWriteDeadline sets the write deadline, at most bound from now.
func (c *boundedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.capped(t))
}

// callPool is the pool with every call's deadline carried to the connects it starts
// (withCallDeadline).
type callPool struct{ *pgxpool.Pool }

func (p callPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.Pool.Exec(withCallDeadline(ctx), sql, args...)
}

func (p callPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.Pool.Query(withCallDeadline(ctx), sql, args...)
}

func (p callPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.Pool.QueryRow(withCallDeadline(ctx), sql, args...)
}

func (p callPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return p.Pool.SendBatch(withCallDeadline(ctx), b)
}

type pgDialect struct {
	b     *Backend
	pool  *pgxpool.Pool
	q     sqlq.Queries // the adapter on the pool (generated/sqlq), through callPool
	begin string
	// idleTx is the dialect's IdleTxTimeout (set_config of idle_in_transaction_session_timeout,
	// transaction-local), sent with every transaction's begin once a session opened (beginTx).
	idleTx string
	hub    pgHub
	// spare keeps one of the pool's connections for keep-alives (spareConn).
	spare keepAliveConn

	unstamped sync.Once // the warning for a pool not built from PostgresPoolConfig
}

// with runs fn on the pool, statement by statement (each in its own implicit transaction, at
// READ COMMITTED), or, when tx, on one connection between the dialect's begin and COMMIT. A
// run PostgreSQL rolled back to break a deadlock (or a serialization failure) is run again.
func (d *pgDialect) with(ctx context.Context, tx bool, fn func(q sqlq.Queries) error) error {
	leave, err := d.spare.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	t0 := silent.Now()
	err = d.withRetry(ctx, tx, fn)
	if err != nil && (silent.TimedOut(err) || pgconn.Timeout(err)) {
		d.dropSilent(t0)
	}
	return err
}

// stampPgConns makes every connection cfg's pool dials note when it last read and wrote
// (silent.Conn), for dropSilent.
func stampPgConns(cfg *pgxpool.Config) {
	cc := &cfg.ConnConfig.Config
	dial := cc.DialFunc
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return silent.New(c), nil
	}
}

// dropSilent closes every idle connection of the pool that has neither read nor begun a write
// since t0, when a call that began at t0 ran out of time: that is evidence of a link gone
// silent (a blackhole), and the pool's idle connections were silenced with it. pgxpool hands
// a connection idle under a second out again without a round trip, so each of them would
// fail one call more, at its timeout, once the link heals: the keep-alive and its retry alike,
// which lost the session to an outage of 0.2 to 1.2 s at a TTL of 3 s. pgxpool destroys a
// closed connection when it is released. A connection in use is left to its call's own
// deadline; a connection the pool did not dial through stampPgConns (a pool not built from
// PostgresPoolConfig) is left as it is.
func (d *pgDialect) dropSilent(t0 int64) {
	// AcquireAllIdle runs the pool's PrepareConn (none unless the user's pool has one) with
	// this context.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range d.pool.AcquireAllIdle(ctx) {
		s := silent.Find(c.Conn().PgConn().Conn())
		if s != nil && s.SilentSince(t0) {
			s.Conn.Close() // the socket first: pgx's Close then waits for nothing
			c.Conn().Close(ctx)
		}
		c.Release()
		if s == nil {
			d.unstamped.Do(func() {
				d.b.log().Warn("simba: sql postgres: a call ran out of time, and the pool's connections do not note when they last read and wrote: those a silent link left are handed out again after it heals, each failing a call at its timeout, the session's keep-alive too; build the pool from PostgresPoolConfig (keep its DialFunc)")
			})
		}
	}
}

func (d *pgDialect) withRetry(ctx context.Context, tx bool, fn func(q sqlq.Queries) error) error {
	return retryRolledBack(ctx, pgRolledBack, func() error {
		if !tx {
			return fn(d.q) // callPool carries each statement's deadline to its connect
		}
		conn, err := d.pool.Acquire(withCallDeadline(ctx))
		if err != nil {
			return err
		}
		defer conn.Release()
		if err := d.beginTx(ctx, conn); err != nil {
			d.rollback(ctx, conn)
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

// idleTxMs is the bound, in milliseconds, on how long the server may keep a transaction begun
// now idle before it ends the connection (0: none, before any session opened): idleTxBound
// of the shortest TTL the backend opened, the renewal interval that bounds every call. A
// transaction idle for longer is one whose client is stopped (SIGSTOP, a VM frozen) or whose
// link lost the replies, and its row locks held up the keep-alives of the sessions whose rows
// it locked (acquire_queued: the caller's, the lease row, in a takeover the holder's) until
// the server found the client gone (TCP keepalive, 2 h by default). The server ends such a
// connection with FATAL 25P03 (idle_in_transaction_session_timeout), which pgconn reads as the
// connection closed: the pool destroys it, and the call's error is retryable (classify).
func (d *pgDialect) idleTxMs() int64 {
	if d.idleTx == "" || d.b == nil {
		return 0
	}
	return idleTxBound(d.b.minTTL.Get()).Milliseconds()
}

// queueBegin queues the transaction's begin on b, and after it, when idleMs > 0, the
// transaction-local idle bound (idleTx): both go in the round trip of b.
func (d *pgDialect) queueBegin(b *pgx.Batch, idleMs int64) {
	b.Queue(d.begin)
	if idleMs > 0 {
		b.Queue(d.idleTx, idleMs)
	}
}

// beginTx begins a transaction on conn with its idle bound (queueBegin), in one round trip.
func (d *pgDialect) beginTx(ctx context.Context, conn *pgxpool.Conn) error {
	idle := d.idleTxMs()
	if idle == 0 {
		_, err := conn.Exec(ctx, d.begin)
		return err
	}
	var b pgx.Batch
	d.queueBegin(&b, idle)
	return conn.SendBatch(ctx, &b).Close()
}

// withPipeline implements pipeliner: a transaction on one connection whose begin goes with
// fn's first batch and whose COMMIT goes with the batch fn sends after setting tx.commitNext
// (pgPipeConn), so that BEGIN, the statements and COMMIT cost the round trips of fn's batches
// only. The server runs a batch's statements in order up to its first error and skips the
// rest, the COMMIT included: a failed batch leaves the transaction aborted (or, when the
// begin itself failed, none), and it is rolled back as with's are; a connection whose batch
// was cut (a cancelled or timed-out context: pgconn closes it) fails the ROLLBACK and is
// closed, so the pool destroys it and never hands out a connection inside a transaction. A
// run PostgreSQL rolled back to break a deadlock starts afresh, with a new pipeTx.
func (d *pgDialect) withPipeline(ctx context.Context, fn func(q sqlq.Queries, tx *pipeTx) error) error {
	leave, err := d.spare.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	t0 := silent.Now()
	err = retryRolledBack(ctx, pgRolledBack, func() error {
		conn, err := d.pool.Acquire(withCallDeadline(ctx))
		if err != nil {
			return err
		}
		defer conn.Release()
		tx := &pipeTx{}
		if err := fn(sqlq.Postgres(pgPipeConn{conn: conn, d: d, tx: tx}), tx); err != nil {
			if tx.begun {
				d.rollback(ctx, conn)
			}
			return err
		}
		switch {
		case tx.committed || !tx.begun:
			return nil
		case tx.rollback:
			d.rollback(ctx, conn)
			return nil
		}
		if _, err := conn.Exec(ctx, wire.SQLCommit); err != nil {
			d.rollback(ctx, conn)
			return err
		}
		return nil
	})
	if err != nil && (silent.TimedOut(err) || pgconn.Timeout(err)) {
		d.dropSilent(t0)
	}
	return err
}

// pgPipeConn is a pipelined transaction's connection (sqlq.PostgresDB): its first batch
// begins with the dialect's begin and the transaction's idle bound (queueBegin; a statement
// sent otherwise goes after a begin of its own, beginTx), and a batch sent while
// tx.commitNext ends with COMMIT.
type pgPipeConn struct {
	conn *pgxpool.Conn
	d    *pgDialect
	tx   *pipeTx
}

func (c pgPipeConn) ensureBegun(ctx context.Context) error {
	if c.tx.begun {
		return nil
	}
	c.tx.begun = true
	return c.d.beginTx(ctx, c.conn)
}

func (c pgPipeConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := c.ensureBegun(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return c.conn.Exec(ctx, sql, args...)
}

func (c pgPipeConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := c.ensureBegun(ctx); err != nil {
		return nil, err
	}
	return c.conn.Query(ctx, sql, args...)
}

func (c pgPipeConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := c.ensureBegun(ctx); err != nil {
		return errRow{err}
	}
	return c.conn.QueryRow(ctx, sql, args...)
}

func (c pgPipeConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !c.tx.begun {
		c.tx.begun = true // sent now; if it fails, a ROLLBACK outside a transaction only warns
		var with pgx.Batch
		c.d.queueBegin(&with, c.d.idleTxMs())
		with.QueuedQueries = append(with.QueuedQueries, b.QueuedQueries...)
		b = &with
	}
	commit := c.tx.commitNext
	if commit {
		b.Queue(wire.SQLCommit)
	}
	return pipeResults{BatchResults: c.conn.SendBatch(ctx, b), tx: c.tx, commit: commit}
}

// pipeResults notes in tx that a batch that ended with COMMIT succeeded.
type pipeResults struct {
	pgx.BatchResults
	tx     *pipeTx
	commit bool
}

func (r pipeResults) Close() error {
	err := r.BatchResults.Close()
	if err == nil && r.commit {
		r.tx.committed = true
	}
	return err
}

// errRow is a pgx.Row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

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
	ctx = withCallDeadline(ctx)
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
	ctx = withCallDeadline(ctx)
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
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, wd.MigrateUnlock); err != nil {
			conn.Conn().Close(uctx) // the lock goes with the connection
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

// pgTLSFailure reports whether err is a TLS failure: a TLS error, or pgconn's refusal of TLS,
// in each of a failed connect's attempts. pgconn tries each host, and with sslmode=prefer or
// allow each host with and without TLS, and joins the attempts' errors: with the default
// sslmode=prefer against a server without TLS the first attempt's error is always the refusal,
// and the second tells what went wrong (a restarted server that replays its WAL: "the database
// system is starting up", 57P03; a refused dial), which is what the error is classified by.
func pgTLSFailure(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if j, ok := ce.Unwrap().(interface{ Unwrap() []error }); ok {
			attempts := j.Unwrap()
			for _, a := range attempts {
				if !spi.IsTLSError(a) && !pgTLSRefused(a) {
					return false
				}
			}
			return len(attempts) > 0
		}
	}
	return spi.IsTLSError(err) || pgTLSRefused(err)
}

// pgCauseFirst makes the message of a failed connect lead with the real cause: with
// sslmode=prefer (the default) against a server without TLS, pgconn's ConnectError lists the
// TLS attempt the server refused ("tls error: server refused TLS connection") before the
// plain attempt that failed for the reason that matters (the server shutting down or starting
// up, a refused password), each on a line of its own, so an outage's WARN line read as a TLS
// problem (trial 28). The attempts that did not fail at TLS now come first, on one line, and
// the TLS ones after them, said to be sslmode=prefer's. The error returned wraps err, so
// errors.Is and errors.As find all they found before (the ConnectError, a PgError); an error
// without such a ConnectError, or whose attempts all or none failed at TLS, is returned as it
// is.
func pgCauseFirst(err error) error {
	var ce *pgconn.ConnectError
	if err == nil || !errors.As(err, &ce) || ce.Config == nil {
		return err
	}
	j, ok := ce.Unwrap().(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var cause, tls []string
	for _, a := range j.Unwrap() {
		if spi.IsTLSError(a) || pgTLSRefused(a) {
			tls = append(tls, a.Error())
		} else {
			cause = append(cause, a.Error())
		}
	}
	whole, full := ce.Error(), err.Error()
	i := strings.Index(full, whole)
	if len(tls) == 0 || len(cause) == 0 || i < 0 {
		return err
	}
	msg := fmt.Sprintf("failed to connect to `user=%s database=%s`: %s (attempted before it with TLS: %s: sslmode=prefer, the default, tries TLS first and the server has none; sslmode=disable skips that attempt)",
		ce.Config.User, ce.Config.Database, strings.Join(cause, "; "), strings.Join(tls, "; "))
	return &causeFirstError{msg: full[:i] + msg + full[i+len(whole):], err: err}
}

// causeFirstError is pgCauseFirst's error: msg in place of err's message, err unwrapped.
type causeFirstError struct {
	msg string
	err error
}

func (e *causeFirstError) Error() string { return e.msg }
func (e *causeFirstError) Unwrap() error { return e.err }

// pgNoSchema reports PostgreSQL's invalid_schema_name (3F000): no schema in the search_path
// to create a table in.
func pgNoSchema(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "3F000"
}

func isPgUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42703" || pe.Code == "42883")
}

// classify: serialization failures, deadlocks and lock timeouts are retryable and contention
// (spi.Contended: the server answered); a write refused by a read-only server (25006: a hot
// standby, default_transaction_read_only) is retryable, naming read-only (errReadOnly);
// connection and resource errors, server shutdown, network errors and the end of a connection
// left idle inside a transaction past its bound (25P03, FATAL: the connection is closed, and
// the pool drops it) are retryable; a missing table or column is
// ErrSchemaMissing, and so is a missing database (3D000: the hint says to create it before
// migrating); authentication, privileges, statement errors and TLS
// failures (a certificate that does not verify with sslmode=verify-ca/verify-full, a server
// that refuses TLS with sslmode=require) are permanent; a connect whose attempts did not all fail
// at TLS (sslmode=prefer, the default, falls back to a plain attempt) is classified by the
// others (pgTLSFailure), and its message leads with theirs (pgCauseFirst). Refused credentials or privileges match spi.ErrAccessDenied
// (accessDenied).
func (d *pgDialect) classify(op string, err error) error {
	if pgTLSFailure(err) {
		return spi.TLSFailure(op, err)
	}
	err = pgCauseFirst(err)
	if denied := d.accessDenied(op, err); denied != nil {
		return denied
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case isPgUndefined(err):
			return d.b.schemaMissing(fmt.Sprintf("%s: %s", op, pe.Message), err)
		case pe.Code == "3D000":
			return d.b.noDatabase(op, pe.Message, err)
		case pe.Code == "3F000":
			// invalid_schema_name: a migration's CREATE TABLE found no schema in the
			// search_path ("no schema has been selected to create in"): retrying cannot
			// make one (it was retried as an outage forever).
			return spi.AsPermanent(fmt.Errorf("%s: the search_path names no schema the role may use (one that does not exist, or on which the role lacks USAGE, is skipped): "+
				"create it (CREATE SCHEMA), GRANT USAGE, CREATE ON SCHEMA to the role, or fix search_path in the DSN: %w", op, err))
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "55P03":
			// The server answered: the statement lost to concurrent transactions (a
			// deadlock victim or serialization failure still so after retryRolledBack's
			// attempts, a lock not granted within lock_timeout). Contention, not an outage.
			return spi.Contended(op, err)
		case pe.Code == "25006":
			return spi.Unavailable(op, errReadOnly(pgReadOnlyHint, err))
		case pe.Code == "57014", pe.Code == "25P03",
			strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"),
			strings.HasPrefix(pe.Code, "57P"), strings.HasPrefix(pe.Code, "58"):
			return spi.Unavailable(op, err)
		case strings.HasPrefix(pe.Code, "42"), strings.HasPrefix(pe.Code, "22"):
			// (Class 28 and 42501 went to accessDenied above.)
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
		// A refusal the server sent while connecting (3D000, class 28) was found above:
		// errors.As unwraps a ConnectError.
		return spi.Unavailable(op, err)
	}
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		return fmt.Errorf("%w: %s: %w", spi.ErrInvalidOption, op, err)
	}
	return spi.Unavailable(op, err)
}

// accessDenied is classify's answer for a refusal of the client's credentials (class 28:
// invalid_authorization_specification, a role that does not exist or no pg_hba.conf entry
// for it; invalid_password, a wrong or missing password) or of a privilege (42501,
// insufficient_privilege: a missing GRANT on Simba's tables or schema): a permanent error
// matching spi.ErrAccessDenied that says which, for which user at which server, and what to
// do. It returns nil for any other error.
func (d *pgDialect) accessDenied(op string, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !(strings.HasPrefix(pe.Code, "28") || pe.Code == "42501") {
		return nil
	}
	who := d.b.who()
	if pe.Code == "42501" {
		return spi.AccessDenied(op, "privilege refused"+who+": the role lacks a privilege Simba needs: GRANT USAGE ON its schema, and SELECT, INSERT, UPDATE, DELETE ON the simba_* tables, TO the role (CREATE on the schema for migrations)", err)
	}
	return spi.AccessDenied(op, "authentication refused"+who+": "+pgAuthCause(pe, d.b.roleIdent()), err)
}

// pgAuthCause says what an authentication refusal (class 28) means and what fixes it. 28P01
// (invalid_password) is a wrong or missing password; 28000 (invalid_authorization_specification)
// covers an unknown role, a role without LOGIN and a connection no pg_hba.conf entry admits,
// told apart by the server's message (in English unless the server's lc_messages says
// otherwise: a message in another language gets the general answer, and the server's own
// message follows it in the error).
func pgAuthCause(pe *pgconn.PgError, role string) string {
	switch {
	case pe.Code == "28P01":
		return "an incorrect or missing password for the role: fix the password in the DSN (or the role's: ALTER ROLE " + role + " PASSWORD)"
	case strings.Contains(pe.Message, "is not permitted to log in"):
		return "the role may not log in (NOLOGIN): ALTER ROLE " + role + " LOGIN, or put a role that may in the DSN"
	case strings.Contains(pe.Message, "does not exist") && strings.HasPrefix(pe.Message, "role "):
		return "no such role: fix the user in the DSN, or create the role (CREATE ROLE " + role + " LOGIN PASSWORD ...)"
	case strings.Contains(pe.Message, "pg_hba.conf"):
		return "no pg_hba.conf entry admits the role from this host to this database: add one (and reload the server), or connect as a role one admits"
	}
	return "the server refused the DSN's credentials (an unknown role, a wrong or missing password, a role without LOGIN, no pg_hba.conf entry for it): fix the user and password in the DSN, or the role (CREATE ROLE ... LOGIN PASSWORD) and pg_hba.conf"
}

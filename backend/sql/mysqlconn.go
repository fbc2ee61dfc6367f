package sql

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net"
	"sync"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/internal/silent"
	"github.com/simba-go/simba/spi"
)

// MySQLConnector returns a connector on cfg (go-sql-driver/mysql's configuration: from
// MySQLConfig, or your own) for sql.OpenDB, to make a pool of your own for NewMySQL that has
// what Open's pool has against a silent link (see the package doc, Outages): its connections
// note when they last read and wrote, and a backend NewMySQL builds on the pool, when one of
// its calls runs out of time, has the pool discard the connections silent since that call
// began as it next takes them out (without the driver's "closing bad idle connection" line),
// so that the call after the link heals goes out on a new connection. cfg's DialFunc, if set,
// dials the connections, else a net.Dialer on cfg.Net; cfg itself is not changed. On such a
// pool the backend's waker (the named-lock waits that bring release hints, see NewMySQL)
// takes its connections from a pool of its own on cfg, as Open's does, which the backend's
// Close closes.
//
// On a pool made otherwise (sql.Open, or mysql.NewConnector) a backend leaves the connections
// as they are: after a burst of calls that left the pool several connections, blackholes of
// 0.2-1.2 s at TTL 3 s lost the session in 10 of 10 trials (0 of 10 on MySQLConnector's).
// A connect runs apart from the call that needs it (see mysqlConnector.Connect), with that
// call's context's values (for cfg's hooks: DialFunc, BeforeConnect) but not its end, so that
// a server slower to set connections up than the calls last is still connected to; DB.Close
// closes the connector, ending those connects. The driver's own lines of a configuration that
// has its default logger go, at DEBUG, to the logger of the backend NewMySQL makes on the pool
// (see WithLogger); a Logger set on cfg is kept. Errors match spi.ErrInvalidOption.
func MySQLConnector(cfg *mysqldriver.Config) (driver.Connector, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: sql mysql: nil *mysql.Config", spi.ErrInvalidOption)
	}
	var driverLog *mysqlConnectorLog
	if isMySQLDefaultLogger(cfg.Logger) {
		// The driver's own stderr logger: its lines go to the backend's logger instead, as
		// Open's do (a logger the program chose is kept). A copy: cfg is the caller's.
		driverLog = &mysqlConnectorLog{}
		cfg = cfg.Clone()
		cfg.Logger = driverLog
	}
	plain, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: sql mysql: %v", spi.ErrInvalidOption, err)
	}
	stop, cancel := context.WithCancel(context.Background())
	c := &mysqlConnector{plain: plain, conns: &silent.Registry{}, stop: stop, cancel: cancel, timeout: cfg.Timeout,
		server: cfg.Addr, user: cfg.User, driverLog: driverLog}
	if c.timeout <= 0 {
		c.timeout = DefaultConnectTimeout
	}
	dial := cfg.DialFunc
	if dial == nil {
		var nd net.Dialer // TCP keep-alives on, as go-sql-driver's own dial has them
		dial = nd.DialContext
	}
	tracked := cfg.Clone()
	tracked.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		t := c.conns.Track(nc)
		if d, ok := ctx.Value(dialedKey{}).(*dialed); ok {
			d.c = silent.Find(t)
		}
		return t, nil
	}
	if c.tracked, err = mysqldriver.NewConnector(tracked); err != nil {
		return nil, fmt.Errorf("%w: sql mysql: %v", spi.ErrInvalidOption, err)
	}
	return c, nil
}

// mysqlConnector is MySQLConnector's connector: tracked's connections are kept by conns, and
// each driver connection is wrapped (mysqlConn) to ask whether its network connection was
// marked silent.
type mysqlConnector struct {
	tracked driver.Connector
	plain   driver.Connector // cfg as given: the waker's pool (NewMySQL)
	conns   *silent.Registry
	// driverLog routes the driver's lines to the logger of the backend made on this pool
	// (NewMySQL); nil when the configuration came with a logger of the program's.
	driverLog *mysqlConnectorLog
	timeout   time.Duration // bounds a connect apart from its call (cfg.Timeout, or the default)
	// server and user are cfg's Addr and User: errors of refused access name them.
	server, user string

	stop   context.Context // ends with Close: the connects apart from their calls
	cancel context.CancelFunc
	wg     sync.WaitGroup // the connects apart from their calls

	mu     sync.Mutex
	closed bool
	apart  int         // connects running apart from their calls
	spares []spareConn // connects that completed after their calls gave up
}

// spareConn is a connection whose call gave up before it was set up.
type spareConn struct {
	c  *mysqlConn
	at time.Time // when it was set up
}

// maxApart bounds the connects a connector runs apart from their calls at once: past it, a
// connect runs within its call, as database/sql runs it. It bounds, too, the sockets a link
// that loses the server's replies holds (each until the connect timeout).
const maxApart = 4

// spareFor is how long a spare connection is handed out for; one older is closed (the server
// may have let it go).
const spareFor = 30 * time.Second

// dialedKey is the context key under which Connect learns the network connection its driver
// connection dialled.
type dialedKey struct{}

type dialed struct{ c *silent.Conn }

// Connect implements driver.Connector. database/sql connects within the call that needs a
// connection, with its context, and go-sql-driver gives the handshake up when that ends: a
// server that takes longer to set a connection up than the calls last (under load; calls of
// 333 ms at a TTL of 1 s) was never connected to (0 of 20 session opens in a trial through a
// proxy that held each new connection 500 ms, against every open from the third on for
// PostgreSQL, whose pool connects apart from its calls). So the connect runs apart from its
// call, bounded by the connect timeout (cfg.Timeout, else DefaultConnectTimeout); if the call
// gives up first, the connection it leaves is kept as a spare and handed to the next Connect.
func (c *mysqlConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c.mu.Lock()
	mc, stale := c.spare(time.Now())
	apart := mc == nil && !c.closed && c.apart < maxApart
	if apart {
		c.apart++
		c.wg.Add(1)
	}
	c.mu.Unlock()
	for _, s := range stale {
		s.Close() // quick: COM_QUIT into the socket, no reply awaited
	}
	if mc != nil {
		return mc, nil
	}
	if !apart {
		return c.connect(ctx)
	}
	a := &apartConnect{done: make(chan struct{})}
	go c.connectApart(ctx, a)
	select {
	case <-a.done:
		return a.mc, a.err
	case <-ctx.Done():
		a.mu.Lock()
		defer a.mu.Unlock()
		select {
		case <-a.done: // done meanwhile: its connection is this call's
			return a.mc, a.err
		default:
		}
		a.abandoned = true
		return nil, ctx.Err()
	}
}

// apartConnect is a connect running apart from its call.
type apartConnect struct {
	done chan struct{} // closed when mc, err are set (under mu)
	mc   *mysqlConn
	err  error

	mu        sync.Mutex
	abandoned bool // its call gave up: the connection, if any, goes to the spares
}

// connectApart connects for a, bounded by the connect timeout and ended by Close, not by the
// end of call, the context of the call that needs the connection: the connect keeps call's
// values (context.WithoutCancel), for the driver's hooks (a DialFunc, a BeforeConnect or a
// logger reading a tracing span or a tenant's key from it). It had a fresh context, and such
// a hook saw none of them. A connection its call gave up on goes to the next call that needs
// one (a spare), made with the first call's values: they are that call's, which started the
// dial, as for any pooled connection database/sql dials within a call and hands to others
// after. Nothing keeps them past the connect: go-sql-driver stops watching the context when
// the handshake ends, and neither mysqlConn nor the silent registry holds it.
func (c *mysqlConnector) connectApart(call context.Context, a *apartConnect) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(call), c.timeout)
	stop := context.AfterFunc(c.stop, cancel)
	mc, err := c.connect(ctx)
	stop()
	cancel()
	c.mu.Lock()
	c.apart--
	c.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.abandoned {
		a.mc, a.err = mc, err
		close(a.done)
		return
	}
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.closed || len(c.spares) >= maxApart {
		c.mu.Unlock()
		mc.Close()
		return
	}
	c.spares = append(c.spares, spareConn{c: mc, at: time.Now()})
	c.mu.Unlock()
}

// spare takes the newest spare connection set up within spareFor before now (nil if none),
// and takes out those older, for the caller to close. c.mu is held.
func (c *mysqlConnector) spare(now time.Time) (out *mysqlConn, stale []*mysqlConn) {
	for len(c.spares) > 0 && out == nil {
		s := c.spares[len(c.spares)-1]
		c.spares = c.spares[:len(c.spares)-1]
		if now.Sub(s.at) < spareFor {
			out = s.c
		} else {
			stale = append(stale, s.c)
		}
	}
	return out, stale
}

// connect makes a connection of the tracked configuration with ctx.
func (c *mysqlConnector) connect(ctx context.Context) (*mysqlConn, error) {
	d := &dialed{}
	dc, err := c.tracked.Connect(context.WithValue(ctx, dialedKey{}, d))
	if err != nil {
		return nil, err
	}
	return &mysqlConn{Conn: dc, s: d.c}, nil
}

// Close implements io.Closer; database/sql's DB.Close calls it. It ends the connects running
// apart from their calls, waits for them and closes the spare connections.
func (c *mysqlConnector) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	spares := c.spares
	c.spares = nil
	c.mu.Unlock()
	for _, s := range spares {
		s.c.Close()
	}
	return nil
}

// Driver implements driver.Connector. NewMySQL finds the connector through it (sql.DB.Driver).
func (c *mysqlConnector) Driver() driver.Driver { return mysqlDriver{c.tracked.Driver(), c} }

// mysqlDriver is the driver of a MySQLConnector's pool.
type mysqlDriver struct {
	driver.Driver
	c *mysqlConnector
}

// connectorOf returns the MySQLConnector db was opened on, or nil.
func connectorOf(d driver.Driver) *mysqlConnector {
	if d, ok := d.(mysqlDriver); ok {
		return d.c
	}
	return nil
}

// mysqlConn is a go-sql-driver connection whose network connection s may be marked silent
// (silent.Registry.MarkSilent): database/sql then discards it, through ResetSession as it takes
// it from the pool or IsValid as it puts it back, and closes it. The driver's own liveness
// check would find a connection closed under it and log "closing bad idle connection" for
// each; closing it through the driver sends COM_QUIT into the socket and logs nothing.
type mysqlConn struct {
	driver.Conn
	s *silent.Conn // nil if the dial was not seen (not expected)
}

func (c *mysqlConn) dropped() bool { return c.s != nil && c.s.Dropped() }

// ResetSession implements driver.SessionResetter.
func (c *mysqlConn) ResetSession(ctx context.Context) error {
	if c.dropped() {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid implements driver.Validator.
func (c *mysqlConn) IsValid() bool {
	if c.dropped() {
		return false
	}
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// BeginTx implements driver.ConnBeginTx.
func (c *mysqlConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

// PrepareContext implements driver.ConnPrepareContext.
func (c *mysqlConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

// ExecContext implements driver.ExecerContext.
func (c *mysqlConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

// QueryContext implements driver.QueryerContext.
func (c *mysqlConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

// Ping implements driver.Pinger.
func (c *mysqlConn) Ping(ctx context.Context) error {
	return c.Conn.(driver.Pinger).Ping(ctx)
}

// CheckNamedValue implements driver.NamedValueChecker.
func (c *mysqlConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

var (
	_ driver.SessionResetter    = (*mysqlConn)(nil)
	_ driver.Validator          = (*mysqlConn)(nil)
	_ driver.ConnBeginTx        = (*mysqlConn)(nil)
	_ driver.ConnPrepareContext = (*mysqlConn)(nil)
	_ driver.ExecerContext      = (*mysqlConn)(nil)
	_ driver.QueryerContext     = (*mysqlConn)(nil)
	_ driver.Pinger             = (*mysqlConn)(nil)
	_ driver.NamedValueChecker  = (*mysqlConn)(nil)
)

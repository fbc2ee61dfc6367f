package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/silent"
	"github.com/simba-go/simba/spi"
)

// lastDial is a go-redis hook on a client Open made. It records the client's last failed dial,
// so that a call that runs out of time while go-redis retries its dials says why (fail):
// go-redis returns the context's "deadline exceeded" then, and a server that refuses
// connections read as one that is slow. A dial that succeeds clears it.
//
// It also keeps the connections the client dials, so that the backend's Close can cut them
// (cut): a pub/sub connection go-redis reconnects on a goroutine of its own waits for the
// server's answer to its handshake without a context, for up to a read timeout, holding the
// pub/sub's lock that closing it needs, and at a server that accepts connections but does not
// answer, Close waited that long, once per reconnection.
type lastDial struct {
	err atomic.Pointer[error]

	mu    sync.Mutex
	conns map[*dialedConn]struct{} // open connections the client dialled
	// cutCtx is cancelled by cut: dials in progress end, later ones fail.
	cutCtx context.Context
	cutFn  context.CancelFunc
}

func newLastDial() *lastDial {
	l := &lastDial{}
	l.cutCtx, l.cutFn = context.WithCancel(context.Background())
	return l
}

// cut closes every connection the client dialled that is still open, ends the dials in
// progress and fails every later one.
func (l *lastDial) cut() {
	l.mu.Lock()
	l.cutFn()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// track adds c to the connections cut closes, or closes it and fails if cut has run.
func (l *lastDial) track(c net.Conn) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cutCtx.Err() != nil {
		c.Close()
		return nil, errCut
	}
	d := &dialedConn{Conn: c, l: l}
	d.Fresh() // new: not silent before its first call
	if l.conns == nil {
		l.conns = map[*dialedConn]struct{}{}
	}
	l.conns[d] = struct{}{}
	if _, ok := c.(syscall.Conn); ok {
		return sysDialedConn{d}, nil
	}
	return d, nil
}

// errCut fails a dial of a backend that is closed.
var errCut = fmt.Errorf("redis: %w", spi.ErrBackendClosed)

// dialedConn is a connection lastDial keeps until it is closed. It notes when it last read a
// byte and when it last began a write (silent.Stamps), for dropSilent.
type dialedConn struct {
	net.Conn
	silent.Stamps
	l *lastDial
}

// Read implements net.Conn, noting a read that returned bytes.
func (d *dialedConn) Read(p []byte) (int, error) {
	n, err := d.Conn.Read(p)
	d.Stamps.Read(n)
	return n, err
}

// Write implements net.Conn, noting when the write began.
func (d *dialedConn) Write(p []byte) (int, error) {
	d.Writing()
	return d.Conn.Write(p)
}

// dropSilent closes every connection the client dialled that has neither read nor begun a
// write since t0, when a call that began at t0 ran out of time: that is evidence of a link gone
// silent (a blackhole: no byte, close or reset either way), and the idle connections in
// go-redis's pool were silenced with it. go-redis takes a pooled connection back without a
// round trip, so each of them would fail one call more, at its timeout, once the link heals:
// the keep-alive and its retry alike, which lost the session to an outage of 200 ms at a TTL of
// 3 s. A closed connection fails go-redis's health check when it is taken from the pool, and
// is replaced by a new one. A connection a later call wrote on is left to that call's own
// deadline; a pub/sub connection that is live reads a PONG at least every sixth of a TTL (the
// hub pings it), well within a call timeout (a third), so it is kept.
func (l *lastDial) dropSilent(t0 int64) {
	l.mu.Lock()
	var silent []*dialedConn
	for c := range l.conns {
		if c.SilentSince(t0) {
			silent = append(silent, c)
		}
	}
	l.mu.Unlock()
	for _, c := range silent {
		c.Close()
	}
}

// Close forgets the connection and closes it.
func (d *dialedConn) Close() error {
	d.l.mu.Lock()
	delete(d.l.conns, d)
	d.l.mu.Unlock()
	return d.Conn.Close()
}

// NetConn returns the connection dialled.
func (d *dialedConn) NetConn() net.Conn { return d.Conn }

// sysDialedConn is a dialedConn whose connection is a socket (not TLS): it passes the socket
// on (syscall.Conn), which is what go-redis's health check of a pooled connection looks for
// (only on the connection it holds: it does not unwrap). Without it every connection passed
// that check: one that the server closed, or that dropSilent closed, was handed out again,
// and failed the call it was handed to ("use of closed network connection", which go-redis
// does not retry).
type sysDialedConn struct{ *dialedConn }

// SyscallConn implements syscall.Conn.
func (d sysDialedConn) SyscallConn() (syscall.RawConn, error) {
	return d.Conn.(syscall.Conn).SyscallConn()
}

// watch adds the hook to c, and to each node of a Cluster client as it is made.
func (l *lastDial) watch(c goredis.UniversalClient) {
	switch c := c.(type) {
	case *goredis.ClusterClient:
		c.OnNewNode(func(n *goredis.Client) { n.AddHook(l) })
	case *goredis.Client:
		c.AddHook(l)
	}
}

// explain returns err with the last failed dial added when err is the deadline of a call
// that may have spent it dialling, and a dial failed since the last one that succeeded.
func (l *lastDial) explain(err error) error {
	if l == nil {
		return err
	}
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		return err
	}
	if last := l.err.Load(); last != nil {
		return fmt.Errorf("%w (last connection attempt: %v)", err, *last)
	}
	return err
}

// DialHook implements goredis.Hook.
func (l *lastDial) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := ctx.Err(); err != nil {
			// Out of time before it began (go-redis reconnects a pub/sub connection with the
			// context of the read that timed out, see hub.pump): no news of the server.
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(l.cutCtx, cancel) // cut ends the dial
		defer stop()
		c, err := next(ctx, network, addr)
		if err != nil {
			l.err.Store(&err)
			return nil, err
		}
		l.err.Store(nil)
		return l.track(c)
	}
}

// ProcessHook implements goredis.Hook: a command that ran out of time drops the silent
// connections (dropSilent).
func (l *lastDial) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		t0 := silent.Now()
		err := next(ctx, cmd)
		if err != nil && silent.TimedOut(err) {
			l.dropSilent(t0)
		}
		return err
	}
}

// ProcessPipelineHook implements goredis.Hook, as ProcessHook.
func (l *lastDial) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		t0 := silent.Now()
		err := next(ctx, cmds)
		if err != nil && silent.TimedOut(err) {
			l.dropSilent(t0)
		}
		return err
	}
}

package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

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
	if l.conns == nil {
		l.conns = map[*dialedConn]struct{}{}
	}
	l.conns[d] = struct{}{}
	return d, nil
}

// errCut fails a dial of a backend that is closed.
var errCut = fmt.Errorf("redis: %w", spi.ErrBackendClosed)

// dialedConn is a connection lastDial keeps until it is closed.
type dialedConn struct {
	net.Conn
	l *lastDial
}

// Close forgets the connection and closes it.
func (d *dialedConn) Close() error {
	d.l.mu.Lock()
	delete(d.l.conns, d)
	d.l.mu.Unlock()
	return d.Conn.Close()
}

// NetConn returns the connection dialled (go-redis's health check looks through wrappers
// with this method for the socket).
func (d *dialedConn) NetConn() net.Conn { return d.Conn }

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

// ProcessHook implements goredis.Hook.
func (l *lastDial) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

// ProcessPipelineHook implements goredis.Hook.
func (l *lastDial) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

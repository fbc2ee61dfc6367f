package redis

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/silent"
	"github.com/simba-go/simba/spi"
)

// lastDial is a go-redis hook on a client Open made (or one passed to New WithDropSilent; Close
// cuts only the connections of a client Open made). It records the client's last failed dial,
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

	// conns are the open connections the client dialled, with when each last read and wrote
	// (for dropSilent), until cut.
	conns silent.Registry
	// mu orders track against cut: a connection dialled while cut runs is closed either way.
	mu sync.Mutex
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
	l.mu.Unlock()
	l.conns.CloseAll()
}

// track adds c to the connections cut closes, or closes it and fails if cut has run. The
// connection it returns notes its reads and writes (silent.Registry.Track) and passes its
// socket on (syscall.Conn), which is what go-redis's health check of a pooled connection looks
// for (only on the connection it holds: it does not unwrap): without it a connection that the
// server closed, or that dropSilent closed, passed that check, was handed out again and failed
// the call it was handed to ("use of closed network connection", which go-redis does not
// retry).
func (l *lastDial) track(c net.Conn) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cutCtx.Err() != nil {
		c.Close()
		return nil, errCut
	}
	return l.conns.Track(c), nil
}

// errCut fails a dial of a backend that is closed.
var errCut = fmt.Errorf("redis: %w", spi.ErrBackendClosed)

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
func (l *lastDial) dropSilent(t0 int64) { l.conns.DropSilent(t0) }

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
	if !silent.TimedOut(err) {
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

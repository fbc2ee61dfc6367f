package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/simba-go/simba/internal/connbound"
	"github.com/simba-go/simba/spi"
)

// Connection watch of a backend's own client (New, NewFromConfig): its gRPC connections are
// dialled by the backend (connWatch.dial), which bounds connection attempts by the sessions'
// TTLs and closes connections that went silent, because gRPC alone notices neither in time
// for a short TTL (see "Outages" in the package doc):
//
//   - A connection attempt to a member that takes the connection and never answers (a
//     blackhole, a hung server) lasts gRPC's MinConnectTimeout, the dial timeout (5 s by
//     default), fixed when the client is made. The backend gives up an attempt that has read
//     nothing after connectBound: the shortest TTL asked of the backend / connbound.Divisor,
//     at least connbound.Min, at most the dial timeout and a third of that TTL, doubling
//     after each round of the endpoints whose attempts were all given up (a network slower
//     than the bound still connects, a few attempts later; any other outcome, a refusal
//     included, starts over).
//   - A connection that went silent (its packets dropped, with no reset: a load balancer's
//     failover, a lost NAT entry, a partition) stays READY for gRPC until its keep-alive
//     pings fail: at least 10 s (gRPC raises any ping interval below that) plus the ping
//     timeout. A keep-alive or grant that timed out (TTL/3 after it was sent, with the
//     engine's defaults) closes every connection that has waited, for at least half that
//     call's time, for a byte after one it sent: gRPC redials it at once, and the engine's
//     retry of the keep-alive goes out on the fresh connection. Not sooner: a connection
//     stalled for part of the keep-alive's time (a busy server or client) still delivers
//     its reply in time, and a fresh one would be stalled as well (see the package doc).
//
// connWatch dials and watches the gRPC connections of a backend's own client.
type connWatch struct {
	dialTimeout time.Duration
	endpoints   int
	minTTL      func() time.Duration // the shortest TTL asked of the backend (0: none yet)
	// tls is set when the client speaks TLS (etcd+tls): a connection the member ends before
	// its first byte is then checked for a plain-text server (plainTextServer).
	tls bool

	mu   sync.Mutex
	live map[*watchedConn]struct{}
	cut  int // connection attempts given up in a row (see connectBound)
	// refusals are the calls waiting to hear that every endpoint failed to connect
	// (watchRefusals).
	refusals map[*refusal]struct{}
}

// refusal is a call's watch of failed dials (watchRefusals).
type refusal struct {
	failed map[string]bool // the endpoints whose dial failed since the watch began
	fn     func(err error)
}

// watchRefusals calls fn, once, with the last dial's error when, since this call, a dial to
// every endpoint has failed (refused, unreachable, or given up) while the client has no
// connection open; stop ends the watch. A call that waits for a connection (gRPC waits for
// one until the call's deadline) uses it to fail as soon as none can be made: the first dial
// after a failed one comes at most ReconnectMaxDelay later.
func (w *connWatch) watchRefusals(fn func(err error)) (stop func()) {
	r := &refusal{failed: map[string]bool{}, fn: fn}
	w.mu.Lock()
	if w.refusals == nil {
		w.refusals = map[*refusal]struct{}{}
	}
	w.refusals[r] = struct{}{}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.refusals, r)
		w.mu.Unlock()
	}
}

// dialFailed notes a failed dial to addr for the refusal watches, and calls those for which
// every endpoint has now failed (w.mu held; the calls are made after it is released, by the
// returned function).
func (w *connWatch) dialFailed(addr string, err error) func() {
	var fire []func(error)
	for r := range w.refusals {
		r.failed[addr] = true
		if len(r.failed) >= w.endpoints && len(w.live) == 0 {
			fire = append(fire, r.fn)
			delete(w.refusals, r)
		}
	}
	return func() {
		for _, fn := range fire {
			fn(err)
		}
	}
}

func newConnWatch(dialTimeout time.Duration, endpoints int, minTTL func() time.Duration) *connWatch {
	return &connWatch{dialTimeout: dialTimeout, endpoints: max(endpoints, 1), minTTL: minTTL, live: map[*watchedConn]struct{}{}}
}

// connectBound is how long a connection attempt may go without reading a byte. Once a session
// was asked for, it doubles up to a third of the shortest TTL (the longest call timeout a session
// of that TTL has), not the dial timeout: an attempt that has read nothing by then is of no use
// to the session call waiting for it, and one made into a blackhole, its bound doubled by the
// attempts the outage swallowed, held the backend's return back by up to the dial timeout
// (2.5 s after the heal at TTL 3 s, 1.1 s at TTL 1 s, while the client's probes timed out).
func (w *connWatch) connectBound() time.Duration {
	w.mu.Lock()
	cut := w.cut
	w.mu.Unlock()
	limit, ttl := w.dialTimeout, w.minTTL()
	if ttl > 0 {
		limit = min(limit, max(ttl/3, connbound.Min))
	}
	return connbound.Bound(ttl, limit, cut, w.endpoints)
}

// dial is the gRPC dialer (grpc.WithContextDialer): a TCP connection, given up (closed) if it
// has read nothing within connectBound of the dial's start; gRPC then counts the attempt failed
// and makes its next one.
func (w *connWatch) dial(ctx context.Context, addr string) (net.Conn, error) {
	bound := w.connectBound()
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		w.mu.Lock()
		if dctx.Err() != nil && ctx.Err() == nil {
			w.cut++
		} else {
			w.cut = 0
		}
		fire := func() {}
		if ctx.Err() == nil { // not a dial gRPC itself called off
			fire = w.dialFailed(addr, err)
		}
		w.mu.Unlock()
		fire()
		return nil, err
	}
	c := &watchedConn{Conn: raw, w: w, addr: addr}
	w.mu.Lock()
	w.live[c] = struct{}{}
	w.mu.Unlock()
	c.timer = time.AfterFunc(bound-time.Since(start), c.handshakeTimedOut)
	return c, nil
}

func (w *connWatch) gaveUp() {
	w.mu.Lock()
	w.cut++
	w.mu.Unlock()
}

// dropSilent closes every connection that has waited for a byte since it last wrote for at
// least half the time since sent, the send time of a call that timed out: gRPC then redials
// them. A connection whose member answers is left alone (it read since it wrote).
func (w *connWatch) dropSilent(sent time.Time) {
	now := time.Now()
	limit := now.Sub(sent) / 2
	w.mu.Lock()
	var silent []*watchedConn
	for c := range w.live {
		c.mu.Lock()
		if c.answered && !c.waitingSince.IsZero() && now.Sub(c.waitingSince) >= limit {
			silent = append(silent, c)
		}
		c.mu.Unlock()
	}
	w.mu.Unlock()
	for _, c := range silent {
		c.Conn.Close() // gRPC's reader fails, and gRPC closes the transport and redials
	}
}

// watchedConn is a connection of a backend's own client, watched for silence.
type watchedConn struct {
	net.Conn
	w     *connWatch
	addr  string
	timer *time.Timer // the connect bound, stopped by the first byte read

	mu           sync.Mutex
	answered     bool      // a byte has been read: the attempt succeeded
	closed       bool      // Close or handshakeTimedOut closed it: a failed read is ours
	waitingSince time.Time // the first write since the last read (zero: none)
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n == 0 && err != nil {
		c.mu.Lock()
		refused := !c.answered && !c.closed
		if refused {
			c.closed = true
		}
		c.mu.Unlock()
		if refused {
			// Counted here as a failed dial: the connect bound must not count it again as
			// given up (handshakeTimedOut), as Close's stop of the timer sees to for ours.
			c.timer.Stop()
			c.endedUnanswered(err)
		}
	}
	if n > 0 {
		c.mu.Lock()
		first := !c.answered
		c.answered, c.waitingSince = true, time.Time{}
		c.mu.Unlock()
		if first {
			c.timer.Stop()
			c.w.mu.Lock()
			c.w.cut = 0
			c.w.mu.Unlock()
		}
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.waitingSince.IsZero() {
		c.waitingSince = time.Now()
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// endedUnanswered notes a connection the member ended (EOF, reset) before its first byte as a
// failed dial for the refusal watches (watchRefusals): gRPC counts the attempt failed and dials
// again, and a call waiting for a connection would otherwise wait for ever (simba status on an
// etcd+tls:// DSN at a plain-text member: the member closes the connection on the TLS
// ClientHello, and gRPC retried the handshake without end, every call timing out as
// "unavailable"). On a TLS client the error says so when the member answers plain text
// (plainTextServer): a TLS failure (spi.ErrTLS), permanent.
func (c *watchedConn) endedUnanswered(err error) {
	if c.w.tls {
		if perr := plainTextServer(c.addr); perr != nil {
			err = perr
		}
	}
	c.w.mu.Lock()
	delete(c.w.live, c)
	fire := c.w.dialFailed(c.addr, err)
	c.w.mu.Unlock()
	fire()
}

// errPlainText is a member that answers plain-text HTTP where the client speaks TLS.
var errPlainText = errors.New("the DSN asks for TLS (etcd+tls://) but the server does not speak TLS: it answers a plain-text HTTP request (use etcd://, or serve TLS: etcd's --cert-file and --key-file)")

// plainTextServer returns an error matching spi.ErrTLS if the member at addr answers a
// plain-text HTTP request (GET /version, which etcd serves on its client port next to gRPC),
// within a second, and nil otherwise.
func plainTextServer(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second)) //nolint:errcheck // the reads fail instead
	if _, err := io.WriteString(conn, "GET /version HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n"); err != nil {
		return nil
	}
	head := make([]byte, 5)
	if _, err := io.ReadFull(conn, head); err != nil || string(head) != "HTTP/" {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", spi.ErrTLS, addr, errPlainText)
}

func (c *watchedConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.timer.Stop()
	c.w.mu.Lock()
	delete(c.w.live, c)
	c.w.mu.Unlock()
	return c.Conn.Close()
}

// handshakeTimedOut gives up a connection attempt that has read nothing within its bound.
func (c *watchedConn) handshakeTimedOut() {
	c.mu.Lock()
	answered := c.answered
	c.closed = c.closed || !answered
	c.mu.Unlock()
	if !answered {
		c.w.gaveUp()
		c.Conn.Close()
	}
}

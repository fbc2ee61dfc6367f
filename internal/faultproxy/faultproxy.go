// Package faultproxy is a TCP proxy that puts network faults between clients and one server,
// for tests and for the chaos harness. A Proxy forwards every connection it accepts on a
// loopback port to its target, and a Fault set on it (until Heal) can
//
//   - cut the link: close the open connections and every new one as soon as it is accepted,
//     with an orderly close or a TCP reset (a server that is down or restarting);
//   - stall a direction: hold its bytes back, end of stream included, and deliver them on Heal
//     (a partition, as TCP holds the bytes in retransmission), one direction or both;
//   - drop a direction: lose its bytes for good, the sockets left open (a client waiting for a
//     reply waits on);
//   - delay or throttle the bytes;
//   - delay new connections: reach the server only some time after they are accepted (a
//     server slow to set connections up, forking and authenticating under load);
//   - blackhole the link: silence the open connections for good and take new ones without
//     ever answering (a failover or partition that sends no reset, a dropped SYN).
//
// Orphan makes the connections open at that moment lose every byte, both ways and for good,
// and never closes their sockets (a NAT or firewall that forgot the flows), while new
// connections work. Conns reports what the proxy saw of each connection.
//
// "Up" is the client-to-server direction, "down" the server-to-client one. An end of stream
// is passed on as a half-close (a FIN), so the other direction goes on until it ends too.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mode is what a direction of the link does with its bytes.
type Mode int

const (
	// Forward passes the bytes on.
	Forward Mode = iota
	// Stall holds the bytes back, the end of the stream included, until the fault changes;
	// they are delivered then, unless the link is cut or the proxy closed meanwhile.
	Stall
	// Drop loses the bytes for good; an end of stream still passes.
	Drop
)

// Fault is the state of the link. The zero Fault forwards everything at once.
type Fault struct {
	// Cut closes every open connection, and every new one as soon as it is accepted.
	Cut bool
	// Reset makes a Cut close with a TCP reset (RST) instead of an orderly close (FIN), as the
	// host of a server that went away answers.
	Reset bool
	// Up is the client-to-server direction's mode, Down the server-to-client one's. Stall in
	// one is a one-way partition, Stall in both a blackhole that heals without loss.
	Up, Down Mode
	// Delay is waited before each chunk is forwarded, in both directions.
	Delay time.Duration
	// BytesPerSecond limits each direction's throughput (0: unlimited).
	BytesPerSecond int
	// Blackhole silences, for good, every connection open when it is set (as Orphan) and
	// every one accepted while it is set: that one is taken and never answered (the target is
	// not dialled), its client's bytes read and lost until the client closes it, as a dropped
	// SYN or a server that takes connections and never answers. Heal lets new connections
	// through again; the silenced ones stay silent.
	Blackhole bool
	// ConnectDelay holds every connection accepted while it is set for that long before the
	// target is dialled: the client's first bytes wait in the proxy and the server's first
	// reply comes that much later, as from a server that takes that long to set a connection
	// up (a PostgreSQL forking and authenticating backends under load). Connections open
	// already are not affected, and an accepted one waits its delay out even if the fault
	// changes meanwhile (Close ends the wait).
	ConnectDelay time.Duration
}

// mode returns the mode of direction up (client to server) or down.
func (f Fault) mode(up bool) Mode {
	if up {
		return f.Up
	}
	return f.Down
}

// Proxy forwards the connections accepted on Addr to a target address. Its methods are safe
// for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu      sync.Mutex
	fault   Fault
	changed chan struct{} // closed (and replaced) when fault changes or the proxy closes
	closed  bool
	conns   []*Conn            // every connection forwarded, in the order accepted
	open    map[*Conn]struct{} // those not ended yet (orphaned ones until Close)
}

// Conn is what the proxy saw of one connection it forwarded.
type Conn struct {
	client       net.Conn
	server       net.Conn      // nil until dialled; under Proxy.mu
	connectDelay time.Duration // the fault's ConnectDelay when accepted
	bytesUp      atomic.Int64
	bytesLost    atomic.Int64 // dropped or orphaned, both ways (for the package's tests)
	clientClosed atomic.Bool
	orphaned     atomic.Bool
}

// BytesUp returns how many bytes were forwarded from the client to the server.
func (c *Conn) BytesUp() int64 { return c.bytesUp.Load() }

// ClientClosed reports whether the client's side ended: the client closed it or shut down its
// writes (or the proxy closed it).
func (c *Conn) ClientClosed() bool { return c.clientClosed.Load() }

// dialTimeout bounds the dial of the target for each connection accepted.
const dialTimeout = 5 * time.Second

// Start listens on a free port of 127.0.0.1 and forwards to target until Close.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		ln:      ln,
		target:  target,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		open:    map[*Conn]struct{}{},
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// StartTest is Start for a test: it fails tb if the proxy cannot start, and closes the proxy
// when the test ends.
func StartTest(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := Start(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// Addr is the address clients connect to (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Set replaces the fault. A Cut closes the open connections at once; bytes a Stall held are
// delivered once their direction no longer stalls.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	p.fault = f
	if !p.closed {
		close(p.changed)
		p.changed = make(chan struct{})
	}
	var socks []net.Conn
	for c := range p.open {
		if f.Cut {
			socks = append(socks, c.sockets()...)
		}
		if f.Blackhole {
			c.orphaned.Store(true)
		}
	}
	p.mu.Unlock()
	for _, s := range socks {
		closeSocket(s, f.Reset)
	}
}

// Heal forwards everything again: Set(Fault{}). Orphaned connections stay lost.
func (p *Proxy) Heal() { p.Set(Fault{}) }

// Fault returns the current fault.
func (p *Proxy) Fault() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault
}

// Orphan makes every connection open now lose all its bytes, both ways and for good; neither
// of its sockets is closed before the proxy is. Later connections are not affected.
func (p *Proxy) Orphan() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.open {
		c.orphaned.Store(true)
	}
}

// Conns returns the connections forwarded so far, in the order accepted (the refused ones
// left out).
func (p *Proxy) Conns() []*Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Conn(nil), p.conns...)
}

// Close stops listening, closes every connection and waits for the proxy's goroutines. Closing
// again does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	close(p.changed)
	var socks []net.Conn
	for c := range p.open {
		socks = append(socks, c.sockets()...)
	}
	p.mu.Unlock()
	for _, s := range socks {
		s.Close()
	}
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// sockets returns c's sockets; p.mu is held.
func (c *Conn) sockets() []net.Conn {
	if c.server == nil {
		return []net.Conn{c.client}
	}
	return []net.Conn{c.client, c.server}
}

// closeSocket closes s, with a TCP reset if reset.
func closeSocket(s net.Conn, reset bool) {
	if tc, ok := s.(*net.TCPConn); ok && reset {
		tc.SetLinger(0) //nolint:errcheck // a close without the reset is still a close
	}
	s.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refused, reset := p.closed || p.fault.Cut, p.fault.Reset
		c := &Conn{client: client, connectDelay: p.fault.ConnectDelay}
		if p.fault.Blackhole {
			c.orphaned.Store(true) // taken, never answered (see serve)
		}
		if !refused {
			p.conns = append(p.conns, c)
			p.open[c] = struct{}{}
		}
		p.mu.Unlock()
		if refused {
			closeSocket(client, reset)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for c and forwards both ways until both directions end.
func (p *Proxy) serve(c *Conn) {
	defer p.wg.Done()
	if c.orphaned.Load() { // accepted during a blackhole: held, never answered
		n, _ := io.Copy(io.Discard, c.client)
		c.bytesLost.Add(n)
		c.clientClosed.Store(true)
		c.client.Close()
		p.forget(c)
		return
	}
	if !p.sleep(c.connectDelay) {
		c.client.Close()
		p.forget(c)
		return
	}
	server, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		c.client.Close()
		p.forget(c)
		return
	}
	p.mu.Lock()
	refused, reset := p.closed || p.fault.Cut, p.fault.Reset
	if !refused {
		c.server = server
	}
	p.mu.Unlock()
	if refused { // cut or closed while dialling
		closeSocket(server, reset)
		closeSocket(c.client, reset)
		p.forget(c)
		return
	}
	ended := make(chan bool, 2)
	go func() { ended <- p.pipe(c, server, c.client, true) }()
	go func() { ended <- p.pipe(c, c.client, server, false) }()
	if abrupt := <-ended; abrupt && !c.orphaned.Load() {
		// Not a half-close: end the other direction too.
		c.client.Close()
		server.Close()
	}
	<-ended
	if c.orphaned.Load() {
		return // its sockets stay open until Close
	}
	c.client.Close()
	server.Close()
	p.forget(c)
}

func (p *Proxy) forget(c *Conn) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
}

// pipe copies src to dst in direction up (client to server) or down, as the fault says. It
// returns false when it passed an end of stream on as a half-close (the other direction goes
// on), true when the connection must end.
func (p *Proxy) pipe(c *Conn, dst, src net.Conn, up bool) (abrupt bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if up && err != nil {
			c.clientClosed.Store(true)
		}
		f, ok := p.await(up)
		if !ok {
			return true
		}
		if c.orphaned.Load() {
			c.bytesLost.Add(int64(n))
			if err != nil {
				return true
			}
			continue
		}
		if n > 0 && f.mode(up) == Drop {
			c.bytesLost.Add(int64(n))
		} else if n > 0 {
			if !p.pace(f, n) {
				return true
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return true
			}
			if up {
				c.bytesUp.Add(int64(n))
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				return tc.CloseWrite() != nil
			}
			return true
		}
	}
}

// await waits while direction up (or down) stalls, and returns the fault then; false once the
// link is cut or the proxy closed.
func (p *Proxy) await(up bool) (Fault, bool) {
	for {
		p.mu.Lock()
		f, closed, changed := p.fault, p.closed, p.changed
		p.mu.Unlock()
		if closed || f.Cut {
			return f, false
		}
		if f.mode(up) != Stall {
			return f, true
		}
		<-changed
	}
}

// pace waits f's delay and throughput limit for a chunk of n bytes; false if the proxy closed
// meanwhile.
func (p *Proxy) pace(f Fault, n int) bool {
	wait := f.Delay
	if f.BytesPerSecond > 0 {
		wait += time.Duration(float64(n) / float64(f.BytesPerSecond) * float64(time.Second))
	}
	return p.sleep(wait)
}

// sleep waits d; false if the proxy closed meanwhile.
func (p *Proxy) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.done:
		return false
	}
}

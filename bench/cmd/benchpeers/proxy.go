package main

// A small TCP fault proxy for the outage measure. The library's internal/faultproxy is
// internal to Simba's module, which this one (bench/) cannot import; this one has only the
// two faults the measure uses, with the same meaning:
//
//   - blackhole: every connection open when it is set is silenced for good (its bytes are
//     read and lost both ways, its sockets left open: a failover or a NAT that forgot the
//     flow, no reset sent), and every connection accepted while it is set is taken and never
//     answered (the target is not dialled: a dropped SYN). Heal lets new connections through
//     again; the silenced ones stay silent, and neither of their sockets is closed before the
//     proxy is: the server never hears of the client's close.
//   - stall: the bytes of the open connections are held back both ways (and new connections
//     wait for their dial) until the heal, then delivered: a partition that TCP rides out.

import (
	"io"
	"net"
	"sync"
	"time"
)

// linkState is what a link does with its bytes.
type linkState int

const (
	linkUp linkState = iota
	linkBlackhole
	linkStall
)

// linkProxy forwards the connections accepted on addr to target, through its faults.
type linkProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	state   linkState
	gen     int // incremented by every blackhole: connections of an older generation are silenced
	conns   map[*proxyConn]bool
	closed  bool
	healed  []time.Time // the end of every fault, in order
	started []time.Time // the start of every fault, in order
}

// proxyConn is one accepted connection and its dialled server side (nil until dialled).
type proxyConn struct {
	client, server net.Conn
	gen            int
	silenced       bool
}

// newLinkProxy listens on a free loopback port and forwards to target.
func newLinkProxy(target string) (*linkProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &linkProxy{ln: ln, target: target, conns: map[*proxyConn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

// addr is the proxy's listening address (host:port).
func (p *linkProxy) addr() string { return p.ln.Addr().String() }

// set puts the link in state s (linkUp heals it) and notes when a fault began and ended.
func (p *linkProxy) set(s linkState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.state != linkUp && s == linkUp {
		p.healed = append(p.healed, now)
	}
	if p.state == linkUp && s != linkUp {
		p.started = append(p.started, now)
	}
	p.state = s
	if s == linkBlackhole {
		p.gen++
		for c := range p.conns {
			c.silenced = true
		}
	}
	p.cond.Broadcast()
}

// healedIn returns the last heal in (from, to], if any.
func (p *linkProxy) healedIn(from, to time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.healed) - 1; i >= 0; i-- {
		h := p.healed[i]
		if !h.After(to) {
			return h, h.After(from)
		}
	}
	return time.Time{}, false
}

// close stops the proxy and closes every connection (a client stuck on a silenced one gets
// an error).
func (p *linkProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.state = linkUp
	conns := p.conns
	p.conns = map[*proxyConn]bool{}
	p.cond.Broadcast()
	p.mu.Unlock()
	_ = p.ln.Close()
	for c := range conns {
		_ = c.client.Close()
		if c.server != nil {
			_ = c.server.Close()
		}
	}
}

func (p *linkProxy) accept() {
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(cc)
	}
}

// serve dials the target for an accepted connection (once the link lets it) and pumps both
// ways.
func (p *linkProxy) serve(cc net.Conn) {
	c := &proxyConn{client: cc}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = cc.Close()
		return
	}
	p.conns[c] = true
	c.gen = p.gen
	for p.state == linkStall && !p.closed {
		p.cond.Wait()
	}
	if p.state == linkBlackhole {
		c.silenced = true
	}
	silenced := c.silenced
	p.mu.Unlock()
	if silenced {
		// Taken and never answered: read and lose the client's bytes until it closes.
		_, _ = io.Copy(io.Discard, cc)
		p.drop(c)
		return
	}
	sc, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	c.server = sc
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.drop(c)
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pump(c, cc, sc); done <- struct{}{} }()
	go func() { p.pump(c, sc, cc); done <- struct{}{} }()
	<-done
	<-done
	p.drop(c)
}

// pump copies src to dst through the link's faults; a silenced connection's bytes are lost.
func (p *linkProxy) pump(c *proxyConn, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.state == linkStall && !c.silenced && !p.closed {
				p.cond.Wait()
			}
			lost := c.silenced
			p.mu.Unlock()
			if !lost {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					_ = src.Close()
					return
				}
			}
		}
		if err != nil {
			p.mu.Lock()
			lost := c.silenced
			p.mu.Unlock()
			if lost {
				// An end of stream is lost like the bytes: neither side hears of the other's
				// close, and the server's socket stays open until the proxy closes (as the
				// library's faultproxy has it: a server behind a dead link keeps the
				// connection, and whatever it holds, until its own timeouts end it).
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			} else {
				_ = dst.Close()
			}
			return
		}
	}
}

// drop closes both sides of c and forgets it.
func (p *linkProxy) drop(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.client.Close()
	if c.server != nil {
		_ = c.server.Close()
	}
}

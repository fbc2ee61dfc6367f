// Package netproxy is the TCP proxy the outside trials put between a client process and its
// server to cut, blackhole or slow the link.
package netproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections to target. Blackholed, it accepts but forwards nothing (the bytes
// wait, as TCP's retransmits would deliver them after the heal); delay holds every chunk that long
// before forwarding it.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	open     chan struct{} // closed while the link is up
	down     bool
	delay    atomic.Int64
	lastSend atomic.Int64 // unix nanos of the last client→server chunk forwarded
	conns    map[net.Conn]struct{}
}

// New listens on a free port of 127.0.0.1 and forwards what it accepts to target, link up.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	go p.serve()
	return p, nil
}

// Addr is the address clients dial instead of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// LastSend is when the last client-to-server chunk was forwarded (unix nanoseconds; 0: none).
func (p *Proxy) LastSend() int64 { return p.lastSend.Load() }

func (p *Proxy) gate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// Cut blackholes the link: connections stay open, nothing is forwarded until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down {
		p.down = true
		p.open = make(chan struct{})
	}
}

// Heal restores a cut link; the bytes held meanwhile are forwarded.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		p.down = false
		close(p.open)
	}
}

// SetDelay holds every chunk d before forwarding it (0: none).
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) handle(c net.Conn) {
	p.track(c, true)
	defer p.track(c, false)
	defer c.Close()
	<-p.gate() // accept, but connect nothing while blackholed
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(u, true)
	defer p.track(u, false)
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(u, c, true); done <- struct{}{} }()
	go func() { p.pipe(c, u, false); done <- struct{}{} }()
	<-done
}

func (p *Proxy) pipe(dst, src net.Conn, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			<-p.gate()
			if up {
				p.lastSend.Store(time.Now().UnixNano())
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// Conns counts the connections open through the proxy (both sides).
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops listening and closes every connection through the proxy.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.Heal()
}

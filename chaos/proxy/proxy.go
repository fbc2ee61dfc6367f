// Package proxy is a TCP fault proxy for the chaos harness: it forwards one local port to one
// server and, on demand, cuts the link, stalls one direction (a one-way partition: bytes are held
// back, as a real partition holds them in retransmission, not dropped), delays or throttles it.
// Each worker of a chaos run reaches each server through a proxy of its own, so a fault hits
// one worker's link and nothing else.
package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Fault is the state of a proxied link. The zero Fault forwards everything at once.
type Fault struct {
	// Cut closes every open connection and every new one at once (a refused link).
	Cut bool
	// StallUp holds back the bytes from the client to the server; StallDown those from the
	// server to the client. Both together are a full blackhole.
	StallUp, StallDown bool
	// Delay is added before each chunk is forwarded, in both directions.
	Delay time.Duration
	// BytesPerSecond limits each direction's throughput (0: unlimited).
	BytesPerSecond int
}

// Proxy forwards connections accepted on Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	fault  Fault
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// pollEvery is how often a stalled direction looks whether the stall ended.
const pollEvery = 5 * time.Millisecond

// Start listens on an ephemeral port of 127.0.0.1 and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Set replaces the fault state. A Cut closes the open connections at once.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	p.fault = f
	var toClose []net.Conn
	if f.Cut {
		for c := range p.conns {
			toClose = append(toClose, c)
		}
	}
	p.mu.Unlock()
	for _, c := range toClose {
		c.Close()
	}
}

// Heal forwards everything again (Set(Fault{})).
func (p *Proxy) Heal() { p.Set(Fault{}) }

// Fault returns the current fault state.
func (p *Proxy) Fault() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault
}

// Close stops listening, closes every connection and waits for the forwarding goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.fault.Cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			client.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, true); done <- struct{}{} }()
	go func() { p.pipe(client, server, false); done <- struct{}{} }()
	<-done
	// One side ended: close both so the other pipe ends too.
	client.Close()
	server.Close()
	<-done
}

// pipe copies src to dst, applying the fault state of its direction (up: client to server)
// before each chunk.
func (p *Proxy) pipe(dst, src net.Conn, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold(up) {
				return
			}
			f := p.Fault()
			wait := f.Delay
			if f.BytesPerSecond > 0 {
				wait += time.Duration(float64(n) / float64(f.BytesPerSecond) * float64(time.Second))
			}
			if wait > 0 {
				time.Sleep(wait)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// hold waits while the direction is stalled; false once the link is cut or the proxy closed.
func (p *Proxy) hold(up bool) bool {
	for {
		p.mu.Lock()
		f, closed := p.fault, p.closed
		p.mu.Unlock()
		if closed || f.Cut {
			return false
		}
		if (up && !f.StallUp) || (!up && !f.StallDown) {
			return true
		}
		time.Sleep(pollEvery)
	}
}

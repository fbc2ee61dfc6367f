// Package outagetest checks, from tests of any backend, that a Simba session rides out a short
// outage of its server: a TCP proxy between the backend and the server resets every connection
// and refuses new ones for a while (or, blackholed, goes silent), then lets new connections
// through again, and a client must keep its session (no EventSessionExpired, no second
// session) when the outage leaves it time to renew.
package outagetest

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// Proxy is a TCP proxy to one server that can go down: while down it resets the connections it
// has and refuses new ones (it accepts them and resets them at once, as the trial's proxy did).
// Blackholed instead, it answers nothing: the connections it has go silent for good (nothing
// more passes either way, and nothing closes them, as after a load balancer's failover or a
// lost NAT entry that sends no reset), and new ones are taken and held silent (as a dropped
// SYN, or a server that takes connections and never answers) until their clients close them.
type Proxy struct {
	ln         net.Listener
	target     string
	down       atomic.Bool
	blackholed atomic.Bool
	wg         sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[*net.TCPConn]struct{}
	// dead holds the proxied connections a blackhole silenced: nothing passes on them.
	dead map[*net.TCPConn]bool
}

// StartProxy starts a proxy to target on a free loopback port; it stops when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*net.TCPConn]struct{}{}, dead: map[*net.TCPConn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Down resets every proxied connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.down.Store(true)
	p.mu.Lock()
	for c := range p.conns {
		reset(c)
	}
	p.mu.Unlock()
}

// Blackhole silences every proxied connection for good and holds new ones silent until Up.
func (p *Proxy) Blackhole() {
	p.blackholed.Store(true)
	p.mu.Lock()
	for c := range p.conns {
		p.dead[c] = true
	}
	p.mu.Unlock()
}

// Up lets new connections through again (connections a blackhole silenced stay silent).
func (p *Proxy) Up() {
	p.down.Store(false)
	p.blackholed.Store(false)
}

// silenced reports whether c was silenced by a blackhole.
func (p *Proxy) silenced(c *net.TCPConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead[c]
}

// reset closes c with a TCP reset.
func reset(c *net.TCPConn) {
	c.SetLinger(0) //nolint:errcheck
	c.Close()
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// track adds c to the proxied connections, or reports false once the proxy is closed.
func (p *Proxy) track(cs ...*net.TCPConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...*net.TCPConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		delete(p.dead, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		client := c.(*net.TCPConn)
		if p.down.Load() {
			reset(client)
			continue
		}
		p.wg.Add(1)
		if p.blackholed.Load() {
			go p.hold(client)
			continue
		}
		go p.serve(client)
	}
}

func (p *Proxy) serve(client *net.TCPConn) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		reset(client)
		return
	}
	server := s.(*net.TCPConn)
	if !p.track(client, server) || p.down.Load() {
		reset(client)
		reset(server)
		p.untrack(client, server)
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src *net.TCPConn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !p.silenced(client) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if p.silenced(client) {
			// A silenced connection's end is not passed on either: its peer hears nothing.
			src.Close()
			return
		}
		dst.Close()
		src.Close()
	}
	wg.Add(2)
	go pipe(server, client)
	go pipe(client, server)
	wg.Wait()
	client.Close()
	server.Close()
	p.untrack(client, server)
}

// hold takes a connection made while the proxy is blackholed and answers nothing, until its
// client closes it or the proxy stops.
func (p *Proxy) hold(client *net.TCPConn) {
	defer p.wg.Done()
	if !p.track(client) {
		client.Close()
		return
	}
	io.Copy(io.Discard, client) //nolint:errcheck
	client.Close()
	p.untrack(client)
}

// Config is a run of outages.
type Config struct {
	// TTL is the client's session TTL (simba.WithTTL; the renewal interval is its default,
	// TTL/3).
	TTL time.Duration
	// Outage is how long each outage lasts.
	Outage time.Duration
	// Phase is when each outage begins, after a keep-alive succeeded: the later, the less of
	// the session's time is left when the outage ends.
	Phase time.Duration
	// Rounds is the number of outages.
	Rounds int
	// Blackhole makes each outage a blackhole (Proxy.Blackhole) instead of resets and refused
	// connections (Proxy.Down).
	Blackhole bool
}

// Run starts a client on backend (whose connections to its server all go through proxies)
// and, Rounds times, waits for a keep-alive to succeed, waits Phase, takes every proxy down for
// Outage, brings them up again and waits one TTL and a second for the session to be renewed or
// to lapse. It returns in how many rounds the session was lost (an EventSessionExpired, or
// another session opened), logging each round.
func Run(t testing.TB, backend spi.Backend, proxies []*Proxy, cfg Config) (lost int) {
	t.Helper()
	kb := &keepAliveBackend{Backend: backend, ok: make(chan struct{}, 1)}
	var expired, opened atomic.Int64
	start := time.Now()
	c, err := simba.New(kb, simba.WithTTL(cfg.TTL), simba.WithListener(func(e simba.Event) {
		switch e.Kind {
		case simba.EventSessionExpired:
			expired.Add(1)
			t.Logf("%6.2fs %v", time.Since(start).Seconds(), e)
		case simba.EventSessionOpened:
			opened.Add(1)
			t.Logf("%6.2fs %v", time.Since(start).Seconds(), e)
		case simba.EventBackendError:
			t.Logf("%6.2fs %v", time.Since(start).Seconds(), e)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx) //nolint:errcheck
	}()
	wait := func() {
		t.Helper()
		select {
		case <-kb.ok:
		case <-time.After(time.Minute):
			t.Fatal("no keep-alive succeeded within a minute")
		}
	}
	wait() // the session is open and renewed
	for i := range cfg.Rounds {
		select { // a fresh success, not one from before
		case <-kb.ok:
		default:
		}
		wait()
		time.Sleep(cfg.Phase)
		e0, o0 := expired.Load(), opened.Load()
		t.Logf("%6.2fs round %d: down", time.Since(start).Seconds(), i)
		for _, p := range proxies {
			if cfg.Blackhole {
				p.Blackhole()
			} else {
				p.Down()
			}
		}
		time.Sleep(cfg.Outage)
		for _, p := range proxies {
			p.Up()
		}
		t.Logf("%6.2fs round %d: up", time.Since(start).Seconds(), i)
		time.Sleep(cfg.TTL + time.Second)
		gone := expired.Load() > e0 || opened.Load() > o0
		t.Logf("%6.2fs round %d: outage of %v, %v after a renewal: session lost: %v", time.Since(start).Seconds(), i, cfg.Outage, cfg.Phase, gone)
		if gone {
			lost++
			wait() // a new session is up before the next round
		}
	}
	return lost
}

// keepAliveBackend signals each successful keep-alive of a live session on ok.
type keepAliveBackend struct {
	spi.Backend
	ok chan struct{}
}

func (b *keepAliveBackend) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	ka, err := b.Backend.KeepAlive(ctx, id, names, groups)
	if err == nil && !ka.Expired {
		select {
		case b.ok <- struct{}{}:
		default:
		}
	}
	return ka, err
}

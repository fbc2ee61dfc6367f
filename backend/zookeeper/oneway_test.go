package zookeeper

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// stallProxy forwards TCP connections to a server and can stall the server-to-client
// direction: a one-way partition, the client's bytes reaching the server while the server's
// are held back (as TCP holds them in retransmission, not dropped). It never heals: closing it
// drops every connection with what it holds.
type stallProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	done    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns []*proxiedConn // in the order accepted
	socks []net.Conn
}

// proxiedConn is what the proxy saw of one client connection.
type proxiedConn struct {
	up     atomic.Int64 // bytes forwarded to the server
	closed atomic.Bool  // the client closed its side
}

func startStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

// stall holds back, from now on, every byte the server sends.
func (p *stallProxy) stall() { p.stalled.Store(true) }

// conn returns the i-th connection accepted (from 0), or nil.
func (p *stallProxy) conn(i int) *proxiedConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < len(p.conns) {
		return p.conns[i]
	}
	return nil
}

func (p *stallProxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.socks {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		pc := &proxiedConn{}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.socks = append(p.socks, client, server)
		p.mu.Unlock()
		select {
		case <-p.done: // closed meanwhile: close has missed these two
			client.Close()
			server.Close()
			return
		default:
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(countingWriter{server, &pc.up}, client)
			pc.closed.Store(true)
			server.(*net.TCPConn).CloseWrite()
		}()
		go func() {
			defer p.wg.Done()
			defer client.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				for p.stalled.Load() { // hold what came, even the end of the stream
					select {
					case <-p.done:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
				if n > 0 {
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// TestOneWayStallCloseFreesLease: when the server's replies stop coming back while the
// client's requests still reach it (a one-way partition), a holder that gives up on its
// session and closes it (as Simba's engine does at its deadline) must free its lease at
// once, whatever go-zookeeper's connection is doing: a second session then acquires the lease
// well within 1.5 session timeouts of the stall, and before the server could have expired the
// holder's session on its own (so only the close can have freed it).
//
// Three moments of the close: while the stalled connection is still up (go-zookeeper's own
// close request goes out on it); after go-zookeeper gave up on it (2/3 of the session timeout
// after the first unanswered request) and before it reconnects (the pacer redials after
// 25–50 ms; the test holds it back): go-zookeeper sent nothing then and, once closed, never reconnected; and while its
// reconnect's handshake awaits the answer that never comes: the connect request reached the
// server and renewed the session, and go-zookeeper's close request waited behind the
// handshake. Before the fix the last two left the lease to the server's expiry, up to a
// session timeout after the last request that reached it. In the last the close must go on
// the reconnect's connection, right behind its connect request: sent on a connection of the
// backend's own it raced with that connect request at the server, and lost now and then.
func TestOneWayStallCloseFreesLease(t *testing.T) {
	z := startPrivateZK(t)
	const ttl = 3 * time.Second
	chroot := "/simba-oneway"
	waiterB := openBackend(t, "zk://"+z.addr+chroot)
	ctx := context.Background()
	ws, err := waiterB.OpenSession(ctx, "waiter", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		// closeAt waits for the moment to close the holder's session, and returns the earliest
		// time the server could expire the session on its own (a lower bound of when the last
		// request that reached it was sent, plus the session timeout).
		closeAt func(t *testing.T, p *stallProxy, b *Backend, sid spi.SessionID) time.Time
		// conns is how many connections the holder has made through the proxy once the lease
		// is free: go-zookeeper's, then its reconnect's if any, then the backend's own one that
		// carried the close if go-zookeeper's could not.
		conns int
	}{
		{"connection up", func(t *testing.T, p *stallProxy, b *Backend, sid spi.SessionID) time.Time {
			sent := keepAliveUnanswered(t, b, sid, ttl)
			return sent.Add(ttl)
		}, 1},
		{"reconnect pending", func(t *testing.T, p *stallProxy, b *Backend, sid spi.SessionID) time.Time {
			// The pacer redials 25–50 ms after go-zookeeper gives up: hold the redial back
			// (as go-zookeeper's own one-second wait did) so that the close falls before it.
			testPacerHold.Store(int64(time.Minute))
			t.Cleanup(func() { testPacerHold.Store(0) })
			keepAliveUnanswered(t, b, sid, ttl)
			// The engine retries an unanswered keep-alive inside its remaining time.
			last := keepAliveUnanswered(t, b, sid, ttl)
			waitFor(t, "go-zookeeper to give up on the stalled connection", func() bool { return p.conn(0).closed.Load() })
			if p.conn(1) != nil {
				t.Fatal("go-zookeeper reconnected while the pacer held the redial back")
			}
			return last.Add(ttl)
		}, 2},
		{"handshake unanswered", func(t *testing.T, p *stallProxy, b *Backend, sid spi.SessionID) time.Time {
			keepAliveUnanswered(t, b, sid, ttl)
			keepAliveUnanswered(t, b, sid, ttl) // so that the reconnect finds the session alive
			waitFor(t, "go-zookeeper to give up on the stalled connection", func() bool { return p.conn(0).closed.Load() })
			gaveUp := time.Now() // the reconnect's connect request comes later
			waitFor(t, "the reconnect's connect request to reach the server", func() bool {
				c := p.conn(1)
				return c != nil && c.up.Load() > 0
			})
			return gaveUp.Add(ttl)
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startStallProxy(t, z.addr)
			holderB := openBackend(t, "zk://"+p.addr()+chroot)
			hs, err := holderB.OpenSession(ctx, "holder", ttl)
			if err != nil {
				t.Fatal(err)
			}
			name := "lease-" + tc.name[:4]
			if a, err := holderB.Acquire(ctx, hs.ID, name); err != nil || a.Kind != spi.Granted {
				t.Fatalf("holder's acquire: %+v, %v", a, err)
			}
			if a, err := waiterB.Acquire(ctx, ws.ID, name); err != nil || a.Kind != spi.HeldBy || a.Holder != hs.ID {
				t.Fatalf("waiter's acquire before the stall: %+v, %v", a, err)
			}

			p.stall()
			stalled := time.Now()
			expiry := tc.closeAt(t, p, holderB, hs.ID)
			// As the engine's, the close is a call of its own that gives up after ttl/3 (its
			// reply cannot come back); the waiter does not wait for it.
			closed := time.Now()
			closeErr := make(chan error, 1)
			go func() {
				cctx, cancel := context.WithTimeout(ctx, ttl/3)
				defer cancel()
				closeErr <- holderB.CloseSession(cctx, hs.ID)
			}()
			defer func() {
				if err := <-closeErr; err != nil && !errors.Is(err, spi.ErrUnavailable) {
					t.Errorf("CloseSession: %v", err)
				}
			}()

			limit := stalled.Add(ttl * 3 / 2)
			if expiry.Before(limit) {
				limit = expiry
			}
			for {
				a, err := waiterB.Acquire(ctx, ws.ID, name)
				if err != nil {
					t.Fatalf("waiter's acquire: %v", err)
				}
				if a.Kind == spi.Granted {
					t.Logf("acquired %.2f×TTL after the stall began, %v after the close (limit: %.2f×TTL)",
						time.Since(stalled).Seconds()/ttl.Seconds(), time.Since(closed).Round(time.Millisecond),
						limit.Sub(stalled).Seconds()/ttl.Seconds())
					if err := waiterB.Release(ctx, ws.ID, name, a.Token); err != nil {
						t.Fatal(err)
					}
					if p.conn(tc.conns-1) == nil || p.conn(tc.conns) != nil {
						t.Errorf("the holder made other than %d connections", tc.conns)
					}
					return
				}
				if time.Now().After(limit) {
					t.Fatalf("the closed holder's lease was still held %.2f×TTL after the stall began: the close did not reach the server (held by %s; the holder was %s)",
						time.Since(stalled).Seconds()/ttl.Seconds(), a.Holder, hs.ID)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// keepAliveUnanswered sends a keep-alive of session sid, whose reply the stall holds back, and
// returns when it was sent; the call gives up after ttl/3, as the engine's calls do.
func keepAliveUnanswered(t *testing.T, b *Backend, sid spi.SessionID, ttl time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
	defer cancel()
	sent := time.Now()
	if _, err := b.KeepAlive(ctx, sid, nil, nil); err == nil {
		t.Fatal("a keep-alive was answered through the stall")
	}
	return sent
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

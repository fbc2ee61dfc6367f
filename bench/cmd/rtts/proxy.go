package main

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// latencyProxy forwards connections to a target with a one-way latency: every chunk read from
// either side is written to the other delay after it was read, chunks in flight overlapping
// (a pipe, not a queue of sleeps), so a reply of several TCP segments costs one delay, not one
// per segment. internal/faultproxy's Delay sleeps before each chunk in turn, which charges a
// reply read in n chunks n delays and so overstates the round trips of a call (trial31's
// "-lat" estimates were made that way).
//
// It also counts turns: a chunk from the client on a connection whose last chunk went the
// other way (or on a new connection) starts a round trip. Turns count every request/response
// exchange, parallel ones each (a Redis Cluster call's rounds at several masters), and so bound
// from above the round trips on a call's critical path that the delay measures.
type latencyProxy struct {
	ln       net.Listener
	target   string
	delay    *atomic.Int64 // nanoseconds, shared by every proxy of a run
	turns    *atomic.Int64
	accepted atomic.Int64 // connections accepted
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startProxy(target string, delay, turns *atomic.Int64) (*latencyProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &latencyProxy{ln: ln, target: target, delay: delay, turns: turns}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *latencyProxy) addr() string { return p.ln.Addr().String() }

func (p *latencyProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *latencyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var last atomic.Int32 // 0 none yet, 1 up, 2 down
		p.wg.Add(2)
		go p.pipe(s, c, true, &last)
		go p.pipe(c, s, false, &last)
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe reads src and writes each chunk to dst delay after it was read; on any error it closes
// both sockets, which ends the other direction too.
func (p *latencyProxy) pipe(dst, src net.Conn, up bool, last *atomic.Int32) {
	defer p.wg.Done()
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.at.Add(time.Duration(p.delay.Load()))); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				dst.Close()
				for range q {
				}
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			dir := int32(2)
			if up {
				dir = 1
			}
			if prev := last.Swap(dir); up && prev != 1 {
				p.turns.Add(1)
			}
			q <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now()}
		}
		if err != nil {
			close(q)
			<-done
			src.Close()
			dst.Close()
			return
		}
	}
}

package zookeeper

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// standIn is the connection the tap's dialer hands go-zookeeper once the tap is abandoned
// (Close drops the session): a local stand-in for a server that answers go-zookeeper's connect
// request at once, swallows every request, and ends when go-zookeeper's close request is
// written to it. Nothing reaches a server.
//
// It exists for go-zookeeper's Conn.Close, which flags its connection loop to stop, queues a
// close request and waits up to a second for that request's answer. A loop that was
// reconnecting when Close came (its connection broke during Close, or it was redialling a
// server that is down) used to see the flag at its wait between rounds of servers and end
// before the request was queued, which then waited out the second (Close took 1.0 s). Dialled
// instead, at once (the pacer does not wait once the tap is abandoned), the stand-in gives the
// loop an established connection, whose send loop takes the close request: it is written to
// the stand-in, which ends, and go-zookeeper fails the request with ErrClosing, ending
// Conn.Close and its goroutines at once, as it does for a dropped established connection (see
// tap.abandon).
type standIn struct {
	mu     sync.Mutex
	rd     []byte        // the connect response, until read
	wrote  bool          // the connect request has been written
	closed chan struct{} // closed by Close
	once   sync.Once
}

// newStandIn returns a stand-in whose connect response carries session sid (1 when the tap
// never had one: 0 would make go-zookeeper take the session for expired and dial again), with
// password passwd and session timeout timeoutMs (at least a second: go-zookeeper pings at a
// third of it).
func newStandIn(sid int64, passwd []byte, timeoutMs int32) *standIn {
	if sid == 0 {
		sid = 1
	}
	if len(passwd) == 0 {
		passwd = make([]byte, 16)
	}
	var f frameBuilder
	// ConnectResponse: protocolVersion, timeOut, sessionId, passwd.
	resp := f.i32(0).i32(max(timeoutMs, 1000)).i64(sid).buf(passwd).frame()
	return &standIn{rd: resp, closed: make(chan struct{})}
}

// Read returns the connect response (go-zookeeper reads it after writing its connect request),
// then blocks until the stand-in is closed.
func (c *standIn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.rd) > 0 {
		n := copy(p, c.rd)
		c.rd = c.rd[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	<-c.closed
	return 0, io.EOF
}

// Write swallows p; a close-session request (go-zookeeper writes each request whole) closes the
// stand-in. It never fails, closed or not, as an abandoned tapConn's: go-zookeeper answers a
// request whose write fails at once and again when it fails the requests awaiting replies,
// and a request already answered once (a request queued as Close came, a setAuth of its
// resent credentials) then blocks its connection loop for good on the second answer.
func (c *standIn) Write(p []byte) (int, error) {
	c.mu.Lock()
	first := !c.wrote
	c.wrote = true
	c.mu.Unlock()
	if !first && len(p) >= 12 && int32(binary.BigEndian.Uint32(p[8:])) == opCloseSession {
		c.Close()
	}
	return len(p), nil
}

// Close ends the stand-in: reads return io.EOF.
func (c *standIn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// LocalAddr implements net.Conn.
func (c *standIn) LocalAddr() net.Addr { return standInAddr{} }

// RemoteAddr implements net.Conn.
func (c *standIn) RemoteAddr() net.Addr { return standInAddr{} }

// SetDeadline implements net.Conn: a stand-in has no deadlines (its reads end with Close).
func (c *standIn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline implements net.Conn (see SetDeadline).
func (c *standIn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline implements net.Conn (see SetDeadline).
func (c *standIn) SetWriteDeadline(time.Time) error { return nil }

// Network implements net.Addr.
func (standInAddr) Network() string { return "standin" }

// String implements net.Addr.
func (standInAddr) String() string { return "standin" }

// standInAddr is a stand-in's address.
type standInAddr struct{}

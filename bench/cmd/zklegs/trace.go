package main

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// Frame kinds of an event: a request written, a reply or watch event read, and the two
// marks a hand-over is timed by.
const (
	kindWrite   = 'w'
	kindRead    = 'r'
	kindUnlock  = 'U' // the holder is about to let go
	kindGranted = 'G' // the waiter's lock call returned
)

// ZooKeeper wire values the legs are told apart by.
const (
	xidWatchEvent        = -1
	opDelete             = 2
	opGetChildren        = 8
	opGetChildren2       = 12
	opMulti              = 14
	eventNodeDeleted     = 2
	eventChildrenChanged = 4
	// watcherTimeout is the session timeout Simba's watcher connection asks for (backend/
	// zookeeper, watcherSessionTimeout): how its connection is told from a session's.
	watcherTimeout = 30000
)

// event is one frame on one of a process's ZooKeeper connections, or a mark.
type event struct {
	T       int64 // unix ns, the wall clock both processes read
	Proc    byte  // 'P' (the harness) or 'C' (its child); set when the two are merged
	Conn    int32
	Kind    byte
	Xid     int32
	Op      int32 // a request's opcode; a reply's error code
	Type    int32 // a watch event's type
	Watcher bool  // on Simba's watcher connection
}

// recorder keeps a process's events in memory: nothing is written while hand-overs run.
type recorder struct {
	mu    sync.Mutex
	evs   []event
	conns int32
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) mark(kind byte) { r.add(event{T: time.Now().UnixNano(), Kind: kind}) }

func (r *recorder) take() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}

// dial is a zk.Dialer whose connections record every complete frame they write or read, with
// the time the Write was called or the Read returned.
func (r *recorder) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.conns++
	id := r.conns
	r.mu.Unlock()
	return &tracedConn{Conn: c, r: r, id: id}, nil
}

type tracedConn struct {
	net.Conn
	r           *recorder
	id          int32
	out, in     []byte // partial frames
	wrote, read bool   // the connect request / response (no header) went by
	watcher     bool
}

// frames calls f with each complete jute frame (after its 4-byte length) at the head of *buf
// and drops it.
func frames(buf *[]byte, f func([]byte)) {
	for len(*buf) >= 4 {
		n := int(binary.BigEndian.Uint32(*buf))
		if len(*buf) < 4+n {
			return
		}
		f((*buf)[4 : 4+n])
		*buf = (*buf)[4+n:]
	}
}

func (c *tracedConn) Write(p []byte) (int, error) {
	now := time.Now().UnixNano()
	c.out = append(c.out, p...)
	frames(&c.out, func(f []byte) {
		if !c.wrote {
			// The connect request: protocol version, last zxid, then the session timeout.
			c.wrote = true
			c.watcher = len(f) >= 16 && binary.BigEndian.Uint32(f[12:]) == watcherTimeout
			return
		}
		if len(f) >= 8 {
			c.r.add(event{T: now, Conn: c.id, Kind: kindWrite, Xid: int32(binary.BigEndian.Uint32(f)),
				Op: int32(binary.BigEndian.Uint32(f[4:])), Watcher: c.watcher})
		}
	})
	return c.Conn.Write(p)
}

func (c *tracedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		now := time.Now().UnixNano()
		c.in = append(c.in, p[:n]...)
		frames(&c.in, func(f []byte) {
			if !c.read {
				c.read = true
				return
			}
			if len(f) < 16 { // reply header: xid, zxid, err
				return
			}
			e := event{T: now, Conn: c.id, Kind: kindRead, Xid: int32(binary.BigEndian.Uint32(f)),
				Op: int32(binary.BigEndian.Uint32(f[12:])), Watcher: c.watcher}
			if e.Xid == xidWatchEvent && len(f) >= 20 {
				e.Type = int32(binary.BigEndian.Uint32(f[16:]))
			}
			c.r.add(e)
		})
	}
	return n, err
}

// Package silent tells the connections a silent link left behind: each connection a backend
// dials notes when it last read a byte and when it last began a write (two atomic stores, no
// lock, no allocation), so that when a call runs out of time (TimedOut) the backend can close
// every connection that has done neither since that call began (Stamps.SilentSince).
//
// A call that runs out of time is evidence of a link gone silent (a blackhole: no byte, close
// or reset either way), and the idle connections of a pool were silenced with it. A pool that
// hands a connection out again without a round trip (go-redis, pgxpool for a connection idle
// under a second) would have each of them fail one call more, at its timeout, once the link
// heals: a session's keep-alive and its retries alike, which lost the session to an outage of
// 200 ms at a TTL of 3 s.
package silent

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// epoch is the origin of Now.
var epoch = time.Now()

// Now is the time on the monotonic clock, as nanoseconds since an origin of the process.
func Now() int64 { return int64(time.Since(epoch)) }

// Stamps are when a connection last read a byte and last began a write (Now).
type Stamps struct {
	lastRead  atomic.Int64
	lastWrite atomic.Int64
}

// Fresh marks the connection as having read now: a new connection is not silent before its
// first call.
func (s *Stamps) Fresh() { s.lastRead.Store(Now()) }

// Read notes a read that returned n bytes.
func (s *Stamps) Read(n int) {
	if n > 0 {
		s.lastRead.Store(Now())
	}
}

// Writing notes a write beginning.
func (s *Stamps) Writing() { s.lastWrite.Store(Now()) }

// SilentSince reports whether the connection has neither read nor begun a write since t0.
func (s *Stamps) SilentSince(t0 int64) bool {
	return s.lastRead.Load() < t0 && s.lastWrite.Load() < t0
}

// Conn is a connection with its Stamps, kept by its Read and Write.
type Conn struct {
	net.Conn
	Stamps
	r       *Registry   // the registry that keeps it, or nil
	dropped atomic.Bool // marked by Registry.MarkSilent
}

// Dropped reports whether a Registry marked c silent (MarkSilent): its driver should discard
// it rather than hand it out.
func (c *Conn) Dropped() bool { return c.dropped.Load() }

// New returns c with Stamps, fresh (Stamps.Fresh).
func New(c net.Conn) *Conn {
	s := &Conn{Conn: c}
	s.Fresh()
	return s
}

// Read implements net.Conn, noting a read that returned bytes.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.Stamps.Read(n)
	return n, err
}

// Write implements net.Conn, noting when the write began.
func (c *Conn) Write(p []byte) (int, error) {
	c.Writing()
	return c.Conn.Write(p)
}

// NetConn returns the connection wrapped.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Close implements net.Conn: it closes the connection, which its registry forgets.
func (c *Conn) Close() error {
	if c.r != nil {
		c.r.mu.Lock()
		delete(c.r.conns, c)
		c.r.mu.Unlock()
	}
	return c.Conn.Close()
}

// sysConn is a Conn whose connection is a socket: it passes the socket on (syscall.Conn),
// which is what a driver's liveness check of a pooled connection looks for (go-sql-driver's
// and go-redis's, on the connection they hold: they do not unwrap). Without it every
// connection would pass that check, a closed one too.
type sysConn struct{ *Conn }

// SyscallConn implements syscall.Conn.
func (c sysConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.Conn.(syscall.Conn).SyscallConn()
}

// Registry keeps the open connections it tracked (Track), for DropSilent. Its lock is taken
// when a connection is tracked or closed and by DropSilent, never by a read or write. The
// zero value is ready to use.
type Registry struct {
	mu    sync.Mutex
	conns map[*Conn]struct{}
}

// Track returns c with Stamps (fresh), kept by r until it is closed; it passes c's socket on
// (syscall.Conn) when c has one.
func (r *Registry) Track(c net.Conn) net.Conn {
	s := New(c)
	s.r = r
	r.mu.Lock()
	if r.conns == nil {
		r.conns = map[*Conn]struct{}{}
	}
	r.conns[s] = struct{}{}
	r.mu.Unlock()
	if _, ok := c.(syscall.Conn); ok {
		return sysConn{s}
	}
	return s
}

// DropSilent closes every connection r keeps that has neither read nor begun a write since
// t0 (SilentSince), when a call that began at t0 ran out of time.
func (r *Registry) DropSilent(t0 int64) {
	r.mu.Lock()
	var quiet []*Conn
	for c := range r.conns {
		if c.SilentSince(t0) {
			quiet = append(quiet, c)
		}
	}
	r.mu.Unlock()
	for _, c := range quiet {
		c.Close()
	}
}

// MarkSilent marks every connection r keeps that has neither read nor begun a write since t0
// (SilentSince), when a call that began at t0 ran out of time, as DropSilent would close it:
// for a driver that asks (Conn.Dropped) before it hands a connection out and then closes it
// itself, where a connection closed under it would be logged as bad (go-sql-driver's "closing
// bad idle connection"). A connection in use is left to its call's own deadline.
func (r *Registry) MarkSilent(t0 int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		if c.SilentSince(t0) {
			c.dropped.Store(true)
		}
	}
}

// CloseAll closes every connection r keeps (and forgets them), as a backend's Close that cuts
// its pool's connections does. Connections tracked after it are kept as before.
func (r *Registry) CloseAll() {
	r.mu.Lock()
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// Find returns the *Conn c is or wraps, following NetConn (as *tls.Conn has it), or nil.
func Find(c net.Conn) *Conn {
	for range 16 { // a bound on the chain of wrappers
		switch w := c.(type) {
		case *Conn:
			return w
		case sysConn:
			return w.Conn
		case interface{ NetConn() net.Conn }:
			c = w.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// TimedOut reports whether err is a call's running out of time: its context's deadline, or a
// network timeout (a deadline a client set from it).
func TimedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

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

// TestSilentHandshakeFailsPromptly reconnects a session to a server that takes the connection
// and the connect request but never answers (as a restarting ZooKeeper 3.8 was seen to do,
// see tapConn.SetReadDeadline): a keep-alive must fail within about the reply timeout, not
// wait out go-zookeeper's own handshake timeout of ten receive timeouts (60 s here), and the
// session's calls must answer again (live or expired) once the server does.
func TestSilentHandshakeFailsPromptly(t *testing.T) {
	d := &silentDialer{t: t}
	b := openBackend(t, serverDSN(t, "timeout=1s"), WithDialer(d.dial))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := b.OpenSession(ctx, "silent-handshake", 9*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := b.credentialsOf(s.ID)
	if !ok {
		t.Fatal("no session")
	}
	reply := c.s.tap.replyTimeout()

	// Drop the connection; go-zookeeper redials (after its one-second pause) into silence.
	d.goSilent()
	waitFor(t, "a redial", func() bool { return len(d.silentConns()) > 0 })

	start := time.Now()
	kctx, kcancel := context.WithTimeout(ctx, reply+30*time.Second)
	_, err = b.KeepAlive(kctx, s.ID, nil, nil)
	kcancel()
	took := time.Since(start)
	if err == nil {
		t.Fatal("a keep-alive was answered while the server was silent")
	}
	if spi.Classify(err) != spi.Retryable {
		t.Fatalf("keep-alive over a silent handshake: %v; want a retryable error", err)
	}
	if took > reply+5*time.Second {
		t.Fatalf("keep-alive over a silent handshake took %v (%v); want it to fail within about the reply timeout %v", took, err, reply)
	}
	t.Logf("keep-alive failed after %v: %v", took.Round(time.Millisecond), err)

	// The server answers again: the session's calls answer (live, or expired if the silence
	// outlasted its timeout) within a few seconds.
	d.silent.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		kctx, kcancel := context.WithTimeout(ctx, 15*time.Second)
		ka, err := b.KeepAlive(kctx, s.ID, nil, nil)
		kcancel()
		if err == nil {
			t.Logf("after the silence: %+v", ka)
			break
		}
		if spi.Classify(err) != spi.Retryable || time.Now().After(deadline) {
			t.Fatalf("keep-alive after the server answers again: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCloseSessionOverSilentHandshake closes a session whose connection is a reconnect that
// the server takes but never answers, with the connect request and go-zookeeper's queued
// close behind it: the close cannot be confirmed, so CloseSession must say so with a
// retryable error (it said nil, as if the session and its lease were gone), and on its own,
// within about the reply timeout rather than at the caller's deadline; the connection must
// be closed all the same. Once the server answers again a retry closes the session, which
// frees its lease at once.
func TestCloseSessionOverSilentHandshake(t *testing.T) {
	d := &silentDialer{t: t}
	dsn := serverDSN(t, "timeout=1s")
	b := openBackend(t, dsn, WithDialer(d.dial))
	other := openBackend(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := b.OpenSession(ctx, "silent-close", 9*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := b.Acquire(ctx, s.ID, "silent-close"); err != nil || a.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", a, err)
	}
	osess, err := other.OpenSession(ctx, "other", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// Drop the connection; go-zookeeper redials (after its one-second pause) into silence and
	// sends its connect request there.
	d.goSilent()
	waitFor(t, "the redial's connect request", func() bool { return d.heard.Load() > 0 })

	err = b.CloseSession(ctx, s.ID)
	if err == nil {
		t.Fatal("CloseSession over an unanswered handshake returned nil: the session and its lease are still at the server")
	}
	if !errors.Is(err, spi.ErrUnavailable) || spi.Classify(err) != spi.Retryable {
		t.Fatalf("CloseSession over an unanswered handshake: %v; want a retryable spi.ErrUnavailable", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("CloseSession over an unanswered handshake waited for the caller's deadline: %v", err)
	}
	t.Logf("CloseSession: %v", err)
	waitFor(t, "the silent connection to be closed", func() bool {
		for _, c := range d.silentConns() {
			if !c.closed.Load() {
				return false
			}
		}
		return true
	})
	if ka, err := b.KeepAlive(ctx, s.ID, nil, nil); err != nil || !ka.Expired {
		t.Fatalf("KeepAlive after CloseSession = %+v, %v; want expired", ka, err)
	}
	if a, err := other.Acquire(ctx, osess.ID, "silent-close"); err != nil || a.Kind != spi.HeldBy || a.Holder != s.ID {
		t.Fatalf("another session's Acquire after the failed close = %+v, %v; want held by %s", a, err, s.ID)
	}

	// The server answers again: a retry closes the session, and the lease is free.
	d.silent.Store(false)
	if err := b.CloseSession(ctx, s.ID); err != nil {
		t.Fatalf("CloseSession retried once the server answers: %v", err)
	}
	if a, err := other.Acquire(ctx, osess.ID, "silent-close"); err != nil || a.Kind != spi.Granted {
		t.Fatalf("another session's Acquire after the retried close = %+v, %v; want granted", a, err)
	}
	if err := b.CloseSession(ctx, s.ID); err != nil {
		t.Fatalf("CloseSession of a closed session: %v", err)
	}
}

// trackedConn records whether it was closed.
type trackedConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *trackedConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// silentDialer dials the server or, once silent, a server that takes every byte and answers
// none; it records the connections it made of both kinds.
type silentDialer struct {
	t      *testing.T
	silent atomic.Bool
	heard  atomic.Int64 // bytes the silent servers took

	mu        sync.Mutex
	live      []net.Conn // to the server
	toSilence []*trackedConn
}

func (d *silentDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if d.silent.Load() {
		c, srv := net.Pipe()
		go io.Copy(countingWriter{io.Discard, &d.heard}, srv) // takes every byte, answers none
		d.t.Cleanup(func() { srv.Close() })
		tc := &trackedConn{Conn: c}
		d.mu.Lock()
		d.toSilence = append(d.toSilence, tc)
		d.mu.Unlock()
		return tc, nil
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.mu.Lock()
		d.live = append(d.live, c)
		d.mu.Unlock()
	}
	return c, err
}

// goSilent makes the dials silent from now on and closes the connections to the server.
func (d *silentDialer) goSilent() {
	d.silent.Store(true)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.live {
		c.Close()
	}
}

// silentConns returns the silent connections dialled so far.
func (d *silentDialer) silentConns() []*trackedConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*trackedConn(nil), d.toSilence...)
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

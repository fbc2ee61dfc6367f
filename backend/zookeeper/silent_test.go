package zookeeper

import (
	"context"
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
	var silent atomic.Bool
	var silentDials atomic.Int32
	var mu sync.Mutex
	var live []net.Conn
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if silent.Load() {
			c, srv := net.Pipe()
			go io.Copy(io.Discard, srv) // takes every byte, answers none
			t.Cleanup(func() { srv.Close() })
			silentDials.Add(1)
			return c, nil
		}
		c, err := net.DialTimeout(network, addr, timeout)
		if err == nil {
			mu.Lock()
			live = append(live, c)
			mu.Unlock()
		}
		return c, err
	}
	b := openBackend(t, serverDSN(t, "timeout=1s"), WithDialer(dial))
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
	silent.Store(true)
	mu.Lock()
	for _, c := range live {
		c.Close()
	}
	mu.Unlock()
	waitFor(t, "a redial", func() bool { return silentDials.Load() > 0 })

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
	silent.Store(false)
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

package etcd

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestConnectBound: the shortest TTL / 6, within [100 ms, the dial timeout], doubled per round
// of the endpoints whose attempts were all given up, up to a third of the TTL (the call
// timeout): doubled to the dial timeout by an outage's swallowed attempts, the bound held a
// session's reopen back by seconds after a blackhole healed.
func TestConnectBound(t *testing.T) {
	ms := time.Millisecond
	var ttl time.Duration
	w := newConnWatch(5*time.Second, 2, func() time.Duration { return ttl })
	for _, c := range []struct {
		ttl  time.Duration
		cut  int
		want time.Duration
	}{
		{0, 0, 5 * time.Second},
		{3 * time.Second, 0, 500 * ms},
		{time.Second, 0, 166666666},
		{time.Second, 1, 166666666},
		{time.Second, 2, 333333332},
		{60 * time.Second, 0, 5 * time.Second},
		{100 * ms, 0, 100 * ms},
		{3 * time.Second, 20, time.Second},
		{time.Second, 8, 333333333},
		{0, 20, 5 * time.Second},
	} {
		ttl, w.cut = c.ttl, c.cut
		if got := w.connectBound(); got != c.want {
			t.Errorf("TTL %v, %d given up: connectBound = %v, want %v", c.ttl, c.cut, got, c.want)
		}
	}
}

// TestDialGivesUpSilentAttempt: a connection whose server never answers is closed at the
// bound (gRPC's read fails), and counted as given up.
func TestDialGivesUpSilentAttempt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the kernel takes the connection
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w := newConnWatch(5*time.Second, 1, func() time.Duration { return time.Second })
	c, err := w.dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read a byte from a server that never answers")
	}
	w.mu.Lock()
	cut := w.cut
	w.mu.Unlock()
	if cut != 1 {
		t.Errorf("%d attempts given up; want 1", cut)
	}
}

// TestDropSilent: after a call that timed out, the connection that waited for an answer since
// it wrote is closed, and one whose server answered is kept.
func TestDropSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	echo := make(chan net.Conn, 2)
	go func() {
		for {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			echo <- s
		}
	}()
	w := newConnWatch(5*time.Second, 1, func() time.Duration { return time.Second })
	dial := func() (net.Conn, net.Conn) {
		c, err := w.dial(context.Background(), ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s := <-echo
		s.Write([]byte{1}) // the handshake's answer
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	silent, s1 := dial()
	defer silent.Close()
	defer s1.Close()
	live, s2 := dial()
	defer live.Close()
	defer s2.Close()

	sent := time.Now()
	silent.Write([]byte{2})
	live.Write([]byte{2})
	s2.Write([]byte{3}) // the live server answers
	if _, err := io.ReadFull(live, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the call's time, all of it waited for by silent
	w.dropSilent(sent)
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Error("the silent connection was not closed")
	}
	s2.Write([]byte{4})
	if _, err := io.ReadFull(live, make([]byte, 1)); err != nil {
		t.Errorf("the live connection was closed: %v", err)
	}
}

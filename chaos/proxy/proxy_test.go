package proxy

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, timeout time.Duration) (string, error) {
	t.Helper()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	return r.ReadString('\n')
}

func TestForwardStallHealCut(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dial(t, p)
	if got, err := roundTrip(t, c, r, 2*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("forward: %q, %v", got, err)
	}

	// A stalled server→client direction holds the reply back, and delivers it once healed.
	p.Set(Fault{StallDown: true})
	if got, err := roundTrip(t, c, r, 200*time.Millisecond); err == nil {
		t.Fatalf("stalled link delivered %q", got)
	}
	p.Heal()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after heal: %q, %v", got, err)
	}

	// Delay shows in the round trip.
	p.Set(Fault{Delay: 100 * time.Millisecond})
	start := time.Now()
	if _, err := roundTrip(t, c, r, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("delayed round trip took %v, want ≥ 200ms (100ms each way)", el)
	}

	// A cut closes the open connection and refuses new ones until healed.
	p.Set(Fault{Cut: true})
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("cut connection still open")
	}
	c2, r2 := dial(t, p)
	if _, err := roundTrip(t, c2, r2, 500*time.Millisecond); err == nil {
		t.Fatal("new connection forwarded through a cut link")
	}
	p.Heal()
	c3, r3 := dial(t, p)
	if got, err := roundTrip(t, c3, r3, 2*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
}

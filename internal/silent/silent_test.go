package silent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDropSilent: DropSilent closes the connections that neither read nor began a write since
// t0, keeps the others, and a closed connection leaves the registry.
func TestDropSilent(t *testing.T) {
	var r Registry
	quietA, quietB := net.Pipe()
	defer quietB.Close()
	readA, readB := net.Pipe()
	defer readB.Close()
	wroteA, wroteB := net.Pipe()
	defer wroteB.Close()
	quiet, read, wrote := r.Track(quietA), r.Track(readA), r.Track(wroteA)
	defer read.Close()
	defer wrote.Close()
	t0 := Now()
	go readB.Write([]byte("x")) //nolint:errcheck
	if _, err := read.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	go wroteB.Read(make([]byte, 1)) //nolint:errcheck
	if _, err := wrote.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	r.DropSilent(t0)
	if _, err := quiet.Write([]byte("x")); err == nil {
		t.Fatal("a write on the silent connection succeeded: it was not closed")
	}
	r.mu.Lock()
	n := len(r.conns)
	r.mu.Unlock()
	if n != 2 {
		t.Fatalf("the registry keeps %d connections, want the 2 that spoke", n)
	}
	if Find(read) == nil || Find(tls.Client(read, &tls.Config{})) == nil {
		t.Fatal("Find does not find a tracked connection, or one under TLS")
	}
	if Find(readB) != nil {
		t.Fatal("Find found an untracked connection")
	}
}

// TestTrackPassesSocketOn: a tracked socket is a syscall.Conn (drivers' liveness checks look
// for it), a tracked pipe is not.
func TestTrackPassesSocketOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ln.Accept()
	defer s.Close()
	var r Registry
	tc := r.Track(c)
	defer tc.Close()
	if _, ok := tc.(syscall.Conn); !ok {
		t.Fatal("a tracked TCP connection is not a syscall.Conn")
	}
	p, q := net.Pipe()
	defer q.Close()
	tp := r.Track(p)
	defer tp.Close()
	if _, ok := tp.(syscall.Conn); ok {
		t.Fatal("a tracked pipe is a syscall.Conn")
	}
}

// TestTimedOut: a context's deadline and a network timeout are running out of time, wrapped or
// not; a cancellation and other errors are not.
func TestTimedOut(t *testing.T) {
	if !TimedOut(fmt.Errorf("x: %w", context.DeadlineExceeded)) || !TimedOut(os.ErrDeadlineExceeded) {
		t.Fatal("a deadline is not running out of time")
	}
	if TimedOut(context.Canceled) || TimedOut(errors.New("x")) {
		t.Fatal("a cancellation or another error is running out of time")
	}
}

// TestMarkSilent: MarkSilent marks the connections silent since t0 (Dropped) and closes none.
func TestMarkSilent(t *testing.T) {
	var r Registry
	quietA, quietB := net.Pipe()
	defer quietB.Close()
	readA, readB := net.Pipe()
	defer readB.Close()
	quiet, read := r.Track(quietA), r.Track(readA)
	defer quiet.Close()
	defer read.Close()
	t0 := Now()
	go readB.Write([]byte("x")) //nolint:errcheck
	if _, err := read.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	r.MarkSilent(t0)
	if !Find(quiet).Dropped() || Find(read).Dropped() {
		t.Fatalf("dropped: silent %v, read %v; want true, false", Find(quiet).Dropped(), Find(read).Dropped())
	}
	go quietB.Read(make([]byte, 1)) //nolint:errcheck
	if _, err := quiet.Write([]byte("x")); err != nil {
		t.Fatalf("the marked connection was closed: %v", err)
	}
}

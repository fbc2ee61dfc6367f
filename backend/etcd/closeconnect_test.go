package etcd

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestCloseEndsClientBeingMade: Close returns, and the call that was making the backend's
// client fails with spi.ErrBackendClosed, while that client (with credentials, so it
// authenticates as it is made) waits for a member that takes connections and never answers,
// with a dial timeout of ten minutes. On the old code Close waited for the client being made,
// which waited for its dial timeout (the default 5 s: one call timeout of a 15 s TTL), and so
// did the call, whatever its context.
func TestCloseEndsClientBeingMade(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	b, err := New("etcd://user:secret@" + ln.Addr().String() + "/close?dial_timeout=10m")
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		_, err := b.OpenSession(context.Background(), "o", 3*time.Second)
		opened <- err
	}()
	// Wait until the call is making the client (it holds cliMu meanwhile).
	for b.cliMu.TryLock() {
		b.cliMu.Unlock()
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close still waits for the client being made after a minute")
	}
	select {
	case err := <-opened:
		if !errors.Is(err, spi.ErrBackendClosed) {
			t.Errorf("OpenSession cut by Close = %v, want spi.ErrBackendClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("OpenSession still waits for the client being made after a minute")
	}
}

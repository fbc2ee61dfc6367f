package etcd

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// silentMember listens on a loopback port, takes connections and never answers them (each held
// open until the test ends); accepted receives a value per connection taken. A client with
// credentials made at it waits to authenticate for its dial timeout.
func silentMember(t *testing.T) (addr string, accepted <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	acc := make(chan struct{}, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case acc <- struct{}{}:
			default:
			}
		}
	}()
	return ln.Addr().String(), acc
}

// TestCloseEndsClientBeingMade: Close returns, and the call that was making the backend's
// client fails with spi.ErrBackendClosed, while that client (with credentials, so it
// authenticates as it is made) waits for a member that takes connections and never answers,
// with a dial timeout of ten minutes. On the old code Close waited for the client being made,
// which waited for its dial timeout (the default 5 s: one call timeout of a 15 s TTL), and so
// did the call, whatever its context.
func TestCloseEndsClientBeingMade(t *testing.T) {
	addr, accepted := silentMember(t)
	b, err := New("etcd://user:secret@" + addr + "/close?dial_timeout=10m")
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		_, err := b.OpenSession(context.Background(), "o", 3*time.Second)
		opened <- err
	}()
	<-accepted // the client being made has connected, to authenticate
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

// TestCallerCtxEndsWaitForClientBeingMade: a call whose context ends while the backend's
// client is being made (with credentials, at a member that never answers, with a dial timeout
// of ten minutes) returns then, with its context's error; a second call waits for the same
// making and ends with its own context too; Close then ends the making. On the old code the
// call waited for the client being made, that is for the dial timeout, whatever its context
// (only Close ended the wait): the calls were still waiting after a minute.
func TestCallerCtxEndsWaitForClientBeingMade(t *testing.T) {
	addr, accepted := silentMember(t)
	b, err := New("etcd://user:secret@" + addr + "/ctx?dial_timeout=10m")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, call := range []func(ctx context.Context) error{
		func(ctx context.Context) error { _, err := b.OpenSession(ctx, "o", 3*time.Second); return err },
		func(ctx context.Context) error { _, err := b.Inspect(ctx); return err },
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		if i == 0 {
			<-accepted // the client being made has connected, to authenticate
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("call %d, its context cancelled while the client was being made: %v, want context.Canceled", i, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("call %d still waits for the client being made a minute after its context was cancelled", i)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close still waits for the client being made after a minute")
	}
	if _, err := b.OpenSession(context.Background(), "o", 3*time.Second); !errors.Is(err, spi.ErrBackendClosed) {
		t.Errorf("OpenSession after Close = %v, want spi.ErrBackendClosed", err)
	}
}

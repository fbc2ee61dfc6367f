package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
)

// mutedServer serves a server that accepts connections and reads what it is sent but never
// answers: a stopped process, or a network that went dark after the handshake.
func mutedServer(t *testing.T) string {
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	return ln.Addr().String()
}

// TestOpenSessionEndsAtItsCancellation: OpenSession at a server that does not answer returns
// once its ctx is cancelled, long before ctx's deadline (a Simba client cancels the open in
// flight when it is closed, and must not wait a whole call timeout for it), with ctx's error.
func TestOpenSessionEndsAtItsCancellation(t *testing.T) {
	b, err := Open("redis://" + mutedServer(t) + "/0?read_timeout=1m")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan error, 1)
	go func() {
		_, err := b.OpenSession(ctx, "muted", time.Minute)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it send and wait
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("OpenSession cancelled: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OpenSession went on 10 s after its cancellation (its deadline and the read timeout are a minute away)")
	}
}

// TestCloseCutsAPubSubHandshake: Close returns at once while go-redis reconnects the hint hub's
// pub/sub connection to a server that does not answer. go-redis waits for the answer to that
// connection's handshake on a goroutine of its own, without a context, for a read timeout
// (20 s here), holding the lock that closing the pub/sub needs; Close used to wait for it.
func TestCloseCutsAPubSubHandshake(t *testing.T) {
	b, err := Open("redis://" + mutedServer(t) + "/0?read_timeout=20s")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The probe gives up after hintCallTimeout (5 s), taking the server for down; the hub's
	// pub/sub connection then reconnects by itself.
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the reconnection has sent its HELLO
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited 10 s for a pub/sub handshake the server never answers (read timeout 20 s)")
	}
}

package etcd

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestOpenSessionAtARefusingServerFailsAtOnce: at an address where nothing listens (every dial
// refused), OpenSession fails with a retryable error naming the refused connection as soon as
// the dial failed, before its context ends. etcd's client waits for a connection until the
// call's deadline, so a client (simba lock at an etcd that is down) heard of the outage only
// at the call's timeout, 5 s by default.
func TestOpenSessionAtARefusingServerFailsAtOnce(t *testing.T) {
	b := refusingBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := b.OpenSession(ctx, "refused", 6*time.Second)
	t.Logf("OpenSession failed after %v: %v", time.Since(start), err)
	if ctx.Err() != nil || !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("OpenSession at a refusing address: %v (context: %v), want a retryable error naming the refused connection before the context ends", err, ctx.Err())
	}
}

// TestInspectAtARefusingServerFailsAtOnce: Inspect (simba status, which gives it no deadline)
// at an address where nothing listens fails with a retryable error naming the refused
// connection; it waited for a connection for as long as its context lasted (for ever).
func TestInspectAtARefusingServerFailsAtOnce(t *testing.T) {
	b := refusingBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := b.Inspect(ctx)
	if ctx.Err() != nil || !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Inspect at a refusing address: %v (context: %v), want a retryable error naming the refused connection before the context ends", err, ctx.Err())
	}
}

// refusingBackend returns a backend for an address where nothing listens (a port just freed),
// closed when the test ends.
func refusingBackend(t *testing.T) *Backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	b, err := New("etcd://" + addr + "/simba-refused")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestInspectAtAServerThatHangsUpFailsAtOnce: at a server that takes each connection and
// closes it before answering a byte, Inspect (simba status, no deadline) fails with a
// retryable error, as at a refusing one. Such an attempt was no failed dial for the refusal
// watch, and the read waited for a connection for as long as its context lasted (for ever).
func TestInspectAtAServerThatHangsUpFailsAtOnce(t *testing.T) {
	ln := testenv.Serve(t, testenv.Listen(t), func(net.Conn) {})
	b, err := New("etcd://" + ln.Addr().String() + "/simba-hangup")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = b.Inspect(ctx)
	if ctx.Err() != nil || !errors.Is(err, spi.ErrUnavailable) || errors.Is(err, spi.ErrTLS) {
		t.Fatalf("Inspect at a server that hangs up: %v (context: %v), want a retryable error before the context ends", err, ctx.Err())
	}
}

// TestTLSAtAPlainTextMemberIsPermanent: an etcd+tls:// DSN at a member that serves plain text
// fails OpenSession and Inspect with a permanent TLS failure (spi.ErrTLS) that says to use
// etcd://, before their contexts end. The member closes the connection on the TLS ClientHello;
// gRPC retried the handshake without end, so every OpenSession timed out as "unavailable"
// (retried by the client for ever) and simba status, whose Inspect has no deadline, hung.
func TestTLSAtAPlainTextMemberIsPermanent(t *testing.T) {
	addr := testenv.Etcd(t)[0]
	b, err := New("etcd+tls://" + addr + "/simba-tlsplain")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = b.OpenSession(ctx, "tls-at-plain", 6*time.Second)
	check := func(op string, err error) {
		t.Helper()
		if ctx.Err() != nil || !errors.Is(err, spi.ErrTLS) || spi.Classify(err) != spi.Permanent ||
			!strings.Contains(err.Error(), "use etcd://") {
			t.Errorf("%s with etcd+tls:// at a plain-text member: %v (%v; context: %v), want a permanent TLS failure saying to use etcd:// before the context ends",
				op, err, spi.Classify(err), ctx.Err())
		}
	}
	check("OpenSession", err)
	_, err = b.Inspect(ctx)
	check("Inspect", err)
}

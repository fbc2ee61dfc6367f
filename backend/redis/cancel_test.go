package redis

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestCallsReturnOnCancel: the SPI's contract says a call returns promptly once its ctx is
// done, with an error wrapping ctx.Err(), and the backend declares itself spi.CutSafe, so the
// client cuts a Lock's acquire with the caller's ctx. go-redis does not watch a context while
// it waits for a reply (cancellation never reaches the socket), so against a server that
// accepts but never answers (a blackholed network) every call waited for the client's read
// timeout instead: a Lock outlived its ctx, and keep-alives outlived their timeout. Each call
// here is cancelled while the server holds its request; it must end with context.Canceled,
// not with go-redis's read timeout.
func TestCallsReturnOnCancel(t *testing.T) {
	addr, got := silentServer(t)
	rc := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2, MaxRetries: -1,
		ReadTimeout: time.Second, WriteTimeout: time.Second, DisableIdentity: true})
	t.Cleanup(func() { rc.Close() })
	b := newBackend(t, rc)
	const sid = spi.SessionID("0123456789abcdef0123456789abcdef")
	calls := map[string]func(ctx context.Context) error{
		"open-session": func(ctx context.Context) error { _, err := b.OpenSession(ctx, "o", time.Minute); return err },
		"keep-alive": func(ctx context.Context) error {
			_, err := b.KeepAlive(ctx, sid, []string{"n"}, []string{"g"})
			return err
		},
		"acquire": func(ctx context.Context) error { _, err := b.Acquire(ctx, sid, "n"); return err },
		"acquire-queued": func(ctx context.Context) error {
			_, err := b.AcquireQueued(ctx, sid, "n")
			return err
		},
		"release":       func(ctx context.Context) error { return b.Release(ctx, sid, "n", 1) },
		"withdraw":      func(ctx context.Context) error { return b.Withdraw(ctx, sid, "n") },
		"join":          func(ctx context.Context) error { _, err := b.Join(ctx, sid, "g"); return err },
		"leave":         func(ctx context.Context) error { _, err := b.Leave(ctx, sid, "g"); return err },
		"members":       func(ctx context.Context) error { _, err := b.Members(ctx, "g"); return err },
		"close-session": func(ctx context.Context) error { return b.CloseSession(ctx, sid) },
	}
	for op, call := range calls {
		t.Run(op, func(t *testing.T) {
			for len(got) > 0 {
				<-got
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- call(ctx) }()
			select {
			case <-got: // the request is at the server, which will never answer
			case err := <-done:
				cancel()
				t.Fatalf("%s returned before the server got a request: %v", op, err)
			}
			cancel()
			err := <-done
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s cancelled while waiting for a reply returned %v; want an error matching context.Canceled", op, err)
			}
		})
	}
}

// TestCallsEndAtTheirDeadline: on a client that honours deadlines (ContextTimeoutEnabled, as
// Open's clients do) a call runs on the caller's goroutine, and its ctx's deadline bounds the
// wait for a reply that never comes: each call ends with an error soon after its deadline,
// not at the client's read timeout (a minute here).
func TestCallsEndAtTheirDeadline(t *testing.T) {
	addr, _ := silentServer(t)
	rc := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2, MaxRetries: 2,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rc.Close() })
	b := newBackend(t, rc)
	if !b.deadlines {
		t.Fatal("a client made with ContextTimeoutEnabled is not taken to honour deadlines")
	}
	const sid = spi.SessionID("0123456789abcdef0123456789abcdef")
	for op, call := range map[string]func(ctx context.Context) error{
		"keep-alive": func(ctx context.Context) error {
			_, err := b.KeepAlive(ctx, sid, []string{"n"}, nil)
			return err
		},
		"acquire": func(ctx context.Context) error { _, err := b.Acquire(ctx, sid, "n"); return err },
		"release": func(ctx context.Context) error { return b.Release(ctx, sid, "n", 1) },
	} {
		t.Run(op, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- call(ctx) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("%s against a server that never answers succeeded", op)
				}
			case <-time.After(20 * time.Second): // a guard far past the deadline, not a timing
				t.Fatalf("%s still waiting 20 s after its 200 ms deadline (the read timeout is a minute)", op)
			}
		})
	}
}

// silentServer serves a server that reads every request and never answers (a blackholed
// network); got gets a value (if it has room) whenever a request arrives.
func silentServer(t *testing.T) (addr string, got chan struct{}) {
	got = make(chan struct{}, 64)
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			select {
			case got <- struct{}{}:
			default:
			}
		}
	})
	return ln.Addr().String(), got
}

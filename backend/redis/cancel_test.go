package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestCallsReturnOnCancel: the SPI's contract says a call returns promptly once its ctx is
// done, with an error wrapping ctx.Err(), and the backend declares itself spi.CutSafe, so the
// client cuts a Lock's acquire with the caller's ctx. go-redis does not watch a context while
// it waits for a reply (cancellation never reaches the socket), so against a server that
// accepts but never answers (a blackholed network) every call waited for the client's read
// timeout instead: a Lock outlived its ctx, and keep-alives outlived their timeout. Each call
// here is cancelled while the server holds its request (see silences for the two kinds of
// silence); it must end with context.Canceled, not with go-redis's read timeout.
func TestCallsReturnOnCancel(t *testing.T) {
	noLeaks(t)
	for _, sl := range silences {
		for op := range blackholeCalls(nil) {
			t.Run(sl.name+"/"+op, func(t *testing.T) {
				// A server and client of its own: a request that an earlier call left behind
				// sends later cannot pass for this call's.
				addr, got := silentServer(t, sl.handshake)
				rc := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2, MaxRetries: -1,
					ReadTimeout: time.Second, WriteTimeout: time.Second, DisableIdentity: true})
				t.Cleanup(func() { rc.Close() })
				call := blackholeCalls(newBackend(t, rc))[op]
				cancelAtServer(t, op, call, got)
			})
		}
	}
}

// TestOpenSessionEndsAtItsCancellation: OpenSession returns once its ctx is cancelled even on a
// client that honours deadlines, where the other calls run on the caller's goroutine and end
// only at their deadline (bounded): a Simba client cancels the open in flight when it is closed
// and must not wait a whole call timeout for it. The deadline and the read timeout are a minute
// away here.
func TestOpenSessionEndsAtItsCancellation(t *testing.T) {
	noLeaks(t)
	addr, got := silentServer(t, true)
	b, err := Open("redis://"+addr+"?read_timeout=1m&max_retries=-1", WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close() // ends the call left behind
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan error, 1)
	go func() {
		_, err := b.OpenSession(ctx, "o", time.Minute)
		done <- err
	}()
	select {
	case <-got: // the server holds the request
	case <-time.After(30 * time.Second):
		t.Fatal("the server got no request within 30 s")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("OpenSession cancelled: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second): // a guard far past a prompt return, not a timing
		t.Fatal("OpenSession still waiting 10 s after its cancellation")
	}
}

// TestCallsEndAtTheirDeadline: a call's deadline bounds its wait for a reply that never comes,
// whatever the client: each call ends with a retryable error soon after its deadline, not at
// the client's read timeout (10 s here, against a deadline of 200 ms). On a client that
// honours deadlines (ContextTimeoutEnabled, as Open's clients do) a call runs on the caller's
// goroutine and go-redis reads with the deadline; on one that does not (a client passed to
// New) bounded returns at the deadline while the call goes on to the read timeout.
func TestCallsEndAtTheirDeadline(t *testing.T) {
	for _, sl := range silences {
		for _, honours := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/ContextTimeoutEnabled=%v", sl.name, honours), func(t *testing.T) {
				noLeaks(t)
				addr, _ := silentServer(t, sl.handshake)
				rc := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2, MaxRetries: 2,
					ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, DisableIdentity: true, ContextTimeoutEnabled: honours})
				t.Cleanup(func() { rc.Close() })
				b := newBackend(t, rc)
				if b.deadlines != honours {
					t.Fatalf("a client made with ContextTimeoutEnabled %v is taken to honour deadlines: %v", honours, b.deadlines)
				}
				for op, call := range blackholeCalls(b) {
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
							if !errors.Is(err, spi.ErrUnavailable) {
								t.Fatalf("%s at its deadline returned %v; want an error matching spi.ErrUnavailable", op, err)
							}
						case <-time.After(5 * time.Second): // a guard far past the deadline, not a timing
							t.Fatalf("%s still waiting 5 s after its 200 ms deadline (the read timeout is 10 s)", op)
						}
					})
				}
			})
		}
	}
}

// noLeaks checks, at the end of t, that no goroutine of t's is left. A call left behind at
// its ctx's end goes on until go-redis's read timeout ends its wait, which closing the client
// does not cut short while the connection is still being set up (its HELLO), so the check
// waits for such goroutines first, for longer than the tests' read timeouts.
func noLeaks(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { // registered first: runs last
		for end := time.Now().Add(30 * time.Second); goleak.Find(leaks) != nil && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
		goleak.VerifyNone(t, leaks)
	})
}

// blackholeCalls are the backend's calls that send commands to the server, by name, for the
// blackhole tests: every exported one. (b may be nil for the names alone.)
func blackholeCalls(b *Backend) map[string]func(ctx context.Context) error {
	const sid = spi.SessionID("0123456789abcdef0123456789abcdef")
	return map[string]func(ctx context.Context) error{
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
		"release":          func(ctx context.Context) error { return b.Release(ctx, sid, "n", 1) },
		"withdraw":         func(ctx context.Context) error { return b.Withdraw(ctx, sid, "n") },
		"join":             func(ctx context.Context) error { _, err := b.Join(ctx, sid, "g"); return err },
		"leave":            func(ctx context.Context) error { _, err := b.Leave(ctx, sid, "g"); return err },
		"members":          func(ctx context.Context) error { _, err := b.Members(ctx, "g"); return err },
		"close-session":    func(ctx context.Context) error { return b.CloseSession(ctx, sid) },
		"inspect":          func(ctx context.Context) error { _, err := b.Inspect(ctx); return err },
		"check-durability": func(ctx context.Context) error { _, err := b.CheckDurability(ctx); return err },
		"hints":            func(ctx context.Context) error { _, err := b.Hints(ctx); return err },
	}
}

// silences are the two ways silentServer can stop answering: from the start (not even a new
// connection's HELLO gets a reply: go-redis then waits in its connection setup, which it
// partly cuts at a ctx's end by itself), or once connections are set up (HELLO is refused,
// as a server older than Redis 6 does, and nothing after it is answered: a network that went
// dark under pooled connections, where only the wait for a reply is left to bound).
var silences = []struct {
	name      string
	handshake bool
}{{"from-the-start", false}, {"after-handshake", true}}

// silentServer serves a server that reads every request and never answers (a blackholed
// network), but for a connection's HELLO if handshake; got gets a value (if it has room)
// whenever a request it does not answer arrives.
func silentServer(t *testing.T, handshake bool) (addr string, got chan struct{}) {
	got = make(chan struct{}, 64)
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		buf := make([]byte, 4096)
		for first := true; ; first = false {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			// go-redis sends HELLO alone, first, and waits for its reply.
			if first && handshake && bytes.Contains(bytes.ToLower(buf[:n]), []byte("\r\nhello\r\n")) {
				if _, err := c.Write([]byte("-ERR unknown command 'hello'\r\n")); err != nil {
					return
				}
				continue
			}
			select {
			case got <- struct{}{}:
			default:
			}
		}
	})
	return ln.Addr().String(), got
}

// TestClusterCallsReturnAtTheirEnd: on a Cluster client the calls go other ways to the server
// (the slot map's CLUSTER SLOTS first, then ForEachMaster for Inspect and CheckDurability, the
// Cluster client's pub/sub for Hints, a round per master), and each still returns once its ctx
// is done: cancelled once the server holds its request, then, on the same backend, at a
// deadline. The second call also shows that the first, left behind, holds nothing the second
// needs (an OpenSession left behind held the durability check's lock for the read timeout).
func TestClusterCallsReturnAtTheirEnd(t *testing.T) {
	noLeaks(t)
	for _, honours := range []bool{true, false} {
		for op := range blackholeCalls(nil) {
			t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v/%s", honours, op), func(t *testing.T) {
				addr, got := silentServer(t, true)
				cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, Protocol: 2, MaxRedirects: 1,
					ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, DisableIdentity: true, ContextTimeoutEnabled: honours})
				t.Cleanup(func() { cc.Close() })
				call := blackholeCalls(newBackend(t, cc))[op]

				cancelAtServer(t, op, call, got)

				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- call(ctx) }()
				select {
				case err := <-done:
					if !errors.Is(err, spi.ErrUnavailable) {
						t.Fatalf("%s at its deadline returned %v; want an error matching spi.ErrUnavailable", op, err)
					}
				case <-time.After(5 * time.Second): // a guard far past the deadline, not a timing
					t.Fatalf("%s still waiting 5 s after its 200 ms deadline (the read timeout is 10 s)", op)
				}
			})
		}
	}
}

// TestOpenSessionLeftBehindReleasesTheDurabilityCheck: the first OpenSession runs the
// durability check under the backend's lock. One left behind at its ctx's end (bounded) used
// to hold that lock while the check waited for the server's reply, up to the client's read
// timeout, so the next OpenSession waited there past its own deadline, even on a client that
// honours deadlines. The check is bounded by the same ctx, so the lock is let go with it.
func TestOpenSessionLeftBehindReleasesTheDurabilityCheck(t *testing.T) {
	noLeaks(t)
	addr, got := silentServer(t, true)
	rc := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2, MaxRetries: -1,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rc.Close() })
	b := newBackend(t, rc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := b.OpenSession(ctx, "o", time.Minute); done <- err }()
	<-got // the durability check's CONFIG GETs are at the server
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled OpenSession returned %v; want an error matching context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	go func() { _, err := b.OpenSession(ctx, "o", time.Minute); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, spi.ErrUnavailable) {
			t.Fatalf("OpenSession at its deadline returned %v; want an error matching spi.ErrUnavailable", err)
		}
	case <-time.After(5 * time.Second): // a guard far past the deadline, not a timing
		t.Fatal("OpenSession still waiting 5 s after its 200 ms deadline, behind the one left behind (the read timeout is 10 s)")
	}
}

// cancelAtServer runs call, cancels its ctx once its request is at the silent server (got),
// and checks that it returns promptly with an error matching context.Canceled.
func cancelAtServer(t *testing.T, op string, call func(context.Context) error, got <-chan struct{}) {
	t.Helper()
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
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s cancelled while waiting for a reply returned %v; want an error matching context.Canceled", op, err)
		}
	case <-time.After(5 * time.Second): // a guard far past a prompt return, not a timing
		t.Fatalf("%s still waiting 5 s after its cancellation", op)
	}
}

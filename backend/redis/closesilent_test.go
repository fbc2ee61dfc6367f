package redis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// subscribeOnlyServer serves a server that confirms SUBSCRIBE and UNSUBSCRIBE (and refuses
// HELLO, as a server older than Redis 6 does) but never answers any other command, as a server
// whose network went dark right after the hub's subscription was confirmed; got gets the name
// of every command it leaves unanswered (if it has room).
func subscribeOnlyServer(t *testing.T) (addr string, got chan string) {
	got = make(chan string, 64)
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			args, err := readCommand(r)
			if err != nil {
				return
			}
			var reply strings.Builder
			switch cmd := strings.ToLower(args[0]); cmd {
			case "hello":
				reply.WriteString("-ERR unknown command 'hello'\r\n")
			case "client":
				reply.WriteString("+OK\r\n")
			case "subscribe", "unsubscribe":
				for i, ch := range args[1:] {
					n := i + 1
					if cmd == "unsubscribe" {
						n = len(args) - 2 - i
					}
					fmt.Fprintf(&reply, "*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n:%d\r\n", len(cmd), cmd, len(ch), ch, n)
				}
			default:
				select {
				case got <- cmd:
				default:
				}
				continue
			}
			if _, err := io.WriteString(c, reply.String()); err != nil {
				return
			}
		}
	})
	return ln.Addr().String(), got
}

// readCommand reads one RESP command (an array of bulk strings).
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		if line, err = r.ReadString('\n'); err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// TestCloseWhileTheHubWaitsForASilentServer: Close stops the hint hub and waits for its
// runner, which may be waiting for a reply the server never sends (here the lease read after a
// subscription's confirmation: a MULTI the server leaves unanswered). Close used to wait out
// that read's bound (hintCallTimeout, a minute here); it now closes the client it owns first,
// which ends every read in flight at once.
func TestCloseWhileTheHubWaitsForASilentServer(t *testing.T) {
	addr, got := subscribeOnlyServer(t)
	b := hubAt(t, "redis://"+addr+"?read_timeout=2m&max_retries=-1", time.Minute)
	// A session of this backend waits for a lease another holds: the hub subscribes to its
	// released channel and, once that is confirmed, reads the lease.
	b.hub.acquired("0123456789abcdef0123456789abcdef", "n", spi.Acquire{Kind: spi.HeldBy, Holder: "fedcba9876543210fedcba9876543210", Remaining: time.Minute})
	select {
	case cmd := <-got:
		if cmd != "multi" {
			t.Fatalf("the server got %q unanswered, want the lease read's MULTI", cmd)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hub did not read the lease within 30 s of its subscription")
	}
	closePromptly(t, b, "the hub's read of a silent server (its bound: a minute)")
}

// hubAt opens a backend on dsn, with hintCallTimeout set to hint for the test (unless hint is
// 0), and starts its hint hub (Hints, until the test ends). Every goroutine the test starts
// must end with it (noLeaks).
func hubAt(t *testing.T, dsn string, hint time.Duration) *Backend {
	t.Helper()
	if hint > 0 {
		saved := hintCallTimeout
		hintCallTimeout = hint
		t.Cleanup(func() { hintCallTimeout = saved }) // runs last
	}
	noLeaks(t)
	b, err := Open(dsn, WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// closePromptly closes b, and fails t if Close is still waiting 10 s later (a guard far past a
// prompt return, not a timing) for what.
func closePromptly(t *testing.T, b *Backend, what string) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("Close still waiting 10 s into %s", what)
	}
}

// TestHintsAtASilentServerWarnsOfTheSkippedProbe: the first Hints checks channel permissions
// with a probe subscription; at a server that does not answer within the probe's time the
// hub goes on without it (the server is taken as down), and says so in a warning, since an
// ACL user without channel permissions would otherwise get no hints and no word of why.
func TestHintsAtASilentServerWarnsOfTheSkippedProbe(t *testing.T) {
	noLeaks(t)
	addr, _ := silentServer(t, true)
	var buf testenv.LogBuffer
	b, err := Open("redis://"+addr+"?read_timeout=200ms&max_retries=-1", WithLogger(buf.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatalf("Hints at a silent server: %v; want the server taken as down", err)
	}
	if log := buf.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "permission to subscribe") {
		t.Fatalf("no warning of the skipped probe; log: %q", log)
	}
}

// TestCloseCutsAPubSubHandshake: Close returns at once, leaving no goroutine behind, while
// go-redis reconnects the hint hub's pub/sub connection to a server that never answers. go-redis
// waits for the answer to that connection's handshake on a goroutine of its own, without a
// context, for a read timeout (20 s here), holding the lock that closing the pub/sub needs;
// Close waited for it (simba lock stopped by SIGINT at such a Redis exited seconds late).
func TestCloseCutsAPubSubHandshake(t *testing.T) {
	addr, got := silentServer(t, false)
	// The probe waits 5 s (hintCallTimeout), then takes the server for down. (Not shortened
	// here: the probe's goroutine, left behind, reads it until the connection is cut.)
	b := hubAt(t, "redis://"+addr+"?read_timeout=20s", 0)
	// The probe's HELLO, then the reconnection's.
	for range 2 {
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("the pub/sub connection did not reconnect within 30 s")
		}
	}
	closePromptly(t, b, "a pub/sub handshake the server never answers (its bound: 20 s)")
}

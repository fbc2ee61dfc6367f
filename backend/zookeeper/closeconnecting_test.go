package zookeeper

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// proxyGoroutines ignores the fault proxy's own goroutines, which the test starts.
var proxyGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/simba-go/simba/internal/faultproxy.(*Proxy).accept"),
	goleak.IgnoreAnyFunction("github.com/simba-go/simba/internal/faultproxy.(*Proxy).serve"),
	goleak.IgnoreAnyFunction("github.com/simba-go/simba/internal/faultproxy.(*Proxy).pipe"),
}

// TestCloseWhileConnectingLeavesNoGoroutine: a session still connecting when Close comes (an
// OpenSession, or the observer session a Members opens, whose handshake a stalled or
// blackholed server never answers) is dropped by Close like an open one: when Close returns,
// no goroutine of the backend runs on (the hop worker that ran the session's first request,
// go-zookeeper's connection), and the caller's call fails at once with ErrBackendClosed,
// starting nothing after Close. Close knew nothing of such a session: its hop worker and
// go-zookeeper's goroutines ran on after Close until the caller's deadline, and then the caller
// dropped the connection (and the observer's caller closed it on a goroutine of its own).
func TestCloseWhileConnectingLeavesNoGoroutine(t *testing.T) {
	for _, server := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"Stalled", faultproxy.Fault{Up: faultproxy.Stall, Down: faultproxy.Stall}},
		{"Blackholed", faultproxy.Fault{Blackhole: true}},
	} {
		for _, call := range []string{"OpenSession", "Members"} {
			t.Run(server.name+"/"+call, func(t *testing.T) {
				chroot := serverChroot(t)
				p := faultproxy.StartTest(t, testenv.ZooKeeper(t)[0])
				p.Set(server.fault)
				leaks := goleak.IgnoreCurrent()
				b, err := New("zk://" + p.Addr() + chroot.Path + "?timeout=10s")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- callSession(ctx, b, call, "close-connecting", 10*time.Second) }()
				waitFor(t, "the session's connection at the proxy", func() bool { return len(p.Conns()) > 0 })
				start := time.Now()
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				t.Logf("Close took %v", time.Since(start))
				awaitClosedCall(t, call, done, append([]goleak.Option{leaks}, proxyGoroutines...)...)
			})
		}
	}
}

// callSession makes call (OpenSession of ttl, or Members) of name: either connects a session.
func callSession(ctx context.Context, b *Backend, call, name string, ttl time.Duration) error {
	if call == "OpenSession" {
		_, err := b.OpenSession(ctx, name, ttl)
		return err
	}
	_, err := b.Members(ctx, name)
	return err
}

// awaitClosedCall checks what a call Close cut short (callSession, reporting on done) left:
// no goroutine of the backend's once Close returned (ignore: what the test's own goroutines
// may be), the call's end with ErrBackendClosed, and nothing started on the call's way out.
func awaitClosedCall(t *testing.T, call string, done <-chan error, ignore ...goleak.Option) {
	t.Helper()
	// The caller's goroutine is the test's, not the backend's: it may still be on its way out.
	goleak.VerifyNone(t, append(slices.Clip(ignore), goleak.IgnoreAnyFunction("github.com/simba-go/simba/backend/zookeeper.callSession"))...)
	select {
	case err := <-done:
		if !errors.Is(err, spi.ErrBackendClosed) {
			t.Errorf("%s after Close: %v; want ErrBackendClosed", call, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s went on after Close", call)
	}
	goleak.VerifyNone(t, ignore...)
}

// TestCloseWhileRequestLeavesNoGoroutine: an open session's requests under way on hop
// workers when Close comes (an Acquire and a KeepAlive with deadlines, at a server whose
// replies are held back or that went silent) end with their connection, and Close waits for
// the workers: none is left when it returns.
func TestCloseWhileRequestLeavesNoGoroutine(t *testing.T) {
	for _, fault := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"Stalled", faultproxy.Fault{Up: faultproxy.Stall, Down: faultproxy.Stall}},
		{"RepliesHeld", faultproxy.Fault{Down: faultproxy.Stall}},
		{"Blackholed", faultproxy.Fault{Blackhole: true}},
	} {
		t.Run(fault.name, func(t *testing.T) {
			chroot := serverChroot(t)
			p := faultproxy.StartTest(t, testenv.ZooKeeper(t)[0])
			leaks := goleak.IgnoreCurrent()
			b, err := New("zk://" + p.Addr() + chroot.Path + "?timeout=10s")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			sid := openSession(t, b, 10*time.Second)
			mustGrant(t, b, sid, "close-request-held")
			if _, err := b.KeepAlive(testCtx(t), sid, []string{"close-request-held"}, nil); err != nil {
				t.Fatal(err)
			}
			c, _ := b.credentialsOf(sid)
			p.Set(fault.fault)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan error, 2)
			go func() { done <- requestAtClose(ctx, b, sid, "acquire") }()
			go func() { done <- requestAtClose(ctx, b, sid, "keep-alive") }()
			waitFor(t, "the requests to be written", func() bool {
				c.s.tap.mu.Lock()
				defer c.s.tap.mu.Unlock()
				return c.s.tap.outstanding >= 2
			})
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			goleak.VerifyNone(t, append([]goleak.Option{leaks,
				goleak.IgnoreAnyFunction("github.com/simba-go/simba/backend/zookeeper.requestAtClose")},
				proxyGoroutines...)...)
			for range 2 {
				select {
				case <-done: // an error, or the session's end (expired: the backend dropped it)
				case <-time.After(30 * time.Second):
					t.Fatal("a request went on after Close")
				}
			}
			goleak.VerifyNone(t, append([]goleak.Option{leaks}, proxyGoroutines...)...)
		})
	}
}

// requestAtClose makes an Acquire of another name, or a KeepAlive, of session sid.
func requestAtClose(ctx context.Context, b *Backend, sid spi.SessionID, what string) error {
	if what == "acquire" {
		_, err := b.Acquire(ctx, sid, "close-request-other")
		return err
	}
	_, err := b.KeepAlive(ctx, sid, nil, []string{"close-request-group"})
	return err
}

// TestCloseWhileDialingLeavesNoGoroutine: a dial still hanging when Close comes, at a server
// that drops the SYN, is cut short by Close, which then returns within its bound (retireWait)
// and leaves no goroutine. The hint connection's dial gets connectBound (10 s here: the
// shortest TTL 60 s / 6, within Config.Timeout 20 s), and Close waited for the watcher, so for
// that dial: 10 s, where Close is bounded at 3 s. A session's dial (an OpenSession's, or the
// observer session's a Members opens) is cut short too (abandon), though go-zookeeper's own
// connect timeout (1 s) already kept it below Close's wait for the connection's goroutines.
func TestCloseWhileDialingLeavesNoGoroutine(t *testing.T) {
	for _, call := range []string{"HintConnection", "OpenSession", "Members"} {
		t.Run(call, func(t *testing.T) {
			addr := synDropAddr(t)
			leaks := goleak.IgnoreCurrent()
			b, err := New("zk://" + addr + "/simba-dial?timeout=20s")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			done := make(chan error, 1)
			if call == "HintConnection" {
				b.minTTL.Note(time.Minute) // as an OpenSession of TTL 60 s would
				if _, err := b.Hints(ctx); err != nil {
					t.Fatal(err)
				}
				b.waitFor(testWaiter, "dialing", time.Hour, false) // something to watch
				waitFor(t, "the hint connection's dial", func() bool {
					b.hmu.Lock()
					defer b.hmu.Unlock()
					return b.watcher != nil && b.watcher.dials.Load() > 0
				})
				done <- spi.ErrBackendClosed
			} else {
				go func() { done <- callSession(ctx, b, call, "close-dialing", 60*time.Second) }()
				waitFor(t, "the session's dial", func() bool { return b.dialing() })
			}
			closed := make(chan error, 1)
			go func() { closed <- b.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(retireWait + 2*time.Second):
				t.Fatalf("Close still waits after %v, past its bound (%v): the dial was not cut short", retireWait+2*time.Second, retireWait)
			}
			awaitClosedCall(t, call, done, leaks)
		})
	}
}

// dialing reports whether a session still connecting has begun to dial a server.
func (b *Backend) dialing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.conning {
		s.tap.mu.Lock()
		addr := s.tap.addr
		s.tap.mu.Unlock()
		if addr != "" {
			return true
		}
	}
	return false
}

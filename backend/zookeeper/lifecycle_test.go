package zookeeper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/spi"
)

// connCounter is a dialer that counts the connections it opened and that are not closed yet,
// and remembers their ports (to find them in /proc/net/tcp).
type connCounter struct {
	mu    sync.Mutex
	open  map[*countedConn]struct{}
	ports map[[2]int]bool // local and remote port
	dials int
}

type countedConn struct {
	net.Conn
	cc   *connCounter
	once sync.Once
}

func newConnCounter() *connCounter {
	return &connCounter{open: map[*countedConn]struct{}{}, ports: map[[2]int]bool{}}
}

func (cc *connCounter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	w := &countedConn{Conn: c, cc: cc}
	cc.mu.Lock()
	cc.open[w] = struct{}{}
	cc.ports[[2]int{c.LocalAddr().(*net.TCPAddr).Port, c.RemoteAddr().(*net.TCPAddr).Port}] = true
	cc.dials++
	cc.mu.Unlock()
	return w, nil
}

// Close closes the connection and counts it closed (a garbage-collected connection's
// finalizer closes its descriptor without calling this).
func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.cc.mu.Lock()
		delete(c.cc.open, c)
		c.cc.mu.Unlock()
	})
	return c.Conn.Close()
}

// counts returns how many connections were dialled and how many of them are still open.
func (cc *connCounter) counts() (dials, open int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dials, len(cc.open)
}

// openSockets counts this process's file descriptors that are TCP sockets with the ports of a
// connection cc dialled, by state (as /proc/net/tcp names them: "01" established, "08"
// close-wait, ...). It reads Linux's /proc; elsewhere it reports ok false.
func (cc *connCounter) openSockets(t *testing.T) (byState map[string]int, ok bool) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	byState = map[string]int{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			if cc.ports[[2]int{hexPort(fs[1]), hexPort(fs[2])}] {
				byState[fs[3]]++
			}
		}
		f.Close()
	}
	return byState, true
}

// hexPort is the port of an address of /proc/net/tcp (hex IP:hex port), or -1.
func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	port, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(port)
}

// TestExpiredSessionsLeaveNoConnection ends sessions at the server, several times over, by
// expiry (no keep-alive for longer than the session timeout, as when the process is stopped)
// and by another client closing them (Curator's KillSession): each time the server drops the
// connection, go-zookeeper reconnects and the server answers that the session is gone, and the
// connection that answer came on must be closed, not left (in CLOSE-WAIT, the server having
// closed its side) until a garbage collection finalizes it: a long-running program whose
// sessions expire piled up one descriptor per expiry. The garbage collector is off meanwhile,
// so that no finalizer closes what the backend left open. Once the backend is closed no
// goroutine of it remains.
func TestExpiredSessionsLeaveNoConnection(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	cc := newConnCounter()
	b, err := New(serverDSN(t, "timeout=5s"), WithDialer(cc.dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	rec := newRecorder()
	rb := recorded{Backend: b, r: rec}
	const rounds = 4
	for i := range rounds {
		expire := i%2 == 0
		ttl := 10 * time.Second
		if expire {
			ttl = time.Second
		}
		s, err := rb.OpenSession(testCtx(t), "expiry-fds", ttl)
		if err != nil {
			t.Fatal(err)
		}
		mustGrant(t, b, s.ID, fmt.Sprintf("lease-%d", i))
		if expire {
			c, _ := b.credentialsOf(s.ID)
			waitFor(t, "the session to expire", c.s.gone)
		} else {
			rec.expire(t, s.ID)
		}
		if ka, err := b.KeepAlive(testCtx(t), s.ID, nil, nil); err != nil || !ka.Expired {
			t.Fatalf("round %d: KeepAlive after the expiry = %+v, %v; want expired", i, ka, err)
		}
		// The expired session's connections all close (the reconnect's too), and so do their
		// descriptors.
		deadline := time.Now().Add(30 * time.Second)
		for {
			dials, open := cc.counts()
			st, _ := cc.openSockets(t)
			if open == 0 && len(st) == 0 {
				t.Logf("round %d: %d connections dialled so far, none open", i, dials)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of the %d connections dialled are still open after the session expired (the process's sockets of them by /proc/net/tcp state, 08 = CLOSE-WAIT: %v)", i, open, dials, st)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if dials, _ := cc.counts(); dials < 2*rounds {
		t.Fatalf("%d connections dialled in %d rounds; want each expiry to have reconnected once", dials, rounds)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t, leaks)
	if _, open := cc.counts(); open != 0 {
		t.Fatalf("%d connections open after Close", open)
	}
}

// noLeaks fails the test if goroutines started since leaks was taken are still running once
// they have had time to end (go-zookeeper's connection loops end up to a second after their
// connection is closed).
func noLeaks(t *testing.T, leaks goleak.Option) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); goleak.Find(leaks) != nil && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	goleak.VerifyNone(t, leaks)
}

// TestCloseLeavesNoGoroutines: once Close returns, nothing of the backend runs on: not the
// hints subscription of a ctx that never ends (its goroutine waited for that ctx alone), nor
// the sessions' connections (open, expired, closed, the observer's), nor the watcher's.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	b, err := New(serverDSN(t, "timeout=5s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	rec := newRecorder()
	rb := recorded{Backend: b, r: rec}
	hints, err := b.Hints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	open := func() spi.SessionID {
		t.Helper()
		s, err := rb.OpenSession(testCtx(t), "close-leaks", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	kept, expired, closed := open(), open(), open()
	mustGrant(t, b, kept, "kept")
	mustGrant(t, b, expired, "expired")
	mustGrant(t, b, closed, "closed")
	rec.expire(t, expired)
	if err := b.CloseSession(testCtx(t), closed); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Members(testCtx(t), "some-group"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for range hints {
	}
	noLeaks(t, leaks)
}

// TestCloseAloneEndsWithCtx: a close over a connection of the tap's own waits for the server's
// answer up to a session timeout; it gives up when its ctx ends (the backend's Close ends it),
// so that no goroutine nor connection of it outlives the backend.
func TestCloseAloneEndsWithCtx(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept() // takes the connection, never answers
		if err == nil {
			accepted <- c
		}
	}()
	tp := newTap(nil, time.Second, 0, nil, nil, nil)
	tp.handshake(&tapConn{t: tp}, 60000, 0x1234, make([]byte, 16)) // a session of a minute
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tp.closeAlone(ctx, []string{ln.Addr().String()}) }()
	srv := <-accepted
	defer srv.Close()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("closeAlone after its ctx ended: %v; want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("closeAlone went on after its ctx ended")
	}
	srv.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, srv); err != nil {
		t.Fatalf("the server's side: %v; want the client to have closed the connection", err)
	}
}

// TestCloseWaitsForGoZookeeper: when Close returns, go-zookeeper's goroutines of the
// backend's connections have ended too (its Conn.Close only queues the close request and
// waits up to a second for it, and its connection loop ends after that), so that a caller's
// own goleak check right after Close passes: the root package's tests (goleak.VerifyNone,
// and VerifyTestMain) saw go-zookeeper's Conn.Close goroutine of an earlier test's backend.
// The sessions cover each way a connection goes: dropped by Close (kept), closed by
// CloseSession (closed), and the observer's.
func TestCloseWaitsForGoZookeeper(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	b, err := New(serverDSN(t, "timeout=5s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var ids []spi.SessionID
	for range 3 {
		s, err := b.OpenSession(testCtx(t), "close-waits", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		mustGrant(t, b, s.ID, fmt.Sprintf("close-waits-%d", len(ids)))
		ids = append(ids, s.ID)
	}
	if err := b.CloseSession(testCtx(t), ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Members(testCtx(t), "close-waits-group"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, leaks)
}

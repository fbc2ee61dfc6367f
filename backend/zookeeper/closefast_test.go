package zookeeper

import (
	"encoding/binary"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// sessionAtServer reports whether the server at addr still has session zid: it connects with
// the session's id and password (which moves the session to this connection) and reads the
// connect response, which carries another id (0) when the session is gone. A live session is
// then closed, so that the probe leaves nothing behind.
func sessionAtServer(t *testing.T, addr string, zid int64, passwd []byte) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(connectFrame(30000, zid, passwd)); err != nil {
		t.Fatal(err)
	}
	resp, err := readZKFrame(c)
	if err != nil {
		t.Fatalf("connect response: %v", err)
	}
	if len(resp) < 16 {
		t.Fatalf("short connect response %x", resp)
	}
	if int64(binary.BigEndian.Uint64(resp[8:])) != zid {
		return false
	}
	if _, err := c.Write(closeFrame(1)); err != nil {
		t.Fatal(err)
	}
	readZKFrame(c) //nolint:errcheck // the close reply, or the end of the connection
	return true
}

// TestCloseClosesObserverAtServer: Close closes the observer session (which holds nothing: it
// only reads, for Members and Inspect) at the server, whose answer ends its connection in a
// round trip, so that once Close returns the server has dropped it, watches and all. Before,
// Close dropped its connection like a session's, without a close request, and the server kept
// it for its 30 s timeout (and go-zookeeper's Conn.Close, left without an answer, now and then
// waited its one-second timer). A session the client opened is still dropped, not closed: it
// stays at the server, its lease held, until it expires, as a crashed client's.
func TestCloseClosesObserverAtServer(t *testing.T) {
	b, err := New(serverDSN(t, "timeout=5s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.Members(testCtx(t), "close-observer"); err != nil { // opens the observer
		t.Fatal(err)
	}
	b.mu.Lock()
	o := b.observer
	b.mu.Unlock()
	if o == nil {
		t.Fatal("Members with no session open made no observer session")
	}
	ozid, opw := o.tap.credentials()
	s, err := b.OpenSession(testCtx(t), "close-observer", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustGrant(t, b, s.ID, "close-observer")
	kept, ok := b.credentialsOf(s.ID)
	if !ok {
		t.Fatal("no credentials of the open session")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	server := testenv.ZooKeeper(t)[0]
	if sessionAtServer(t, server, ozid, opw) {
		t.Errorf("the observer session %s is still at the server after Close; want it closed", SessionIDString(ozid))
	}
	if !sessionAtServer(t, server, kept.zid, kept.passwd) {
		t.Errorf("the client's session %s is gone from the server after Close; want it left to expire, as a crashed client's", SessionIDString(kept.zid))
	}
}

// closeRecorder is a dialer whose connections record the stack of the first call to their
// Close.
type closeRecorder struct {
	mu     sync.Mutex
	stacks []string
}

func (r *closeRecorder) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &recordedConn{Conn: c, r: r}, nil
}

type recordedConn struct {
	net.Conn
	r    *closeRecorder
	once sync.Once
}

func (c *recordedConn) Close() error {
	c.once.Do(func() {
		buf := make([]byte, 64<<10)
		buf = buf[:runtime.Stack(buf, false)]
		c.r.mu.Lock()
		c.r.stacks = append(c.r.stacks, string(buf))
		c.r.mu.Unlock()
	})
	return c.Conn.Close()
}

// TestCloseDropsConnectionBehindCloseRequest: Close drops the established connection of a
// session it leaves to expire only once go-zookeeper's send loop has taken its close request
// (which the tap then swallows: the server never hears of it), on that loop's own goroutine.
// go-zookeeper's Conn.Close flags its loop to stop, then queues the close request and waits up
// to a second for the answer: closed earlier, as Close used to (before calling Conn.Close),
// the connection's loop could see the flag and end before the request was queued, which then
// waited out the second (1-5 of 40 Closes of a backend with one session took 1.0 s). Taken by
// the send loop, the request awaits a reply, and go-zookeeper fails it with ErrClosing as soon
// as the connection ends.
func TestCloseDropsConnectionBehindCloseRequest(t *testing.T) {
	var rec closeRecorder
	b, err := New(serverDSN(t, "timeout=5s"), WithDialer(rec.dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, err := b.OpenSession(testCtx(t), "close-behind", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustGrant(t, b, s.ID, "close-behind")
	// The keep-alive sets the lease's watch, so that no write is under way at Close.
	if _, err := b.KeepAlive(testCtx(t), s.ID, []string{"close-behind"}, nil); err != nil {
		t.Fatal(err)
	}
	kept, _ := b.credentialsOf(s.ID)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	stacks := rec.stacks
	rec.mu.Unlock()
	if len(stacks) != 1 {
		t.Fatalf("%d connections closed; want the session's one", len(stacks))
	}
	if !strings.Contains(stacks[0], "zk.(*Conn).sendData") {
		t.Errorf("the session's connection was closed before go-zookeeper's send loop took its close request; closed at:\n%s", stacks[0])
	}
	if !sessionAtServer(t, testenv.ZooKeeper(t)[0], kept.zid, kept.passwd) {
		t.Error("the session is gone from the server after Close; want it left to expire")
	}
}

// TestCloseAtUnansweringServer: Close still returns, and leaves no goroutine of the backend
// behind, when the server stops answering (a blackhole: the observer's close is never
// answered, and is dropped after closeGrace) or is cut off (the connections are reconnecting).
func TestCloseAtUnansweringServer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"Blackhole", faultproxy.Fault{Blackhole: true}},
		{"Stall", faultproxy.Fault{Up: faultproxy.Stall, Down: faultproxy.Stall}},
		{"Cut", faultproxy.Fault{Cut: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaks := goleak.IgnoreCurrent()
			chroot := serverChroot(t)
			p, err := faultproxy.Start(testenv.ZooKeeper(t)[0])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			b, err := New("zk://" + p.Addr() + chroot.Path + "?timeout=5s")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			if _, err := b.Members(testCtx(t), "unanswered"); err != nil { // the observer
				t.Fatal(err)
			}
			var ids []spi.SessionID
			for i := range 2 {
				s, err := b.OpenSession(testCtx(t), "unanswered", 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				mustGrant(t, b, s.ID, "unanswered-"+string(rune('a'+i)))
				ids = append(ids, s.ID)
			}
			p.Set(tc.fault)
			done := make(chan error, 1)
			go func() { done <- b.Close() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Close did not return")
			}
			p.Close()
			goleak.VerifyNone(t, leaks)
		})
	}
}

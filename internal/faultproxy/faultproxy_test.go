package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet is how long a read waits for bytes a fault must keep back. It can only make a broken
// proxy pass (the bytes were late), never fail a working one.
const quiet = 200 * time.Millisecond

// echoServer starts a server that echoes every byte; ended gets a value as each of its
// connections ends.
func echoServer(t *testing.T) (addr string, ended chan struct{}) {
	ended = make(chan struct{}, 16)
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		io.Copy(c, c) //nolint:errcheck
		ended <- struct{}{}
	})
	return ln.Addr().String(), ended
}

// client is a connection through a proxy, read line by line.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) send(line string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next line, waiting at most within.
func (c *client) read(within time.Duration) (string, error) {
	c.c.SetReadDeadline(time.Now().Add(within))
	return c.r.ReadString('\n')
}

// expect reads the next line and fails unless it is want.
func (c *client) expect(want string) {
	c.t.Helper()
	if got, err := c.read(10 * time.Second); err != nil || got != want+"\n" {
		c.t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// expectNothing fails if a line arrives within quiet.
func (c *client) expectNothing(why string) {
	c.t.Helper()
	got, err := c.read(quiet)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("%s: read %q, %v; want nothing", why, got, err)
	}
}

// eventually polls cond until it holds, failing the test after ten seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

func TestForwardsAndRecordsConnections(t *testing.T) {
	addr, _ := echoServer(t)
	p := StartTest(t, addr)
	if p.Target() != addr {
		t.Fatalf("Target = %s, want %s", p.Target(), addr)
	}
	a, b := dial(t, p), dial(t, p)
	a.send("ping")
	a.expect("ping")
	eventually(t, "both connections recorded", func() bool { return len(p.Conns()) == 2 })
	first := p.Conns()[0]
	// The proxy counts bytes once its write upstream returned, which may be after the echo
	// came back to the client.
	eventually(t, "the first connection's 5 bytes counted", func() bool { return first.BytesUp() >= 5 })
	if first.BytesUp() != 5 || first.ClientClosed() {
		t.Fatalf("first connection: %d bytes up, client closed %v; want 5, false", first.BytesUp(), first.ClientClosed())
	}
	a.c.Close()
	eventually(t, "the first connection's client closed", first.ClientClosed)
	b.send("pong")
	b.expect("pong")
}

// TestStallHoldsAndHealDelivers: a stalled direction, either or both, holds the bytes back
// and delivers them on Heal.
func TestStallHoldsAndHealDelivers(t *testing.T) {
	addr, _ := echoServer(t)
	for _, f := range []Fault{{Up: Stall}, {Down: Stall}, {Up: Stall, Down: Stall}} {
		p := StartTest(t, addr)
		c := dial(t, p)
		c.send("warm")
		c.expect("warm")
		p.Set(f)
		if p.Fault() != f {
			t.Fatalf("Fault = %+v, want %+v", p.Fault(), f)
		}
		c.send("ping")
		c.expectNothing("stalled")
		p.Heal()
		c.expect("ping")
	}
}

// TestStallHoldsTheEndOfStream: a server's close is held back with its last bytes.
func TestStallHoldsTheEndOfStream(t *testing.T) {
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		bufio.NewReader(c).ReadString('\n') //nolint:errcheck
		c.Write([]byte("bye\n"))            //nolint:errcheck
	})
	p := StartTest(t, ln.Addr().String())
	c := dial(t, p)
	p.Set(Fault{Down: Stall})
	c.send("hello")
	c.expectNothing("stalled")
	p.Heal()
	c.expect("bye")
	if got, err := c.read(10 * time.Second); err != io.EOF {
		t.Fatalf("after the last line: %q, %v; want EOF", got, err)
	}
}

// TestDropLoses: a dropped direction loses the bytes for good; after Heal new bytes pass.
func TestDropLoses(t *testing.T) {
	addr, _ := echoServer(t)
	for _, f := range []Fault{{Up: Drop}, {Down: Drop}} {
		p := StartTest(t, addr)
		c := dial(t, p)
		c.send("warm")
		c.expect("warm")
		conn := p.Conns()[0]
		p.Set(f)
		c.send("lost")
		eventually(t, "the bytes lost", func() bool { return conn.bytesLost.Load() == 5 })
		p.Heal()
		c.send("ping")
		c.expect("ping")
	}
}

// TestCut: a cut closes the open connections and refuses new ones, with a FIN or a reset,
// until Heal.
func TestCut(t *testing.T) {
	addr, _ := echoServer(t)
	for _, reset := range []bool{false, true} {
		want := io.EOF
		if reset {
			want = syscall.ECONNRESET
		}
		p := StartTest(t, addr)
		open := dial(t, p)
		open.send("warm")
		open.expect("warm")
		p.Set(Fault{Cut: true, Reset: reset})
		if got, err := open.read(10 * time.Second); !errors.Is(err, want) {
			t.Fatalf("reset %v: open connection read %q, %v; want %v", reset, got, err, want)
		}
		// A reset may come before the dial returns.
		if refused, err := net.Dial("tcp", p.Addr()); err == nil {
			refused.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = refused.Read(make([]byte, 1))
			refused.Close()
			if !errors.Is(err, want) {
				t.Fatalf("reset %v: new connection read: %v; want %v", reset, err, want)
			}
		} else if !reset || !errors.Is(err, want) {
			t.Fatalf("reset %v: dial: %v", reset, err)
		}
		p.Heal()
		healed := dial(t, p)
		healed.send("ping")
		healed.expect("ping")
	}
}

// TestDelayAndThrottle: each makes a round trip last at least what it adds both ways.
func TestDelayAndThrottle(t *testing.T) {
	addr, _ := echoServer(t)
	p := StartTest(t, addr)
	c := dial(t, p)
	line := string(make([]byte, 999)) // 1,000 bytes with the newline
	for _, tc := range []struct {
		f   Fault
		min time.Duration
	}{
		{Fault{Delay: 100 * time.Millisecond}, 200 * time.Millisecond},
		{Fault{BytesPerSecond: 10_000}, 200 * time.Millisecond},
	} {
		p.Set(tc.f)
		start := time.Now()
		c.send(line)
		c.expect(line)
		if took := time.Since(start); took < tc.min {
			t.Errorf("%+v: round trip of %v, want at least %v", tc.f, took, tc.min)
		}
	}
}

// TestOrphan: the connections open at the orphaning lose every byte and keep their sockets
// open until the proxy closes; new connections work.
func TestOrphan(t *testing.T) {
	addr, ended := echoServer(t)
	p, err := Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	orphan := dial(t, p)
	orphan.send("warm")
	orphan.expect("warm")
	p.Orphan()
	orphan.send("lost")
	conn := p.Conns()[0]
	eventually(t, "the bytes lost", func() bool { return conn.bytesLost.Load() == 5 })
	fresh := dial(t, p)
	fresh.send("ping")
	fresh.expect("ping")
	orphan.c.Close()
	eventually(t, "the orphan's client closed", conn.ClientClosed)
	select {
	case <-ended:
		t.Fatal("the server saw an orphaned connection end")
	case <-time.After(quiet):
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	<-ended
	<-ended
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseEndsHeldConnections: Close waits neither for a stall to heal nor for a delay.
func TestCloseEndsHeldConnections(t *testing.T) {
	addr, _ := echoServer(t)
	for _, f := range []Fault{{Up: Stall, Down: Stall}, {Delay: time.Hour}} {
		p, err := Start(addr)
		if err != nil {
			t.Fatal(err)
		}
		c := dial(t, p)
		p.Set(f)
		c.send("held")
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if got, err := c.read(10 * time.Second); err == nil {
			t.Fatalf("%+v: read %q through a closed proxy", f, got)
		}
	}
}

// TestBlackhole: a blackhole silences the open connections for good and takes new ones
// without answering them (the server never sees them); after Heal new connections work and
// the silenced ones stay silent.
func TestBlackhole(t *testing.T) {
	addr, ended := echoServer(t)
	p := StartTest(t, addr)
	old := dial(t, p)
	old.send("warm")
	old.expect("warm")
	p.Set(Fault{Blackhole: true})
	old.send("lost")
	old.expectNothing("an open connection during a blackhole")
	held := dial(t, p)
	held.send("hello")
	held.expectNothing("a connection taken during a blackhole")
	p.Heal()
	old.send("after")
	old.expectNothing("a connection the blackhole silenced, after the heal")
	held.send("after")
	held.expectNothing("a connection taken during the blackhole, after the heal")
	fresh := dial(t, p)
	fresh.send("ping")
	fresh.expect("ping")
	conns := p.Conns()
	if len(conns) != 3 {
		t.Fatalf("%d connections recorded, want 3", len(conns))
	}
	held.c.Close()
	eventually(t, "the held connection's client closed", conns[1].ClientClosed)
	if lost := conns[1].bytesLost.Load(); lost != int64(len("hello\nafter\n")) {
		t.Errorf("the held connection lost %d bytes, want %d", lost, len("hello\nafter\n"))
	}
	select {
	case <-ended:
		t.Fatal("the server saw a connection end: the held one was dialled, or the silenced one's end passed")
	case <-time.After(quiet):
	}
}

// TestConnectDelay: a connection accepted under a ConnectDelay reaches the server only after
// it (its bytes wait, none comes back), even once the fault is healed; connections open
// already, and those accepted after the heal, are not held; Close ends the wait.
func TestConnectDelay(t *testing.T) {
	addr, _ := echoServer(t)
	p, err := Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	open := dial(t, p)
	open.send("warm")
	open.expect("warm")

	const delay = 300 * time.Millisecond
	p.Set(Fault{ConnectDelay: delay})
	start := time.Now()
	slow := dial(t, p)
	slow.send("first")
	open.send("still")
	open.expect("still") // an open connection is not held
	p.Heal()             // the accepted connection waits its delay out all the same
	slow.expect("first")
	if took := time.Since(start); took < delay {
		t.Errorf("the first reply came %v after the connection, want at least %v", took, delay)
	}

	p.Set(Fault{ConnectDelay: time.Hour})
	held := dial(t, p)
	held.send("held")
	held.expectNothing("a connection accepted under a ConnectDelay of an hour")
	p.Heal()
	fresh := dial(t, p)
	fresh.send("ping")
	fresh.expect("ping") // accepted after the heal: not held
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := held.read(10 * time.Second); err == nil {
		t.Fatalf("read %q on a held connection through a closed proxy", got)
	}
}

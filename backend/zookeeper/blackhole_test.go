package zookeeper

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
)

// synDropAddr returns a loopback address whose listener's accept queue is full (a backlog of
// 0, filled by one connection of the test's own): the kernel drops every later SYN, so a dial
// there hangs as one to a blackholed server does (no reset, no answer).
func synDropAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	filler, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	return addr
}

// silentAddr returns a loopback address whose listener never accepts: the kernel completes
// the TCP handshake, and the session handshake is never answered.
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// blackholes are the two kinds of server that swallow a connection.
var blackholes = []struct {
	name string
	addr func(*testing.T) string
}{
	{"SYNDropped", synDropAddr},
	{"Silent", silentAddr},
}

// TestOpenSessionPastBlackholedServer opens sessions of TTL 3 s on a connection string whose
// other server swallows connections, each within its TTL: an attempt there is given up after
// the session timeout / 6 (500 ms), and the next server is dialled. The host order is
// random (go-zookeeper shuffles it), so about half the sessions dial the blackholed server
// first; before, such an attempt lasted go-zookeeper's connect timeout (1 s, a dropped SYN)
// or Config.Timeout (10 s, an unanswered handshake).
func TestOpenSessionPastBlackholedServer(t *testing.T) {
	good := testenv.ZooKeeper(t)[0]
	const ttl = 3 * time.Second
	for _, bh := range blackholes {
		t.Run(bh.name, func(t *testing.T) {
			chroot := zktest.New(t, []string{good}, "simba-test").Path
			b := openBackend(t, "zk://"+bh.addr(t)+","+good+chroot)
			for i := range 6 {
				ctx, cancel := context.WithTimeout(context.Background(), ttl)
				s, err := b.OpenSession(ctx, "blackholed", ttl)
				cancel()
				if err != nil {
					t.Fatalf("session %d did not open within its TTL %v: %v", i, ttl, err)
				}
				cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
				b.CloseSession(cctx, s.ID) //nolint:errcheck
				ccancel()
			}
		})
	}
}

// TestSessionRidesOutOutagePastBlackholedServer: a session of TTL 3 s on a connection string
// whose first server swallows connections and whose second loses every connection for 0.5 s,
// 0.95 s after a renewal: every reconnect dials the blackholed server first (go-zookeeper
// takes the servers in turn), and the session must survive each outage, as with the live
// server alone.
func TestSessionRidesOutOutagePastBlackholedServer(t *testing.T) {
	testenv.Short(t, "four outages per kind of blackhole")
	good := testenv.ZooKeeper(t)[0]
	for _, bh := range blackholes {
		t.Run(bh.name, func(t *testing.T) {
			p := faultproxy.StartTest(t, good)
			b := openBackend(t, "zk://"+bh.addr(t)+","+p.Addr())
			cfg := outagetest.Config{TTL: 3 * time.Second, Outage: 500 * time.Millisecond, Phase: 950 * time.Millisecond, Rounds: 4}
			if lost := outagetest.Run(t, b, []*faultproxy.Proxy{p}, cfg); lost > 0 {
				t.Errorf("the session was lost in %d of %d outages of %v at TTL %v with a blackholed server first; want none", lost, cfg.Rounds, cfg.Outage, cfg.TTL)
			}
		})
	}
}

package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// member is one etcd process of a private cluster.
type member struct {
	name   string
	client string // host:port
	cmd    *exec.Cmd
	out    *lockedBuffer // what it printed (stdout and stderr)
}

// privateCluster is a cluster of etcd processes this test owns, on free loopback ports, with
// a short election timeout (so a lost leader is replaced within a second, and leases may be
// as short as one second).
type privateCluster struct {
	members []*member
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCluster starts n etcd members (the etcd binary of testenv.EtcdBinary) and waits until
// the cluster has a leader. A cluster that elects none within 20 s is started once more, on
// new ports and a new data directory, after logging what its members printed: a CI run once
// saw a fresh 3-member v3.7 cluster elect no leader in 20 s (the ports freePort hands out are
// free when asked, not when etcd binds them).
func startCluster(t testing.TB, n int) *privateCluster {
	for attempt := 1; ; attempt++ {
		c := startMembers(t, n)
		if c.waitLeader(20*time.Second) != nil {
			return c
		}
		for _, m := range c.members {
			c.kill(m)
		}
		if attempt == 2 {
			t.Fatalf("the private etcd cluster has no leader after 20 s, twice; its members printed:\n%s", c.output())
		}
		t.Logf("the private etcd cluster has no leader after 20 s; starting it again; its members printed:\n%s", c.output())
	}
}

// lockedBuffer is a bytes.Buffer safe for a process's writes and the test's reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startMembers starts n etcd members of a new cluster, without waiting for a leader.
func startMembers(t testing.TB, n int) *privateCluster {
	bin := testenv.EtcdBinary(t)
	dir := t.TempDir()
	c := &privateCluster{}
	var initial []string
	peers := make([]int, n)
	for i := range n {
		peers[i] = freePort(t)
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, peers[i]))
	}
	for i := range n {
		m := &member{name: fmt.Sprintf("m%d", i), client: fmt.Sprintf("127.0.0.1:%d", freePort(t)), out: &lockedBuffer{}}
		peer := fmt.Sprintf("http://127.0.0.1:%d", peers[i])
		m.cmd = exec.Command(bin, "--name", m.name, "--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", "http://"+m.client, "--advertise-client-urls", "http://"+m.client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", filepath.Base(dir),
			"--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "error")
		m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
		if err := m.cmd.Start(); err != nil {
			testenv.Unavailable(t, "etcd server binary", err.Error())
		}
		t.Cleanup(func() { c.kill(m) })
		c.members = append(c.members, m)
	}
	return c
}

// output is what the members printed (their last 2,000 bytes each), for a failure's message.
func (c *privateCluster) output() string {
	var b strings.Builder
	for _, m := range c.members {
		out := m.out.String()
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		fmt.Fprintf(&b, "--- %s (client %s, exit %v):\n%s\n", m.name, m.client, m.cmd.ProcessState, out)
	}
	return b.String()
}

func (c *privateCluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.client)
	}
	return out
}

// kill SIGKILLs m (once) and reaps it.
func (c *privateCluster) kill(m *member) {
	if m.cmd.ProcessState == nil && m.cmd.Process != nil {
		m.cmd.Process.Kill() //nolint:errcheck
		m.cmd.Wait()         //nolint:errcheck
	}
}

// leader returns the member that is leader, as the live members agree, waiting up to 20 s.
func (c *privateCluster) leader(t testing.TB) *member {
	t.Helper()
	if l := c.waitLeader(20 * time.Second); l != nil {
		return l
	}
	t.Fatalf("the private etcd cluster has no leader after 20 s; its members printed:\n%s", c.output())
	return nil
}

// waitLeader returns the member that is leader, as the live members agree, waiting up to
// limit; nil if none is by then.
func (c *privateCluster) waitLeader(limit time.Duration) *member {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, m := range c.members {
			if m.cmd.ProcessState != nil {
				continue
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.client}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, m.client)
			cancel()
			cli.Close()
			if err != nil || st.Leader == 0 {
				continue
			}
			for _, l := range c.members {
				if l.cmd.ProcessState != nil {
					continue
				}
				lcli, err := clientv3.New(clientv3.Config{Endpoints: []string{l.client}, DialTimeout: time.Second, Logger: zap.NewNop()})
				if err != nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				ls, err := lcli.Status(ctx, l.client)
				cancel()
				lcli.Close()
				if err == nil && ls.Header.MemberId == st.Leader {
					return l
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// tenure is one grant of the contended lease, as its holder saw it.
type tenure struct {
	token   int64
	granted time.Time // when the grant's reply arrived
}

// TestLeaderLossKeepsTokenOrder: on a 3-member cluster, contenders take and release one lease
// over and over while the leader is SIGKILLed in the middle of a tenure. The tenure survives
// (its holder's keep-alive still reports the lease with its token once a new leader is
// elected), and every grant, ordered by when it arrived, carries a greater token than the one
// before: no token is repeated or reordered across the leader change.
func TestLeaderLossKeepsTokenOrder(t *testing.T) {
	testenv.Short(t, "starts a 3-member etcd cluster")
	c := startCluster(t, 3)
	dsn := "etcd://" + strings.Join(c.endpoints(), ",") + testPrefix(t)
	const ttl = 5 * time.Second
	name := "leader-loss"

	retry := func(ctx context.Context, f func(context.Context) error) error {
		for {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			err := f(cctx)
			cancel()
			if err == nil || spi.Classify(err) == spi.Permanent || ctx.Err() != nil {
				return errors.Join(err, ctx.Err())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// The tenure that spans the leader's death.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holder := openBackend(t, dsn)
	hs, err := holder.OpenSession(ctx, "holder", ttl)
	if err != nil {
		t.Fatal(err)
	}
	var first spi.Acquire
	if err := retry(ctx, func(ctx context.Context) (err error) { first, err = holder.Acquire(ctx, hs.ID, name); return }); err != nil || first.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", first, err)
	}
	var mu sync.Mutex
	tenures := []tenure{{first.Token, time.Now()}}

	old := c.leader(t)
	c.kill(old)
	t.Logf("killed leader %s at token %d", old.name, first.Token)
	if l := c.leader(t); l == old {
		t.Fatal("the dead member is still leader")
	}
	var ka spi.KeepAlive
	if err := retry(ctx, func(ctx context.Context) (err error) {
		ka, err = holder.KeepAlive(ctx, hs.ID, []string{name}, nil)
		return
	}); err != nil {
		t.Fatalf("KeepAlive after the leader's death: %v", err)
	}
	if ka.Expired || !slices.Contains(ka.Held, spi.Held{Name: name, Token: first.Token}) {
		t.Fatalf("KeepAlive after the leader's death = %+v, want the lease with token %d", ka, first.Token)
	}
	if err := retry(ctx, func(ctx context.Context) error { return holder.Release(ctx, hs.ID, name, first.Token) }); err != nil {
		t.Fatal(err)
	}

	// Contenders on the surviving pair, each on a backend (a client) of its own.
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := New(dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer b.Close()
			var s spi.Session
			if err := retry(ctx, func(ctx context.Context) (err error) { s, err = b.OpenSession(ctx, fmt.Sprint("c", i), ttl); return }); err != nil {
				t.Error(err)
				return
			}
			for time.Now().Before(stop) {
				var r spi.Acquire
				if err := retry(ctx, func(ctx context.Context) (err error) { r, err = b.Acquire(ctx, s.ID, name); return }); err != nil {
					t.Error(err)
					return
				}
				if r.Kind != spi.Granted {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				mu.Lock()
				tenures = append(tenures, tenure{r.Token, time.Now()})
				mu.Unlock()
				if err := retry(ctx, func(ctx context.Context) error { return b.Release(ctx, s.ID, name, r.Token) }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	slices.SortStableFunc(tenures, func(a, b tenure) int { return a.granted.Compare(b.granted) })
	if len(tenures) < 10 {
		t.Fatalf("only %d tenures", len(tenures))
	}
	for i := 1; i < len(tenures); i++ {
		if tenures[i].token <= tenures[i-1].token {
			t.Fatalf("tenure %d has token %d after %d: order lost", i, tenures[i].token, tenures[i-1].token)
		}
	}
	t.Logf("%d tenures, tokens %d … %d, strictly increasing", len(tenures), tenures[0].token, tenures[len(tenures)-1].token)
}

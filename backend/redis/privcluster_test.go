package redis

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testenv"
)

// privCluster is a Redis Cluster of 3 masters with a replica each that a test starts for itself
// on ports it picks free (privPorts; never the shared 7001-7006 one) so that it can fail
// masters over. Replicas authenticate to their master as the ACL user "repl", so a test can cut
// a master's replication (breakReplication) and make an asynchronous failover lose writes
// deterministically. A standalone private server (startPrivServerProc) is one too, of one
// server.
type privCluster struct {
	t     testing.TB
	ports []int
	procs map[int]*privProc
	confs map[int]string
	logs  map[int]string // each server's log file
}

// privProc is a running redis-server: done is closed once it has exited (and been waited for).
type privProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	// logFrom is the size of the server's log file when it started: what it logs from then
	// on is this run's.
	logFrom int64
}

// Private servers' ports are picked at random in [privPortMin, privPortMin+privPortSpan), with
// their Cluster bus ports (port+privBusOffset) below the ephemeral range (32768 on): a port the
// kernel hands out for outgoing connections could be taken by one between the pick and the
// server's bind.
const (
	privPortMin   = 12000
	privPortSpan  = 10000
	privBusOffset = 10000 // Redis Cluster's default bus port: port + 10000
	privAttempts  = 3     // tries at starting on ports picked afresh when one was taken meanwhile
)

// privPorts picks n distinct ports on 127.0.0.1 that nothing listens on, and with bus also
// nothing on port+privBusOffset (a Cluster node's bus port). Each port is proved free by
// listening on it; the listeners are held until all are picked, so that neither this process
// nor another one that probes the same way picks a port twice, and closed on return, just
// before the servers bind them. Ports picked at random keep two test processes (or another
// program) from colliding as fixed ports did; a port taken between the pick and the bind
// makes the server exit, and the caller starts again on new ports (privAttempts).
func privPorts(t testing.TB, n int, bus bool) []int {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	listen := func(p int) bool {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		held = append(held, l)
		return true
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("found %d of %d free ports in [%d, %d) in %d tries", len(ports), n, privPortMin, privPortMin+privPortSpan, tries)
		}
		p := privPortMin + rand.IntN(privPortSpan)
		mark := len(held)
		if !listen(p) {
			continue
		}
		if bus && !listen(p+privBusOffset) {
			held[mark].Close()
			held = held[:mark]
			continue
		}
		ports = append(ports, p)
	}
	return ports
}

// quiet drops go-redis's log lines (dial failures while a node is down are expected here).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

const replUser, replPass = "repl", "replpw"

// startPrivCluster starts the cluster on 6 ports it picks (privPorts; masters are the first
// 3). It skips when redis-server or redis-cli is missing (failing under
// SIMBA_REQUIRE_SERVICES=1), and tears everything down when the test ends.
func startPrivCluster(t testing.TB) *privCluster {
	t.Helper()
	testenv.Short(t, "starts a private Redis Cluster")
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, "redis-server and redis-cli", err.Error())
		}
	}
	goredis.SetLogger(quiet{})
	// The directory first: cleanups run last-in first-out, so the servers are killed before
	// their directory is removed (removing it under running servers, which still write their
	// logs and nodes.conf, failed a test's cleanup with "directory not empty").
	root := t.TempDir()
	pc := &privCluster{t: t, procs: map[int]*privProc{}, confs: map[int]string{}, logs: map[int]string{}}
	t.Cleanup(pc.stop)
	for attempt := 1; ; attempt++ {
		pc.ports = privPorts(t, 6, true)
		for _, p := range pc.ports {
			dir := filepath.Join(root, strconv.Itoa(p))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			conf := fmt.Sprintf(`port %d
bind 127.0.0.1
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 1000
cluster-replica-validity-factor 0
save ""
appendonly no
dir %s
logfile %s
masteruser %s
masterauth %s
user default on nopass ~* &* +@all
user %s on >%s ~* &* +@all
`, p, dir, filepath.Join(dir, "redis.log"), replUser, replPass, replUser, replPass)
			cf := filepath.Join(dir, "redis.conf")
			if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			pc.confs[p], pc.logs[p] = cf, filepath.Join(dir, "redis.log")
			pc.start(p)
		}
		err := pc.waitAllReady()
		if err == nil {
			break
		}
		pc.stop()
		if attempt == privAttempts {
			t.Fatalf("the private Redis Cluster did not start in %d attempts on ports picked free: %v", attempt, err)
		}
		t.Logf("starting the private Redis Cluster again on other ports: %v", err)
	}
	args := []string{"--cluster", "create"}
	for _, p := range pc.ports {
		args = append(args, "127.0.0.1:"+strconv.Itoa(p))
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	pc.waitHealthy(30 * time.Second)
	return pc
}

// start starts (or restarts, with its cluster state from nodes.conf) the server on port.
func (pc *privCluster) start(port int) {
	var from int64
	if fi, err := os.Stat(pc.logs[port]); err == nil {
		from = fi.Size()
	}
	cmd := exec.Command("redis-server", pc.confs[port])
	cmd.SysProcAttr = testenv.OwnGroup()
	if err := cmd.Start(); err != nil {
		pc.t.Fatalf("starting redis-server on %d: %v", port, err)
	}
	pr := &privProc{cmd: cmd, done: make(chan struct{}), logFrom: from}
	go func() {
		cmd.Wait()
		close(pr.done)
	}()
	pc.procs[port] = pr
}

// kill ends the server on port with SIGKILL (a crash: no goodbye to the cluster).
func (pc *privCluster) kill(port int) {
	if pr := pc.procs[port]; pr != nil {
		pr.cmd.Process.Signal(syscall.SIGKILL)
		<-pr.done
		delete(pc.procs, port)
	}
}

func (pc *privCluster) stop() {
	for p := range pc.procs {
		pc.kill(p)
	}
}

// privStartLimit bounds how long a redis-server takes to listen.
const privStartLimit = 10 * time.Second

// waitReady waits until the server started on port logs that it accepts connections — it, not
// another process that took the port meanwhile: it bound the port (and a Cluster node its bus
// port) — and fails if it exits first (a port taken) or takes longer than privStartLimit.
func (pc *privCluster) waitReady(port int) error {
	pr := pc.procs[port]
	if pr == nil {
		return fmt.Errorf("no server started on %d", port)
	}
	deadline := time.Now().Add(privStartLimit)
	for {
		log := pc.logSince(port, pr.logFrom)
		if strings.Contains(log, "Ready to accept connections") {
			return nil
		}
		select {
		case <-pr.done:
			return fmt.Errorf("redis-server on %d exited: %s", port, strings.TrimSpace(pc.logSince(port, pr.logFrom)))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %d not ready within %v: %s", port, privStartLimit, strings.TrimSpace(log))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAllReady is waitReady for every server started.
func (pc *privCluster) waitAllReady() error {
	for p := range pc.procs {
		if err := pc.waitReady(p); err != nil {
			return err
		}
	}
	return nil
}

// logSince is what the server on port has logged from offset from on.
func (pc *privCluster) logSince(port int, from int64) string {
	b, err := os.ReadFile(pc.logs[port])
	if err != nil || int64(len(b)) < from {
		return ""
	}
	return string(b[from:])
}

// waitPort waits until the server started on port accepts connections (waitReady), failing
// the test otherwise.
func (pc *privCluster) waitPort(p int) {
	if err := pc.waitReady(p); err != nil {
		pc.t.Fatal(err)
	}
}

// node returns a plain client of one server.
func (pc *privCluster) node(port int) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	pc.t.Cleanup(func() { c.Close() })
	return c
}

// client returns a Cluster client seeded with every server.
func (pc *privCluster) client() *goredis.ClusterClient {
	var addrs []string
	for _, p := range pc.ports {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRedirects: 3})
	pc.t.Cleanup(func() { c.Close() })
	return c
}

// slotMap is the slot map a frozenSlots client loads: CLUSTER SLOTS of the private Cluster,
// or, while frozen, the last one it read.
type slotMap struct {
	pc      *privCluster
	frozen  atomic.Bool
	mu      sync.Mutex
	last    []goredis.ClusterSlot
	clients map[int]*goredis.Client
}

func (s *slotMap) freeze() { s.frozen.Store(true) }
func (s *slotMap) thaw()   { s.frozen.Store(false) }

func (s *slotMap) load(ctx context.Context) ([]goredis.ClusterSlot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen.Load() && s.last != nil {
		return s.last, nil
	}
	var firstErr error
	for _, p := range s.pc.ports {
		if s.clients[p] == nil {
			s.clients[p] = s.pc.node(p)
		}
		slots, err := s.clients[p].ClusterSlots(ctx).Result()
		if err == nil {
			s.last = slots
			return slots, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// frozenSlots returns a Cluster client of pc (as client) whose slot map can be frozen: while it
// is, the client's reloads (after a MOVED, or ReloadState) keep the map it had, so that a test
// sees a stale map for as long as it chooses, not for go-redis's 200 ms between reloads.
func frozenSlots(pc *privCluster) (*goredis.ClusterClient, *slotMap) {
	s := &slotMap{pc: pc, clients: map[int]*goredis.Client{}}
	var addrs []string
	for _, p := range pc.ports {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRedirects: 3, ClusterSlots: s.load})
	pc.t.Cleanup(func() { c.Close() })
	return c, s
}

// nodeInfo is one line of CLUSTER NODES.
type nodeInfo struct {
	id, master string
	port       int
	isMaster   bool
	failed     bool
}

func (pc *privCluster) nodes(via int) []nodeInfo {
	out, err := pc.node(via).ClusterNodes(context.Background()).Result()
	if err != nil {
		return nil
	}
	var ns []nodeInfo
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		addr := strings.SplitN(f[1], "@", 2)[0]
		_, ps, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(ps)
		ns = append(ns, nodeInfo{id: f[0], master: f[3], port: port,
			isMaster: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")})
	}
	return ns
}

// replicaOf returns the port of the replica of the master on port.
func (pc *privCluster) replicaOf(port int) int {
	ns := pc.nodes(port)
	var id string
	for _, n := range ns {
		if n.port == port {
			id = n.id
		}
	}
	for _, n := range ns {
		if n.master == id {
			return n.port
		}
	}
	pc.t.Fatalf("no replica of %d in %v", port, ns)
	return 0
}

// masterOfKey returns the port of the master serving key.
func (pc *privCluster) masterOfKey(c *goredis.ClusterClient, key string) int {
	n, err := c.MasterForKey(context.Background(), key)
	if err != nil {
		pc.t.Fatal(err)
	}
	_, ps, _ := net.SplitHostPort(n.Options().Addr)
	p, _ := strconv.Atoi(ps)
	return p
}

// waitHealthy waits until every live server reports cluster_state:ok and every live replica's
// link to its master is up.
func (pc *privCluster) waitHealthy(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ok := true
		for p := range pc.procs {
			info, err := pc.node(p).ClusterInfo(context.Background()).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
				break
			}
			repl, err := pc.node(p).Info(context.Background(), "replication").Result()
			if err != nil || (strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up")) {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	pc.t.Fatalf("private cluster not healthy within %v", limit)
}

// waitPromoted waits until the server on port is a master serving slots and every live server
// reports cluster_state:ok.
func (pc *privCluster) waitPromoted(port int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		repl, err := pc.node(port).Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(repl, "role:master") {
			ok := true
			for p := range pc.procs {
				info, err := pc.node(p).ClusterInfo(context.Background()).Result()
				if err != nil || !strings.Contains(info, "cluster_state:ok") {
					ok = false
				}
			}
			if ok {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	pc.t.Fatalf("replica on %d not promoted within %v", port, limit)
}

// breakReplication cuts the master on port off from its replica: the replica's ACL user is
// disabled on the master and its link killed, so it cannot resynchronise. From then on the
// master acknowledges writes that no replica has.
func (pc *privCluster) breakReplication(port int) {
	ctx := context.Background()
	n := pc.node(port)
	if err := n.Do(ctx, "acl", "setuser", replUser, "off").Err(); err != nil {
		pc.t.Fatal(err)
	}
	if err := n.Do(ctx, "client", "kill", "type", "replica").Err(); err != nil {
		pc.t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		info, _ := n.Info(ctx, "replication").Result()
		if strings.Contains(info, "connected_slaves:0") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	pc.t.Fatal("the replica is still connected")
}

// startPrivServer starts a private standalone redis-server with the extra config lines on a
// port it picks (privPorts) and returns the port; it is killed when the test ends.
func startPrivServer(t *testing.T, lines ...string) int {
	t.Helper()
	_, port := startPrivServerProc(t, lines...)
	return port
}

// startPrivServerProc is startPrivServer returning also the handle that restarts the server
// (kill, then start and waitPort, with the same port and configuration).
func startPrivServerProc(t *testing.T, lines ...string) (*privCluster, int) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Unavailable(t, "redis-server", err.Error())
	}
	root := t.TempDir() // before the servers' cleanup: see startPrivCluster
	pc := &privCluster{t: t, procs: map[int]*privProc{}, confs: map[int]string{}, logs: map[int]string{}}
	t.Cleanup(pc.stop)
	for attempt := 1; ; attempt++ {
		port := privPorts(t, 1, false)[0]
		dir, err := os.MkdirTemp(root, "redis")
		if err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir %s\nlogfile %s\n%s\n",
			port, dir, filepath.Join(dir, "redis.log"), strings.Join(lines, "\n"))
		cf := filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		pc.ports = []int{port}
		pc.confs[port], pc.logs[port] = cf, filepath.Join(dir, "redis.log")
		pc.start(port)
		err = pc.waitReady(port)
		if err == nil {
			return pc, port
		}
		pc.stop()
		if attempt == privAttempts {
			t.Fatalf("the private Redis server did not start in %d attempts on ports picked free: %v", attempt, err)
		}
		t.Logf("starting the private Redis server again on another port: %v", err)
	}
}

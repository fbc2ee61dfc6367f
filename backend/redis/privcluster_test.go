package redis

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testenv"
)

// privCluster is a Redis Cluster of 3 masters with a replica each that a test starts for itself
// on spare ports (never the shared 7001-7006 one) so that it can fail masters over. Replicas
// authenticate to their master as the ACL user "repl", so a test can cut a master's replication
// (breakReplication) and make an asynchronous failover lose writes deterministically.
type privCluster struct {
	t     testing.TB
	ports []int
	procs map[int]*exec.Cmd
	confs map[int]string
}

// quiet drops go-redis's log lines (dial failures while a node is down are expected here).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

const replUser, replPass = "repl", "replpw"

// startPrivCluster starts the cluster on base..base+5 (masters base..base+2). It skips when
// redis-server or redis-cli is missing (failing under SIMBA_REQUIRE_SERVICES=1) or a port is
// taken, and tears everything down when the test ends.
func startPrivCluster(t *testing.T, base int) *privCluster {
	t.Helper()
	testenv.Short(t, "starts a private Redis Cluster")
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, "redis-server and redis-cli", err.Error())
		}
	}
	goredis.SetLogger(quiet{})
	pc := &privCluster{t: t, procs: map[int]*exec.Cmd{}, confs: map[int]string{}}
	for p := base; p < base+6; p++ {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), 200*time.Millisecond); err == nil {
			c.Close()
			testenv.Unavailable(t, "the private Redis Cluster", fmt.Sprintf("port %d is taken: cannot start it on %d-%d", p, base, base+5))
		}
		pc.ports = append(pc.ports, p)
	}
	t.Cleanup(pc.stop)
	root := t.TempDir()
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
		pc.confs[p] = cf
		pc.start(p)
	}
	for _, p := range pc.ports {
		pc.waitPort(p)
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
	cmd := exec.Command("redis-server", pc.confs[port])
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pc.t.Fatalf("starting redis-server on %d: %v", port, err)
	}
	pc.procs[port] = cmd
}

// kill ends the server on port with SIGKILL (a crash: no goodbye to the cluster).
func (pc *privCluster) kill(port int) {
	if cmd := pc.procs[port]; cmd != nil {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		delete(pc.procs, port)
	}
}

func (pc *privCluster) stop() {
	for p := range pc.procs {
		pc.kill(p)
	}
}

func (pc *privCluster) waitPort(p int) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	pc.t.Fatalf("redis-server did not come up on %d", p)
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

// startPrivServer starts a private standalone redis-server on port with the extra config lines
// and returns the port; it is killed when the test ends.
func startPrivServer(t *testing.T, port int, lines ...string) int {
	t.Helper()
	startPrivServerProc(t, port, lines...)
	return port
}

// startPrivServerProc is startPrivServer returning the handle that restarts the server
// (kill, then start and waitPort, with the same configuration).
func startPrivServerProc(t *testing.T, port int, lines ...string) *privCluster {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Unavailable(t, "redis-server", err.Error())
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond); err == nil {
		c.Close()
		testenv.Unavailable(t, "a private Redis server", fmt.Sprintf("port %d is taken", port))
	}
	dir := t.TempDir()
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir %s\nlogfile %s\n%s\n",
		port, dir, filepath.Join(dir, "redis.log"), strings.Join(lines, "\n"))
	cf := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	pc := &privCluster{t: t, procs: map[int]*exec.Cmd{}, confs: map[int]string{port: cf}}
	t.Cleanup(pc.stop)
	pc.start(port)
	pc.waitPort(port)
	return pc
}

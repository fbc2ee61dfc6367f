package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one private server process the harness owns.
type proc struct {
	argv []string
	dir  string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) start() error {
	lf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() { cmd.Wait(); lf.Close(); close(done) }()
	return nil
}

func (p *proc) signal(sig syscall.Signal) {
	if p.cmd != nil {
		syscall.Kill(p.cmd.Process.Pid, sig)
	}
}

// kill SIGKILLs the process and waits for it to exit.
func (p *proc) kill() {
	if p.cmd == nil {
		return
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// term SIGTERMs the process (a clean restart) and waits for it to exit (SIGKILL after 10 s).
func (p *proc) term() {
	if p.cmd == nil {
		return
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
	p.cmd = nil
}

func freePorts(n int, bus bool) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for p := 13000 + int(time.Now().UnixNano()%5000); len(ports) < n && p < 22000; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		if bus {
			l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
			if err != nil {
				l.Close()
				continue
			}
			ls = append(ls, l2)
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("found %d of %d free ports", len(ports), n)
	}
	return ports, nil
}

// ---- Redis Cluster ----

// redisCluster is a private Cluster of 3 masters and 3 replicas (cluster-node-timeout 1 s,
// appendonly yes, as the README asks of a Redis that keeps leases).
type redisCluster struct {
	ports []int
	procs map[int]*proc
}

func startRedisCluster(ctx context.Context, root string, fullCoverage bool) (*redisCluster, error) {
	ports, err := freePorts(6, true)
	if err != nil {
		return nil, err
	}
	rc := &redisCluster{ports: ports, procs: map[int]*proc{}}
	for _, p := range ports {
		dir := filepath.Join(root, "redis-"+strconv.Itoa(p))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ncluster-enabled yes\ncluster-config-file nodes.conf\n"+
			"cluster-node-timeout 1000\ncluster-replica-validity-factor 0\nappendonly yes\nappendfsync everysec\n"+
			"save \"\"\ndir %s\ncluster-require-full-coverage %s\n", p, dir, map[bool]string{true: "yes", false: "no"}[fullCoverage])
		cf := filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		pr := &proc{argv: []string{"redis-server", cf}, dir: dir, log: filepath.Join(dir, "redis.log")}
		rc.procs[p] = pr
		if err := pr.start(); err != nil {
			return nil, err
		}
	}
	for _, p := range ports {
		if err := waitPort(p, 20*time.Second); err != nil {
			rc.close()
			return nil, err
		}
	}
	args := []string{"--cluster", "create"}
	for _, p := range ports {
		args = append(args, "127.0.0.1:"+strconv.Itoa(p))
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		rc.close()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := rc.waitHealthy(ctx, 60*time.Second); err != nil {
		rc.close()
		return nil, err
	}
	return rc, nil
}

func waitPort(p int, within time.Duration) error {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("port %d did not open within %v", p, within)
}

func (rc *redisCluster) dsn() string {
	var hs []string
	for _, p := range rc.ports {
		hs = append(hs, "127.0.0.1:"+strconv.Itoa(p))
	}
	return "redis+cluster://" + strings.Join(hs, ",")
}

func cli(port int, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-p", strconv.Itoa(port)}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

// node is a line of CLUSTER NODES.
type node struct {
	id, master string
	port       int
	isMaster   bool
	failed     bool
	slots      [][2]int
}

func (rc *redisCluster) nodes() ([]node, error) {
	var lastErr error
	for _, p := range rc.ports {
		if rc.procs[p].cmd == nil {
			continue
		}
		out, err := cli(p, "cluster", "nodes")
		if err != nil || out == "" {
			lastErr = fmt.Errorf("cluster nodes at %d: %v", p, err)
			continue
		}
		var ns []node
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			addr := f[1]
			if i := strings.IndexByte(addr, '@'); i >= 0 {
				addr = addr[:i]
			}
			_, ps, _ := net.SplitHostPort(addr)
			port, _ := strconv.Atoi(ps)
			n := node{id: f[0], master: f[3], port: port,
				isMaster: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")}
			for _, s := range f[8:] {
				if strings.HasPrefix(s, "[") {
					continue
				}
				a, b, ok := strings.Cut(s, "-")
				lo, _ := strconv.Atoi(a)
				hi := lo
				if ok {
					hi, _ = strconv.Atoi(b)
				}
				n.slots = append(n.slots, [2]int{lo, hi})
			}
			ns = append(ns, n)
		}
		return ns, nil
	}
	return nil, lastErr
}

// masterOf returns the port of the master serving slot and of one of its replicas (0: none).
func (rc *redisCluster) masterOf(slot int) (master, replica int, err error) {
	ns, err := rc.nodes()
	if err != nil {
		return 0, 0, err
	}
	var id string
	for _, n := range ns {
		if !n.isMaster || n.failed {
			continue
		}
		for _, r := range n.slots {
			if slot >= r[0] && slot <= r[1] {
				master, id = n.port, n.id
			}
		}
	}
	if master == 0 {
		return 0, 0, fmt.Errorf("no master serves slot %d", slot)
	}
	for _, n := range ns {
		if n.master == id && !n.failed {
			replica = n.port
		}
	}
	return master, replica, nil
}

// keySlot is CLUSTER KEYSLOT of key.
func (rc *redisCluster) keySlot(key string) (int, error) {
	for _, p := range rc.ports {
		if rc.procs[p].cmd == nil {
			continue
		}
		out, err := cli(p, "cluster", "keyslot", key)
		if err == nil {
			return strconv.Atoi(out)
		}
	}
	return 0, fmt.Errorf("no node answered CLUSTER KEYSLOT")
}

// waitHealthy waits until every node runs, says cluster_state:ok, and the cluster has 3
// masters, each with a replica whose link to it is up.
func (rc *redisCluster) waitHealthy(ctx context.Context, within time.Duration) error {
	end := time.Now().Add(within)
	var why string
	for time.Now().Before(end) && ctx.Err() == nil {
		why = rc.unhealthy()
		if why == "" {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("redis cluster not healthy within %v: %s", within, why)
}

func (rc *redisCluster) unhealthy() string {
	for _, p := range rc.ports {
		if rc.procs[p].cmd == nil {
			return fmt.Sprintf("%d is down", p)
		}
		out, err := cli(p, "cluster", "info")
		if err != nil || !strings.Contains(out, "cluster_state:ok") {
			return fmt.Sprintf("%d: cluster_state not ok (%v)", p, err)
		}
	}
	ns, err := rc.nodes()
	if err != nil {
		return err.Error()
	}
	masters := 0
	for _, n := range ns {
		if n.failed {
			return fmt.Sprintf("node %d flagged fail", n.port)
		}
		if n.isMaster && len(n.slots) > 0 {
			masters++
		} else if !n.isMaster {
			info, err := cli(n.port, "info", "replication")
			if err != nil || !strings.Contains(info, "master_link_status:up") {
				return fmt.Sprintf("replica %d link not up", n.port)
			}
		}
	}
	if masters != 3 {
		return fmt.Sprintf("%d masters with slots", masters)
	}
	return ""
}

func (rc *redisCluster) close() {
	for _, p := range rc.procs {
		p.kill()
	}
}

// ---- etcd cluster ----

type etcdMember struct {
	name       string
	client     int
	peer       int
	p          *proc
	argvCommon []string
}

// etcdCluster is a private 3-member etcd (heartbeat 50 ms, election 500 ms as chaos/servers'
// single member: its minimum lease TTL is 1 s).
type etcdCluster struct {
	members []*etcdMember
}

func startEtcdCluster(ctx context.Context, root string) (*etcdCluster, error) {
	bin := os.Getenv("SIMBA_TEST_ETCD_BIN")
	if bin == "" {
		bin = "etcd"
	}
	ports, err := freePorts(6, false)
	if err != nil {
		return nil, err
	}
	ec := &etcdCluster{}
	var initial []string
	for i := range 3 {
		m := &etcdMember{name: fmt.Sprintf("m%d", i), client: ports[2*i], peer: ports[2*i+1]}
		ec.members = append(ec.members, m)
		initial = append(initial, fmt.Sprintf("%s=http://127.0.0.1:%d", m.name, m.peer))
	}
	token := fmt.Sprintf("trial34-%d", ports[0])
	for _, m := range ec.members {
		dir := filepath.Join(root, "etcd-"+m.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		cu := fmt.Sprintf("http://127.0.0.1:%d", m.client)
		pu := fmt.Sprintf("http://127.0.0.1:%d", m.peer)
		m.p = &proc{dir: dir, log: filepath.Join(dir, "etcd.log"), argv: []string{bin, "--name", m.name,
			"--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", cu, "--advertise-client-urls", cu,
			"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap", "--log-level", etcdLogLevel()}}
		if err := m.p.start(); err != nil {
			ec.close()
			return nil, err
		}
	}
	if err := ec.waitHealthy(ctx, 60*time.Second); err != nil {
		ec.close()
		return nil, err
	}
	return ec, nil
}

func (ec *etcdCluster) dsn() string {
	var hs []string
	for _, m := range ec.members {
		hs = append(hs, "127.0.0.1:"+strconv.Itoa(m.client))
	}
	return "etcd://" + strings.Join(hs, ",") + "/trial34"
}

// status is the maintenance status of a member (via the grpc-gateway): its id and its leader's.
func (m *etcdMember) status() (id, leader string, err error) {
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Post(fmt.Sprintf("http://127.0.0.1:%d/v3/maintenance/status", m.client), "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", "", err
	}
	return st.Header.MemberID, st.Leader, nil
}

// leader returns the member that leads, as the running members agree.
func (ec *etcdCluster) leader() (*etcdMember, error) {
	ids := map[string]*etcdMember{}
	var lead string
	for _, m := range ec.members {
		if m.p.cmd == nil {
			continue
		}
		id, l, err := m.status()
		if err != nil {
			continue
		}
		ids[id] = m
		if l != "" && l != "0" {
			lead = l
		}
	}
	if m := ids[lead]; m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("no leader known (leader id %q)", lead)
}

func (ec *etcdCluster) waitHealthy(ctx context.Context, within time.Duration) error {
	end := time.Now().Add(within)
	var why string
	for time.Now().Before(end) && ctx.Err() == nil {
		why = ""
		for _, m := range ec.members {
			if m.p.cmd == nil {
				why = m.name + " is down"
				break
			}
			_, l, err := m.status()
			if err != nil || l == "" || l == "0" {
				why = fmt.Sprintf("%s: no leader (%v)", m.name, err)
				break
			}
		}
		if why == "" {
			if _, err := ec.leader(); err != nil {
				why = err.Error()
			}
		}
		if why == "" {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("etcd cluster not healthy within %v: %s", within, why)
}

func (ec *etcdCluster) close() {
	for _, m := range ec.members {
		m.p.kill()
	}
}

// etcdLogLevel is $TRIAL34_ETCD_LOG_LEVEL, else warn.
func etcdLogLevel() string {
	if l := os.Getenv("TRIAL34_ETCD_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

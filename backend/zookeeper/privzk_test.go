package zookeeper

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
)

// Where Debian's zookeeper package puts the server (as .ci/services.sh installs it);
// SIMBA_ZK_CLASSPATH overrides the class path.
const (
	zkJar      = "/usr/share/java/zookeeper.jar"
	zkConfDir  = "/etc/zookeeper/conf"
	zkMainPeer = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
)

// privateZK is a ZooKeeper server of the test's own, on a spare port with a temporary data
// directory, so that a test can restart it without disturbing the shared server other tests
// use.
type privateZK struct {
	addr    string
	cfg     string
	dir     string
	cmd     *exec.Cmd
	extraCP []string // jars added to the class path
	jvm     []string // JVM flags added to the server's command line (system properties)
}

// startPrivateZK starts a private single server with a short tick (200 ms, as .ci/zoo.cfg),
// skipping the test (failing under SIMBA_REQUIRE_SERVICES=1) when java or ZooKeeper is not
// installed.
func startPrivateZK(t *testing.T) *privateZK {
	t.Helper()
	return startPrivateZKWith(t, "")
}

// startPrivateZKJVM is startPrivateZK with extra JVM flags: system properties such as
// -Dznode.container.checkIntervalMs, which zoo.cfg cannot set (it prefixes its unknown keys
// with "zookeeper.").
func startPrivateZKJVM(t *testing.T, jvm ...string) *privateZK {
	t.Helper()
	return startPrivateZKAs(t, &privateZK{jvm: jvm}, "")
}

// startPrivateZKWith is startPrivateZK with extra lines appended to the server's zoo.cfg and
// extra jars on its class path.
func startPrivateZKWith(t *testing.T, extraCfg string, extraCP ...string) *privateZK {
	t.Helper()
	return startPrivateZKAs(t, &privateZK{extraCP: extraCP}, extraCfg)
}

// startPrivateZKAs starts z (its class path and JVM flags set) on a free port in a new
// directory, with extraCfg appended to its zoo.cfg, and stops it when the test ends.
func startPrivateZKAs(t *testing.T, z *privateZK, extraCfg string) *privateZK {
	t.Helper()
	needZK(t, "ZooKeeper (private server)")
	dir := t.TempDir()
	port := freePort(t)
	z.addr, z.cfg, z.dir = "127.0.0.1:"+strconv.Itoa(port), filepath.Join(dir, "zoo.cfg"), dir
	if err := os.WriteFile(z.cfg, []byte(zkConfig(dir, port)+extraCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	z.start(t)
	t.Cleanup(z.stop)
	return z
}

// needZK skips the test (failing it under SIMBA_REQUIRE_SERVICES=1) when java or ZooKeeper is
// not installed.
func needZK(t testing.TB, service string) {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		testenv.Unavailable(t, service, "java not found")
	}
	if os.Getenv("SIMBA_ZK_CLASSPATH") == "" {
		if _, err := os.Stat(zkJar); err != nil {
			testenv.Unavailable(t, service, zkJar+" not found")
		}
	}
}

// zkConfig returns the zoo.cfg of a private server with its data under dir, serving clients
// on 127.0.0.1:clientPort: the settings of .ci/zoo.cfg and .ci/zk-ensemble.sh (tickTime
// 200 ms, session timeouts 400 ms to 60 s).
func zkConfig(dir string, clientPort int) string {
	return fmt.Sprintf(`tickTime=200
initLimit=10
syncLimit=5
minSessionTimeout=400
maxSessionTimeout=60000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
`, filepath.Join(dir, "data"), clientPort)
}

// start starts the server and waits until it serves.
func (z *privateZK) start(t testing.TB) {
	t.Helper()
	z.launch(t)
	deadline := time.Now().Add(60 * time.Second)
	for !fourLetter(z.addr, "srvr", "Zookeeper version") { // "ruok" answers before the server serves
		if time.Now().After(deadline) {
			t.Fatalf("private ZooKeeper on %s did not come up; log:\n%s", z.addr, z.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// launch starts the server's JVM, as a child of the test, without waiting for it to serve (a
// member of an ensemble serves only once a quorum runs).
func (z *privateZK) launch(t testing.TB) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatal(err)
	}
	cp := os.Getenv("SIMBA_ZK_CLASSPATH")
	if cp == "" {
		cp = zkConfDir + ":" + zkJar
	}
	for _, j := range z.extraCP {
		cp += ":" + j
	}
	args := append([]string{"-Xmx256m", "-Dzookeeper.log.dir=" + z.dir, "-Dzookeeper.root.logger=WARN,CONSOLE"}, z.jvm...)
	cmd := exec.Command(java, append(args, "-cp", cp, zkMainPeer, z.cfg)...)
	logf, err := os.OpenFile(filepath.Join(z.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a private ZooKeeper: %v", err)
	}
	z.cmd = cmd
}

// log returns what the server wrote to its log.
func (z *privateZK) log() string {
	b, _ := os.ReadFile(filepath.Join(z.dir, "server.log"))
	return string(b)
}

// stop stops the server (SIGTERM, then SIGKILL) and waits for it.
func (z *privateZK) stop() {
	if z.cmd == nil {
		return
	}
	z.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { z.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		z.cmd.Process.Kill()
		<-done
	}
	z.cmd = nil
}

// restart stops and starts the server on the same port and data.
func (z *privateZK) restart(t testing.TB) {
	t.Helper()
	z.stop()
	z.start(t)
}

// mode returns the mode srvr reports (standalone, leader, follower), or "" when the server
// does not serve.
func (z *privateZK) mode() string {
	for _, line := range strings.Split(fourLetterReply(z.addr, "srvr"), "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// privateEnsemble is a ZooKeeper ensemble of the test's own: servers on spare client, quorum
// and election ports, each with a temporary data directory, so that a test can stop and start
// its members without disturbing the shared servers other tests use.
type privateEnsemble struct {
	servers []*privateZK
}

// startPrivateEnsemble starts an ensemble of n servers with the settings of
// .ci/zk-ensemble.sh and waits until one leads and the others follow. The servers are stopped
// when the test ends. It skips the test (failing it under SIMBA_REQUIRE_SERVICES=1) when java
// or ZooKeeper is not installed.
func startPrivateEnsemble(t *testing.T, n int) *privateEnsemble {
	t.Helper()
	needZK(t, "ZooKeeper (private ensemble)")
	ports := freePorts(t, 3*n) // client, quorum and election port of each server
	var peers strings.Builder
	for i := range n {
		fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[n+i], ports[2*n+i])
	}
	e := &privateEnsemble{}
	for i := range n {
		dir := t.TempDir()
		z := &privateZK{addr: "127.0.0.1:" + strconv.Itoa(ports[i]), cfg: filepath.Join(dir, "zoo.cfg"), dir: dir}
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data", "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(z.cfg, []byte(zkConfig(dir, ports[i])+peers.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		e.servers = append(e.servers, z)
	}
	for _, z := range e.servers {
		t.Cleanup(z.stop)
		z.launch(t)
	}
	e.waitQuorum(t)
	return e
}

// addrs returns the servers' client addresses.
func (e *privateEnsemble) addrs() []string {
	var a []string
	for _, z := range e.servers {
		a = append(a, z.addr)
	}
	return a
}

// leader returns the index of the server that leads.
func (e *privateEnsemble) leader(t testing.TB) int {
	t.Helper()
	for i, z := range e.servers {
		if z.mode() == "leader" {
			return i
		}
	}
	t.Fatalf("no server of the private ensemble leads: %s", e.status())
	return -1
}

// startStopped starts every server that is not running and waits until one leads and the
// others follow.
func (e *privateEnsemble) startStopped(t testing.TB) {
	t.Helper()
	for _, z := range e.servers {
		if z.cmd == nil {
			z.launch(t)
		}
	}
	e.waitQuorum(t)
}

// waitQuorum waits until one server leads and every other follows.
func (e *privateEnsemble) waitQuorum(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		leaders, followers := 0, 0
		for _, z := range e.servers {
			switch z.mode() {
			case "leader":
				leaders++
			case "follower":
				followers++
			}
		}
		if leaders == 1 && followers == len(e.servers)-1 {
			return
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for i, z := range e.servers {
				fmt.Fprintf(&logs, "--- server %d log:\n%s", i+1, z.log())
			}
			t.Fatalf("the private ensemble did not form (%s)\n%s", e.status(), logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// status describes each server's mode.
func (e *privateEnsemble) status() string {
	var s []string
	for i, z := range e.servers {
		s = append(s, fmt.Sprintf("server %d (%s): %q", i+1, z.addr, z.mode()))
	}
	return strings.Join(s, ", ")
}

// fourLetter sends a four-letter command and reports whether the reply starts with want.
func fourLetter(addr, cmd, want string) bool {
	return strings.HasPrefix(fourLetterReply(addr, cmd), want)
}

// fourLetterReply sends a four-letter command and returns the reply ("" if the server does not
// answer).
func fourLetterReply(addr, cmd string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(c, 64<<10)) // the server closes the connection after its reply
	return string(b)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// freePorts returns n distinct free ports, each found by listening on it (all n at once, so
// that none is handed out twice).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

package zookeeper

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
}

// startPrivateZK starts a private single server with a short tick (200 ms, as .ci/zoo.cfg),
// skipping the test (failing under SIMBA_REQUIRE_SERVICES=1) when java or ZooKeeper is not
// installed.
func startPrivateZK(t *testing.T) *privateZK {
	t.Helper()
	return startPrivateZKWith(t, "")
}

// startPrivateZKWith is startPrivateZK with extra lines appended to the server's zoo.cfg and
// extra jars on its class path.
func startPrivateZKWith(t *testing.T, extraCfg string, extraCP ...string) *privateZK {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		testenv.Unavailable(t, "ZooKeeper (private server)", "java not found")
	}
	if os.Getenv("SIMBA_ZK_CLASSPATH") == "" {
		if _, err := os.Stat(zkJar); err != nil {
			testenv.Unavailable(t, "ZooKeeper (private server)", zkJar+" not found")
		}
	}
	dir := t.TempDir()
	port := freePort(t)
	z := &privateZK{addr: "127.0.0.1:" + strconv.Itoa(port), cfg: filepath.Join(dir, "zoo.cfg"), dir: dir, extraCP: extraCP}
	cfg := fmt.Sprintf(`tickTime=200
initLimit=10
syncLimit=5
minSessionTimeout=400
maxSessionTimeout=60000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
`, filepath.Join(dir, "data"), port) + extraCfg
	if err := os.WriteFile(z.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	z.start(t, java)
	t.Cleanup(z.stop)
	return z
}

func (z *privateZK) start(t testing.TB, java string) {
	t.Helper()
	cp := os.Getenv("SIMBA_ZK_CLASSPATH")
	if cp == "" {
		cp = zkConfDir + ":" + zkJar
	}
	for _, j := range z.extraCP {
		cp += ":" + j
	}
	cmd := exec.Command(java, "-Xmx256m", "-Dzookeeper.log.dir="+z.dir, "-Dzookeeper.root.logger=WARN,CONSOLE",
		"-cp", cp, zkMainPeer, z.cfg)
	logf, err := os.OpenFile(filepath.Join(z.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a private ZooKeeper: %v", err)
	}
	z.cmd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for !fourLetter(z.addr, "srvr", "Zookeeper version") { // "ruok" answers before the server serves
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(z.dir, "server.log"))
			t.Fatalf("private ZooKeeper on %s did not come up; log:\n%s", z.addr, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	java, _ := exec.LookPath("java")
	z.start(t, java)
}

// fourLetter sends a four-letter command and reports whether the reply starts with want.
func fourLetter(addr, cmd, want string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return false
	}
	buf := make([]byte, 4096)
	n, _ := c.Read(buf)
	return len(buf[:n]) >= len(want) && string(buf[:len(want)]) == want
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

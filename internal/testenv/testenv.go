// Package testenv finds the real servers tests run against. A test that needs a server asks for
// it here; when the server is absent the test is skipped locally, but fails when
// SIMBA_REQUIRE_SERVICES=1 (as .ci/run sets), so CI never silently skips a backend.
package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Required reports whether missing services must fail tests instead of skipping them.
func Required() bool { return os.Getenv("SIMBA_REQUIRE_SERVICES") == "1" }

// Unavailable skips t, or fails it when services are required, explaining what is missing.
func Unavailable(t testing.TB, service, why string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is required (SIMBA_REQUIRE_SERVICES=1) but unavailable: %s", service, why)
	}
	t.Skipf("%s unavailable (%s); set SIMBA_REQUIRE_SERVICES=1 to make this a failure", service, why)
}

// env returns the value of the environment variable name, or def.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// reachable dials every host:port in addrs, failing on the first that does not answer.
func reachable(addrs ...string) error {
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			return err
		}
		c.Close()
	}
	return nil
}

// need returns dsn if every address answers, else skips or fails t. When services are
// required, a service that does not answer is waited for first, up to serviceWait, once per
// test binary: CI's watcher (.ci/run) starts again a shared server that stopped answering, and
// a test should fail on what it tests, not on a server that was away for seconds. A service
// that did not come back fails every later test at once.
func need(t testing.TB, service, dsn string, addrs ...string) string {
	t.Helper()
	err := reachable(addrs...)
	if err != nil && Required() {
		err = waitFor(t, service, addrs)
	}
	if err != nil {
		Unavailable(t, service, err.Error())
	}
	return dsn
}

// serviceWait is how long a required service that does not answer is waited for
// (SIMBA_SERVICE_WAIT, a Go duration, overrides; 0 waits not at all).
func serviceWait() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SIMBA_SERVICE_WAIT")); err == nil && d >= 0 {
		return d
	}
	return time.Minute
}

var (
	waitMu sync.Mutex
	gone   = map[string]error{} // services waited for in vain, and why
)

// waitFor dials addrs until every one answers or serviceWait passes, logging the wait in t.
// Waits are one at a time, and a service waited for in vain is not waited for again.
func waitFor(t testing.TB, service string, addrs []string) error {
	t.Helper()
	waitMu.Lock()
	defer waitMu.Unlock()
	if err, ok := gone[service]; ok {
		return fmt.Errorf("%w (waited for it %s earlier in this run)", err, serviceWait())
	}
	start := time.Now()
	t.Logf("%s does not answer: waiting up to %s for it", service, serviceWait())
	for {
		err := reachable(addrs...)
		if err == nil {
			t.Logf("%s answers again after %s", service, time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Since(start) >= serviceWait() {
			gone[service] = err
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Postgres returns a DSN for the PostgreSQL test database (SIMBA_TEST_POSTGRES overrides).
func Postgres(t testing.TB) string {
	t.Helper()
	return need(t, "PostgreSQL", env("SIMBA_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), env("SIMBA_TEST_POSTGRES_ADDR", "127.0.0.1:5432"))
}

// MySQL returns a go-sql-driver/mysql DSN for the MySQL/MariaDB test database
// (SIMBA_TEST_MYSQL overrides).
func MySQL(t testing.TB) string {
	t.Helper()
	return need(t, "MySQL/MariaDB", env("SIMBA_TEST_MYSQL", "root@tcp(127.0.0.1:3306)/test"), env("SIMBA_TEST_MYSQL_ADDR", "127.0.0.1:3306"))
}

// Redis returns host:port of the standalone Redis test server (SIMBA_TEST_REDIS overrides).
func Redis(t testing.TB) string {
	t.Helper()
	addr := env("SIMBA_TEST_REDIS", "127.0.0.1:6379")
	return need(t, "Redis", addr, addr)
}

// RedisCluster returns the seed addresses of the Redis Cluster test servers
// (SIMBA_TEST_REDIS_CLUSTER, comma-separated, overrides; .ci/run starts them on 7001-7006).
func RedisCluster(t testing.TB) []string {
	t.Helper()
	addrs := strings.Split(env("SIMBA_TEST_REDIS_CLUSTER", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"), ",")
	need(t, "Redis Cluster", "", addrs...)
	return addrs
}

// ZooKeeper returns the host:port list of the ZooKeeper test server (SIMBA_TEST_ZOOKEEPER,
// comma-separated, overrides; .ci/run starts one with a short tickTime on 2181).
func ZooKeeper(t testing.TB) []string {
	t.Helper()
	addrs := strings.Split(env("SIMBA_TEST_ZOOKEEPER", "127.0.0.1:2181"), ",")
	need(t, "ZooKeeper", "", addrs...)
	return addrs
}

// Etcd returns the client addresses (host:port) of the etcd test server (SIMBA_TEST_ETCD,
// comma-separated, overrides; .ci/services.sh starts Debian's 3.4 on 2379, and a current etcd,
// v3.7.3, on 2479, which `make test-etcd-current` runs backend/etcd's tests against by setting
// SIMBA_TEST_ETCD). The service's name in a skip or failure says which server was asked for.
func Etcd(t testing.TB) []string {
	t.Helper()
	v := env("SIMBA_TEST_ETCD", "127.0.0.1:2379")
	addrs := strings.Split(v, ",")
	need(t, "etcd at "+v, "", addrs...)
	return addrs
}

// EtcdBinary returns the path of an etcd server binary for tests that run private members
// (SIMBA_TEST_ETCD_BIN, a name on PATH or a path, overrides; .ci/services.sh installs Debian's
// etcd-server, and builds v3.7.3 as $SIMBA_SERVICES_DIR/etcd37/etcd, which
// `make test-etcd-current` sets).
func EtcdBinary(t testing.TB) string {
	t.Helper()
	bin := env("SIMBA_TEST_ETCD_BIN", "etcd")
	p, err := exec.LookPath(bin)
	if err != nil {
		Unavailable(t, "etcd server binary", err.Error())
	}
	return p
}

// Short skips a slow test under `go test -short`, except when services are required (as in CI),
// where every test runs.
func Short(t testing.TB, why string) {
	t.Helper()
	if testing.Short() && !Required() {
		t.Skipf("-short: %s", why)
	}
}

// Serve accepts connections on ln until the test ends (then it closes ln) and runs handle on
// each, on a goroutine of its own, closing the connection after: a fake server for tests of
// what a client does with a peer that misbehaves.
func Serve(t testing.TB, ln net.Listener, handle func(net.Conn)) net.Listener {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln
}

// Listen listens on a free loopback port, for Serve.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// RefusedAddr returns a loopback address (host:port) nobody listens on: a port that was free a
// moment ago, so every dial there is refused (until another process happens to take it).
func RefusedAddr(t testing.TB) string {
	t.Helper()
	ln := Listen(t)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// PrivateRedis starts a redis-server that only the calling test uses (no persistence, on a
// port that was free a moment ago, killed when the test ends) and returns its address: for a
// test that changes server-wide state (SCRIPT FLUSH, CONFIG SET, a restart), which the shared
// Redis must never see because other packages' tests use it at the same time. It waits until
// the server it started logs that it accepts connections — it, not another process that took
// the port meanwhile — and tries another port if the server exits first. It skips (fails under
// SIMBA_REQUIRE_SERVICES=1) without redis-server.
func PrivateRedis(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server", err.Error())
	}
	for attempt := 1; ; attempt++ {
		addr := RefusedAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		dir := t.TempDir()
		logFile := dir + "/redis.log"
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", logFile)
		cmd.SysProcAttr = OwnGroup()
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting redis-server on %s: %v", addr, err)
		}
		done := make(chan struct{})
		go func() {
			cmd.Wait()
			close(done)
		}()
		stop := func() {
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
		ready, why := waitLogged(logFile, "Ready to accept connections", done, 10*time.Second)
		if ready {
			t.Cleanup(stop)
			return addr
		}
		stop()
		if attempt == 3 {
			t.Fatalf("a private redis-server did not start in %d attempts: %s", attempt, why)
		}
	}
}

// waitLogged waits until the file at path contains line, the process whose done channel is
// given exits, or limit passes; it reports whether the line came, else why not (with the log).
func waitLogged(path, line string, done <-chan struct{}, limit time.Duration) (bool, string) {
	deadline := time.Now().Add(limit)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), line) {
			return true, ""
		}
		select {
		case <-done:
			return false, "it exited: " + strings.TrimSpace(string(b))
		default:
		}
		if time.Now().After(deadline) {
			return false, fmt.Sprintf("not ready within %v: %s", limit, strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

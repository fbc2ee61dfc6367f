package open_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba/internal/testenv"
)

// class is the error class a bad DSN must have.
type class int

const (
	invalid     class = iota // errors.Is simba.ErrInvalidOption
	unavailable              // errors.Is simba.ErrUnavailable (retryable)
	refused                  // permanent (spi.Classify), not ErrUnavailable: credentials, files
	denied                   // refused, and errors.Is simba.ErrAccessDenied: credentials
)

func (c class) check(err error) string {
	switch c {
	case invalid:
		if !errors.Is(err, simba.ErrInvalidOption) || spi.Classify(err) != spi.Permanent {
			return "want errors.Is(err, simba.ErrInvalidOption), permanent"
		}
	case unavailable:
		if !errors.Is(err, simba.ErrUnavailable) || spi.Classify(err) != spi.Retryable {
			return "want errors.Is(err, simba.ErrUnavailable), retryable"
		}
	case refused, denied:
		if c == denied && !errors.Is(err, simba.ErrAccessDenied) {
			return "want errors.Is(err, simba.ErrAccessDenied), permanent"
		}
		if errors.Is(err, simba.ErrUnavailable) || errors.Is(err, simba.ErrInvalidOption) || spi.Classify(err) != spi.Permanent {
			return "want a permanent error, neither ErrUnavailable nor ErrInvalidOption"
		}
	}
	return ""
}

// TestBadDSNs opens bad DSNs of every kind with WithPing: an unknown scheme, no scheme, malformed
// DSNs, wrong credentials (PostgreSQL, MariaDB) and unreachable servers for every scheme. Each
// fails with a one-line error that names the problem (want), never shows the password ("secret",
// "wrongpw") and has the right class.
func TestBadDSNs(t *testing.T) {
	pg := testenv.Postgres(t)
	testenv.MySQL(t)
	pgURL, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir", "simba.db")
	for _, tc := range []struct {
		name, dsn string
		class     class
		want      []string // each must appear in the message
	}{
		{"unknown scheme", "foo://u:secret@x", invalid, []string{`unknown scheme "foo"`, "postgres://", "redis+sentinel://", "zk://"}},
		{"no scheme", "u:secret@tcp(h:3306)/db", invalid, []string{"no scheme"}},
		{"keyword DSN", "host=h password=secret", invalid, []string{"no scheme"}},
		{"malformed postgres", "postgres://%zz", invalid, []string{"invalid percent-encoded"}},
		{"malformed postgres password", "postgres://u:secret@h:port/db", invalid, []string{"postgres", "u:xxxxx@h"}},
		{"malformed mysql", "mysql://u:secret@h:3306", invalid, []string{"name one database"}},
		{"malformed sqlite", "sqlite://", invalid, []string{"no file path"}},
		{"sqlite in memory", "sqlite://:memory:", invalid, []string{"in-memory"}},
		{"malformed redis", "redis://u:secret@h:99999", invalid, []string{"bad port"}},
		{"malformed redis cluster", "redis+cluster://u:secret@h1", invalid, []string{`"h1" needs host:port`}},
		{"redis sentinel without master", "redis+sentinel://u:secret@h:26379", invalid, []string{"name the master"}},
		{"malformed zk", "zk://u:secret@h:2181?nope=1", invalid, []string{`unknown parameter "nope"`}},
		{"zk tickTime not positive", "zk://u:secret@h:2181?tickTime=-2s", invalid, []string{`tickTime "-2s"`, "positive"}},
		{"malformed etcd", "etcd://u:secret@h:2379?nope=1", invalid, []string{`unknown parameter "nope"`}},
		{"wrong password postgres", "postgres://nobody:secret@" + pgURL.Host + "/test", denied, []string{"nobody", pgURL.Host, "authentication refused"}},
		{"wrong password mariadb", "mysql://root:wrongpw@127.0.0.1:3306/test", denied, []string{"Access denied", "root", "authentication refused"}},
		{"unreachable postgres", "postgres://u:secret@127.0.0.1:1/test", unavailable, []string{"127.0.0.1:1", "connection refused"}},
		{"unreachable postgresql", "postgresql://u:secret@127.0.0.1:1/test?sslmode=disable", unavailable, []string{"127.0.0.1:1", "connection refused"}},
		{"unreachable mysql", "mysql://u:secret@127.0.0.1:1/test", unavailable, []string{"127.0.0.1:1", "connection refused"}},
		{"unopenable sqlite", "sqlite://" + missing, refused, []string{"unable to open database file", missing}},
		{"unreachable redis", "redis://u:secret@127.0.0.1:1", unavailable, []string{"127.0.0.1:1", "connection refused"}},
		{"unreachable rediss", "rediss://u:secret@127.0.0.1:1", unavailable, []string{"127.0.0.1:1", "connection refused"}},
		{"unreachable redis cluster", "redis+cluster://u:secret@127.0.0.1:1,127.0.0.1:2", unavailable, []string{"127.0.0.1:1", "connection refused"}},
		{"unreachable redis sentinel", "redis+sentinel://u:secret@127.0.0.1:1/mymaster", unavailable, []string{"127.0.0.1:1", "sentinel"}},
		{"unreachable zk", "zk://u:secret@127.0.0.1:1", unavailable, []string{"127.0.0.1:1", "connection refused"}},
		{"unreachable zk+tls", "zk+tls://u:secret@127.0.0.1:1", unavailable, []string{"127.0.0.1:1", "connection refused"}},
		{"unreachable etcd", "etcd://u:secret@127.0.0.1:1", unavailable, []string{"127.0.0.1:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b, err := open.Open(ctx, tc.dsn, open.WithPing())
			if err == nil {
				b.Close()
				t.Fatalf("Open(%q) succeeded", tc.dsn)
			}
			msg := err.Error()
			t.Logf("%s", msg)
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, pw := range []string{"secret", "wrongpw"} {
				if strings.Contains(msg, pw) {
					t.Errorf("error shows the password %q: %s", pw, msg)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not say %q: %s", w, msg)
				}
			}
			if why := tc.class.check(err); why != "" {
				t.Errorf("%s: %v (class %v)", why, err, spi.Classify(err))
			}
			if strings.Count(msg, "simba:") > 1 {
				t.Errorf("error repeats the simba: prefix: %s", msg)
			}
		})
	}
}

// TestOpenDoesNoIO: without WithPing (or WithAutoMigrate), Open of an unreachable server
// returns a backend at once, as the backends' constructors do; the first call fails retryably.
func TestOpenDoesNoIO(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:secret@127.0.0.1:1/test", "mysql://u:secret@127.0.0.1:1/test",
		"redis://127.0.0.1:1", "redis+cluster://127.0.0.1:1", "redis+sentinel://127.0.0.1:1/m",
		"zk://u:secret@127.0.0.1:1", "etcd://u:secret@127.0.0.1:1",
	} {
		b, err := open.Open(context.Background(), dsn)
		if err != nil {
			t.Errorf("Open(%q): %v", dsn, err)
			continue
		}
		if err := b.Close(); err != nil {
			t.Errorf("Close(%q): %v", dsn, err)
		}
	}
}

// TestOptions: option errors match simba.ErrInvalidOption and name the problem.
func TestOptions(t *testing.T) {
	ctx := context.Background()
	if _, err := open.Open(ctx, "redis://127.0.0.1:1", open.WithLogger(nil)); !errors.Is(err, simba.ErrInvalidOption) {
		t.Errorf("WithLogger(nil) = %v, want ErrInvalidOption", err)
	}
	sqlite := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	_, err := open.Open(ctx, sqlite, open.WithTLS(&tls.Config{}))
	if !errors.Is(err, simba.ErrInvalidOption) || !strings.Contains(err.Error(), "set TLS in the DSN") {
		t.Errorf("WithTLS with a SQL DSN = %v, want ErrInvalidOption saying to set TLS in the DSN", err)
	}
	for _, dsn := range []string{"redis://127.0.0.1:1", "zk://127.0.0.1:1", "redis+sentinel://127.0.0.1:1/m", "etcd://127.0.0.1:1"} {
		b, err := open.Open(ctx, dsn, open.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12}), open.WithAutoMigrate())
		if err != nil {
			t.Errorf("Open(%q, WithTLS, WithAutoMigrate): %v", dsn, err)
			continue
		}
		b.Close()
	}
	// The scheme is case-insensitive.
	b, err := open.Open(ctx, "SQLite://"+filepath.Join(t.TempDir(), "y.db"))
	if err != nil {
		t.Fatalf("SQLite://: %v", err)
	}
	b.Close()
}

// TestOpenEveryScheme opens each backend family by DSN against the real servers (a temporary
// SQLite file, PostgreSQL, MariaDB, Redis standalone, Redis Cluster, a private Redis Sentinel
// and ZooKeeper), with WithPing, then opens and closes a session through the SPI and closes the
// backend.
func TestOpenEveryScheme(t *testing.T) {
	dsns := map[string]func(t *testing.T) (string, []open.Option){
		"sqlite": func(t *testing.T) (string, []open.Option) {
			return "sqlite://" + filepath.Join(t.TempDir(), "simba.db"), []open.Option{open.WithAutoMigrate()}
		},
		"sqlite relative": func(t *testing.T) (string, []open.Option) {
			dir := t.TempDir()
			t.Chdir(dir)
			return "sqlite://simba.db", []open.Option{open.WithAutoMigrate()}
		},
		"postgres": func(t *testing.T) (string, []open.Option) {
			return testenv.Postgres(t), []open.Option{open.WithAutoMigrate()}
		},
		"mysql": func(t *testing.T) (string, []open.Option) {
			return mysqlURL(t, testenv.MySQL(t)), []open.Option{open.WithAutoMigrate()}
		},
		"redis": func(t *testing.T) (string, []open.Option) {
			return "redis://" + testenv.Redis(t), nil
		},
		"redis+cluster": func(t *testing.T) (string, []open.Option) {
			return "redis+cluster://" + strings.Join(testenv.RedisCluster(t), ","), nil
		},
		"redis+sentinel": func(t *testing.T) (string, []open.Option) {
			sentinel := startSentinel(t)
			return "redis+sentinel://" + sentinel + "/simba-open-test", nil
		},
		"zk": func(t *testing.T) (string, []open.Option) {
			return "zk://simba:open@" + strings.Join(testenv.ZooKeeper(t), ",") + "/simba-open-test", nil
		},
		"zk tickTime": func(t *testing.T) (string, []open.Option) {
			// The shared server's tickTime (.ci/zoo.cfg): sessions ask for TTL − 200 ms.
			return "zk://simba:open@" + strings.Join(testenv.ZooKeeper(t), ",") + "/simba-open-test?tickTime=200ms", nil
		},
		"etcd": func(t *testing.T) (string, []open.Option) {
			return "etcd://" + strings.Join(testenv.Etcd(t), ",") + "/simba-open-test", nil
		},
	}
	for name, make := range dsns {
		t.Run(name, func(t *testing.T) {
			dsn, opts := make(t)
			var logs testenv.LogBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b, err := open.Open(ctx, dsn, append(opts, open.WithPing(), open.WithLogger(logs.Logger()))...)
			if err != nil {
				t.Fatalf("Open(%q): %v", dsn, err)
			}
			s, err := b.OpenSession(ctx, "open-test", 5*time.Second)
			if err != nil {
				b.Close()
				t.Fatalf("OpenSession: %v", err)
			}
			if s.ID == "" || s.Remaining <= 0 || s.Remaining > 5*time.Second {
				t.Errorf("OpenSession = %+v", s)
			}
			if err := b.CloseSession(ctx, s.ID); err != nil {
				t.Errorf("CloseSession: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if _, err := b.OpenSession(ctx, "open-test", 5*time.Second); !errors.Is(err, simba.ErrClosed) {
				t.Errorf("OpenSession after Close = %v, want ErrClosed", err)
			}
			if name == "redis+sentinel" && !strings.Contains(logs.String(), "appendonly") {
				// The private master runs without AOF: the backend warns through WithLogger's logger.
				t.Errorf("the durability warning did not go to WithLogger's logger; logged: %q", logs.String())
			}
		})
	}
}

// mysqlURL turns testenv's go-sql-driver DSN into a mysql:// URL.
func mysqlURL(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testenv MySQL DSN: %v", err)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

// startSentinel starts, for this test only, a Redis master and a Sentinel monitoring it as
// "simba-open-test" (never touching the shared servers), and returns the Sentinel's address.
// It stops both when the test ends. It skips when redis-server is missing (failing under
// SIMBA_REQUIRE_SERVICES=1).
func startSentinel(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "redis-server", err.Error())
	}
	dir := t.TempDir()
	master, sentinel := freePort(t), freePort(t)
	start := func(name string, args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			log.Close()
		})
	}
	start("master", "--port", strconv.Itoa(master), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	waitPort(t, master, filepath.Join(dir, "master.log"))
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor simba-open-test 127.0.0.1 %d 1\nsentinel down-after-milliseconds simba-open-test 60000\n", sentinel, master)), 0o600); err != nil {
		t.Fatal(err)
	}
	start("sentinel", conf, "--sentinel")
	waitPort(t, sentinel, filepath.Join(dir, "sentinel.log"))
	return "127.0.0.1:" + strconv.Itoa(sentinel)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitPort waits (up to 10 s) until a server accepts connections on port, failing with its log.
func waitPort(t *testing.T, port int, logFile string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logFile)
			t.Fatalf("port %d never answered: %v\n%s", port, err, out)
		}
		<-tick.C
	}
}

// TestHostThatCannotBeOne: a DSN whose host cannot be a host name or an IP address (the
// commonest: go-sql-driver's tcp(host:port) form written inside a URL) fails at Open with
// ErrInvalidOption on every scheme, as a port out of range does, rather than returning a
// backend whose every connect fails as an outage ("lookup tcp(localhost: no such host"), which
// a client retries for ever. Hosts that are real stay accepted (Open does no I/O here).
func TestHostThatCannotBeOne(t *testing.T) {
	for _, dsn := range []string{
		"mysql://root:secret@tcp(localhost:3306/test",
		"mysql://root:secret@localhost:99999/test",
		"mysql://root@db host:3306/test",
		"postgres://u:secret@tcp(localhost:5432/test",
		"postgres://u:secret@h1,tcp(h2:5432/test",
		"redis://u:secret@tcp(localhost:6379",
		"redis://u:secret@tcp(localhost",
		"redis+cluster://u:secret@localhost:7001,tcp(x:7002",
		"zk://u:secret@tcp(localhost:2181",
		"etcd://u:secret@tcp(localhost:2379",
		"etcd://u:secret@h<1>:2379",
	} {
		b, err := open.Open(context.Background(), dsn)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded", dsn)
			continue
		}
		if !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOption", dsn, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) shows the password: %v", dsn, err)
		}
		if strings.Contains(dsn, "tcp(") && !strings.Contains(err.Error(), "go-sql-driver's own DSN form") {
			t.Errorf("Open(%q) = %v, want the tcp(host:port) hint", dsn, err)
		}
	}
	for _, dsn := range []string{
		"mysql://root@db_1:3306/test",
		"mysql://root@[::1]:3306/test",
		"mysql://root@[fe80::1%25eth0]:3306/test",
		"postgres://u@db-1.internal:5432/test",
		"postgres:///test?host=/var/run/postgresql",
		"redis://[::1]:6379",
		"redis://cache_1",
		"zk://bücher.example:2181",
		"etcd://10.0.0.1:2379,10.0.0.2",
	} {
		b, err := open.Open(context.Background(), dsn)
		if err != nil {
			t.Errorf("Open(%q) = %v, want a backend", dsn, err)
			continue
		}
		b.Close()
	}
}

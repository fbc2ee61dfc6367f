// Package servers starts the private servers a chaos run may kill and restart: Redis with AOF
// (appendfsync always), PostgreSQL (initdb, postgres), MariaDB (mariadb-install-db, mariadbd),
// ZooKeeper and etcd, each on a spare port with a data directory of its own. The shared servers
// the tests use are never touched.
package servers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is one private server process.
type Server struct {
	// Kind is redis, postgres, mariadb, zookeeper or etcd.
	Kind string
	// Port is the server's TCP port on 127.0.0.1.
	Port int
	// Durable reports whether an acknowledged write survives a SIGKILL.
	Durable bool
	// Keep leaves the data directory in place on Close (a run whose check failed keeps the
	// server's files, e.g. Redis's AOF, beside its history for the post-mortem).
	Keep bool

	dir  string
	argv []string
	cred *syscall.Credential
	env  []string
	// ready, if set, tells whether a server whose port is open serves yet.
	ready func() bool
	// startWithin bounds Start (0: the package's startWithin).
	startWithin time.Duration
	cmd         *exec.Cmd
	log         *os.File
	// killed is when Kill last killed the server (zero: never): a process started within
	// exitGrace of it that exits is started again (see Start).
	killed time.Time
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// FreePort returns a port nothing listens on now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startWithin is how long Start waits for a server to serve (its port open and, if it has a
// readiness check, the check passed) unless Server.startWithin says otherwise.
const startWithin = 60 * time.Second

// exitGrace is how long after Kill a process that exits before it serves is started again:
// what the killed one left may still be going (a killed postmaster's children exit when they
// notice, and until then a new postmaster finds its shared memory in use and exits).
const exitGrace = 10 * time.Second

// errExited marks startOnce's error for a process that exited before it served.
var errExited = errors.New("exited before it served")

// Start starts the process and waits until its port accepts connections and, if the server has
// a readiness check, the check passes: for startWithin at most, or until ctx ends. A process
// that exits before it serves fails Start at once, with its exit status, unless it started
// within exitGrace of a Kill: it is then started again (e.g. a killed postmaster's children
// still exiting). Every exit was started again until startWithin ran out, so a server that
// could not start (a bad flag, a data directory it refuses) cost 60 s of retries before its
// error. On failure the process is killed and the error names the server, its port and the
// end of its log.
func (s *Server) Start(ctx context.Context) error {
	within := s.startWithin
	if within <= 0 {
		within = startWithin
	}
	deadline := time.Now().Add(within)
	for {
		err := s.startOnce(ctx, deadline)
		if err == nil {
			return nil
		}
		again := errors.Is(err, errExited) && !s.killed.IsZero() && time.Since(s.killed) < exitGrace
		if !again || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s on port %d: %w; its log %s ends:\n%s", s.Kind, s.Port, err, s.log.Name(), s.logTail())
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logTailBytes is how much of a server's log a failed Start quotes.
const logTailBytes = 2048

// logTail returns the last logTailBytes of the server's log, from a line's start if it can.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.log.Name())
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// startOnce starts the process and waits until it serves, it exits, ctx ends or deadline
// passes; in the last two cases it kills the process. The readiness check's failures were
// not bounded: a server whose port opened but that never passed its check (a PostgreSQL
// that never left recovery, an etcd with no leader) was waited for forever.
func (s *Server) startOnce(ctx context.Context, deadline time.Time) error {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.Env = append(os.Environ(), s.env...)
	cmd.SysProcAttr = serverAttr(s.cred)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	open := false // the port accepted a connection
	for {
		select {
		case err := <-exited:
			status := "exit status 0"
			if err != nil {
				status = err.Error() // "exit status 3", "signal: killed"
			}
			return fmt.Errorf("%w: %s", errExited, status)
		case <-ctx.Done():
			kill()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
			c.Close()
			open = true
			if s.ready == nil || s.ready() {
				s.cmd = cmd
				go func() { <-exited }()
				return nil
			}
		}
		if time.Now().After(deadline) {
			kill()
			if open {
				return errors.New("its port opened, but it never passed its readiness check")
			}
			return errors.New("its port never opened")
		}
	}
}

// retry runs fn until it succeeds (a server that opened its port may still be starting up),
// for 30 s at most; on failure it kills the server.
func (s *Server) retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Kill()
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Kill sends SIGKILL to the server's process group and waits until its port is closed.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd = nil
	s.killed = time.Now()
	for range 100 {
		c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(50 * time.Millisecond)
	}
}

// Dir is the server's data directory.
func (s *Server) Dir() string { return s.dir }

// Close kills the server and removes its data, unless Keep is set.
func (s *Server) Close() {
	s.Kill()
	s.log.Close()
	if !s.Keep {
		os.RemoveAll(s.dir)
	}
}

func newServer(kind, root string, durable bool) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%d", kind, port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(root, fmt.Sprintf("%s-%d.log", kind, port)))
	if err != nil {
		return nil, err
	}
	return &Server{Kind: kind, Port: port, Durable: durable, dir: dir, log: log}, nil
}

// Redis starts a private Redis; durable means AOF with appendfsync always, else no persistence.
func Redis(ctx context.Context, root string, durable bool) (*Server, error) {
	s, err := newServer("redis", root, durable)
	if err != nil {
		return nil, err
	}
	aof := "no"
	if durable {
		aof = "yes"
	}
	s.argv = []string{"redis-server", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--appendonly", aof, "--appendfsync", "always", "--save", "", "--daemonize", "no"}
	return s, s.Start(ctx)
}

func lookupCred(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func chown(dir string, c *syscall.Credential) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, int(c.Uid), int(c.Gid))
	})
}

func run(cred *syscall.Credential, log *os.File, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w (log %s)", strings.Join(argv, " "), err, log.Name())
	}
	return nil
}

// pgBin finds PostgreSQL's server binaries (Debian: /usr/lib/postgresql/N/bin).
func pgBin() (string, error) {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(m) == 0 {
		return "", errors.New("initdb not found under /usr/lib/postgresql/*/bin")
	}
	return filepath.Dir(m[len(m)-1]), nil
}

// Postgres starts a private PostgreSQL (fsync on) with a database named test, trust auth.
func Postgres(ctx context.Context, root string) (*Server, error) {
	return postgres(ctx, root, "")
}

// PostgresPassword is Postgres with password authentication (scram-sha-256) on TCP, the
// superuser postgres's password being password (not empty): a server where a wrong password
// is refused (28P01), which the shared one, trust on 127.0.0.1, never refuses.
func PostgresPassword(ctx context.Context, root, password string) (*Server, error) {
	if password == "" {
		return nil, errors.New("servers: PostgresPassword needs a password")
	}
	return postgres(ctx, root, password)
}

// postgres starts a private PostgreSQL: trust authentication when password is empty,
// otherwise scram-sha-256 on TCP (the Unix socket, which createdb uses, stays trust).
func postgres(ctx context.Context, root, password string) (*Server, error) {
	s, err := newServer("postgres", root, true)
	if err != nil {
		return nil, err
	}
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if s.cred, err = lookupCred("postgres"); err != nil {
			return nil, err
		}
		if err := chown(s.dir, s.cred); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := []string{filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"}
	if password != "" {
		pwfile := filepath.Join(s.dir, "pwfile")
		if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
			return nil, err
		}
		if s.cred != nil {
			if err := os.Chown(pwfile, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return nil, err
			}
		}
		initdb = append(initdb, "--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile="+pwfile)
	}
	if err := run(s.cred, s.log, initdb...); err != nil {
		return nil, err
	}
	s.argv = []string{filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.Port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "max_connections=200"}
	// PostgreSQL listens before it serves: after a SIGKILL it first syncs its data directory
	// and replays its WAL, refusing connections ("the database system is starting up") for
	// seconds on a loaded machine (4 s seen, 2026-12-05). A restart healed at the open port
	// judged the clients' liveness from a time the server did not serve yet: it serves once
	// pg_isready says it accepts connections.
	isready := filepath.Join(bin, "pg_isready")
	s.ready = func() bool {
		// Not Postgres's ctx: the check runs at every Start, after that ctx may have ended.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return exec.CommandContext(ctx, isready, "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "postgres").Run() == nil
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, s.retry(ctx, func() error {
		host := "127.0.0.1"
		if password != "" {
			host = s.dir // the Unix socket (-k), trust
		}
		return run(s.cred, s.log, filepath.Join(bin, "createdb"), "-h", host, "-p", strconv.Itoa(s.Port), "-U", "postgres", "test")
	})
}

// MariaDB starts a private MariaDB (InnoDB, flushed at each commit) with a database named
// test; root has no password.
func MariaDB(ctx context.Context, root string) (*Server, error) {
	s, err := newServer("mariadb", root, true)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(s.dir, "data")
	args := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=mysql")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		c, err := lookupCred("mysql")
		if err != nil {
			return nil, err
		}
		if err := chown(s.dir, c); err != nil {
			return nil, err
		}
	}
	if err := run(nil, s.log, append([]string{"mariadb-install-db"}, args...)...); err != nil {
		return nil, err
	}
	s.argv = []string{"mariadbd", "--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1", "--socket=" + filepath.Join(s.dir, "mysqld.sock"), "--skip-grant-tables",
		"--innodb-flush-log-at-trx-commit=1", "--max-connections=300", "--skip-name-resolve"}
	if os.Geteuid() == 0 {
		s.argv = append(s.argv, "--user=mysql")
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, s.retry(ctx, func() error {
		return run(nil, s.log, "mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", strconv.Itoa(s.Port), "-u", "root",
			"-e", "CREATE DATABASE IF NOT EXISTS test")
	})
}

// ZooKeeper starts a private single ZooKeeper server (tickTime 200 ms, as .ci/zoo.cfg).
func ZooKeeper(ctx context.Context, root string) (*Server, error) {
	s, err := zkServer(root)
	if err != nil {
		return nil, err
	}
	if err := s.configureZK(""); err != nil {
		return nil, err
	}
	return s, s.Start(ctx)
}

// ZooKeeperEnsemble starts a private ensemble of three servers (as .ci/zk-ensemble.sh, on spare
// ports) and waits until each serves.
func ZooKeeperEnsemble(ctx context.Context, root string) ([]*Server, error) {
	var ss []*Server
	var peers strings.Builder
	for i := range 3 {
		s, err := zkServer(root)
		if err != nil {
			return nil, err
		}
		quorum, err := FreePort()
		if err != nil {
			return nil, err
		}
		election, err := FreePort()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i+1, quorum, election)
		ss = append(ss, s)
	}
	for i, s := range ss {
		if err := os.WriteFile(filepath.Join(s.dir, "data", "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
			return nil, err
		}
		if err := s.configureZK(peers.String()); err != nil {
			return nil, err
		}
	}
	errs := make(chan error, len(ss))
	for _, s := range ss {
		go func() { errs <- s.Start(ctx) }()
	}
	var first error
	for range ss {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		for _, s := range ss {
			s.Close()
		}
		return nil, first
	}
	return ss, nil
}

// ZKMode returns what srvr reports as the server's mode (standalone, leader, follower), or "".
func (s *Server) ZKMode() string {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return ""
	}
	b, _ := io.ReadAll(c)
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

func zkServer(root string) (*Server, error) {
	s, err := newServer("zookeeper", root, true)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o755); err != nil {
		return nil, err
	}
	return s, nil
}

// configureZK writes the server's zoo.cfg (peers: the server.N lines of an ensemble) and its
// command line.
func (s *Server) configureZK(peers string) error {
	cfg := filepath.Join(s.dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`tickTime=200
initLimit=10
syncLimit=5
minSessionTimeout=400
maxSessionTimeout=60000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr
%s`, filepath.Join(s.dir, "data"), s.Port, peers)), 0o644); err != nil {
		return err
	}
	zk := os.Getenv("ZKSERVER")
	if zk == "" {
		zk = "/usr/share/zookeeper/bin/zkServer.sh"
	}
	// start-foreground keeps the JVM our child, so Kill reaches it.
	s.argv = []string{zk, "start-foreground", cfg}
	s.env = []string{"ZOO_LOG_DIR=" + s.dir}
	// ZooKeeper accepts connections before it serves: it serves once srvr reports a mode.
	s.ready = func() bool { return s.ZKMode() != "" }
	return nil
}

// Etcd starts a private single-member etcd (the binary of $SIMBA_TEST_ETCD_BIN, else etcd on
// the PATH, as the backend's tests find it) with the short election timeout of the backend's
// cluster test (heartbeat 50 ms, election 500 ms), so that its minimum lease TTL is 1 s and a
// session gets the TTL it asks for. Its data directory (WAL fsynced before a write is
// acknowledged) stays across a restart: a restart is a real one, not a wipe.
func Etcd(ctx context.Context, root string) (*Server, error) {
	s, err := newServer("etcd", root, true)
	if err != nil {
		return nil, err
	}
	bin := os.Getenv("SIMBA_TEST_ETCD_BIN")
	if bin == "" {
		bin = "etcd"
	}
	if bin, err = exec.LookPath(bin); err != nil {
		return nil, fmt.Errorf("etcd server binary: %w", err)
	}
	peerPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	client := "http://" + s.Addr()
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	name := fmt.Sprintf("chaos-%d", s.Port)
	s.argv = []string{bin, "--name", name, "--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", name + "=" + peer, "--initial-cluster-state", "new",
		"--initial-cluster-token", name,
		"--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap", "--log-level", "warn"}
	// etcd opens its client port before it serves: it serves once /health says so (the
	// member is leader of its one-member cluster).
	s.ready = func() bool { return etcdHealthy(s.Addr()) }
	return s, s.Start(ctx)
}

// etcdHealthy reports whether the etcd at addr answers /health with health true.
func etcdHealthy(addr string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"health":"true"`)
}

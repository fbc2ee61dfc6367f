package servers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// etcdCall posts body to the etcd gRPC gateway's path (etcd's JSON API) and decodes the
// answer into out.
func etcdCall(t *testing.T, s *Server, path string, body, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post("http://"+s.Addr()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s: %s", path, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, raw)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestEtcdRestartKeepsData: the private etcd grants a 1 s lease as asked (its short election
// timeout puts its minimum lease TTL at 1 s, the harness's default TTL), and a write it
// acknowledged survives a SIGKILL and a start again: the chaos run's restart is a real
// restart, not a wipe.
func TestEtcdRestartKeepsData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Etcd(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var grant struct {
		TTL string `json:"TTL"`
	}
	etcdCall(t, s, "/v3/lease/grant", map[string]any{"TTL": 1}, &grant)
	if grant.TTL != "1" {
		t.Fatalf("a 1 s lease was granted TTL %q, want 1 (the server's minimum lease TTL is above 1 s)", grant.TTL)
	}

	var put struct{}
	etcdCall(t, s, "/v3/kv/put", map[string]string{"key": b64("chaos-key"), "value": b64("kept")}, &put)
	s.Kill()
	if etcdHealthy(s.Addr()) {
		t.Fatal("etcd still answers after Kill")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Kvs []struct {
			Value string `json:"value"`
		} `json:"kvs"`
	}
	etcdCall(t, s, "/v3/kv/range", map[string]string{"key": b64("chaos-key")}, &got)
	if len(got.Kvs) != 1 || got.Kvs[0].Value != b64("kept") {
		t.Fatalf("after the restart the key reads %+v, want %q: the restart lost the data", got.Kvs, "kept")
	}
}

// TestPostgresRestartServesAtStart: Start of a PostgreSQL killed with SIGKILL returns once
// the server serves queries, not once its port opens. PostgreSQL listens while it still syncs
// its data directory and replays its WAL, refusing connections ("the database system is
// starting up"); a chaos run that healed a restart at the open port judged the clients'
// liveness from a time the server did not serve yet (seed 1205, 2026-12-05: two liveness
// failures, recovery still running 2.4 s and 4.7 s after the heal).
func TestPostgresRestartServesAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The server runs as the postgres user when the test runs as root: it must reach its
	// directory (t.TempDir and its parent are private to the test's user).
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Postgres(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dsn := "postgres://postgres@" + s.Addr() + "/test?sslmode=disable"
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Some WAL for the recovery to replay.
	if _, err := conn.Exec(ctx, "CREATE TABLE chaos_t AS SELECT generate_series(1, 20000) AS n"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	for i := range 3 {
		s.Kill()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("restart %d: the first connection after Start failed: %v", i+1, err)
		}
		var n int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM chaos_t").Scan(&n)
		conn.Close(ctx)
		if err != nil || n != 20000 {
			t.Fatalf("restart %d: the first query after Start: %d rows, %v; want 20000", i+1, n, err)
		}
	}
}

// TestStartGivesUpOnAServerNeverReady: a server whose port opens but whose readiness check
// never passes is killed once Start's time is up, and Start says which server, on which port,
// and how its log ends. Start waited for it forever (with a ctx that never ends, as the
// harness's own).
func TestStartGivesUpOnAServerNeverReady(t *testing.T) {
	s, err := newServer("fake", t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", s.Addr()) // the port is open: the check is what never passes
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s.argv = []string{"sh", "-c", "echo $$ > pid; echo fake server starting; exec sleep 600"}
	s.ready = func() bool { return false }
	s.startWithin = 500 * time.Millisecond
	err = s.Start(context.Background())
	if err == nil {
		t.Fatal("Start of a server never ready succeeded")
	}
	t.Logf("Start: %v", err)
	for _, want := range []string{"fake on port " + strconv.Itoa(s.Port), "readiness check", "fake server starting"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error %q does not say %q", err, want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(s.Dir(), "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the server's process %d after Start gave up: %v, want it gone", pid, err)
	}
}

// TestStartFailsAtOnceOnAnExit: a server whose process exits before its port opens (a bad
// flag, a data directory it refuses) fails Start at once, started once, and the error gives
// its exit status and how its output ends. Start started it again every 200 ms until its time
// was up (60 s by default; 3 s here, in which the old Start started it a dozen times).
func TestStartFailsAtOnceOnAnExit(t *testing.T) {
	s, err := newServer("fake", t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.argv = []string{"sh", "-c", "echo started >> starts; echo 'fake: unknown flag --nope'; exit 3"}
	s.startWithin = 3 * time.Second
	err = s.Start(context.Background())
	if err == nil {
		t.Fatal("Start of a server that exits succeeded")
	}
	t.Logf("Start: %v", err)
	for _, want := range []string{"fake on port " + strconv.Itoa(s.Port), "exit status 3", "fake: unknown flag --nope"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error %q does not say %q", err, want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(s.Dir(), "starts"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "started"); n != 1 {
		t.Errorf("the server was started %d times, want 1", n)
	}
}

// TestStartAgainAfterKillRetriesAnExit: within exitGrace of a Kill, a process that exits
// before it serves is started again (what the killed server left may still be going), and
// Start succeeds once one serves.
func TestStartAgainAfterKillRetriesAnExit(t *testing.T) {
	s, err := newServer("fake", t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The first start exits; the second serves (the port is the test's listener, and the
	// readiness check passes from the second start on).
	s.argv = []string{"sh", "-c", "echo started >> starts; [ -e once ] || { touch once; exit 1; }; exec sleep 600"}
	s.ready = func() bool {
		raw, _ := os.ReadFile(filepath.Join(s.Dir(), "starts"))
		return strings.Count(string(raw), "started") >= 2
	}
	s.killed = time.Now()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(s.Dir(), "starts"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "started"); n != 2 {
		t.Errorf("the server was started %d times, want 2", n)
	}
}

// TestPostgresRestartAfterItsCreationCtxEnded: the readiness check of a restart must not use
// the ctx Postgres was created with. A harness that starts its server with a bounded ctx (and
// cancels it once the server serves) then kills and restarts it: the check (pg_isready run
// under that ended ctx) failed at once every time, so Start waited out its minute and killed a
// server that had been serving for a minute (trial29's soak: PostgreSQL ready 0.1 s after the
// restart, killed 60 s later, the workers cut off for the rest of the run).
func TestPostgresRestartAfterItsCreationCtxEnded(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	created, cancelCreated := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := Postgres(created, root)
	cancelCreated()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.startWithin = 20 * time.Second
	s.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("restart after the creation ctx ended: %v", err)
	}
}

// Package readonly holds tests of the SQL backends against private servers the tests switch
// read-only (a PostgreSQL in default_transaction_read_only, a MariaDB with read_only set), as a
// failover that leaves a DSN's address on a standby or replica does. They never touch the
// shared servers.
package readonly

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// serverRoot is a directory for a private server's data that the server's own user (postgres,
// mysql: the test may run as root) can reach.
func serverRoot(t *testing.T) string {
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// probeCounter is the backend, counting the client's outage probes (Members of
// wire.ProbeGroup) that succeeded: each is taken for a sign that the server answers again.
type probeCounter struct {
	*simbasql.Backend
	answered atomic.Int32
}

func (p *probeCounter) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	ids, err := p.Backend.Members(ctx, group)
	if err == nil && group == wire.ProbeGroup {
		p.answered.Add(1)
	}
	return ids, err
}

// readOnlyOutage runs a client holding a lock on b through a spell in which setReadOnly(true)
// made the server refuse writes, until setReadOnly(false), and checks: the outage's WARN lines
// name read-only; no outage probe succeeds while the server refuses writes (each success was
// taken for the server's return: the client stepped EvReachable and retried its session's
// calls at once, to fail again); and the outage ends with one "reachable again" once the
// server takes writes, and a probe or the session's call succeeds.
func readOnlyOutage(t *testing.T, sb *simbasql.Backend, setReadOnly func(bool)) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := sb.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := &probeCounter{Backend: sb}
	var logs testenv.LogBuffer
	c, err := simba.New(b, simba.WithOwner("ro"), simba.WithTTL(3*time.Second), simba.WithLogger(logs.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Lock(ctx, "readonly.lock"); err != nil {
		t.Fatal(err)
	}
	lines := func(what string) []string {
		var out []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, what) {
				out = append(out, l)
			}
		}
		return out
	}
	waitLine := func(what string, within time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(within); len(lines(what)) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q line within %v; log:\n%s", what, within, logs.String())
			}
		}
	}
	setReadOnly(true)
	before := b.answered.Load()
	waitLine("level=WARN", 30*time.Second)
	// Four seconds read-only: more than the session's TTL, a dozen probes (every 250 ms at
	// most at TTL 3 s) and the session's reopen attempts.
	time.Sleep(4 * time.Second)
	during := lines("reachable again")
	answered := b.answered.Load() - before
	setReadOnly(false)
	waitLine("reachable again", 30*time.Second)
	time.Sleep(2 * time.Second) // what a flapping outage would add
	warns := lines("level=WARN")
	var named int
	for _, l := range warns {
		if strings.Contains(l, "server is read-only") && strings.Contains(l, "check SELECT") {
			named++
		}
	}
	if named == 0 {
		t.Errorf("no WARN line of the outage says the server is read-only and what to check:\n%s", strings.Join(warns, "\n"))
	}
	if len(during) > 0 {
		t.Errorf("%d \"reachable again\" lines while the server refused writes, want none:\n%s", len(during), strings.Join(during, "\n"))
	}
	if answered > 0 {
		t.Errorf("%d outage probes succeeded while the server refused writes, want none (each one the client took for the server's return)", answered)
	}
	if got := lines("reachable again"); len(got) != 1 {
		t.Errorf("%d \"reachable again\" lines, want 1 (one outage, ended once the server took writes):\n%s", len(got), strings.Join(got, "\n"))
	}
	if got := lines(`msg="simba backend error"`); len(got) > 0 && !strings.Contains(got[0], "level=WARN") {
		t.Errorf("the outage's first line is not a WARN: %s", got[0])
	}
	if t.Failed() {
		t.Logf("WARN and INFO lines:\n%s\n%s", strings.Join(warns, "\n"), strings.Join(lines("level=INFO"), "\n"))
	}
}

// TestPostgresReadOnlyIsOneOutage: a private PostgreSQL switched to
// default_transaction_read_only (ALTER SYSTEM, pg_reload_conf) refuses every write (25006)
// while reads succeed, as a hot standby does after a failover behind the same address. The
// client's outage is one outage whose error names read-only, and it ends with one "reachable
// again" once the server takes writes again. The probe (a read) succeeded throughout, so the
// client took the server for reachable again at each probe, and the error said nothing of
// read-only (trial 25).
func TestPostgresReadOnlyIsOneOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := servers.Postgres(ctx, serverRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dsn := "postgres://postgres@" + s.Addr() + "/test?sslmode=disable"
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	// The admin's own session writes whatever the server's default.
	if _, err := admin.Exec(ctx, "SET default_transaction_read_only = off"); err != nil {
		t.Fatal(err)
	}
	b, err := simbasql.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	readOnlyOutage(t, b, func(on bool) {
		stmt := "ALTER SYSTEM SET default_transaction_read_only = on"
		if !on {
			stmt = "ALTER SYSTEM RESET default_transaction_read_only"
		}
		for _, q := range []string{stmt, "SELECT pg_reload_conf()"} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	})
}

// TestMariaDBReadOnlyIsOneOutage: TestPostgresReadOnlyIsOneOutage on a private MariaDB made
// read-only with SET GLOBAL read_only, which refuses the writes (1290) of a user without
// READ_ONLY ADMIN (the backend connects as one; the test's server starts without grant tables,
// which the test loads first).
func TestMariaDBReadOnlyIsOneOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := servers.MariaDB(ctx, serverRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("mysql", "root@tcp("+s.Addr()+")/test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin, err := db.Conn(ctx) // opened without grant tables: it may do anything, for good
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{
		"FLUSH PRIVILEGES", // grant tables on: read_only binds users without READ_ONLY ADMIN
		"CREATE USER 'simba'@'%'",
		"GRANT ALL PRIVILEGES ON test.* TO 'simba'@'%'",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	b, err := simbasql.Open(ctx, "mysql://simba@"+s.Addr()+"/test")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	readOnlyOutage(t, b, func(on bool) {
		q := "SET GLOBAL read_only = OFF"
		if on {
			q = "SET GLOBAL read_only = ON"
		}
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	})
}

// TestMariaDBReadOnlyAdminProbe: on a private MariaDB with read_only on, a user with READ_ONLY
// ADMIN, whose writes the setting does not bind, opens a session and passes the client's
// outage probe (Members of wire.ProbeGroup); a user without it still fails the probe with an
// error naming read-only. On the old code the probe reported the READ_ONLY ADMIN user's server
// read-only ("read_only is on") while its writes succeeded, so a client in an outage stayed in
// it until read_only went off.
func TestMariaDBReadOnlyAdminProbe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := servers.MariaDB(ctx, serverRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("mysql", "root@tcp("+s.Addr()+")/test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin, err := db.Conn(ctx) // opened without grant tables: it may do anything, for good
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{
		"FLUSH PRIVILEGES", // grant tables on: read_only binds users without READ_ONLY ADMIN
		"CREATE USER 'roadmin'@'%'",
		"GRANT ALL PRIVILEGES ON test.* TO 'roadmin'@'%'",
		"GRANT READ_ONLY ADMIN ON *.* TO 'roadmin'@'%'",
		"CREATE USER 'plain'@'%'",
		"GRANT ALL PRIVILEGES ON test.* TO 'plain'@'%'",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	open := func(user string) *simbasql.Backend {
		b, err := simbasql.Open(ctx, "mysql://"+user+"@"+s.Addr()+"/test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	roadmin, plain := open("roadmin"), open("plain")
	if err := roadmin.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := plain.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, "SET GLOBAL read_only = ON"); err != nil {
		t.Fatal(err)
	}

	sess, err := roadmin.OpenSession(ctx, "o", time.Minute)
	if err != nil {
		t.Fatalf("READ_ONLY ADMIN: OpenSession under read_only: %v, want its write to succeed", err)
	}
	defer roadmin.CloseSession(ctx, sess.ID)
	if _, err := roadmin.Members(ctx, wire.ProbeGroup); err != nil {
		t.Errorf("READ_ONLY ADMIN: the probe under read_only: %v, want it to pass (the user's writes succeed)", err)
	}
	_, err = plain.Members(ctx, wire.ProbeGroup)
	if !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), "read_only is on") {
		t.Errorf("without READ_ONLY ADMIN: the probe under read_only: %v, want an outage naming read_only", err)
	}
	if _, err := plain.OpenSession(ctx, "o", time.Minute); !errors.Is(err, spi.ErrUnavailable) {
		t.Errorf("without READ_ONLY ADMIN: OpenSession under read_only: %v, want it refused (retryable)", err)
	}
}

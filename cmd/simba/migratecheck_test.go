package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	dsnutil "github.com/simba-go/simba/internal/dsn"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
)

// closedPort returns a local port nothing listens on (one just freed).
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// migrateLine runs simba migrate -dsn dsn in the process and returns its error's line (what
// main prints) and exit status.
func migrateLine(t *testing.T, dsn string) (error, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := migrate(ctx, []string{"-dsn", dsn})
	line := ""
	if err != nil {
		line = errorLine(err)
	}
	t.Logf("simba migrate -dsn %s: %s", dsn, line)
	if err == nil {
		return nil, "", 0
	}
	return err, line, exitStatusOf(ctx, err)
}

// wantMigrateDenied checks that simba migrate -dsn dsn fails as every other command does on
// refused credentials: simba.ErrAccessDenied, one line beginning "simba: access denied: " that
// does not show pw, exit status 1.
func wantMigrateDenied(t *testing.T, dsn, pw string) {
	t.Helper()
	err, line, status := migrateLine(t, dsn)
	if !errors.Is(err, simba.ErrAccessDenied) || status != 1 || strings.ContainsAny(line, "\n\r") ||
		!strings.HasPrefix(line, "simba: access denied: ") || pw != "" && strings.Contains(line, pw) {
		t.Errorf("simba migrate -dsn %s: %q (exit %d); want simba.ErrAccessDenied on one line beginning \"simba: access denied: \", no password, exit 1",
			dsn, line, status)
	}
}

// wantMigrateUnreachable checks that simba migrate -dsn dsn (a closed port) fails with
// simba.ErrUnavailable on one line naming the address, exit status 1.
func wantMigrateUnreachable(t *testing.T, dsn, addr string) {
	t.Helper()
	err, line, status := migrateLine(t, dsn)
	if !errors.Is(err, simba.ErrUnavailable) || status != 1 || strings.ContainsAny(line, "\n\r") ||
		!strings.HasPrefix(line, "simba: ") || !strings.Contains(line, addr) {
		t.Errorf("simba migrate -dsn %s: %q (exit %d); want simba.ErrUnavailable on one line naming %s, exit 1", dsn, line, status, addr)
	}
}

// wantMigrateOK checks that the simba binary's migrate -dsn dsn exits 0 saying there is no
// schema to apply.
func wantMigrateOK(t *testing.T, dsn string) {
	t.Helper()
	stdout, stderr, status := runSimba(t, "migrate", "-dsn", dsn)
	if want := noSchemaReport(dsnutil.Redact(dsn)) + "\n"; status != 0 || stdout != want {
		t.Errorf("simba migrate -dsn %s: exit status %d, stdout %q, stderr %q; want 0 and %q", dsn, status, stdout, stderr, want)
	}
}

// TestMigrateChecksRedis: simba migrate on Redis connects and opens a session (as the other
// commands' first session would): refused credentials (an unknown ACL user, a password for a
// default user that has none) fail it with simba.ErrAccessDenied, exit 1, one line; a closed
// port with simba.ErrUnavailable; the shared server passes, saying there is nothing to apply.
// On the old code it printed "... needs no schema" and exited 0 for all of them, without
// connecting.
func TestMigrateChecksRedis(t *testing.T) {
	addr := testenv.Redis(t)
	wantMigrateDenied(t, "redis://simba_migrate_nosuch:wrongpw@"+addr+"/0", "wrongpw")
	wantMigrateDenied(t, "redis://:needlesspw@"+addr+"/0", "needlesspw")
	port := closedPort(t)
	wantMigrateUnreachable(t, fmt.Sprintf("redis://127.0.0.1:%d/0", port), fmt.Sprintf("127.0.0.1:%d", port))
	wantMigrateOK(t, "redis://"+addr+"/0")
}

// TestMigrateChecksZooKeeper: simba migrate on ZooKeeper opens a session: a chroot whose ACL
// grants creating to another digest identity only refuses a DSN without credentials and one
// with a wrong password (simba.ErrAccessDenied, exit 1), a closed port fails with
// simba.ErrUnavailable, and the owner's credentials pass. On the old code each printed
// "... needs no schema" and exited 0.
func TestMigrateChecksZooKeeper(t *testing.T) {
	servers := testenv.ZooKeeper(t)
	ch := zktest.New(t, servers, "simba-cli-migrate")
	ch.Auth("owner:0wner-pw")
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.AddAuth("digest", []byte("owner:0wner-pw")); err != nil {
		t.Fatal(err)
	}
	acl := append(zk.DigestACL(zk.PermAll, "owner", "0wner-pw"), zk.WorldACL(zk.PermRead)...)
	if _, err := conn.Create(ch.Path, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	wantMigrateDenied(t, ch.DSN("", ""), "")
	wantMigrateDenied(t, ch.DSN("owner:wr0ng-pw", ""), "wr0ng-pw")
	port := closedPort(t)
	wantMigrateUnreachable(t, fmt.Sprintf("zk://127.0.0.1:%d/simba-cli-migrate", port), fmt.Sprintf("127.0.0.1:%d", port))
	wantMigrateOK(t, ch.DSN("owner:0wner-pw", ""))
}

// TestMigrateChecksEtcd: simba migrate on etcd opens a session: a closed port fails it with
// simba.ErrUnavailable, exit 1; the shared server passes and keeps nothing under the prefix.
// (The shared server runs without authentication, which takes any credentials; etcd's refusals
// are TestAccessDenied's in backend/etcd, on a private member.) On the old code the closed
// port printed "... needs no schema" and exited 0.
func TestMigrateChecksEtcd(t *testing.T) {
	endpoints := testenv.Etcd(t)
	port := closedPort(t)
	wantMigrateUnreachable(t, fmt.Sprintf("etcd://127.0.0.1:%d/simba-cli-migrate", port), fmt.Sprintf("127.0.0.1:%d", port))
	prefix := fmt.Sprintf("simba-cli-migrate-%d", time.Now().UnixNano())
	raw, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := raw.Delete(ctx, "/"+prefix+"/", clientv3.WithPrefix()); err != nil {
			t.Errorf("deleting the test's prefix: %v", err)
		}
	})
	wantMigrateOK(t, "etcd://"+strings.Join(endpoints, ",")+"/"+prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := raw.Get(ctx, "/"+prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
		t.Logf("keys left under /%s/ after migrate: %v (err %v)", prefix, r, err)
	}
}

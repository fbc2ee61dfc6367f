package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sqlbackend "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
	"github.com/simba-go/simba/spi"
)

// statusNameScenario holds, on b, the election ledger (session "ledger-leader"), the partition
// leases ledger.0 and ledger.1 of the group ledger (session "ledger-member", also the group's
// live member), the election ledger-2 and the lock ledger.eu (session "neighbour", also the
// only member of the group ledger-2), and checks that simba status -name ledger shows ledger,
// its partitions, its group and the two sessions in them, and nothing of the neighbours, which
// -prefix ledger shows (trial 30: "status -prefix NAME also lists NAME-2").
func statusNameScenario(t *testing.T, ctx context.Context, dsn string, b spi.Backend) {
	t.Helper()
	open := func(owner string) spi.Session {
		s, err := b.OpenSession(ctx, owner, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.CloseSession(context.Background(), s.ID) })
		return s
	}
	leader, member, neighbour := open("ledger-leader"), open("ledger-member"), open("neighbour")
	for _, l := range []struct {
		s    spi.Session
		name string
	}{{leader, "ledger"}, {member, "ledger.0"}, {member, "ledger.1"}, {neighbour, "ledger-2"}, {neighbour, "ledger.eu"}} {
		if a, err := b.Acquire(ctx, l.s.ID, l.name); err != nil || a.Kind != spi.Granted {
			t.Fatalf("acquire %s: %+v, %v", l.name, a, err)
		}
	}
	if _, err := b.Join(ctx, member.ID, "ledger"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(ctx, neighbour.ID, "ledger-2"); err != nil {
		t.Fatal(err)
	}
	status := func(args ...string) string {
		t.Helper()
		var buf bytes.Buffer
		if err := statusTo(ctx, &buf, append([]string{"-dsn", dsn}, args...)); err != nil {
			t.Fatal(err)
		}
		t.Logf("simba status %q:\n%s", args, buf.String())
		return buf.String()
	}
	// Each row of the tables by its first column.
	rows := func(out string) map[string]bool {
		m := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				m[f[0]] = true
			}
		}
		return m
	}
	out := rows(status("-name", "ledger"))
	for _, want := range []string{"ledger", "ledger.0", "ledger.1", string(leader.ID), string(member.ID)} {
		if !out[want] {
			t.Errorf("-name ledger lacks %s", want)
		}
	}
	for _, not := range []string{"ledger-2", "ledger.eu", string(neighbour.ID)} {
		if out[not] {
			t.Errorf("-name ledger shows %s", not)
		}
	}
	if out := rows(status("-prefix", "ledger")); !out["ledger-2"] || !out["ledger.eu"] {
		t.Errorf("-prefix ledger no longer shows every name that starts with ledger")
	}
	out = rows(status("-name", "ledger.0"))
	if !out["ledger.0"] || out["ledger"] || out["ledger.1"] || out[string(leader.ID)] {
		t.Errorf("-name ledger.0: want the partition lease ledger.0 alone")
	}
	var buf bytes.Buffer
	err := statusTo(ctx, &buf, []string{"-dsn", dsn, "-name", "nosuch"})
	if _, ok := err.(notFoundError); !ok || buf.Len() != 0 || !strings.Contains(err.Error(), "no lease, lock or group named nosuch") {
		t.Errorf("-name nosuch: error %v, output %q; want that nothing has that name (exit status 3), and no tables", err, buf.String())
	}
}

func TestStatusNameOnSQLite(t *testing.T) {
	ctx, dsn, b := sqliteStatusBackend(t)
	statusNameScenario(t, ctx, dsn, b)
}

func TestStatusNameOnZooKeeper(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := zktest.New(t, testenv.ZooKeeper(t), "simba-cli-status-name").DSN("", "")
	b, err := openDSN(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	statusNameScenario(t, ctx, dsn, b)
}

// -name and -prefix together are a usage error (exit status 2).
func TestStatusNameAndPrefixRefused(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
	_, stderr, status := runSimba(t, "status", "-dsn", dsn, "-name", "a", "-prefix", "a")
	if status != 2 || !strings.Contains(stderr, "-name and -prefix") {
		t.Fatalf("exit status %d, stderr %q; want 2 and the reason", status, stderr)
	}
}

// sqliteStatusBackend is a migrated SQLite backend on a file of the test's own, its DSN for
// simba status, and a context of a minute; both end with the test.
func sqliteStatusBackend(t *testing.T) (context.Context, string, *sqlbackend.Backend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
	b, err := sqlbackend.Open(ctx, dsn, sqlbackend.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return ctx, dsn, b
}

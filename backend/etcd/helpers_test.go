package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/simba-go/simba/internal/testenv"
)

// testPrefix returns a key prefix no other test or run uses, whose keys are deleted from the
// shared server when the test ends: registered before the test's backends are, it runs after
// they have closed (the counters and records a client leaves, such as a lease's token, would
// stay otherwise: a package run left a prefix per test). The test fails if they cannot be.
func testPrefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "/simba-test-" + hex.EncodeToString(b[:])
	endpoints := testenv.Etcd(t)
	t.Cleanup(func() {
		if err := deletePrefix(endpoints, prefix); err != nil {
			t.Errorf("the test's keys are left on the shared etcd: %v", err)
		}
	})
	return prefix
}

// deletePrefix deletes every key under prefix+"/" on the server at endpoints.
func deletePrefix(endpoints []string, prefix string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("deleting %s/: %w", prefix, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, prefix+"/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("deleting %s/: %w", prefix, err)
	}
	return nil
}

// serverDSN returns a DSN of the shared etcd test server under a fresh prefix.
func serverDSN(t testing.TB) string {
	return "etcd://" + strings.Join(testenv.Etcd(t), ",") + testPrefix(t)
}

// openBackend opens a backend on dsn with opts, closed when the test ends.
func openBackend(t testing.TB, dsn string, opts ...Option) *Backend {
	t.Helper()
	b, err := New(dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// rawClient returns a plain etcd client of endpoints, closed when the test ends.
func rawClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// minTTL asks the server for a one-second lease and returns the TTL it grants: etcd raises
// TTLs below its minimum (1.5 election timeouts, rounded up to a second).
func minTTL(t testing.TB, cli *clientv3.Client) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := cli.Grant(ctx, 1)
	if err != nil {
		testenv.Unavailable(t, "etcd", err.Error())
	}
	cli.Revoke(ctx, g.ID) //nolint:errcheck
	return time.Duration(g.TTL) * time.Second
}

func clientLease(id int64) clientv3.LeaseID { return clientv3.LeaseID(id) }

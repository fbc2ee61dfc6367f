package etcd

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestForeignWaiterKeysDropped: a key under a name's waiters prefix that is not on the etcd
// lease of the session its name gives (on no lease, on another session's lease, or named by
// no session id) is dropped, with one warning each, by the next Acquire and AcquireQueued,
// which then take the free lease; a real waiter is still owed it. On the old code each such key
// reserved the lease for nobody for as long as it stayed (for ever, for one on no lease): every
// acquire replied HeldBy naming it, with its value (escape sequences included) as the owner.
func TestForeignWaiterKeysDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs testenv.LogBuffer
	b, err := New(serverDSN(t), WithSlog(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cli := rawClient(t, testenv.Etcd(t))
	t.Cleanup(func() { cli.Delete(context.Background(), b.prefix+"/", clientv3.WithPrefix()) }) //nolint:errcheck
	s, err := b.OpenSession(ctx, "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.OpenSession(ctx, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	otherLease, _ := leaseOf(other.ID)
	cases := []struct {
		name, sid string
		lease     clientv3.LeaseID
	}{
		{"no-lease", "0000000000000abc", clientv3.NoLease},
		{"garbage-id", "garbage-id", clientv3.NoLease},
		{"other-lease", "0000000000000abc", otherLease},
	}
	for i, tc := range cases {
		var opts []clientv3.OpOption
		if tc.lease != clientv3.NoLease {
			opts = append(opts, clientv3.WithLease(tc.lease))
		}
		key := wire.EtcdWaiterKey(b.prefix, tc.name, tc.sid)
		if _, err := cli.Put(ctx, key, "forger\x1b[2J", opts...); err != nil {
			t.Fatal(err)
		}
		acquire := b.Acquire
		if i%2 == 1 {
			acquire = b.AcquireQueued
		}
		if r, err := acquire(ctx, s.ID, tc.name); err != nil || r.Kind != spi.Granted {
			t.Errorf("%s: acquire = %+v, %v; want granted", tc.name, r, err)
		}
		if g, err := cli.Get(ctx, key); err != nil || len(g.Kvs) != 0 {
			t.Errorf("%s: the foreign waiter key is still there (%v)", tc.name, err)
		}
		if n := strings.Count(logs.String(), key); n != 1 {
			t.Errorf("%s: want one warning naming %s, got %d; log:\n%s", tc.name, key, n, logs.String())
		}
	}
	// A real waiter is still owed the lease it waits for.
	third, err := b.OpenSession(ctx, "third", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Acquire(ctx, s.ID, "sound")
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	if w, err := b.AcquireQueued(ctx, other.ID, "sound"); err != nil || w.Kind != spi.HeldBy {
		t.Fatalf("the waiter's AcquireQueued = %+v, %v; want HeldBy", w, err)
	}
	if err := b.Release(ctx, s.ID, "sound", r.Token); err != nil {
		t.Fatal(err)
	}
	if x, err := b.Acquire(ctx, third.ID, "sound"); err != nil || x.Kind != spi.HeldBy || x.Holder != other.ID || x.HolderOwner != "other" {
		t.Errorf("a third session's Acquire = %+v, %v; want HeldBy the waiter %s (other)", x, err, other.ID)
	}
}

// TestLeaseKeyOnNoLease: a lease key on no etcd lease (a plain put by something else) is
// honoured as held, with one warning naming it, and its value is never shown as the owner when
// it is not an owner string (ForeignOwner); the name is granted once the key is deleted. On the
// old code the value, escape sequences included, was the HeldBy owner, and nothing was logged.
func TestLeaseKeyOnNoLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs testenv.LogBuffer
	b, err := New(serverDSN(t), WithSlog(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cli := rawClient(t, testenv.Etcd(t))
	t.Cleanup(func() { cli.Delete(context.Background(), b.prefix+"/", clientv3.WithPrefix()) }) //nolint:errcheck
	s, err := b.OpenSession(ctx, "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key := wire.EtcdLeaseKey(b.prefix, "squat")
	if _, err := cli.Put(ctx, key, "evil\x1b[2J\x00"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r, err := b.Acquire(ctx, s.ID, "squat")
		if err != nil || r.Kind != spi.HeldBy || r.HolderOwner != ForeignOwner || !r.RemainingUnknown {
			t.Fatalf("Acquire = %+v, %v; want HeldBy with owner %q", r, err, ForeignOwner)
		}
	}
	if n := strings.Count(logs.String(), key); n != 1 {
		t.Errorf("want one warning naming %s, got %d; log:\n%s", key, n, logs.String())
	}
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(ctx, s.ID, "squat"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire after the key's deletion = %+v, %v; want granted", r, err)
	}
}

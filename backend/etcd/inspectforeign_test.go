package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestInspectLeaseForeignKeys: InspectLease agrees with Inspect on lease keys no client wrote
// the way Simba does, which both leave out (not found): a key with no etcd lease, a key whose
// etcd lease has no session key, and a key whose etcd lease's session key is attached to
// another etcd lease; a sound lease beside them is found held. It guards InspectLease's
// session-key read and LeaseTimeToLive, sent together since mends5 (they were sent one after
// the other): the answer is decided in the same order.
func TestInspectLeaseForeignKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := openBackend(t, serverDSN(t))
	cli := rawClient(t, testenv.Etcd(t))
	s, err := b.OpenSession(ctx, "sound", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(ctx, s.ID, "sound"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	grant := func() clientv3.LeaseID {
		g, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Revoke(context.Background(), g.ID) }) //nolint:errcheck
		return g.ID
	}
	put := func(key string, lease clientv3.LeaseID) {
		var opts []clientv3.OpOption
		if lease != clientv3.NoLease {
			opts = append(opts, clientv3.WithLease(lease))
		}
		if _, err := cli.Put(ctx, key, "forger", opts...); err != nil {
			t.Fatal(err)
		}
	}
	put(wire.EtcdLeaseKey(b.prefix, "no-lease"), clientv3.NoLease)
	put(wire.EtcdLeaseKey(b.prefix, "no-session"), grant())
	l1, l2 := grant(), grant()
	put(wire.EtcdLeaseKey(b.prefix, "other-lease"), l1)
	put(wire.EtcdSessionKey(b.prefix, string(sessionID(l1))), l2)

	snap, err := b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Leases) != 1 || snap.Leases[0].Name != "sound" {
		t.Errorf("Inspect listed %+v, want only the sound lease", snap.Leases)
	}
	for _, name := range []string{"no-lease", "no-session", "other-lease"} {
		if l, found, err := b.InspectLease(ctx, name); err != nil || found {
			t.Errorf("%s: InspectLease = %+v, %v, %v; want not found, as Inspect", name, l, found, err)
		}
	}
	if l, found, err := b.InspectLease(ctx, "sound"); err != nil || !found || l.Holder != s.ID || l.Remaining <= 0 {
		t.Errorf("sound: InspectLease = %+v, %v, %v; want held by %s", l, found, err, s.ID)
	}
}

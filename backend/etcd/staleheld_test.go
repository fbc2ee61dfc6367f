package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestStaleHeldEntryDeleted: a held index entry whose lease key something other than Simba
// deleted, or put again on another etcd lease, is deleted from the server by the session's
// next keep-alive after the one that found it (in its transaction), so that another backend
// adopting the session (a keep-alive asking about no name) no longer lists the name; an entry
// whose name was granted to the session again meanwhile (through another backend) is kept. On
// the old code the entry was only hidden in the memory of the backend that found it: it stayed
// on the server, and the adopting backend listed the name as held, with the old token.
func TestStaleHeldEntryDeleted(t *testing.T) {
	for _, how := range []string{"deleted", "moved", "regranted"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dsn := serverDSN(t)
			b := openBackend(t, dsn, WithSlog(nil))
			adopter := openBackend(t, dsn, WithSlog(nil))
			cli := rawClient(t, testenv.Etcd(t))
			s, err := b.OpenSession(ctx, "me", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			const name = "stale"
			g, err := b.Acquire(ctx, s.ID, name)
			if err != nil || g.Kind != spi.Granted {
				t.Fatalf("Acquire = %+v, %v", g, err)
			}
			key := wire.EtcdLeaseKey(b.prefix, name)
			if how == "moved" {
				l, err := cli.Grant(ctx, 60)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cli.Revoke(context.Background(), l.ID) }) //nolint:errcheck
				_, err = cli.Put(ctx, key, "me", clientv3.WithLease(l.ID))
			} else {
				_, err = cli.Delete(ctx, key)
			}
			if err != nil {
				t.Fatal(err)
			}
			keepAlive := func(on *Backend, names ...string) spi.KeepAlive {
				t.Helper()
				ka, err := on.KeepAlive(ctx, s.ID, names, nil)
				if err != nil || ka.Expired {
					t.Fatalf("KeepAlive(%v) = %+v, %v", names, ka, err)
				}
				return ka
			}
			if ka := keepAlive(b, name); len(ka.Held) != 0 {
				t.Fatalf("KeepAlive after the lease key was %s = %+v; want nothing held", how, ka)
			}
			var regranted int64
			if how == "regranted" {
				r, err := adopter.Acquire(ctx, s.ID, name)
				if err != nil || r.Kind != spi.Granted {
					t.Fatalf("the session's Acquire through another backend = %+v, %v", r, err)
				}
				regranted = r.Token
			}
			keepAlive(b) // the keep-alive after the one that found the entry stale
			held := wire.EtcdHeldKey(b.prefix, string(s.ID), name)
			r, err := cli.Get(ctx, held)
			if err != nil {
				t.Fatal(err)
			}
			ka := keepAlive(adopter)
			if how == "regranted" {
				if len(r.Kvs) != 1 || len(ka.Held) != 1 || ka.Held[0].Name != name {
					t.Fatalf("after a grant again (token %d): held index entries %v, the adopting backend's KeepAlive = %+v; want the entry kept and %q held", regranted, r.Kvs, ka, name)
				}
				if ka := keepAlive(b, name); len(ka.Held) != 1 || ka.Held[0].Token != regranted {
					t.Fatalf("KeepAlive asking about %q after a grant again = %+v; want it held with token %d", name, ka, regranted)
				}
				return
			}
			if len(r.Kvs) != 0 {
				t.Errorf("the stale held index entry %s is still on the server after the next keep-alive", held)
			}
			if len(ka.Held) != 0 {
				t.Errorf("a backend adopting the session lists %+v held; want nothing (the lease key was %s)", ka.Held, how)
			}
		})
	}
}

// TestStaleHeldDropsFitTheTxnLimit: the keep-alive that deletes stale held index entries
// (maxDrops and more of them pending) stays within etcd's limit on a transaction's operations
// (its nested drop_held transactions included) whatever the number of names and groups asked
// about around the point where the names' reads turn into one range (and where they turned
// without the drops), and deletes the entries over as many keep-alives as it takes (two).
func TestStaleHeldDropsFitTheTxnLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := openBackend(t, serverDSN(t), WithSlog(nil))
	cli := rawClient(t, testenv.Etcd(t))
	s, err := b.OpenSession(ctx, "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, groups := range []int{0, 3, maxGroupRanges, maxGroupRanges + 1} {
		gs := make([]string, groups)
		for i := range gs {
			gs[i] = fmt.Sprintf("g-%03d", i)
		}
		groupOps := 1
		if groups <= maxGroupRanges {
			groupOps = groups
		}
		// The most names read one by one beside maxDrops drops, and beside none.
		room := maxTxnOps - 1 - groupOps - maxDrops - dropHeldOps
		for _, n := range []int{room - 1, room, room + 1, room + maxDrops + dropHeldOps} {
			// maxDrops+1 stale entries: acquired, their lease keys deleted, found by a keep-alive.
			stale := make([]string, maxDrops+1)
			for i := range stale {
				stale[i] = fmt.Sprintf("stale-%d-%d-%02d", groups, n, i)
				if g, err := b.Acquire(ctx, s.ID, stale[i]); err != nil || g.Kind != spi.Granted {
					t.Fatalf("Acquire(%s) = %+v, %v", stale[i], g, err)
				}
				if _, err := cli.Delete(ctx, wire.EtcdLeaseKey(b.prefix, stale[i])); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := b.KeepAlive(ctx, s.ID, stale, nil); err != nil {
				t.Fatal(err)
			}
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("name-%03d", i)
			}
			for round := 1; ; round++ {
				if ka, err := b.KeepAlive(ctx, s.ID, names, gs); err != nil || ka.Expired {
					t.Fatalf("%d groups, %d names, keep-alive %d with stale entries to delete: %+v, %v", groups, n, round, ka, err)
				}
				r, err := cli.Get(ctx, wire.EtcdHeldPrefix(b.prefix, string(s.ID)), clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				if r.Count == 0 {
					break
				}
				if round == 2 {
					t.Fatalf("%d groups, %d names: %d stale held index entries left after %d keep-alives", groups, n, r.Count, round)
				}
			}
		}
	}
}

package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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
	b := openBackend(t, serverDSN(t), WithSlog(slog.New(slog.NewTextHandler(&logs, nil))))
	cli := rawClient(t, testenv.Etcd(t))
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
	b := openBackend(t, serverDSN(t), WithSlog(slog.New(slog.NewTextHandler(&logs, nil))))
	cli := rawClient(t, testenv.Etcd(t))
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

// TestLeaseKeyMovedOffSession: a held lease whose key something other than Simba puts again on
// another etcd lease (etcdctl put --lease=<other>), or on none, with the same value, is no
// longer reported held by the session's keep-alive (moved: left out, the term is taken over;
// on no lease: named Corrupt), with one warning, and a later keep-alive that does not ask about
// the name leaves the stale index entry out too. On the old code the keep-alive read only the
// held index, still on the session's lease: it reported the name held after the other lease
// ended (or the key was deleted) and a second session was granted it, a double grant the first
// holder never heard of.
func TestLeaseKeyMovedOffSession(t *testing.T) {
	for _, detach := range []bool{false, true} {
		t.Run(map[bool]string{false: "reattached", true: "detached"}[detach], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var logs testenv.LogBuffer
			b := openBackend(t, serverDSN(t), WithSlog(slog.New(slog.NewTextHandler(&logs, nil))))
			cli := rawClient(t, testenv.Etcd(t))
			first, err := b.OpenSession(ctx, "first", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			const name = "moved"
			g, err := b.Acquire(ctx, first.ID, name)
			if err != nil || g.Kind != spi.Granted {
				t.Fatalf("Acquire = %+v, %v", g, err)
			}
			holds := func(when string) bool {
				t.Helper()
				ka, err := b.KeepAlive(ctx, first.ID, []string{name}, nil)
				if err != nil || ka.Expired {
					t.Fatalf("%s: KeepAlive = %+v, %v", when, ka, err)
				}
				for _, h := range ka.Held {
					if h.Name == name {
						return true
					}
				}
				if detach && !slices.Contains(ka.Corrupt, name) && when == "after the move" {
					t.Errorf("%s: KeepAlive = %+v; want %s named corrupt (its key is on no lease)", when, ka, name)
				}
				return false
			}
			if !holds("before the move") {
				t.Fatal("the first session does not hold the lease it was granted")
			}
			key := wire.EtcdLeaseKey(b.prefix, name)
			var other clientv3.LeaseID
			var opts []clientv3.OpOption
			if !detach {
				l, err := cli.Grant(ctx, 60)
				if err != nil {
					t.Fatal(err)
				}
				other = l.ID
				t.Cleanup(func() { cli.Revoke(context.Background(), other) }) //nolint:errcheck
				opts = append(opts, clientv3.WithLease(other))
			}
			if _, err := cli.Put(ctx, key, "first", opts...); err != nil {
				t.Fatal(err)
			}
			if holds("after the move") {
				t.Error("after its lease key was moved off the session's etcd lease, the keep-alive still reports the lease held")
			}
			if n := strings.Count(logs.String(), key); n != 1 {
				t.Errorf("want one warning naming %s, got %d; log:\n%s", key, n, logs.String())
			}
			// The other lease ends (or an operator deletes the key on no lease): the name is
			// free, and a second session is granted it.
			if detach {
				_, err = cli.Delete(ctx, key)
			} else {
				_, err = cli.Revoke(ctx, other)
			}
			if err != nil {
				t.Fatal(err)
			}
			second, err := b.OpenSession(ctx, "second", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := b.Acquire(ctx, second.ID, name); err != nil || r.Kind != spi.Granted {
				t.Fatalf("the second session's Acquire = %+v, %v; want granted", r, err)
			}
			if holds("after the second session's grant") {
				t.Error("double grant: the first session's keep-alive reports the lease held while the second session holds it")
			}
			// Not asked about (the client gave the term up): the stale index entry is not listed.
			ka, err := b.KeepAlive(ctx, first.ID, nil, nil)
			if err != nil || len(ka.Held) != 0 {
				t.Errorf("KeepAlive asking about nothing = %+v, %v; want nothing held", ka, err)
			}
		})
	}
}

// TestLeaseReadsEveryForm: the keep-alive's lease-key reads find the same keys in each of
// their two forms (one read per name, or one range over every lease key when they do not fit
// the room the transaction has left), on the real server.
func TestLeaseReadsEveryForm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := openBackend(t, serverDSN(t))
	cli := rawClient(t, testenv.Etcd(t))
	s, err := b.OpenSession(ctx, "reads", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, maxTxnOps+1)
	for i := range names {
		names[i] = fmt.Sprintf("n%03d", i)
		if i%2 == 0 {
			if r, err := b.Acquire(ctx, s.ID, names[i]); err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire = %+v, %v", r, err)
			}
		}
	}
	for _, tc := range []struct {
		n, room int
	}{{maxTxnOps, maxTxnOps}, {len(names), maxTxnOps}, {3, 2}} {
		names, room := names[:tc.n], tc.room
		then, picked := appendLeaseReads(nil, b.prefix, names, room)
		if len(then) > room {
			t.Errorf("room %d: %d operations", room, len(then))
		}
		r, err := cli.Txn(ctx).Then(then...).Commit()
		if err != nil {
			t.Fatalf("room %d: %v", room, err)
		}
		got := picked(r.Responses)
		for i, n := range names {
			kv := got[n]
			if (kv != nil) != (i%2 == 0) || kv != nil && sessionID(clientv3.LeaseID(kv.Lease)) != s.ID {
				t.Errorf("room %d: %s read as %v", room, n, kv)
			}
		}
	}
}

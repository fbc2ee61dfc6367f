package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// TestClusterInspectLeaseFollowsSlotMove: InspectLease (what fence.LeaseVerifier reads per
// check) follows a slot migration, on a private Cluster whose slot of one lease key the test
// moves by hand from its master to another while a backend holds the lease with its slot map
// read before: first midway (the key already on the importing master, the slot still the
// source's: the source answers ASK), then finished (the slot the target's: the source answers
// MOVED). Each time InspectLease shows the lease held by its session with its token, and the
// verifier admits that token. On the old code, which sent its pipeline to the master its slot
// map named, both failed with the redirection (ErrUnavailable: the verifier's 503), mends5.
func TestClusterInspectLeaseFollowsSlotMove(t *testing.T) {
	pc := startPrivCluster(t)
	ctx := context.Background()
	cc := pc.client()
	b := newBackend(t, cc, WithLogger(discard))
	sid := open(t, b, privTestTTL)
	const name = "slotmove"
	r, err := b.Acquire(ctx, sid, name)
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	key := wire.LeaseKey(name)
	check := func(stage string) {
		t.Helper()
		l, found, err := b.InspectLease(ctx, name)
		if err != nil || !found || l.Holder != sid || l.Token != r.Token || l.Unreadable != "" || l.Remaining <= 0 {
			t.Errorf("%s: InspectLease = %+v, %v, %v; want held by %s with token %d", stage, l, found, err, sid, r.Token)
		}
		if err := fence.LeaseVerifier(b, nil)(ctx, name, r.Token); err != nil {
			t.Errorf("%s: the holder's token refused: %v", stage, err)
		}
	}
	check("before the move")
	// A lease key of another type is still one unreadable lease, not a failed read (the HMGET
	// fails alone inside the MULTI/EXEC).
	if err := cc.Set(ctx, wire.LeaseKey("slotmove-stringly"), "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if l, found, err := b.InspectLease(ctx, "slotmove-stringly"); err != nil || !found || !strings.Contains(l.Unreadable, "not a hash") {
		t.Errorf("InspectLease of a string key = %+v, %v, %v; want Unreadable naming \"not a hash\"", l, found, err)
	}

	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	src := pc.masterOfKey(cc, key)
	var dst int
	ids := map[int]string{}
	for _, n := range pc.nodes(src) {
		ids[n.port] = n.id
		if n.isMaster && n.port != src && dst == 0 {
			dst = n.port
		}
	}
	if dst == 0 {
		t.Fatalf("no other master than %d in %v", src, pc.nodes(src))
	}
	srcNode, dstNode := pc.node(src), pc.node(dst)
	do := func(c *goredis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	do(dstNode, "cluster", "setslot", slot, "importing", ids[src])
	do(srcNode, "cluster", "setslot", slot, "migrating", ids[dst])
	do(srcNode, "migrate", "127.0.0.1", dst, "", 0, 5000, "keys", key)
	if err := srcNode.Exists(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "ASK") {
		t.Fatalf("EXISTS at the source midway: %v, want ASK", err)
	}
	check("midway (ASK)")

	for _, p := range []int{dst, src} {
		do(pc.node(p), "cluster", "setslot", slot, "node", ids[dst])
	}
	for _, p := range pc.ports {
		if p != src && p != dst {
			// The other nodes learn the owner by gossip too; told at once, none answers with
			// the old one.
			_ = pc.node(p).Do(ctx, "cluster", "setslot", slot, "node", ids[dst]).Err()
		}
	}
	if err := srcNode.Exists(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
		t.Fatalf("EXISTS at the source after the move: %v, want MOVED", err)
	}
	if got := strconv.Itoa(dst); !strings.Contains(srcNode.Exists(ctx, key).Err().Error(), ":"+got) {
		t.Fatalf("the source redirects elsewhere than %s: %v", got, srcNode.Exists(ctx, key).Err())
	}
	check("after the move (MOVED)")

}

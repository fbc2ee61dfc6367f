package zookeeper

import (
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestTapKeepsOnlyLeaseCreates: the tap records the czxid of a lease node's create, which the
// acquire takes as the token, and of no other create. It kept the creates of member, group,
// waiter and queue nodes too, which nothing took: a session that joined and left groups and
// waited for locks grew the map by an entry per join and per wait for as long as it lived (an
// outside trial: about 1,000 objects a minute in a client churning through names).
func TestTapKeepsOnlyLeaseCreates(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	sid := openSession(t, b, 10*time.Second)
	other := openSession(t, b, 10*time.Second)
	ctx := testCtx(t)
	for i := range 5 {
		g := fmt.Sprintf("tapgroup-%d", i)
		if _, err := b.Join(ctx, sid, g); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Leave(ctx, sid, g); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("taplease-%d", i)
		tok := mustGrant(t, b, other, name)
		r, err := b.Acquire(ctx, sid, name) // queues as a waiter
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != spi.HeldBy {
			t.Fatalf("acquire of %s held by the other session: %v", name, r.Kind)
		}
		if err := b.Withdraw(ctx, sid, name); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, other, name, tok); err != nil {
			t.Fatal(err)
		}
		own := mustGrant(t, b, sid, name)
		if err := b.Release(ctx, sid, name, own); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := b.lookup(sid)
	s.tap.mu.Lock()
	created := make([]string, 0, len(s.tap.created))
	for p := range s.tap.created {
		created = append(created, p)
	}
	s.tap.mu.Unlock()
	if len(created) != 0 {
		t.Fatalf("the tap keeps %d creates nothing will take: %v", len(created), created)
	}
}

package simba_test

import (
	"context"
	"testing"
	"time"
)

// TestLeaveOfAnOldHandleLeavesTheNewMembershipAlone: once a group has been left and joined
// again, a Leave through the first join's *PartitionGroup (a deferred Leave, a second Leave of
// a handle the program kept) is over already and must not leave the new membership. Found by an
// outside trial on PostgreSQL, ZooKeeper, etcd and Redis alike: the old handle's Leave sent the
// group's Leave and the new handle lost every partition.
func TestLeaveOfAnOldHandleLeavesTheNewMembershipAlone(t *testing.T) {
	w := newWorld(t)
	c, b := w.client("a")
	ctx := context.Background()
	old, err := c.JoinGroup(ctx, "g", 4)
	if err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "the first join to lead every partition", func() bool { return len(old.Held()) == 4 })
	w.async(func() error { return old.Leave(ctx) })
	cur, err := c.JoinGroup(ctx, "g", 4)
	if err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "the second join to lead every partition", func() bool { return len(cur.Held()) == 4 })
	leaves := b.Calls("Leave")
	w.async(func() error { return old.Leave(ctx) })
	// Give a Leave that was sent time to land, then look.
	for range 100 {
		w.clock.Advance(10 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
	}
	if n := b.Calls("Leave"); n != leaves {
		t.Errorf("the old handle's Leave sent %d Leave calls for the new membership", n-leaves)
	}
	if n := len(cur.Held()); n != 4 {
		t.Errorf("after the old handle's Leave the new membership leads %d partitions, want 4", n)
	}
	if len(cur.Members()) != 1 {
		t.Errorf("after the old handle's Leave the members are %v, want this client's session", cur.Members())
	}
}

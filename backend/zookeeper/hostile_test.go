package zookeeper

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestGarbageGroupMembersAreSkipped: children of a group node that are not Simba members (a
// persistent node named like a session, a node whose name is not a session id, an ephemeral
// of one session under another session's id) are skipped with a warning, so they are never
// assigned partitions: two real clients that join lead every partition between them.
func TestGarbageGroupMembersAreSkipped(t *testing.T) {
	dsn := serverDSN(t, "")
	logs := &testenv.LogBuffer{}
	setup := openBackend(t, dsn)
	openSession(t, setup, 10*time.Second) // creates the roots
	raw := rawClient(t, setup, "")
	group := setup.lay.group("orders")
	if _, err := raw.Create(group, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	garbage := []struct {
		name  string
		flags int32
	}{
		{"00000000000000ff", 0},                // session-id form, persistent
		{"not-a-session", 0},                   // not a session id
		{"0123456789abcdef", zk.FlagEphemeral}, // the raw client's ephemeral, under another id
	}
	for _, g := range garbage {
		if _, err := raw.Create(group+"/"+g.name, []byte("x"), g.flags, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	const P = 12
	var groups []*simba.PartitionGroup
	var sids []spi.SessionID
	for _, owner := range []string{"a", "b"} {
		b := openBackend(t, dsn, WithSlog(slog.New(slog.NewTextHandler(logs, nil))))
		c, err := simba.New(b, simba.WithOwner(owner), simba.WithTTL(4*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		g, err := c.JoinGroup(testCtx(t), "orders", P)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		led := map[int]int{}
		for i, g := range groups {
			for p := range g.Held() {
				if j, dup := led[p]; dup {
					t.Fatalf("partition %d led by members %d and %d", p, j, i)
				}
				led[p] = i
			}
		}
		if len(led) == P && len(groups[0].Members()) == 2 && len(groups[1].Members()) == 2 {
			for _, m := range groups[0].Members() {
				sids = append(sids, spi.SessionID(m))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %d of %d partitions led; members %v and %v", len(led), P, groups[0].Members(), groups[1].Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ms, err := setup.Members(testCtx(t), "orders")
	slices.Sort(sids)
	if err != nil || !slices.Equal(ms, sids) {
		t.Fatalf("Members = %v, %v; want only the two clients %v", ms, err, sids)
	}
	snap, err := setup.Inspect(testCtx(t))
	if err != nil || !slices.Equal(snap.Groups["orders"], sids) {
		t.Fatalf("Inspect groups = %v, %v; want %v", snap.Groups, err, sids)
	}
	for _, g := range garbage {
		if !strings.Contains(logs.String(), g.name) {
			t.Errorf("no warning about the garbage member %s; logs:\n%s", g.name, logs)
		}
		if ok, _, err := raw.Exists(group + "/" + g.name); err != nil || !ok {
			t.Errorf("the garbage member %s was deleted (%v): Simba must leave foreign nodes alone", g.name, err)
		}
	}
}

// TestEphemeralAtLibraryPath: an ephemeral node where Simba needs a persistent one (the
// leases node, a group node) is a permanent error naming the path, at OpenSession when the
// backend finds it among its roots, at Acquire or Join otherwise; never a retryable one.
func TestEphemeralAtLibraryPath(t *testing.T) {
	permanent := func(t *testing.T, what string, err error, path string) {
		t.Helper()
		if err == nil || spi.Classify(err) != spi.Permanent || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s = %v (%v); want a permanent error naming %s", what, err, spi.Classify(err), path)
		}
	}
	t.Run("leases node at open", func(t *testing.T) {
		b := openBackend(t, serverDSN(t, ""))
		raw := rawClient(t, b, "")
		for _, p := range []string{b.lay.chroot, b.lay.root()} {
			if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := raw.Create(b.lay.leasesRoot(), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		_, err := b.OpenSession(testCtx(t), "o", 5*time.Second)
		permanent(t, "OpenSession", err, b.lay.leasesRoot())
	})
	t.Run("leases node replaced later", func(t *testing.T) {
		b := openBackend(t, serverDSN(t, ""))
		s := openSession(t, b, 5*time.Second)
		raw := rawClient(t, b, "")
		if err := raw.Delete(b.lay.leasesRoot(), -1); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Create(b.lay.leasesRoot(), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		_, err := b.Acquire(testCtx(t), s, "x")
		permanent(t, "Acquire", err, b.lay.leasesRoot())
	})
	t.Run("group node", func(t *testing.T) {
		b := openBackend(t, serverDSN(t, ""))
		s := openSession(t, b, 5*time.Second)
		raw := rawClient(t, b, "")
		if _, err := raw.Create(b.lay.group("g"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		_, err := b.Join(testCtx(t), s, "g")
		permanent(t, "Join", err, b.lay.group("g"))
	})
}

// TestForeignLeaseNode: a node at a lease path that Simba did not create is honoured as held,
// never taken for the session's own and never deleted: a persistent node is HeldBy
// ForeignHolder with ForeignOwner (it used to be a permanent error, as if the name were
// broken for good) and the name is granted once someone deletes it; another session's
// ephemeral whose data is not an owner string is HeldBy that session with ForeignOwner.
func TestForeignLeaseNode(t *testing.T) {
	logs := &testenv.LogBuffer{}
	b := openBackend(t, serverDSN(t, ""), WithSlog(slog.New(slog.NewTextHandler(logs, nil))))
	s := openSession(t, b, 5*time.Second)
	raw := rawClient(t, b, "")
	path := b.lay.lease("squat")
	if _, err := raw.Create(path, []byte("not ours"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, err := raw.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r, err := b.Acquire(testCtx(t), s, "squat")
		if err != nil || r.Kind != spi.HeldBy || r.Holder != ForeignHolder || r.HolderOwner != ForeignOwner || !r.RemainingUnknown {
			t.Fatalf("Acquire of a persistent foreign node = %+v, %v; want HeldBy %s %q", r, err, ForeignHolder, ForeignOwner)
		}
	}
	if !strings.Contains(logs.String(), path) {
		t.Errorf("no warning naming %s; logs:\n%s", path, logs)
	}
	if ka, err := b.KeepAlive(testCtx(t), s, []string{"squat"}, nil); err != nil || len(ka.Held) != 0 {
		t.Fatalf("KeepAlive = %+v, %v; want nothing held", ka, err)
	}
	if err := b.Release(testCtx(t), s, "squat", st.Czxid); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := raw.Exists(path); err != nil || !ok {
		t.Fatalf("the foreign node is gone after a release with its czxid (%v)", err)
	}
	snap, err := b.Inspect(testCtx(t))
	if err != nil || len(snap.Leases) != 1 || snap.Leases[0].Holder != ForeignHolder || snap.Leases[0].Owner != ForeignOwner {
		t.Fatalf("Inspect leases = %+v, %v", snap.Leases, err)
	}
	if err := raw.Delete(path, -1); err != nil {
		t.Fatal(err)
	}
	mustGrant(t, b, s, "squat")

	// Another session's ephemeral with data that is no owner string.
	other := b.lay.lease("garbled")
	if _, err := raw.Create(other, []byte("evil\x1b[2J\x00"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	r, err := b.Acquire(testCtx(t), s, "garbled")
	if err != nil || r.Kind != spi.HeldBy || r.Holder != SessionIDString(raw.SessionID()) || r.HolderOwner != ForeignOwner {
		t.Fatalf("Acquire of a garbled ephemeral = %+v, %v; want HeldBy %s %q", r, err, SessionIDString(raw.SessionID()), ForeignOwner)
	}
}

package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/wire"
)

// TestProbeGroupNotWatched: the client probes a backend whose session calls fail by reading the
// members of wire.ProbeGroup, a group no member joins. Such a read made the backend watch that
// group's node for two TTLs like any group read, opening the hint connection for it (on a
// client that waits for nothing else); now it is not used, while a read of another group is.
func TestProbeGroupNotWatched(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	ctx := testCtx(t)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := b.Hints(hctx); err != nil {
		t.Fatal(err)
	}
	openSession(t, b, time.Minute)
	if _, err := b.Members(ctx, wire.ProbeGroup); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Members(ctx, "read"); err != nil {
		t.Fatal(err)
	}
	b.hmu.Lock()
	_, probe := b.groups[wire.ProbeGroup]
	_, read := b.groups["read"]
	b.hmu.Unlock()
	if probe || !read {
		t.Errorf("groups used after reads of %s and read: %s %v, read %v; want only read", wire.ProbeGroup, wire.ProbeGroup, probe, read)
	}
}

package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/wire"
)

// TestProbeGroupNotWatched: the client probes a backend whose session calls fail by reading the
// members of wire.ProbeGroup, a group no member joins. Such a read made the backend watch that
// group for two TTLs like any group read (one more watch per probe, for nothing); now it is not
// watched, while a read of another group is.
func TestProbeGroupNotWatched(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := openBackend(t, serverDSN(t))
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Members(ctx, wire.ProbeGroup); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Members(ctx, "read"); err != nil {
		t.Fatal(err)
	}
	waitGroupWatch(ctx, t, b, "read")
	if kept, _ := groupWatched(b, wire.ProbeGroup); kept {
		t.Errorf("a probe's read of %s made the backend watch it", wire.ProbeGroup)
	}
}

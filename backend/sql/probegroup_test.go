package sql

import (
	"context"
	"testing"

	"github.com/simba-go/simba/generated/wire"
)

// TestPostgresProbeGroupNotListened: the client probes a backend whose session calls fail by
// reading the members of wire.ProbeGroup, a group no member joins. Such a read made the hint
// listener LISTEN on that group's channel for a linger, as for any group read (one LISTEN and
// UNLISTEN per probe, for nothing); now it does not, while a read of another group does.
func TestPostgresProbeGroupNotListened(t *testing.T) {
	b := migrated(t, pgDSN(t))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	waitListening(t, b)
	read := "read-" + unique(t)
	for _, g := range []string{wire.ProbeGroup, read} {
		if _, err := b.Members(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	h := b.groupsN.(*pgHub)
	h.imu.Lock()
	_, probe := h.groups[wire.ProbeGroup]
	_, other := h.groups[read]
	h.imu.Unlock()
	if probe || !other {
		t.Errorf("groups noted after reads of %s and %s: probe %v, other %v; want only the other", wire.ProbeGroup, read, probe, other)
	}
}

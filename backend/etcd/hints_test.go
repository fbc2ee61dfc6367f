package etcd

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// awaitReleased reads hints until a Released hint for name, failing on one for any name in
// never before it, or when ctx ends first.
func awaitReleased(ctx context.Context, t *testing.T, hints <-chan spi.Hint, who, name string, never ...string) {
	t.Helper()
	for {
		select {
		case h, ok := <-hints:
			if !ok {
				t.Fatalf("%s: hint channel closed", who)
			}
			switch {
			case h.Kind != spi.Released:
			case h.Name == name:
				return
			case slices.Contains(never, h.Name):
				t.Fatalf("%s: Released hint for %q, a name none of its sessions waits for (waiting for %q)", who, h.Name, name)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no Released hint for %q", who, name)
		}
	}
}

// TestHintsOnlyForWaitedNames: a backend subscribed to hints hears of the releases of the
// names its sessions wait for, and of no other: one whose session waited for a name, was
// hinted and granted it, then waits for nothing, hears nothing of another backend's lock and
// unlock cycles; one whose session waits (TTL one minute, no further acquire: the hint must
// come before its one-TTL retry would) hears only of its name's release. Before the hint for
// the name each waits for last (n, sentinel) neither may get one for a cycled name: on the old
// code, which watched every lease key and waiter key, both did.
func TestHintsOnlyForWaitedNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := serverDSN(t)
	other, idle, waiting := openBackend(t, dsn), openBackend(t, dsn), openBackend(t, dsn)
	idleHints, err := idle.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitHints, err := waiting.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open := func(b *Backend, owner string) spi.SessionID {
		s, err := b.OpenSession(ctx, owner, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	o, i, w := open(other, "other"), open(idle, "idle"), open(waiting, "waiting")
	acquire := func(b *Backend, id spi.SessionID, name string, queued bool, want spi.AcquireKind) int64 {
		t.Helper()
		acq := b.Acquire
		if queued {
			acq = b.AcquireQueued
		}
		r, err := acq(ctx, id, name)
		if err != nil || r.Kind != want {
			t.Fatalf("acquire of %s = %+v, %v; want %s", name, r, err, want)
		}
		return r.Token
	}
	release := func(b *Backend, id spi.SessionID, name string, tok int64) {
		t.Helper()
		if err := b.Release(ctx, id, name, tok); err != nil {
			t.Fatal(err)
		}
	}

	// The idle backend's session waits for x, is hinted, is granted x and releases it.
	tok := acquire(other, o, "x", false, spi.Granted)
	acquire(idle, i, "x", true, spi.HeldBy)
	release(other, o, "x", tok)
	awaitReleased(ctx, t, idleHints, "idle", "x")
	release(idle, i, "x", acquire(idle, i, "x", true, spi.Granted))

	// The waiting backend's session waits for n.
	ntok := acquire(other, o, "n", false, spi.Granted)
	acquire(waiting, w, "n", true, spi.HeldBy)

	// Lock and unlock cycles on names no session of theirs waits for.
	busy := []string{"busy-1", "busy-2"}
	for range 5 {
		for _, name := range busy {
			release(other, o, name, acquire(other, o, name, true, spi.Granted))
		}
	}

	release(other, o, "n", ntok)
	awaitReleased(ctx, t, waitHints, "waiting", "n", busy...)
	stok := acquire(other, o, "sentinel", false, spi.Granted)
	acquire(idle, i, "sentinel", false, spi.HeldBy)
	release(other, o, "sentinel", stok)
	awaitReleased(ctx, t, idleHints, "idle", "sentinel", busy...)
}

package redis

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestReleaseHintsLocally: a release of a lease a session of the backend waits for hints the
// backend's own subscribers without the server; a release nobody here waits for hints nothing.
// The pub/sub connection is closed first, so the only way the hint can come is the backend's
// own fan-out.
func TestReleaseHintsLocally(t *testing.T) {
	for _, mode := range []struct {
		name string
		b    func(t *testing.T) *Backend
	}{
		{"standalone", func(t *testing.T) *Backend { return newBackend(t, standaloneClient(t)) }},
		{"cluster", func(t *testing.T) *Backend { return newBackend(t, clusterClient(t), WithRouteBySlot(true)) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			b := mode.b(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hints, err := b.Hints(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b.hub.mu.Lock()
			b.hub.conn.ps.Close() // no more hints from the server
			b.hub.mu.Unlock()
			s, err := b.OpenSession(ctx, "local", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			w, err := b.OpenSession(ctx, "local-waiter", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer b.CloseSession(ctx, w.ID)
			name := "local-hint-" + time.Now().Format("150405.000000000")
			dropKeys(t, name)
			r, err := b.Acquire(ctx, s.ID, name)
			if err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire = %+v, %v", r, err)
			}
			if err := b.Release(ctx, s.ID, name, r.Token); err != nil {
				t.Fatal(err)
			}
			noHint(t, hints, spi.Released, name) // nobody waits: the fan-out is synchronous
			if r, err = b.Acquire(ctx, s.ID, name); err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire = %+v, %v", r, err)
			}
			if wr, err := b.AcquireQueued(ctx, w.ID, name); err != nil || wr.Kind != spi.HeldBy {
				t.Fatalf("waiter's AcquireQueued = %+v, %v", wr, err)
			}
			if err := b.Release(ctx, s.ID, name, r.Token); err != nil {
				t.Fatal(err)
			}
			for {
				select {
				case h := <-hints:
					if h.Kind == spi.Released && h.Name == name {
						_ = b.CloseSession(ctx, s.ID)
						return
					}
				case <-ctx.Done():
					t.Fatal("no Released hint from the backend's own release")
				}
			}
		})
	}
}

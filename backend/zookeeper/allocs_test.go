package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// maxAcquireReleaseAllocs is the heap allocations an uncontended SPI Acquire and Release may
// make, go-zookeeper's own included, with one to spare (70 with -race, whose sync.Pool drops
// some of what is put back): 69 on 2026-12-07 with context.Background and with a deadline
// alike, against 83 and 89 before. The multi-ops' parts and their hand-off to a hop worker
// come from a pool (leaseReq), the lease's node paths from the session's memory (pathsOf),
// and a held lease's delayed watch from one timer per session (startDueWatches) instead of a
// time.AfterFunc per grant; a held lease's record is the one allocation of the backend's own
// left. The rest is go-zookeeper's: its reflective encoding and decoding of each multi-op (a
// copy of each struct it looks at), its request and reply channel, and the replies' parts.
const maxAcquireReleaseAllocs = 71

// TestAcquireReleaseAllocations counts the heap allocations of an uncontended SPI Acquire and
// Release against the shared ZooKeeper server, go-zookeeper's own included (its request
// encoding, its send and receive goroutines, the reply decoding), with context.Background (the
// requests run on the caller's goroutine) and with a context that can end (on a hop worker).
// Counted, not timed.
func TestAcquireReleaseAllocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		{"background", func(*testing.T) context.Context { return context.Background() }},
		{"deadline", func(t *testing.T) context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			t.Cleanup(cancel)
			return ctx
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := openBackend(t, serverDSN(t, ""))
			ctx := tc.ctx(t)
			s, err := b.OpenSession(ctx, "allocs", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer b.CloseSession(context.Background(), s.ID)
			cycle := func() {
				r, err := b.Acquire(ctx, s.ID, "allocs")
				if err != nil || r.Kind != spi.Granted {
					t.Fatalf("acquire: %+v %v", r, err)
				}
				if err := b.Release(ctx, s.ID, "allocs", r.Token); err != nil {
					t.Fatalf("release: %v", err)
				}
			}
			for range 20 {
				cycle()
			}
			got := testing.AllocsPerRun(200, cycle)
			t.Logf("%.1f allocations per Acquire and Release", got)
			if got > maxAcquireReleaseAllocs {
				t.Errorf("an Acquire and Release allocated %.1f times, want at most %d", got, maxAcquireReleaseAllocs)
			}
		})
	}
}

package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/spi"
)

// The heap allocations an uncontended SPI Acquire and Release may make, go-redis's own
// included (its connection check, the command, the reply's reading), with a few to spare: 34
// on 2026-12-06, standalone (acquire, 5 keys and 3 arguments; release, 2 keys and 3
// arguments) and on the Cluster (acquire_at, 3 keys and 4 arguments; release_leases, 1 key
// and 3 arguments, its lists built by the backend) alike. Each script call builds its whole
// command as one list; before, it built its KEYS and ARGV as two lists of their own that
// go-redis's EvalSha copied into a third, boxing the command's name and SHA1 as it did: 4
// allocations more a call, 42 a cycle.
const maxAcquireReleaseAllocs = 37

// TestAcquireReleaseAllocations counts the heap allocations of an uncontended SPI Acquire and
// Release with context.Background (the calls made on the caller's goroutine) against the shared
// Redis and Redis Cluster. Counted, not timed.
func TestAcquireReleaseAllocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    func(testing.TB) goredis.UniversalClient
	}{
		{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, tc.c(t), benchQuiet)
			ctx := context.Background()
			sid := open(t, b, time.Minute)
			defer b.CloseSession(ctx, sid)
			name := uniq(t, "allocs")
			cycle := func() {
				r, err := b.Acquire(ctx, sid, name)
				if err != nil || r.Kind != spi.Granted {
					t.Fatalf("acquire: %+v %v", r, err)
				}
				if err := b.Release(ctx, sid, name, r.Token); err != nil {
					t.Fatalf("release: %v", err)
				}
			}
			for range 20 { // the pool's connections and the script cache
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

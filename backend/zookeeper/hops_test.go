package zookeeper

import (
	"context"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestAcquireReleaseReusesHopWorkers counts the goroutines started per acquire and release
// with a context that can end (as a simba.Client's calls always have, and the bench harness's
// SPI row): each request waits on a hop worker that the next one reuses (see hops), where a
// goroutine was started for each request (2 a cycle), whose stack go-zookeeper's encoding then
// grew. A count, not a time: with nothing else starting goroutines in the test, a cycle starts
// none once a worker is idle.
func TestAcquireReleaseReusesHopWorkers(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := b.OpenSession(ctx, "hops", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cycle := func() {
		a, err := b.Acquire(ctx, s.ID, "hops")
		if err != nil || a.Kind != spi.Granted {
			t.Fatalf("Acquire = %+v, %v", a, err)
		}
		if err := b.Release(ctx, s.ID, "hops", a.Token); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // the roots, and a worker
	const cycles = 50
	started := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(started)
	before := started[0].Value.Uint64()
	for range cycles {
		cycle()
	}
	metrics.Read(started)
	per := float64(started[0].Value.Uint64()-before) / cycles
	t.Logf("%.2f goroutines started per acquire and release", per)
	if per > 0.5 {
		t.Errorf("%.2f goroutines started per acquire and release with a context that can end, want none (a hop worker reused)", per)
	}
}

package zookeeper

import (
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// BenchmarkHandover measures a graceful hand-over between two sessions of one backend: a
// holder releases while a queued waiter waits, and the waiter, woken by the Released hint,
// is granted. It reports the median and 99th percentile from the release's start to the
// waiter's grant.
func BenchmarkHandover(b *testing.B) {
	e := newBenchEnv(b)
	w, err := e.b.OpenSession(e.ctx, "bench-waiter", 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	hints, err := e.b.Hints(e.ctx)
	if err != nil {
		b.Fatal(err)
	}
	const name = "handover"
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		r, err := e.b.Acquire(e.ctx, e.session, name)
		if err != nil || r.Kind != spi.Granted {
			b.Fatalf("Acquire = %+v, %v", r, err)
		}
		if q, err := e.b.AcquireQueued(e.ctx, w.ID, name); err != nil || q.Kind != spi.HeldBy {
			b.Fatalf("the waiter's attempt = %+v, %v", q, err)
		}
		for drained := false; !drained; {
			select {
			case <-hints:
			default:
				drained = true
			}
		}
		start := time.Now()
		if err := e.b.Release(e.ctx, e.session, name, r.Token); err != nil {
			b.Fatal(err)
		}
		var got spi.Acquire
		for got.Kind != spi.Granted {
			select {
			case h := <-hints:
				if h.Kind != spi.Released || h.Name != name {
					continue
				}
			case <-time.After(5 * time.Second):
				b.Fatal("no Released hint within 5 s")
			}
			if got, err = e.b.AcquireQueued(e.ctx, w.ID, name); err != nil {
				b.Fatal(err)
			}
		}
		lat = append(lat, time.Since(start))
		if err := e.b.Release(e.ctx, w.ID, name, got.Token); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "ns/handover-p50")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Nanoseconds()), "ns/handover-p99")
}

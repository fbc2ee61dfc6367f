package etcd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// benchEnv is a backend with one session on the shared server, and a plain client on which the
// baseline runs: one Put.
type benchEnv struct {
	b       *Backend
	session spi.SessionID
	ctx     context.Context
	dsn     string
}

func newBenchEnv(b *testing.B) *benchEnv {
	dsn := serverDSN(b)
	be := openBackend(b, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	s, err := be.OpenSession(ctx, "bench", 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{b: be, session: s.ID, ctx: ctx, dsn: dsn}
}

// put is the baseline: one Put of a key under the backend's prefix.
func (e *benchEnv) put(b *testing.B) {
	if _, err := e.b.cli.Put(e.ctx, e.b.prefix+"/baseline", "x"); err != nil {
		b.Fatal(err)
	}
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// ratio runs op and the baseline Put interleaved b.N times and reports op's cost in Puts as
// the ratio of the medians, with op's mean latency.
func ratio(b *testing.B, e *benchEnv, unit string, op func()) {
	for range 20 {
		e.put(b)
		op()
	}
	ops := make([]time.Duration, 0, b.N)
	puts := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		e.put(b)
		t1 := time.Now()
		op()
		ops = append(ops, time.Since(t1))
		puts = append(puts, t1.Sub(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(quantile(ops, 0.5))/float64(quantile(puts, 0.5)), "puts/"+unit)
	b.ReportMetric(float64(quantile(ops, 0.5).Microseconds()), "µs/"+unit)
}

// BenchmarkAcquireRelease measures the acquire+release cycle of one lease (two transactions)
// in same-run Puts, beside etcd's own concurrency.Mutex Lock+Unlock measured the same way.
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("simba", func(b *testing.B) {
		e := newBenchEnv(b)
		ratio(b, e, "cycle", func() {
			r, err := e.b.Acquire(e.ctx, e.session, "cycle")
			if err != nil || r.Kind != spi.Granted {
				b.Fatalf("Acquire = %+v, %v", r, err)
			}
			if err := e.b.Release(e.ctx, e.session, "cycle", r.Token); err != nil {
				b.Fatal(err)
			}
		})
	})
	// The same cycle through AcquireQueued, as Lock and a campaign acquire: with no one
	// waiting it is the acquire transaction too (the queue costs one compare over an empty
	// range).
	b.Run("simba-queued", func(b *testing.B) {
		e := newBenchEnv(b)
		ratio(b, e, "cycle", func() {
			r, err := e.b.AcquireQueued(e.ctx, e.session, "cycle")
			if err != nil || r.Kind != spi.Granted {
				b.Fatalf("AcquireQueued = %+v, %v", r, err)
			}
			if err := e.b.Release(e.ctx, e.session, "cycle", r.Token); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		e := newBenchEnv(b)
		s, err := concurrency.NewSession(e.b.cli, concurrency.WithTTL(30))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		mu := concurrency.NewMutex(s, e.b.prefix+"/etcd-mutex")
		ratio(b, e, "cycle", func() {
			if err := mu.Lock(e.ctx); err != nil {
				b.Fatal(err)
			}
			if err := mu.Unlock(e.ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkAcquireReleaseIdle measures BenchmarkAcquireRelease's cycle (Acquire, Release) in
// same-run Puts, on a backend subscribed to hints as a simba.Client is, alone and with 8 idle
// backends open on clients of their own, each subscribed to hints (a reader drains them, as a
// client's does) with a session that once waited for another name and then got it. Idle
// backends wait for nothing: the cycle's releases should cost them nothing.
func BenchmarkAcquireReleaseIdle(b *testing.B) {
	for _, idle := range []int{0, 8} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			e := newBenchEnv(b)
			drain := func(be *Backend) {
				hints, err := be.Hints(e.ctx)
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					for range hints {
					}
				}()
			}
			drain(e.b)
			for i := range idle {
				ib := openBackend(b, e.dsn)
				drain(ib)
				s, err := ib.OpenSession(e.ctx, "idle", 30*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				name := fmt.Sprintf("idle-%d", i)
				r, err := e.b.Acquire(e.ctx, e.session, name)
				if err != nil || r.Kind != spi.Granted {
					b.Fatalf("Acquire = %+v, %v", r, err)
				}
				if w, err := ib.AcquireQueued(e.ctx, s.ID, name); err != nil || w.Kind != spi.HeldBy {
					b.Fatalf("idle AcquireQueued = %+v, %v", w, err)
				}
				if err := e.b.Release(e.ctx, e.session, name, r.Token); err != nil {
					b.Fatal(err)
				}
				w, err := ib.AcquireQueued(e.ctx, s.ID, name)
				if err != nil || w.Kind != spi.Granted {
					b.Fatalf("idle AcquireQueued after the release = %+v, %v", w, err)
				}
				if err := ib.Release(e.ctx, s.ID, name, w.Token); err != nil {
					b.Fatal(err)
				}
			}
			blockRatio(b, e, "cycle", func() {
				r, err := e.b.Acquire(e.ctx, e.session, "cycle")
				if err != nil || r.Kind != spi.Granted {
					b.Fatalf("Acquire = %+v, %v", r, err)
				}
				if err := e.b.Release(e.ctx, e.session, "cycle", r.Token); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkJoinLeaveIdle measures a join+leave cycle of a group in same-run Puts, on a
// backend subscribed to hints as a simba.Client is, alone and with 8 idle backends open on
// clients of their own, each subscribed to hints (a reader drains and counts them) with a
// session that is a member of a group of its own. Idle backends use no group of the cycle's:
// it should cost them nothing (hints/cycle: the GroupChanged hints they got per cycle, a lower
// bound as the last cycles' may be on their way). When each subscriber watched the whole
// groups prefix, every join and leave went to all of them (16 hints a cycle).
// Measured (-benchtime 200x -count 3, the old code in the same session): with 8 idle, 16
// hints and 3.61-3.78 Puts a cycle before (2.40-2.69 alone), 0 hints and 2.50-2.62 Puts now
// (2.42-2.70 alone).
func BenchmarkJoinLeaveIdle(b *testing.B) {
	for _, idle := range []int{0, 8} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			e := newBenchEnv(b)
			var got atomic.Int64
			drain := func(be *Backend, count bool) {
				hints, err := be.Hints(e.ctx)
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					for h := range hints {
						if count && h.Kind == spi.GroupChanged {
							got.Add(1)
						}
					}
				}()
			}
			drain(e.b, false)
			for i := range idle {
				ib := openBackend(b, e.dsn)
				drain(ib, true)
				s, err := ib.OpenSession(e.ctx, "idle", 30*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if st, err := ib.Join(e.ctx, s.ID, fmt.Sprintf("idle-%d", i)); err != nil || st != spi.OK {
					b.Fatalf("idle Join = %v, %v", st, err)
				}
			}
			var base int64
			cycles := 0
			blockRatio(b, e, "cycle", func() {
				if cycles == 20 { // the warm-up is done
					base = got.Load()
				}
				cycles++
				if st, err := e.b.Join(e.ctx, e.session, "cycle"); err != nil || st != spi.OK {
					b.Fatalf("Join = %v, %v", st, err)
				}
				if st, err := e.b.Leave(e.ctx, e.session, "cycle"); err != nil || st != spi.OK {
					b.Fatalf("Leave = %v, %v", st, err)
				}
			})
			b.ReportMetric(float64(got.Load()-base)/float64(b.N), "hints/cycle")
		})
	}
}

// blockRatio is ratio for an op whose cost partly lands after it returns (a release's watch
// events, which the idle backends' clients handle while the next call runs): interleaved
// one by one, that cost would slow the baseline Put after it as much as the next op. So it
// runs the Puts and the ops in alternating blocks of 50, and reports the ratio of the medians
// and op's median latency.
func blockRatio(b *testing.B, e *benchEnv, unit string, op func()) {
	const block = 50
	for range 20 {
		e.put(b)
		op()
	}
	ops := make([]time.Duration, 0, b.N)
	puts := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for len(ops) < b.N {
		n := min(block, b.N-len(ops))
		for range n {
			t0 := time.Now()
			e.put(b)
			puts = append(puts, time.Since(t0))
		}
		for range n {
			t0 := time.Now()
			op()
			ops = append(ops, time.Since(t0))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(quantile(ops, 0.5))/float64(quantile(puts, 0.5)), "puts/"+unit)
	b.ReportMetric(float64(quantile(ops, 0.5).Microseconds()), "µs/"+unit)
}

// newSimba starts a simba.Client on a backend of its own on dsn.
func newSimba(b *testing.B, dsn string, ttl time.Duration) (*simba.Client, *Backend) {
	be, err := New(dsn)
	if err != nil {
		b.Fatal(err)
	}
	c, err := simba.New(be, simba.WithTTL(ttl))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx) //nolint:errcheck
		be.Close()
	})
	return c, be
}

// BenchmarkHandover measures a graceful hand-over of a simba Lock between two clients (two
// sessions, two etcd clients): the waiter has been waiting 20 ms when the holder unlocks; the
// time runs from Unlock to the waiter's grant (the release transaction, the watch event, the
// waiter's acquire transaction). Reported: p50 and p99 in ms, and the p99 in same-run
// concurrency.Mutex hand-overs, measured the same way.
func BenchmarkHandover(b *testing.B) {
	dsn := serverDSN(b)
	ctx := context.Background()
	ca, _ := newSimba(b, dsn, 10*time.Second)
	cb, _ := newSimba(b, dsn, 10*time.Second)
	raw := rawClient(b, testenv.Etcd(b))
	sa, err := concurrency.NewSession(raw, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	sb, err := concurrency.NewSession(raw, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	prefix, _ := ParseDSN(dsn)
	ma, mb := concurrency.NewMutex(sa, prefix.Prefix+"/mutex-hand"), concurrency.NewMutex(sb, prefix.Prefix+"/mutex-hand")

	var simbaLat, mutexLat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		hold, wait := ca, cb
		if i%2 == 1 {
			hold, wait = cb, ca
		}
		h, err := hold.Lock(ctx, "hand")
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			w, err := wait.Lock(ctx, "hand")
			got <- time.Now()
			if err == nil {
				w.Unlock(ctx) //nolint:errcheck
			}
		}()
		time.Sleep(20 * time.Millisecond)
		t0 := time.Now()
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		simbaLat = append(simbaLat, (<-got).Sub(t0))
		time.Sleep(5 * time.Millisecond) // let the waiter's unlock finish

		// etcd's Mutex, the same way.
		if err := ma.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		mgot := make(chan time.Time, 1)
		go func() {
			err := mb.Lock(ctx)
			mgot <- time.Now()
			if err == nil {
				mb.Unlock(ctx) //nolint:errcheck
			}
		}()
		time.Sleep(20 * time.Millisecond)
		t0 = time.Now()
		if err := ma.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		mutexLat = append(mutexLat, (<-mgot).Sub(t0))
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(quantile(simbaLat, 0.5)), "p50-ms")
	b.ReportMetric(ms(quantile(simbaLat, 0.99)), "p99-ms")
	b.ReportMetric(ms(quantile(mutexLat, 0.99)), "mutex-p99-ms")
	b.ReportMetric(float64(quantile(simbaLat, 0.99))/float64(quantile(mutexLat, 0.99)), "p99/mutex-p99")
}

// BenchmarkCrashFailover measures a crash failover of a simba Lock: the holder's client takes
// the lock, the waiter waits, and after a random 0.3–1.3 s the holder "crashes" (its backend
// is closed under it: no more keep-alives, no release, exactly what a killed process leaves
// behind); the time runs from the crash to the waiter's grant, in TTLs. The TTL is the
// server's shortest lease. The bound is etcd's: the lease expires at most one TTL after the
// crash, and etcd's lessor revokes expired leases on a 500 ms timer, so the waiter's watch
// sees the deletion up to that much later. Reported: p50 and max ×TTL. Run it with
// -benchtime=Nx (each iteration takes about a TTL).
func BenchmarkCrashFailover(b *testing.B) {
	dsn := serverDSN(b)
	ttl := minTTL(b, rawClient(b, testenv.Etcd(b)))
	ctx := context.Background()
	waiter, _ := newSimba(b, dsn, ttl)
	var fails []time.Duration
	b.ResetTimer()
	for i := range b.N {
		holder, hb := newSimba(b, dsn, ttl)
		name := fmt.Sprintf("crash-%d", i)
		if _, err := holder.Lock(ctx, name); err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			w, err := waiter.Lock(ctx, name)
			got <- time.Now()
			if err == nil {
				w.Unlock(ctx) //nolint:errcheck
			}
		}()
		time.Sleep(300*time.Millisecond + rand.N(time.Second))
		t0 := time.Now()
		hb.Close() // the crash
		fails = append(fails, (<-got).Sub(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(quantile(fails, 0.5))/float64(ttl), "p50-xTTL")
	b.ReportMetric(float64(slices.Max(fails))/float64(ttl), "max-xTTL")
	b.ReportMetric(ttl.Seconds(), "ttl-s")
}

// BenchmarkKeepAlive10000 measures a keep-alive of a session holding 10,000 leases (asking
// about all of them) in same-run Puts: one LeaseKeepAliveOnce and one read-only transaction,
// whatever the number of leases.
func BenchmarkKeepAlive10000(b *testing.B) { benchKeepAlive(b, 10000) }

// BenchmarkKeepAlive10 is BenchmarkKeepAlive10000 for a session holding 10 leases, the common
// case: the keep-alive's transaction reads their lease keys one by one, beside the held index.
func BenchmarkKeepAlive10(b *testing.B) { benchKeepAlive(b, 10) }

func benchKeepAlive(b *testing.B, n int) {
	e := newBenchEnv(b)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("held-%05d", i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	sem := make(chan struct{}, 64)
	for _, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
			defer cancel()
			if r, err := e.b.Acquire(ctx, e.session, name); err != nil || r.Kind != spi.Granted {
				select {
				case errs <- fmt.Errorf("Acquire(%s) = %+v, %v", name, r, err):
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	ratio(b, e, "keep-alive", func() {
		ka, err := e.b.KeepAlive(e.ctx, e.session, names, nil)
		if err != nil || ka.Expired || len(ka.Held) != n {
			b.Fatalf("KeepAlive: %d held, expired %v, %v", len(ka.Held), ka.Expired, err)
		}
	})
}

// BenchmarkInspectLease: one InspectLease of a held lease (what fence.LeaseVerifier reads per
// check), with the linearizable Get of the lease key the call cannot do without reported
// beside it in the same run (get-ns/op): InspectLease costs that read plus its holder's
// session key and time left.
func BenchmarkInspectLease(b *testing.B) {
	e := newBenchEnv(b)
	name := fmt.Sprintf("bench-inspect-%d", rand.Int64())
	if r, err := e.b.Acquire(e.ctx, e.session, name); err != nil || r.Kind != spi.Granted {
		b.Fatalf("Acquire = %+v, %v", r, err)
	}
	var getTime, inspectTime time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		if _, err := e.b.cli.Get(e.ctx, e.b.prefix+"/baseline"); err != nil {
			b.Fatal(err)
		}
		getTime += time.Since(start)
		start = time.Now()
		if l, found, err := e.b.InspectLease(e.ctx, name); err != nil || !found || l.Holder != e.session {
			b.Fatalf("InspectLease = %+v, %v, %v", l, found, err)
		}
		inspectTime += time.Since(start)
		n++
	}
	b.ReportMetric(float64(inspectTime)/float64(n), "inspect-ns/op")
	b.ReportMetric(float64(getTime)/float64(n), "get-ns/op")
	b.ReportMetric(float64(inspectTime)/float64(getTime), "inspect/get")
}

// BenchmarkReleaseCost breaks a release down against the server's plainest writes, each timed
// after the same idle pause as a hand-over's release (20 ms) and one sample of each in turn, so
// that the ratios are same-run: put (one Put, the baseline), delete (one Delete of a key on
// the session's lease), release (Backend.Release: one transaction, two compares on the lease
// key, two deletes), release-waited (the same with another session waiting for the name,
// whose backend watches the lease key and the queue: the watch events it triggers), and
// release-b2b and put-b2b right after the acquire (or a Put) instead of after the pause. It
// reports each one's p50 in µs and in idle Puts (p50 ratio).
func BenchmarkReleaseCost(b *testing.B) {
	const pause = 20 * time.Millisecond
	e := newBenchEnv(b)
	lease, _ := leaseOf(e.session)
	other := openBackend(b, e.dsn)
	w, err := other.OpenSession(e.ctx, "waiter", 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	acquire := func(name string) int64 {
		r, err := e.b.Acquire(e.ctx, e.session, name)
		if err != nil || r.Kind != spi.Granted {
			b.Fatalf("Acquire = %+v, %v", r, err)
		}
		return r.Token
	}
	release := func(name string, tok int64) {
		if err := e.b.Release(e.ctx, e.session, name, tok); err != nil {
			b.Fatal(err)
		}
	}
	kinds := []string{"put", "delete", "release", "release-waited", "release-b2b", "put-b2b"}
	lat := make(map[string][]time.Duration, len(kinds))
	sample := func(kind string) {
		var t0 time.Time
		switch kind {
		case "put":
			time.Sleep(pause)
			t0 = time.Now()
			e.put(b)
		case "put-b2b":
			e.put(b)
			t0 = time.Now()
			e.put(b)
		case "delete":
			key := e.b.prefix + "/baseline-leased"
			if _, err := e.b.cli.Put(e.ctx, key, "x", clientv3.WithLease(lease)); err != nil {
				b.Fatal(err)
			}
			time.Sleep(pause)
			t0 = time.Now()
			if _, err := e.b.cli.Delete(e.ctx, key); err != nil {
				b.Fatal(err)
			}
		case "release":
			tok := acquire("cost")
			time.Sleep(pause)
			t0 = time.Now()
			release("cost", tok)
		case "release-b2b":
			tok := acquire("cost")
			t0 = time.Now()
			release("cost", tok)
		case "release-waited":
			tok := acquire("cost-waited")
			if r, err := other.AcquireQueued(e.ctx, w.ID, "cost-waited"); err != nil || r.Kind != spi.HeldBy {
				b.Fatalf("the waiter's AcquireQueued = %+v, %v", r, err)
			}
			time.Sleep(pause)
			t0 = time.Now()
			release("cost-waited", tok)
			d := time.Since(t0)
			lat[kind] = append(lat[kind], d)
			// The waiter takes the lease and gives it back, as a hand-over's would.
			r, err := other.AcquireQueued(e.ctx, w.ID, "cost-waited")
			if err != nil || r.Kind != spi.Granted {
				b.Fatalf("the waiter's AcquireQueued after the release = %+v, %v", r, err)
			}
			if err := other.Release(e.ctx, w.ID, "cost-waited", r.Token); err != nil {
				b.Fatal(err)
			}
			return
		}
		lat[kind] = append(lat[kind], time.Since(t0))
	}
	for i := range 5 * len(kinds) {
		sample(kinds[i%len(kinds)])
	}
	clear(lat)
	b.ResetTimer()
	for i := range b.N {
		for k := range kinds {
			sample(kinds[(i+k)%len(kinds)])
		}
	}
	b.StopTimer()
	put := quantile(lat["put"], 0.5)
	for _, k := range kinds {
		p50 := quantile(lat[k], 0.5)
		b.ReportMetric(float64(p50.Microseconds()), "µs-"+k)
		if k != "put" {
			b.ReportMetric(float64(p50)/float64(put), "puts-"+k)
		}
	}
}

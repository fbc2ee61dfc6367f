package zookeeper

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// benchEnv is a backend with one session, and a plain go-zookeeper connection (no tap) on
// which the baseline runs: a raw create+delete of an ephemeral node under the same parent.
type benchEnv struct {
	b       *Backend
	session spi.SessionID
	raw     *zk.Conn
	rawPath string
	ctx     context.Context
	dsn     string // the backend's, for more backends on the same chroot
}

func newBenchEnv(b *testing.B) *benchEnv {
	dsn := serverDSN(b, "")
	be := openBackend(b, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	s, err := be.OpenSession(ctx, "bench", 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	raw, _, err := zk.Connect(be.cfg.Servers, 30*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(raw.Close)
	return &benchEnv{b: be, session: s.ID, raw: raw, rawPath: be.lay.lease("raw-baseline"), ctx: ctx, dsn: dsn}
}

// pair is the baseline: create an ephemeral node and delete it, as a bare client would.
func (e *benchEnv) pair(b *testing.B) {
	if _, err := e.raw.Create(e.rawPath, []byte("bench"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		b.Fatal(err)
	}
	if err := e.raw.Delete(e.rawPath, -1); err != nil {
		b.Fatal(err)
	}
}

// ratio runs op and the baseline pair interleaved b.N times and reports op's cost in
// baseline pairs (the target for an acquire+release cycle is ≤ 1.1) as the ratio of the
// medians, which fsync stalls of the server move far less than the means, with both mean
// latencies.
func ratio(b *testing.B, e *benchEnv, unit string, op func()) {
	for range 20 { // warm up both paths
		e.pair(b)
		op()
	}
	ops := make([]time.Duration, 0, b.N)
	pairs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		e.pair(b)
		t1 := time.Now()
		op()
		ops = append(ops, time.Since(t1))
		pairs = append(pairs, t1.Sub(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(ops))/float64(median(pairs)), "pairs/"+unit)
	b.ReportMetric(float64(mean(ops).Nanoseconds()), "ns/"+unit)
	b.ReportMetric(float64(mean(pairs).Nanoseconds()), "ns/pair")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

// BenchmarkAcquireRelease measures the acquire+release cycle of one lease (Granted, then
// Release with its token) against a raw create+delete pair of an ephemeral node in the same
// run; go-zookeeper's own Lock+Unlock is measured the same way for comparison.
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
	// A name that once had waiters (its queue node exists, now empty): the first acquire's
	// multi-op deletes the empty queue node (as the server would on its container check), and
	// the cycle is then the one of a name without a queue node.
	b.Run("simba-queue-node", func(b *testing.B) {
		e := newBenchEnv(b)
		other, err := e.b.OpenSession(e.ctx, "bench-waiter", 30*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		r, err := e.b.Acquire(e.ctx, e.session, "cycle")
		if err != nil || r.Kind != spi.Granted {
			b.Fatalf("Acquire = %+v, %v", r, err)
		}
		if w, err := e.b.AcquireQueued(e.ctx, other.ID, "cycle"); err != nil || w.Kind != spi.HeldBy {
			b.Fatalf("AcquireQueued = %+v, %v", w, err)
		}
		if err := e.b.Withdraw(e.ctx, other.ID, "cycle"); err != nil {
			b.Fatal(err)
		}
		if err := e.b.Release(e.ctx, e.session, "cycle", r.Token); err != nil {
			b.Fatal(err)
		}
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
	b.Run("go-zookeeper-Lock", func(b *testing.B) {
		e := newBenchEnv(b)
		lock := zk.NewLock(e.raw, e.b.lay.lease("zk-lock"), zk.WorldACL(zk.PermAll))
		ratio(b, e, "cycle", func() {
			if err := lock.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := lock.Unlock(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkAcquireReleaseIdleHinted is the simba cycle of BenchmarkAcquireRelease while 8
// other backends on the same chroot are open, as 8 idle simba.Clients' would be: each has a
// Hints subscriber (drained) and a session that once waited for a name of its own and then
// got it. Their hint connections watch only names their sessions wait for, so the cycle should
// cost what it costs alone; when they watched every lease node, each create and delete was
// sent to all of them. The baseline pair runs outside the leases node, where no hint
// connection ever watched, so that it costs the same either way.
func BenchmarkAcquireReleaseIdleHinted(b *testing.B) {
	e := newBenchEnv(b)
	e.rawPath = e.b.lay.root() + "/raw-baseline"
	for i := range 8 {
		idle := openBackend(b, e.dsn)
		hints, err := idle.Hints(e.ctx)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range hints {
			}
		}()
		s, err := idle.OpenSession(e.ctx, "bench-idle", 30*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("idle-%d", i)
		r, err := e.b.Acquire(e.ctx, e.session, name)
		if err != nil || r.Kind != spi.Granted {
			b.Fatalf("Acquire = %+v, %v", r, err)
		}
		if w, err := idle.Acquire(e.ctx, s.ID, name); err != nil || w.Kind != spi.HeldBy {
			b.Fatalf("idle Acquire = %+v, %v; want held", w, err)
		}
		if err := e.b.Release(e.ctx, e.session, name, r.Token); err != nil {
			b.Fatal(err)
		}
		if g, err := idle.Acquire(e.ctx, s.ID, name); err != nil || g.Kind != spi.Granted {
			b.Fatalf("idle Acquire after the release = %+v, %v; want granted", g, err)
		}
	}
	ratio(b, e, "cycle", func() {
		r, err := e.b.Acquire(e.ctx, e.session, "cycle")
		if err != nil || r.Kind != spi.Granted {
			b.Fatalf("Acquire = %+v, %v", r, err)
		}
		if err := e.b.Release(e.ctx, e.session, "cycle", r.Token); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkJoinLeaveIdleMembers is a join+leave cycle of a group while 8 other backends on the
// same chroot are open, as 8 idle simba.Clients' would be: each has a Hints subscriber
// (drained) and a session that is a member of a group of its own. Their hint connections
// watch only the groups their sessions use, so the cycle should be no event at any of them
// (events/cycle: the watch events their hint connections read per cycle); when each watched
// the whole groups node, every join and leave was sent to all of them (16 events a cycle).
// The baseline pair runs outside the groups node, where no hint connection ever watched.
// Measured (-benchtime 200x -count 3, the old code in the same session): 16 events and
// 1.31-1.53 pairs a cycle before, 0 events and 0.99-1.06 pairs now.
func BenchmarkJoinLeaveIdleMembers(b *testing.B) {
	e := newBenchEnv(b)
	e.rawPath = e.b.lay.root() + "/raw-baseline"
	var events atomic.Int64
	hook := func(w *watcher, path string) {
		if w.b != e.b && strings.HasPrefix(path, e.b.lay.groupsRoot()+"/") {
			events.Add(1)
		}
	}
	testHookWatchEvent.Store(&hook)
	b.Cleanup(func() { testHookWatchEvent.Store(nil) })
	var idles []*Backend
	for i := range 8 {
		idle := openBackend(b, e.dsn)
		idles = append(idles, idle)
		hints, err := idle.Hints(e.ctx)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range hints {
			}
		}()
		s, err := idle.OpenSession(e.ctx, "bench-idle", 30*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if st, err := idle.Join(e.ctx, s.ID, fmt.Sprintf("idle-%d", i)); err != nil || st != spi.OK {
			b.Fatalf("idle Join = %v, %v", st, err)
		}
	}
	// The idle backends' hint connections set their watches before the cycles.
	for i, idle := range idles {
		for deadline := time.Now().Add(time.Minute); !hintWatcher(idle).covers(spi.GroupChanged, fmt.Sprintf("idle-%d", i)); {
			if time.Now().After(deadline) {
				b.Fatal("an idle backend's hint connection set no watch")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cycles := int64(0)
	var base int64
	ratio(b, e, "cycle", func() {
		if cycles == 20 { // the warm-up is done
			base = events.Load()
		}
		cycles++
		if st, err := e.b.Join(e.ctx, e.session, "cycle"); err != nil || st != spi.OK {
			b.Fatalf("Join = %v, %v", st, err)
		}
		if st, err := e.b.Leave(e.ctx, e.session, "cycle"); err != nil || st != spi.OK {
			b.Fatalf("Leave = %v, %v", st, err)
		}
	})
	// The events of the last cycles may still be on their way: a lower bound.
	b.ReportMetric(float64(events.Load()-base)/float64(b.N), "events/cycle")
}

// BenchmarkKeepAlive10000 measures a keep-alive of a session holding 10,000 leases (asking
// about all of them) against the raw create+delete pair: it is one request, whatever the
// number of leases.
func BenchmarkKeepAlive10000(b *testing.B) {
	const n = 10000
	e := newBenchEnv(b)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("held-%05d", i)
	}
	// Acquire them with some concurrency (the session's requests are pipelined).
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	sem := make(chan struct{}, 64)
	for _, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := e.b.Acquire(e.ctx, e.session, name)
			if err == nil && r.Kind != spi.Granted {
				err = fmt.Errorf("acquire %s: %s", name, r.Kind)
			}
			if err != nil {
				select {
				case errs <- err:
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
	ratio(b, e, "keepalive", func() {
		ka, err := e.b.KeepAlive(e.ctx, e.session, names, nil)
		if err != nil || ka.Expired || len(ka.Held) != n {
			b.Fatalf("KeepAlive: held %d, expired %v, %v", len(ka.Held), ka.Expired, err)
		}
	})
}

// BenchmarkCloseWithSession measures Backend.Close of a backend with one session open and one
// lease held (dropped, not closed: see Closing the backend in the package doc), and of one whose
// only session is the observer (closed at the server); the backend and its sessions are set up
// outside the timer. It reports the mean, and closes/s slower than 500 ms (go-zookeeper's
// one-second close timer: "slow/op", the share of such closes).
func BenchmarkCloseWithSession(b *testing.B) {
	dsn := serverDSN(b, "")
	n := 0 // numbers the leases across the runs of b.N
	for _, kind := range []string{"session", "observer"} {
		b.Run(kind, func(b *testing.B) {
			slow := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				be, err := New(dsn, WithSlog(nil))
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if kind == "session" {
					s, err := be.OpenSession(ctx, "bench-close", 10*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					if a, err := be.Acquire(ctx, s.ID, fmt.Sprintf("bench-close-%d", n)); err != nil || a.Kind != spi.Granted {
						b.Fatalf("acquire: %+v, %v", a, err)
					}
				} else if _, err := be.Members(ctx, "bench-close"); err != nil {
					b.Fatal(err)
				}
				cancel()
				n++
				b.StartTimer()
				start := time.Now()
				be.Close()
				if time.Since(start) > 500*time.Millisecond {
					slow++
				}
			}
			b.ReportMetric(float64(slow)/float64(b.N), "slow/op")
		})
	}
}

// BenchmarkCloseReconnecting measures Backend.Close of a backend whose session's connection
// is reconnecting to a server that is down (a fault proxy cuts its connection and refuses new
// ones while Close runs), set up outside the timer. It reports the mean and the share of closes
// slower than 500 ms ("slow/op": go-zookeeper's Conn.Close waiting out its one-second timer for
// a close request its connection loop, ending between two rounds of dials, never took).
func BenchmarkCloseReconnecting(b *testing.B) {
	chroot := serverChroot(b)
	slow := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p, err := faultproxy.Start(testenv.ZooKeeper(b)[0])
		if err != nil {
			b.Fatal(err)
		}
		be, err := New("zk://"+p.Addr()+chroot.Path+"?timeout=5s", WithSlog(nil))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := be.OpenSession(ctx, "bench-close-reconnecting", 10*time.Second); err != nil {
			b.Fatal(err)
		}
		cancel()
		p.Set(faultproxy.Fault{Cut: true})
		time.Sleep(time.Duration(i%8) * 25 * time.Millisecond) // somewhere in the redial rounds
		b.StartTimer()
		start := time.Now()
		be.Close()
		if d := time.Since(start); d > 500*time.Millisecond {
			slow++
			b.Logf("close %d (%d ms into the cut) took %v", i, (i%8)*25, d)
		}
		b.StopTimer()
		p.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(slow)/float64(b.N), "slow/op")
}

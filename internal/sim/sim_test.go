package sim

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/engine"
)

var (
	flagSeeds    = flag.Int("seeds", defaultSeeds, "number of seeds TestSimulate runs (seeds seedbase .. seedbase+seeds-1)")
	flagSeedBase = flag.Uint64("seedbase", 1, "first seed TestSimulate runs")
	flagSeed     = flag.Uint64("seed", 0, "replay this one seed (verbose: prints its options and, on failure, its transcript)")
	flagLines    = flag.Int("lines", DefaultTranscript, "transcript lines a failure report shows")
	flagLand     = flag.Bool("land-after-timeout", true, "let timed-out requests reach the backend after the client gave up (Sim.LandAfterTimeout)")
)

// runSeeds runs seeds from..from+n-1 with rule brk broken on GOMAXPROCS workers. It returns
// the failed results, lowest seed first, stopping early once stopAfter failures are found
// (0: never).
func runSeeds(from uint64, n int, brk engine.Rule, stopAfter int) (failed []Result, ran int64) {
	var (
		next  atomic.Uint64
		done  atomic.Int64
		stop  atomic.Bool
		mu    sync.Mutex
		wg    sync.WaitGroup
		limit = from + uint64(n)
	)
	next.Store(from)
	workers := min(runtime.GOMAXPROCS(0), n)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := New(DefaultShape())
			s.LandAfterTimeout = *flagLand
			for !stop.Load() {
				seed := next.Add(1) - 1
				if seed >= limit {
					return
				}
				res := s.Run(seed, brk)
				done.Add(1)
				if res.Violation != nil {
					mu.Lock()
					failed = append(failed, res)
					if stopAfter > 0 && len(failed) >= stopAfter {
						stop.Store(true)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	sortResults(failed)
	return failed, done.Load()
}

func sortResults(rs []Result) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Config.Seed < rs[j-1].Config.Seed; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// TestSimulate runs -seeds seeds (or replays -seed) with every engine rule in force and fails
// on the first violation of an invariant, printing its seed, options, replay command and
// transcript.
func TestSimulate(t *testing.T) {
	if *flagSeed != 0 {
		seed := *flagSeed
		t.Logf("seed %d (replay: %s)", seed, ReplayCommand(seed))
		start := time.Now()
		s := New(DefaultShape())
		s.Lines = max(*flagLines, 1)
		s.LandAfterTimeout = *flagLand
		res := s.Run(seed, 0)
		t.Logf("options:\n%s", res.Config.String())
		t.Logf("%+v in %v", res.Stats, time.Since(start))
		if res.Violation != nil {
			t.Fatal(res.Report())
		}
		return
	}
	n := *flagSeeds
	t.Logf("seeds %d..%d on %d workers (replay one with: %s)", *flagSeedBase, *flagSeedBase+uint64(n)-1,
		runtime.GOMAXPROCS(0), ReplayCommand(*flagSeedBase))
	start := time.Now()
	failed, ran := runSeeds(*flagSeedBase, n, 0, 1)
	elapsed := time.Since(start)
	t.Logf("%d seeds in %v (%.0f seeds/s)", ran, elapsed.Round(time.Millisecond), float64(ran)/elapsed.Seconds())
	for _, res := range failed {
		t.Error(res.Report())
	}
}

// TestMutations proves each rule of DESIGN.md §2 is needed: with the rule broken
// (engine.Options.Break), the simulator finds a violation within the default seed count.
func TestMutations(t *testing.T) {
	for _, rule := range []engine.Rule{engine.Rule1, engine.Rule2, engine.Rule3, engine.Rule4, engine.Rule5} {
		t.Run(fmt.Sprintf("rule%d", rule), func(t *testing.T) {
			failed, ran := runSeeds(1, defaultSeeds, rule, 1)
			if len(failed) == 0 {
				t.Fatalf("rule %d broken: %d seeds found no violation", rule, ran)
			}
			v := failed[0].Violation
			t.Logf("rule %d broken: caught by %s on seed %d (%d seeds run): %s", rule, v.Check, failed[0].Config.Seed, ran, v.Msg)
		})
	}
}

// TestDeterministic: a seed replays to the same outcome, transcript included.
func TestDeterministic(t *testing.T) {
	s := New(DefaultShape())
	for seed := uint64(1); seed <= 5; seed++ {
		a := s.Run(seed, engine.Rule2) // fails early, with a transcript
		b := New(DefaultShape()).Run(seed, engine.Rule2)
		if a.Stats != b.Stats || a.Transcript != b.Transcript || fmt.Sprint(a.Violation) != fmt.Sprint(b.Violation) {
			t.Fatalf("seed %d: two runs differ:\n%+v %v\n%+v %v", seed, a.Stats, a.Violation, b.Stats, b.Violation)
		}
		if a.Violation == nil || a.Transcript == "" {
			t.Fatalf("seed %d with rule 2 broken: no violation or no transcript", seed)
		}
		c := s.Run(seed, 0)
		d := New(DefaultShape()).Run(seed, 0)
		if c.Stats != d.Stats || c.Stats.Steps == 0 {
			t.Fatalf("seed %d: two runs differ or did nothing: %+v vs %+v", seed, c.Stats, d.Stats)
		}
	}
}

// BenchmarkSeed runs whole seeds (60 s of virtual time each) on every core and reports
// seeds/s.
func BenchmarkSeed(b *testing.B) {
	var seed atomic.Uint64
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		s := New(DefaultShape())
		for pb.Next() {
			if res := s.Run(seed.Add(1), 0); res.Violation != nil {
				b.Error(res.Report())
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "seeds/s")
}

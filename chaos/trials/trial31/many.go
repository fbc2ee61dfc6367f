package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
)

// many: one client, 2,000 lock names held and released by 200 goroutines, 50 elections and a
// group of 64 partitions; the footprint and the backend calls at rest and under churn.
func many(args []string) error {
	fs := flag.NewFlagSet("many", flag.ExitOnError)
	kind := fs.String("b", "mysql", "mysql|cluster")
	ttl := fs.Duration("ttl", 3*time.Second, "client TTL (renewal every TTL/3)")
	rest := fs.Duration("rest", 10*time.Second, "each at-rest measure")
	churn := fs.Duration("churn", 20*time.Second, "churn measure")
	dir := fs.String("dir", "/tmp/t31", "log directory")
	fs.Parse(args)
	os.MkdirAll(*dir, 0o755)
	logger, loud, err := newLog(filepath.Join(*dir, "many-"+*kind+".log"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	g0, h0 := proc()
	say("many %s: before the backend: goroutines=%d heap=%.1fMB", *kind, g0, h0)
	b, closeB, err := backendFor(ctx, *kind, dsnFor(*kind), logger)
	if err != nil {
		return err
	}
	cc := newCalls()
	c, err := simba.New(b, simba.WithTTL(*ttl), simba.WithLogger(logger), simba.WithOwner("t31-many"),
		simba.WithCallObserver(cc.observe))
	if err != nil {
		return err
	}
	renew := *ttl / 3
	pre := fmt.Sprintf("t31-%s-%s", runID, *kind)
	measure := func(label string, d time.Duration) {
		cc.take()
		start := time.Now()
		time.Sleep(d)
		secs := time.Since(start).Seconds()
		early, shortest := cc.early(renew)
		n, errs, _, mx := cc.take()
		g, h := proc()
		say("  %-34s goroutines=%d heap=%.1fMB calls: %s; errors: %v; keep-alives %d in %.1fs = %.2f per renewal interval (slowest %v; %d early, shortest gap %v)",
			label, g, h, fmtCounts(n, secs), errs, n[simba.OpKeepAlive], secs,
			float64(n[simba.OpKeepAlive])/(secs/renew.Seconds()), mx[simba.OpKeepAlive].Round(time.Millisecond), early, shortest.Round(time.Millisecond))
	}
	// Lock once so that the session is open before the idle measure.
	h, err := c.Lock(ctx, pre+"-warm")
	if err != nil {
		return fmt.Errorf("first lock: %w", err)
	}
	h.Unlock(ctx)
	measure("idle (session only)", *rest)

	// 50 elections, one group of 64 partitions: alone, this client leads all of them.
	var elected atomic.Int64
	var els []*simba.Election
	for i := 0; i < 50; i++ {
		e, err := c.NewElection(fmt.Sprintf("%s-el-%d", pre, i), simba.OnElected(func(context.Context, simba.Term) { elected.Add(1) }))
		if err != nil {
			return err
		}
		if err := e.Start(ctx); err != nil {
			return err
		}
		els = append(els, e)
	}
	grp, err := c.JoinGroup(ctx, pre+"-grp", 64, simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
		<-ctx.Done()
		return nil
	}))
	if err != nil {
		return err
	}
	t0 := time.Now()
	for elected.Load() < 50 || len(grp.Held()) < 64 {
		if time.Since(t0) > 30*time.Second {
			return fmt.Errorf("after 30 s: %d elections led, %d partitions held", elected.Load(), len(grp.Held()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	say("  50 elections led and 64 partitions held after %v", time.Since(t0).Round(time.Millisecond))
	measure("50 elections + 64 partitions", *rest)

	// 200 goroutines take 10 names each and hold them: 2,000 + 114 leases at rest.
	names := make([]string, 2000)
	for i := range names {
		names[i] = fmt.Sprintf("%s-lock-%d", pre, i)
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	var held atomic.Int64
	lockErrs := newTally()
	t0 = time.Now()
	for w := 0; w < 200; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var hs []*simba.Held
			for i := 0; i < 10; i++ {
				lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				h, err := c.Lock(lctx, names[w*10+i])
				cancel()
				if err != nil {
					lockErrs.add(errClass(err), err)
					continue
				}
				held.Add(1)
				hs = append(hs, h)
			}
			<-release
			for _, h := range hs {
				if err := h.Unlock(ctx); err != nil {
					lockErrs.add("unlock "+errClass(err), err)
				}
			}
		}(w)
	}
	for held.Load() < 2000 && time.Since(t0) < 40*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	say("  %d of 2000 locks held after %v (errors: %s)", held.Load(), time.Since(t0).Round(time.Millisecond), lockErrs)
	measure("2,000 locks + 50 el. + 64 part.", *rest)
	close(release)
	wg.Wait()
	say("  released; errors so far: %s", lockErrs)

	// Churn: the 200 goroutines lock a random name of the 2,000, hold it 1-10 ms, unlock.
	chk := newChecker()
	stop := make(chan struct{})
	var ops atomic.Int64
	for w := 0; w < 200; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			who := fmt.Sprintf("g%d", w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				name := names[rand.IntN(len(names))]
				lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				h, err := c.Lock(lctx, name)
				cancel()
				if err != nil {
					lockErrs.add("churn "+errClass(err), err)
					continue
				}
				chk.enter(name, who, h.Term)
				if h.IsValid() {
					chk.write(name, h.Token())
				}
				time.Sleep(time.Duration(1+rand.IntN(10)) * time.Millisecond)
				chk.leave(name, who)
				if err := h.Unlock(ctx); err != nil {
					lockErrs.add("churn unlock "+errClass(err), err)
				}
				ops.Add(1)
			}
		}(w)
	}
	time.Sleep(2 * time.Second) // let the churn settle in before measuring
	o0 := ops.Load()
	start := time.Now()
	measure("churn (200 goroutines, 2,000 names)", *churn)
	say("  churn: %.0f lock cycles/s; %s", float64(ops.Load()-o0)/time.Since(start).Seconds(), poolStats())
	close(stop)
	wg.Wait()
	chk.report(out)
	say("  lock errors: %s", lockErrs)
	lockErrs.examples(out)
	measure("after churn (50 el. + 64 part.)", *rest)

	for _, e := range els {
		e.Stop(ctx)
	}
	grp.Leave(ctx)
	measure("after Stop/Leave (session only)", *rest)
	if f, err := os.Create(filepath.Join(*dir, "many-"+*kind+".heap")); err == nil {
		pprof.WriteHeapProfile(f) // what the heap keeps once nothing is held
		f.Close()
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t0 = time.Now()
	err = c.Close(cctx)
	cancel()
	say("  Close: %v in %v", err, time.Since(t0).Round(time.Millisecond))
	gc, hc := proc()
	say("  after Close, before the backend's Close: goroutines=%d heap=%.1fMB", gc, hc)
	closeB()
	g := waitGoroutines(g0, 5*time.Second)
	g1, h1 := proc()
	say("  after Close and the backend's Close: goroutines=%d (before the backend: %d; after waiting %d) heap=%.1fMB", g1, g0, g, h1)
	say("  log lines: %s", loud())
	return nil
}

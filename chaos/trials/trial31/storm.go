package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// party is one client on a backend of its own (its own session), as one service would have.
type party struct {
	b      spi.Backend
	closeB func()
	c      *simba.Client
	calls  *calls
}

func newParty(ctx context.Context, kind, dsn, owner string, ttl time.Duration, logger *slog.Logger) (*party, error) {
	b, closeB, err := backendFor(ctx, kind, dsn, logger)
	if err != nil {
		return nil, err
	}
	cc := newCalls()
	c, err := simba.New(b, simba.WithTTL(ttl), simba.WithLogger(logger.With("client", owner)), simba.WithOwner(owner),
		simba.WithCallObserver(cc.observe))
	if err != nil {
		closeB()
		return nil, err
	}
	return &party{b, closeB, c, cc}, nil
}

// freeWithin polls InspectLease until no session holds name, up to d; it returns how long that
// took, or -1 if the name was still held at d (with its holder).
func freeWithin(ctx context.Context, b spi.Backend, name string, d time.Duration) (time.Duration, string) {
	li := b.(spi.LeaseInspector)
	start := time.Now()
	for {
		info, ok, err := li.InspectLease(ctx, name)
		if err == nil && (!ok || (info.Holder == "" && info.Unreadable == "")) {
			return time.Since(start), ""
		}
		if time.Since(start) > d {
			return -1, fmt.Sprintf("%s held by %s (%s) token %d, %v left, err %v", name, info.Holder, info.Owner, info.Token, info.Remaining, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holdAll has h lock every name and keep it until release is closed; it returns once all are held.
func holdAll(ctx context.Context, c *simba.Client, names []string, release <-chan struct{}, done *sync.WaitGroup) error {
	hs := make([]*simba.Held, 0, len(names))
	for _, n := range names {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		h, err := c.Lock(lctx, n)
		cancel()
		if err != nil {
			return fmt.Errorf("holder lock %s: %w", n, err)
		}
		hs = append(hs, h)
	}
	done.Add(1)
	go func() {
		defer done.Done()
		<-release
		for _, h := range hs {
			h.Unlock(ctx)
		}
	}()
	return nil
}

// tryAll has c TryLock every name until it gets it, up to d each, then unlocks it: a free lease
// still reserved for a waiter that gave up would fail TryLock with ErrLockHeld naming it.
func tryAll(ctx context.Context, c *simba.Client, names []string, d time.Duration) (worst time.Duration, failed []string) {
	for _, n := range names {
		start := time.Now()
		for {
			h, err := c.TryLock(ctx, n)
			if err == nil {
				h.Unlock(ctx)
				if e := time.Since(start); e > worst {
					worst = e
				}
				break
			}
			if time.Since(start) > d {
				failed = append(failed, fmt.Sprintf("%s: %v", n, trunc(err.Error(), 200)))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return worst, failed
}

func storm(args []string) error {
	fs := flag.NewFlagSet("storm", flag.ExitOnError)
	kind := fs.String("b", "mysql", "mysql|cluster")
	ttl := fs.Duration("ttl", 3*time.Second, "client TTL")
	dir := fs.String("dir", "/tmp/t31", "log directory")
	fs.Parse(args)
	os.MkdirAll(*dir, 0o755)
	logger, loud, err := newLog(filepath.Join(*dir, "storm-"+*kind+".log"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	dsn := dsnFor(*kind)
	pre := fmt.Sprintf("t31-%s-%s-st", runID, *kind)
	contended := make([]string, 20)
	for i := range contended {
		contended[i] = fmt.Sprintf("%s-c-%d", pre, i)
	}
	g0 := waitGoroutines(1, 0)
	h, err := newParty(ctx, *kind, dsn, "t31-holder", *ttl, logger)
	if err != nil {
		return err
	}
	s, err := newParty(ctx, *kind, dsn, "t31-stormer", *ttl, logger)
	if err != nil {
		return err
	}

	// A: holders keep the 20 names busy (100-300 ms tenures); 500 Locks with 50-500 ms timeouts.
	say("storm %s A: 20 holder goroutines, 2 waves of 500 Locks with 50-500 ms timeouts on 20 names", *kind)
	chk := newChecker()
	stop := make(chan struct{})
	var hwg sync.WaitGroup
	var hcycles atomic.Int64
	for i := range contended {
		hwg.Add(1)
		go func(i int) {
			defer hwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				hd, err := h.c.Lock(lctx, contended[i])
				cancel()
				if err != nil {
					continue
				}
				chk.enter(contended[i], "holder", hd.Term)
				if hd.IsValid() {
					chk.write(contended[i], hd.Token())
				}
				time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
				chk.leave(contended[i], "holder")
				hd.Unlock(ctx)
				hcycles.Add(1)
				time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
			}
		}(i)
	}
	time.Sleep(500 * time.Millisecond)
	res := newTally()
	var lateGrants, overshoots atomic.Int64
	var worstOver atomic.Int64
	for wave := 0; wave < 2; wave++ {
		var wg sync.WaitGroup
		for i := 0; i < 500; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				name := contended[rand.IntN(len(contended))]
				timeout := time.Duration(50+rand.IntN(451)) * time.Millisecond
				lctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				start := time.Now()
				hd, err := s.c.Lock(lctx, name)
				took := time.Since(start)
				if over := took - timeout; over > 0 {
					if over > 100*time.Millisecond {
						overshoots.Add(1)
					}
					for {
						w := worstOver.Load()
						if int64(over) <= w || worstOver.CompareAndSwap(w, int64(over)) {
							break
						}
					}
				}
				if err != nil {
					res.add(errClass(err), err)
					if !errorsIs(err, context.DeadlineExceeded) {
						say("  unexpected Lock error: %v", err)
					}
					return
				}
				res.add("granted", nil)
				if lctx.Err() != nil {
					lateGrants.Add(1) // granted, but its ctx had ended by the time Lock returned
				}
				who := fmt.Sprintf("s%d", i)
				chk.enter(name, who, hd.Term)
				if hd.IsValid() {
					chk.write(name, hd.Token())
				}
				time.Sleep(20 * time.Millisecond)
				chk.leave(name, who)
				if err := hd.Unlock(ctx); err != nil {
					res.add("unlock "+errClass(err), err)
				}
			}(i)
		}
		wg.Wait()
		time.Sleep(time.Second)
	}
	close(stop)
	hwg.Wait()
	_, _, grants, _ := s.calls.take()
	say("  stormer's Locks: %s; returned granted after their ctx ended: %d; returned >100 ms after their timeout: %d (worst %v); holder tenures %d",
		res, lateGrants.Load(), overshoots.Load(), time.Duration(worstOver.Load()).Round(time.Millisecond), hcycles.Load())
	res.examples(out)
	say("  stormer's %s", poolStats())
	say("  stormer's backend grants (acquires that returned a token, after warm-up): %d", grants)
	chk.report(out)
	var worstFree time.Duration
	var stuck []string
	for _, n := range contended {
		d, why := freeWithin(ctx, h.b, n, 2**ttl)
		if d < 0 {
			stuck = append(stuck, why)
		} else if d > worstFree {
			worstFree = d
		}
	}
	say("  after the storm, every name free (InspectLease) within %v; still held after 2 TTLs: %d %v", worstFree.Round(time.Millisecond), len(stuck), stuck)
	worst, failed := tryAll(ctx, h.c, contended, 2**ttl)
	say("  holder's TryLock of each name: slowest success after %v; failed for 2 TTLs: %d %v", worst.Round(time.Millisecond), len(failed), failed)

	// B: Close with hundreds of Locks in flight: 300 waiting on names the holder keeps, 50 held.
	say("storm %s B: Close with 300 Locks waiting and 50 locks held", *kind)
	release := make(chan struct{})
	var rwg sync.WaitGroup
	if err := holdAll(ctx, h.c, contended, release, &rwg); err != nil {
		return err
	}
	gB := waitGoroutines(0, 0)
	s2, err := newParty(ctx, *kind, dsn, "t31-closer", *ttl, logger)
	if err != nil {
		return err
	}
	own := make([]string, 50)
	var held []*simba.Held
	for i := range own {
		own[i] = fmt.Sprintf("%s-own-%d", pre, i)
		hd, err := s2.c.Lock(ctx, own[i])
		if err != nil {
			return fmt.Errorf("closer lock: %w", err)
		}
		held = append(held, hd)
	}
	resB := newTally()
	var bwg sync.WaitGroup
	var returnedAt sync.Map
	for i := 0; i < 300; i++ {
		bwg.Add(1)
		go func(i int) {
			defer bwg.Done()
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			hd, err := s2.c.Lock(lctx, contended[i%len(contended)])
			returnedAt.Store(i, time.Now())
			if err != nil {
				resB.add(errClass(err), err)
				return
			}
			resB.add("granted", nil)
			hd.Unlock(ctx)
		}(i)
	}
	time.Sleep(1500 * time.Millisecond)
	gIn := waitGoroutines(0, 0)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t0 := time.Now()
	cerr := s2.c.Close(cctx)
	took := time.Since(t0)
	cancel()
	bwg.Wait()
	var lastRet time.Duration
	returnedAt.Range(func(_, v any) bool {
		if d := v.(time.Time).Sub(t0); d > lastRet {
			lastRet = d
		}
		return true
	})
	unl := newTally()
	for _, hd := range held {
		unl.add(errClass(hd.Unlock(ctx)), nil)
	}
	say("  Close returned %v (errors.Is ErrClosed: %v) in %v; goroutines before the closer %d, with 300 waiting %d", cerr, errorsIs(cerr, simba.ErrClosed), took.Round(time.Millisecond), gB, gIn)
	say("  the 300 Locks: %s, the last returned %v after Close began", resB, lastRet.Round(time.Millisecond))
	resB.examples(out)
	say("  Unlock of the 50 held after Close: %s", unl)
	worstFree, stuck = 0, nil
	for _, n := range own {
		d, why := freeWithin(ctx, h.b, n, 2**ttl)
		if d < 0 {
			stuck = append(stuck, why)
		} else if d > worstFree {
			worstFree = d
		}
	}
	say("  the closer's 50 names free within %v of Close's return; still held after 2 TTLs: %d %v", worstFree.Round(time.Millisecond), len(stuck), stuck)
	s2.closeB()
	gAfter := waitGoroutines(gB, 5*time.Second)
	say("  goroutines after the closer's backend Close: %d (before it was made: %d)", gAfter, gB)
	close(release)
	rwg.Wait()
	worst, failed = tryAll(ctx, h.c, contended, 2**ttl)
	say("  holder's TryLock of the 20 names after its Unlocks: slowest success after %v; failed for 2 TTLs: %d %v", worst.Round(time.Millisecond), len(failed), failed)

	// C: a service process stopped by SIGTERM while it holds 50 locks and waits for 100.
	say("storm %s C: SIGTERM to a child holding 50 locks with 100 Locks waiting", *kind)
	release = make(chan struct{})
	if err := holdAll(ctx, h.c, contended, release, &rwg); err != nil {
		return err
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, "sigchild", "-b", *kind, "-pre", pre, "-ttl", ttl.String(), "-log", filepath.Join(*dir, "sigchild-"+*kind+".log"))
	cmd.Stderr = os.Stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	ready := make(chan struct{})
	go func() {
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				continue
			}
			lines = append(lines, sc.Text())
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return fmt.Errorf("sigchild never got ready")
	}
	time.Sleep(time.Second)
	t0 = time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	werr := cmd.Wait()
	exitTook := time.Since(t0)
	say("  child exited %v in %v after SIGTERM; it said:", werr, exitTook.Round(time.Millisecond))
	for _, l := range lines {
		fmt.Fprintln(out, "    "+l)
	}
	worstFree, stuck = 0, nil
	for i := 0; i < 50; i++ {
		d, why := freeWithin(ctx, h.b, fmt.Sprintf("%s-sig-%d", pre, i), 2**ttl)
		if d < 0 {
			stuck = append(stuck, why)
		} else if d > worstFree {
			worstFree = d
		}
	}
	say("  the child's 50 names free within %v of its exit; still held after 2 TTLs: %d %v", worstFree.Round(time.Millisecond), len(stuck), stuck)
	close(release)
	rwg.Wait()
	worst, failed = tryAll(ctx, h.c, contended, 2**ttl)
	say("  holder's TryLock of the 20 names the child waited for: slowest success after %v; failed for 2 TTLs: %d %v", worst.Round(time.Millisecond), len(failed), failed)

	for _, p := range []*party{h, s} {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := p.c.Close(cctx); err != nil {
			say("  close: %v", err)
		}
		cancel()
		p.closeB()
	}
	gEnd := waitGoroutines(g0, 5*time.Second)
	say("  goroutines at the end: %d (at the start %d); log lines: %s", gEnd, g0, loud())
	return nil
}

// sigchild is a service process as the docs suggest writing one: a ctx from signal.NotifyContext
// for its work, and Close on the way out.
func sigchild(args []string) error {
	fs := flag.NewFlagSet("sigchild", flag.ExitOnError)
	kind := fs.String("b", "mysql", "mysql|cluster")
	pre := fs.String("pre", "", "name prefix")
	ttl := fs.Duration("ttl", 3*time.Second, "client TTL")
	logPath := fs.String("log", "/tmp/t31/sigchild.log", "log file")
	fs.Parse(args)
	logger, _, err := newLog(*logPath)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, err := newParty(context.Background(), *kind, dsnFor(*kind), "t31-sigchild", *ttl, logger)
	if err != nil {
		return err
	}
	var held []*simba.Held
	for i := 0; i < 50; i++ {
		hd, err := p.c.Lock(ctx, fmt.Sprintf("%s-sig-%d", *pre, i))
		if err != nil {
			return err
		}
		held = append(held, hd)
	}
	res := newTally()
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			hd, err := p.c.Lock(ctx, fmt.Sprintf("%s-c-%d", *pre, i%20))
			if err != nil {
				res.add(errClass(err), err)
				return
			}
			res.add("granted", nil)
			hd.Unlock(context.Background())
		}(i)
	}
	fmt.Println("ready")
	<-ctx.Done()
	t0 := time.Now()
	wg.Wait()
	waitersOut := time.Since(t0)
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cerr := p.c.Close(cctx)
	closeTook := time.Since(t0)
	p.closeB()
	var b strings.Builder
	for _, hd := range held {
		fmt.Fprintf(&b, "%s ", errClass(hd.Unlock(context.Background())))
	}
	fmt.Printf("waiting Locks returned within %v of SIGTERM: %s\n", waitersOut.Round(time.Millisecond), res)
	fmt.Printf("Close: %v, %v after SIGTERM; Unlocks after Close: %s\n", cerr, closeTook.Round(time.Millisecond), trunc(b.String(), 60))
	return nil
}

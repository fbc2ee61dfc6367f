package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// hostile runs the hostile-use checks on a private Redis (10,000 names leave 10,000 lease
// hashes for good: not on the shared server) or on -dsn.
func hostile(args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ExitOnError)
	dsn := fs.String("dsn", "", "DSN (default: a private Redis)")
	names := fs.Int("names", 10000, "distinct names")
	fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var srv *servers.Server
	if *dsn == "" {
		root, err := os.MkdirTemp("", "trial28-hostile-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(root)
		if srv, err = servers.Redis(ctx, root, true); err != nil {
			return err
		}
		defer srv.Close()
		*dsn = "redis://" + srv.Addr() + "/0"
	}
	fmt.Println("hostile on", *dsn)
	newClient := func(owner string) (*simba.Client, func(), error) {
		b, err := open.Open(ctx, *dsn, open.WithAutoMigrate())
		if err != nil {
			return nil, nil, err
		}
		c, err := simba.New(b, simba.WithTTL(3*time.Second), simba.WithOwner(owner))
		if err != nil {
			b.Close()
			return nil, nil, err
		}
		return c, func() { c.Close(context.Background()); b.Close() }, nil
	}
	a, closeA, err := newClient("a")
	if err != nil {
		return err
	}
	defer closeA()
	bc, closeB, err := newClient("b")
	if err != nil {
		return err
	}
	defer closeB()
	show := func(what string, start time.Time, err error) {
		fmt.Printf("%-44s %8.3f ms  err=%v  ErrNotHeld=%v ErrClosed=%v ErrInvalidName=%v Canceled=%v permanent=%v\n", what,
			float64(time.Since(start).Microseconds())/1000, trim(err), errors.Is(err, simba.ErrNotHeld), errors.Is(err, simba.ErrClosed),
			errors.Is(err, simba.ErrInvalidName), errors.Is(err, context.Canceled), err != nil && simba.IsPermanent(err))
	}

	// Unlock twice.
	h, err := a.Lock(ctx, "h-twice")
	if err != nil {
		return err
	}
	t := time.Now()
	show("Unlock #1", t, h.Unlock(ctx))
	t = time.Now()
	show("Unlock #2 (same Held)", t, h.Unlock(ctx))

	// Unlock with a cancelled ctx: returns what, and is the lock released anyway?
	h, err = a.Lock(ctx, "h-cancelled")
	if err != nil {
		return err
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	t = time.Now()
	show("Unlock(cancelled ctx)", t, h.Unlock(cctx))
	t = time.Now()
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	h2, err := bc.Lock(lctx, "h-cancelled")
	lcancel()
	show("  other client's Lock of it after that", t, err)
	if err == nil {
		h2.Unlock(ctx)
	}
	t = time.Now()
	show("  Unlock #2 after the cancelled one", t, h.Unlock(ctx))

	// TryLock (non-blocking attempt) of a held name, naming the holder.
	h, _ = a.Lock(ctx, "h-try")
	t = time.Now()
	_, err = bc.TryLock(ctx, "h-try")
	show("TryLock of a name another client holds", t, err)
	var lhe *simba.LockHeldError
	if errors.As(err, &lhe) {
		fmt.Printf("  LockHeldError: %+v\n", *lhe)
	}
	h.Unlock(ctx)

	// Observe-only: an election this client never starts; who leads?
	ea, _ := a.NewElection("h-elect")
	ea.Start(ctx)
	time.Sleep(500 * time.Millisecond)
	eb, err := bc.NewElection("h-elect")
	if err == nil {
		l, ok := eb.Leader()
		fmt.Printf("observe-only (NewElection, no Start): Leader() = %+v, known=%v\n", l, ok)
		time.Sleep(500 * time.Millisecond)
		l, ok = eb.Leader()
		fmt.Printf("  0.5 s later: Leader() = %+v, known=%v\n", l, ok)
	}
	ob, err := open.Open(ctx, *dsn)
	if err == nil {
		li, ok, err := ob.(spi.LeaseInspector).InspectLease(ctx, "h-elect")
		fmt.Printf("observe-only through the backend's InspectLease: %+v found=%v err=%v\n", li, ok, err)
		ob.Close()
	}
	ea.Stop(ctx)

	// Very long names.
	for _, n := range []int{128, 129, 1 << 20} {
		t = time.Now()
		h, err := a.Lock(ctx, strings.Repeat("n", n))
		show(fmt.Sprintf("Lock of a %d-byte name", n), t, err)
		if err != nil {
			fmt.Printf("  its message is %d bytes\n", len(err.Error()))
		}
		if err == nil {
			h.Unlock(ctx)
		}
	}

	// 10,000 distinct names, 16 goroutines.
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()
	var next, fails atomic.Int64
	t = time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(*names) {
					return
				}
				h, err := a.Lock(ctx, fmt.Sprintf("job-%d", i))
				if err != nil {
					fails.Add(1)
					continue
				}
				if err := h.Unlock(ctx); err != nil {
					fails.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t)
	time.Sleep(2 * time.Second) // lingering subscriptions go after a second
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	fmt.Printf("%d distinct names locked and unlocked by 16 goroutines: %.2fs (%.0f cycles/s), %d failures; goroutines %d → %d; heap in use %.1f → %.1f MiB\n",
		*names, el.Seconds(), float64(*names)/el.Seconds(), fails.Load(), g0, runtime.NumGoroutine(),
		float64(ms0.HeapInuse)/(1<<20), float64(ms1.HeapInuse)/(1<<20))
	if srv != nil {
		out, _ := rcli(srv, "DBSIZE")
		mem, _ := rcli(srv, "INFO", "memory")
		for _, l := range strings.Split(mem, "\n") {
			if strings.HasPrefix(l, "used_memory_human") {
				fmt.Printf("  Redis keys left: %s, %s\n", strings.TrimSpace(out), strings.TrimSpace(l))
			}
		}
	}

	// Lock on a closed client.
	c, closeC, err := newClient("c")
	if err != nil {
		return err
	}
	closeC()
	t = time.Now()
	_, err = c.Lock(ctx, "h-closed")
	show("Lock on a closed client", t, err)
	t = time.Now()
	_, err = c.TryLock(ctx, "h-closed")
	show("TryLock on a closed client", t, err)
	t = time.Now()
	_, err = c.NewElection("h-closed")
	show("NewElection on a closed client", t, err)
	t = time.Now()
	show("Close again", t, c.Close(ctx))
	return nil
}

func trim(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 150 {
		s = s[:150] + "…"
	}
	return s
}

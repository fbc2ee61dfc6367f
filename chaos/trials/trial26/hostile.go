package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/simba-go/simba/chaos/trials/netproxy"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// hostile runs the operator-side misuses: one name with two TTLs, Start twice, Stop from inside
// the leader work, Close during a partition, a ctx cancelled mid-Start.
func hostile(args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ExitOnError)
	be := fs.String("backend", "pg", "pg, etcd or rc")
	fs.Parse(args)
	r := &runner{backend: *be}
	switch *be {
	case "pg":
		r.target, r.dsnFmt = "127.0.0.1:5432", "postgres://postgres@%s/test?sslmode=disable"
	case "etcd":
		r.target, r.dsnFmt = "127.0.0.1:2379", "etcd://%s/trial26"
	case "rc":
		r.dsnFmt = "redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	base := fmt.Sprintf("trial26-hostile-%s-%d", *be, time.Now().Unix())
	ctx := context.Background()
	type cl struct {
		c  *simba.Client
		b  spi.Backend
		px *netproxy.Proxy
	}
	mk := func(owner string, ttl time.Duration) (cl, error) {
		addr := r.target
		var px *netproxy.Proxy
		if r.target != "" {
			p, err := netproxy.New(r.target)
			if err != nil {
				return cl{}, err
			}
			px, addr = p, p.Addr()
		}
		b, err := open.Open(ctx, r.dsn(addr), open.WithAutoMigrate())
		if err != nil {
			return cl{}, err
		}
		c, err := simba.New(b, simba.WithTTL(ttl), simba.WithOwner(owner), simba.WithLogger(logger.With("client", owner)))
		if err != nil {
			return cl{}, err
		}
		return cl{c, b, px}, nil
	}
	done := func(x cl) {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := x.c.Close(cctx); err != nil {
			fmt.Println("  close:", err)
		}
		x.b.Close()
		if x.px != nil {
			x.px.Close()
		}
	}
	report := func(name string, kv ...any) { fmt.Printf("HOSTILE %s %v\n", name, kv) }
	g0 := runtime.NumGoroutine()

	// 1. One name, two TTLs (two binaries configured apart). Both lead in turn; never at once.
	{
		name := base + "-ttls"
		a, err := mk("ttl3", 3*time.Second)
		if err != nil {
			return err
		}
		b, err := mk("ttl9", 9*time.Second)
		if err != nil {
			return err
		}
		var both, aLead, bLead atomic.Int64
		var inA, inB atomic.Bool
		work := func(me, other *atomic.Bool, n *atomic.Int64) func(context.Context, simba.Term) error {
			return func(ctx context.Context, t simba.Term) error {
				me.Store(true)
				n.Add(1)
				if other.Load() {
					both.Add(1)
				}
				<-ctx.Done()
				me.Store(false)
				return nil
			}
		}
		ea, _ := a.c.NewElection(name, simba.RunWhileLeader(work(&inA, &inB, &aLead)))
		eb, _ := b.c.NewElection(name, simba.RunWhileLeader(work(&inB, &inA, &bLead)))
		ea.Start(ctx)
		time.Sleep(500 * time.Millisecond)
		eb.Start(ctx)
		time.Sleep(2 * time.Second)
		// Cut the leader's link (if there is a proxy) and time the take-over.
		var fo []string
		for round := 0; round < 2 && r.target != ""; round++ {
			var lead, other cl
			var otherE *simba.Election
			if ea.IsLeader() {
				lead, other, otherE = a, b, eb
			} else {
				lead, other, otherE = b, a, ea
			}
			t0 := time.Now()
			lead.px.Cut()
			for !otherE.IsLeader() && time.Since(t0) < 30*time.Second {
				time.Sleep(10 * time.Millisecond)
			}
			fo = append(fo, fmt.Sprintf("%s->%s %v", lead.c.Owner(), other.c.Owner(), time.Since(t0).Round(time.Millisecond)))
			time.Sleep(500 * time.Millisecond)
			lead.px.Heal()
			time.Sleep(3 * time.Second)
		}
		report("two-ttls", "both_working_at_once", both.Load(), "a_terms", aLead.Load(), "b_terms", bLead.Load(), "failovers", fo)
		done(a)
		done(b)
	}

	// 2. Start twice.
	{
		a, err := mk("twice", 3*time.Second)
		if err != nil {
			return err
		}
		e, _ := a.c.NewElection(base+"-twice", simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error { <-ctx.Done(); return nil }))
		err1 := e.Start(ctx)
		err2 := e.Start(ctx)
		report("start-twice", "first", err1, "second", err2, "is_ErrInvalidOption", errors.Is(err2, simba.ErrInvalidOption))
		time.Sleep(time.Second)
		err3 := e.Stop(ctx)
		err4 := e.Start(ctx)
		time.Sleep(time.Second)
		report("start-after-stop", "stop", err3, "start", err4, "leads", e.IsLeader())
		done(a)
	}

	// 3. Stop from inside the leader work: returns at once, the other candidate takes over.
	{
		name := base + "-inside"
		a, err := mk("inside-a", 3*time.Second)
		if err != nil {
			return err
		}
		b, err := mk("inside-b", 3*time.Second)
		if err != nil {
			return err
		}
		var ea *simba.Election
		stopDur := make(chan time.Duration, 1)
		var stoppedAt atomic.Int64
		ea, _ = a.c.NewElection(name, simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
			time.Sleep(300 * time.Millisecond)
			t0 := time.Now()
			err := ea.Stop(ctx)
			stopDur <- time.Since(t0)
			if err != nil {
				fmt.Println("  stop inside:", err)
			}
			<-ctx.Done() // the work's ctx must end after Stop
			time.Sleep(200 * time.Millisecond)
			stoppedAt.Store(time.Now().UnixNano())
			return nil
		}))
		var bStart atomic.Int64
		eb, _ := b.c.NewElection(name, simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
			bStart.CompareAndSwap(0, time.Now().UnixNano())
			<-ctx.Done()
			return nil
		}))
		ea.Start(ctx)
		for !ea.IsLeader() {
			time.Sleep(10 * time.Millisecond)
		}
		eb.Start(ctx)
		var d time.Duration
		select {
		case d = <-stopDur:
		case <-time.After(10 * time.Second):
			d = -1
		}
		for bStart.Load() == 0 && time.Since(time.Unix(0, stoppedAt.Load())) < 10*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		report("stop-inside-work", "stop_returned_in", d, "b_started_after_a_work_returned", time.Duration(bStart.Load()-stoppedAt.Load()))
		done(a)
		done(b)
	}

	// 4. Close during a partition.
	if r.target != "" {
		a, err := mk("close-cut", 3*time.Second)
		if err != nil {
			return err
		}
		workEnded := make(chan time.Time, 1)
		e, _ := a.c.NewElection(base+"-closecut", simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
			<-ctx.Done()
			workEnded <- time.Now()
			return nil
		}))
		e.Start(ctx)
		for !e.IsLeader() {
			time.Sleep(10 * time.Millisecond)
		}
		gBefore := runtime.NumGoroutine()
		a.px.Cut()
		time.Sleep(500 * time.Millisecond)
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = a.c.Close(cctx)
		cancel()
		d := time.Since(t0)
		var sce *simba.SessionCloseError
		var we time.Duration = -1
		select {
		case w := <-workEnded:
			we = w.Sub(t0)
		default:
		}
		report("close-during-partition", "close_took", d.Round(time.Millisecond), "err", err, "is_SessionCloseError", errors.As(err, &sce),
			"is_ErrUnavailable", errors.Is(err, simba.ErrUnavailable), "work_ended_after_close_began", we, "stop_after_close", e.Stop(ctx))
		a.px.Heal()
		a.b.Close()
		a.px.Close()
		time.Sleep(2 * time.Second)
		report("close-during-partition-goroutines", "before_cut", gBefore, "after", runtime.NumGoroutine())
	}

	// 5. A ctx cancelled mid-Start: while the session cannot open (partition), and racing at once.
	{
		a, err := mk("midstart", 3*time.Second)
		if err != nil {
			return err
		}
		e, _ := a.c.NewElection(base+"-midstart", simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error { <-ctx.Done(); return nil }))
		var results []string
		for i := 0; i < 20; i++ {
			c2, cancel := context.WithCancel(ctx)
			go func() { time.Sleep(time.Duration(i*5) * time.Microsecond); cancel() }()
			err := e.Start(c2)
			time.Sleep(50 * time.Millisecond)
			started := err == nil
			// If Start failed the election is not started: Start again must succeed; if it
			// succeeded, Start again must fail with ErrInvalidOption.
			err2 := e.Start(ctx)
			ok := (started && errors.Is(err2, simba.ErrInvalidOption)) || (!started && err2 == nil)
			results = append(results, fmt.Sprintf("%v/%v:%v", started, err2 == nil, ok))
			e.Stop(ctx)
		}
		report("ctx-cancelled-mid-start", "started/restart_ok:consistent", results)
		pre, cancel := context.WithCancel(ctx)
		cancel()
		errPre := e.Start(pre)
		time.Sleep(time.Second)
		report("start-with-cancelled-ctx", "err", errPre, "is_Canceled", errors.Is(errPre, context.Canceled), "leads_after_1s", e.IsLeader(),
			"start_again", e.Start(ctx))
		e.Stop(ctx)
		if a.px != nil {
			e2, _ := a.c.NewElection(base+"-midstart-cut", simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error { <-ctx.Done(); return nil }))
			a.px.Cut()
			c2, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			t0 := time.Now()
			err := e2.Start(c2)
			cancel()
			d := time.Since(t0)
			a.px.Heal()
			time.Sleep(5 * time.Second)
			report("ctx-timeout-start-during-partition", "start_err", err, "took", d.Round(time.Millisecond), "leads_after_heal", e2.IsLeader())
		}
		done(a)
	}
	// 6. Start raced by two goroutines; Start and Stop raced; Close raced with Start; Close
	// from inside the leader work.
	{
		a, err := mk("races", 3*time.Second)
		if err != nil {
			return err
		}
		okBoth, okOne, okNone := 0, 0, 0
		for i := 0; i < 20; i++ {
			e, _ := a.c.NewElection(fmt.Sprintf("%s-race-%d", base, i), simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error { <-ctx.Done(); return nil }))
			errs := make(chan error, 2)
			for j := 0; j < 2; j++ {
				go func() { errs <- e.Start(ctx) }()
			}
			e1, e2 := <-errs, <-errs
			switch {
			case e1 == nil && e2 == nil:
				okBoth++
			case e1 == nil || e2 == nil:
				okOne++
			default:
				okNone++
			}
			// Start and Stop at once: afterwards the election is either running or stopped, and
			// a Stop then leaves it stopped and the name free.
			go e.Stop(ctx)
			e.Start(ctx)
			if err := e.Stop(ctx); err != nil {
				fmt.Println("  stop after race:", err)
			}
		}
		report("start-raced", "both_succeeded", okBoth, "one", okOne, "none", okNone)
		done(a)

		b, err := mk("close-inside", 3*time.Second)
		if err != nil {
			return err
		}
		closed := make(chan error, 1)
		e, _ := b.c.NewElection(base+"-closeinside", simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
			t0 := time.Now()
			err := b.c.Close(context.Background())
			fmt.Println("  close inside returned after", time.Since(t0), "err", err)
			closed <- err
			<-ctx.Done()
			return nil
		}))
		e.Start(ctx)
		select {
		case err := <-closed:
			report("close-inside-work", "err", err)
		case <-time.After(15 * time.Second):
			report("close-inside-work", "err", "Close from inside the work did not return in 15 s")
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		report("close-after-close-inside", "err", b.c.Close(cctx))
		cancel()
		b.b.Close()
		if b.px != nil {
			b.px.Close()
		}

		c, err := mk("close-start", 3*time.Second)
		if err != nil {
			return err
		}
		var outcomes []string
		for i := 0; i < 10; i++ {
			e, _ := c.c.NewElection(fmt.Sprintf("%s-cs-%d", base, i), simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error { <-ctx.Done(); return nil }))
			go e.Start(ctx)
		}
		cctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		t0 := time.Now()
		err = c.c.Close(cctx)
		cancel()
		outcomes = append(outcomes, fmt.Sprintf("close %v in %v", err, time.Since(t0).Round(time.Millisecond)))
		report("close-raced-with-starts", "outcome", outcomes)
		c.b.Close()
		if c.px != nil {
			c.px.Close()
		}
	}
	time.Sleep(2 * time.Second)
	report("goroutines", "at_start", g0, "at_end", runtime.NumGoroutine())
	return nil
}

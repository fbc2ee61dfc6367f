package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// hostile is scenario 3: group names and partition counts at and beyond the documented limits,
// unicode, many groups at once, tiny TTLs and a huge P, on one backend (a private server, or a
// new SQLite file).
func hostile(args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ExitOnError)
	kind := fs.String("b", "sqlite", "backend")
	huge := fs.Int("huge", 65536, "partitions of the huge group (0: skip)")
	groups := fs.Int("groups", 200, "groups joined at once by one client")
	only := fs.String("only", "", "run only the checks whose name contains this")
	leaveAfter := fs.Duration("leave-after", 0, "huge: first Leave a huge group this long after joining it")
	fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp("", "trial29-hostile-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	dsn, srv, err := backendDSN(ctx, *kind, root, true)
	if err != nil {
		return err
	}
	if srv != nil {
		defer srv.Close()
	}
	fmt.Println("hostile on", dsn)
	var lines [4]atomic.Int64
	logf, _ := os.Create(fmt.Sprintf("/tmp/trial29-hostile-%s.log", *kind))
	defer logf.Close()
	logger := slog.New(levelCounter{h: slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}), n: &lines})
	b, err := open.Open(ctx, dsn, open.WithAutoMigrate(), open.WithLogger(logger))
	if err != nil {
		return err
	}
	defer b.Close()
	type callCount struct {
		mu sync.Mutex
		n  map[string]int
	}
	newClient := func(opts ...simba.Option) (*simba.Client, *callCount, error) {
		cc := &callCount{n: map[string]int{}}
		opts = append([]simba.Option{simba.WithTTL(3 * time.Second), simba.WithLogger(logger),
			simba.WithCallObserver(func(ci simba.CallInfo) {
				cc.mu.Lock()
				cc.n[ci.Op]++
				if ci.Err != nil {
					cc.n[ci.Op+"!"]++
				}
				cc.mu.Unlock()
			})}, opts...)
		c, err := simba.New(b, opts...)
		return c, cc, err
	}
	show := func(what string, start time.Time, err error) {
		fmt.Printf("%-58s %9.3f ms err=%v  [InvalidName=%v InvalidOption=%v permanent=%v]\n", what, float64(time.Since(start).Microseconds())/1000,
			trim(err), errors.Is(err, simba.ErrInvalidName), errors.Is(err, simba.ErrInvalidOption), err != nil && simba.IsPermanent(err))
	}
	run := func(name string) bool { return *only == "" || strings.Contains(name, *only) }
	c, _, err := newClient(simba.WithOwner("wörker-ü-1"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	noop := simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error { <-ctx.Done(); return nil })
	waitHeld := func(g *simba.PartitionGroup, n int, d time.Duration) (time.Duration, int) {
		t := time.Now()
		for time.Since(t) < d {
			if h := len(g.Held()); h >= n {
				return time.Since(t), h
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(t), len(g.Held())
	}

	if run("names") {
		fmt.Println("-- names")
		for _, tc := range []struct {
			what  string
			group string
			p     int
		}{
			{"group of 126 bytes, P=1 (last partition 128 bytes)", strings.Repeat("g", 126), 1},
			{"group of 127 bytes, P=1 (partition 129 bytes)", strings.Repeat("h", 127), 1},
			{"group of 122 bytes, P=65536 (last partition '.65535', 128)", strings.Repeat("i", 122), 65536},
			{"group of 123 bytes, P=65536 (129)", strings.Repeat("j", 123), 65536},
			{"group of 125 bytes, P=10 (g.9: 127, fits)", strings.Repeat("k", 125), 10},
			{"group of 125 bytes, P=11 (g.10: 128, fits)", strings.Repeat("l", 125), 11},
			{"group of 126 bytes, P=11 (g.10: 129)", strings.Repeat("m", 126), 11},
			{"unicode group 'jöbs'", "jöbs", 4},
			{"group with a space", "jobs a", 4},
			{"group '.'", ".", 4},
			{"group '..'", "..", 4},
			{"group ''", "", 4},
			{"group 'a/b'", "a/b", 4},
			{"group with NUL", "a\x00b", 4},
			{"group 'x.' (partitions 'x..0')", "x.", 2},
			{"P=0", "p0", 0},
			{"P=-1", "pneg", -1},
			{"P=65537", "pbig", 65537},
		} {
			jc := c
			if tc.p > 100 { // a client of its own: its partitions' calls would queue ahead of the next checks'
				if jc, _, err = newClient(simba.WithOwner("big")); err != nil {
					return err
				}
			}
			t := time.Now()
			g, err := jc.JoinGroup(ctx, tc.group, tc.p, noop)
			show(tc.what, t, err)
			if err == nil {
				d, h := waitHeld(g, tc.p, 5*time.Second)
				lctx, lc := context.WithTimeout(ctx, 90*time.Second)
				t2 := time.Now()
				lerr := g.Leave(lctx)
				lc()
				fmt.Printf("    held %d after %.2fs; Leave %.2fs: %v\n", h, d.Seconds(), time.Since(t2).Seconds(), lerr)
			}
			if jc != c {
				t := time.Now()
				cerr := jc.Close(ctx)
				fmt.Printf("    Close %.2fs: %v\n", time.Since(t).Seconds(), trim(cerr))
			}
		}
		// A group nested in another's partition namespace: group "n" partition 1 is lease "n.1";
		// a group named "n.1" has partitions "n.1.0" …
		t := time.Now()
		g1, err := c.JoinGroup(ctx, "n", 4, noop)
		show("group 'n' P=4", t, err)
		t = time.Now()
		g2, err2 := c.JoinGroup(ctx, "n.1", 4, noop)
		show("group 'n.1' P=4 on the same client", t, err2)
		if err == nil && err2 == nil {
			_, h1 := waitHeld(g1, 4, 3*time.Second)
			_, h2 := waitHeld(g2, 4, 3*time.Second)
			fmt.Printf("    held: n %d of 4, n.1 %d of 4; members n %d, n.1 %d\n", h1, h2, len(g1.Members()), len(g2.Members()))
		}
		if err == nil {
			g1.Leave(ctx)
		}
		if err2 == nil {
			g2.Leave(ctx)
		}
		// A lock on a partition's name from the same client, and a group whose partition is locked.
		t = time.Now()
		g3, err := c.JoinGroup(ctx, "q", 2, noop)
		show("group 'q' P=2", t, err)
		if err == nil {
			waitHeld(g3, 2, 3*time.Second)
			t = time.Now()
			_, lerr := c.TryLock(ctx, "q.1")
			show("  TryLock('q.1') while joined", t, lerr)
			g3.Leave(ctx)
		}
		t = time.Now()
		_, err = c.JoinGroup(ctx, "q", 2, noop)
		show("  JoinGroup('q') again after Leave", t, err)
		t = time.Now()
		_, err = c.JoinGroup(ctx, "q", 2, noop)
		show("  JoinGroup('q') while joined", t, err)
		// Owners.
		for _, o := range []string{"wörker-ü", "工人-1", "👩‍💻", "a\u202eb", strings.Repeat("o", 1000), strings.Repeat("o", 100000)} {
			t := time.Now()
			oc, _, err := newClient(simba.WithOwner(o))
			show(fmt.Sprintf("WithOwner(%q) (%d bytes)", trunc(o, 20), len(o)), t, err)
			if err == nil {
				g, err := oc.JoinGroup(ctx, "own", 2, noop)
				if err == nil {
					_, h := waitHeld(g, 2, 5*time.Second)
					fmt.Printf("    group held %d of 2, err %v\n", h, trim(g.Err()))
					g.Leave(ctx)
				}
				oc.Close(ctx)
			}
		}
	}

	if run("ttl") {
		fmt.Println("-- tiny TTLs: one client, a group of 8, 3 s")
		for _, ttl := range []time.Duration{0, -time.Second, time.Nanosecond, time.Microsecond, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, time.Second, simba.MaxTTL, simba.MaxTTL + 1} {
			t := time.Now()
			before := [4]int64{lines[0].Load(), lines[1].Load(), lines[2].Load(), lines[3].Load()}
			var granted, revoked atomic.Int64
			tc, tcc, err := newClient(simba.WithTTL(ttl), simba.WithOwner("tiny"), simba.WithListener(func(ev simba.Event) {
				switch ev.Kind {
				case simba.EventElected:
					granted.Add(1)
				case simba.EventRevoked:
					revoked.Add(1)
				}
			}))
			show(fmt.Sprintf("WithTTL(%s)", ttl), t, err)
			if err != nil {
				continue
			}
			var valid atomic.Int64
			g, err := tc.JoinGroup(ctx, fmt.Sprintf("tiny-%d", ttl), 8, simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
				for t.IsValid() {
					valid.Add(1)
					time.Sleep(10 * time.Millisecond)
				}
				return nil
			}))
			if err != nil {
				show("  JoinGroup", t, err)
				tc.Close(ctx)
				continue
			}
			time.Sleep(3 * time.Second)
			tcc.mu.Lock()
			calls := fmt.Sprint(tcc.n)
			tcc.mu.Unlock()
			fmt.Printf("    in 3 s: held now %d, granted %d, revoked %d, valid-checks %d, group err %v, client err %v; log lines info/warn/error %d/%d/%d; calls %s\n",
				len(g.Held()), granted.Load(), revoked.Load(), valid.Load(), trim(g.Err()), trim(tc.Err()),
				lines[1].Load()-before[1], lines[2].Load()-before[2], lines[3].Load()-before[3], calls)
			lctx, lc := context.WithTimeout(ctx, 10*time.Second)
			t2 := time.Now()
			lerr := g.Leave(lctx)
			cerr := tc.Close(lctx)
			lc()
			fmt.Printf("    Leave+Close %.2fs: %v / %v\n", time.Since(t2).Seconds(), trim(lerr), trim(cerr))
		}
	}

	if run("many") && *groups > 0 {
		fmt.Printf("-- %d groups of 8 partitions joined at once by one client (TTL 3 s)\n", *groups)
		mc, mcc, err := newClient(simba.WithOwner("many"))
		if err != nil {
			return err
		}
		gor0 := runtime.NumGoroutine()
		t := time.Now()
		var gs []*simba.PartitionGroup
		for i := range *groups {
			g, err := mc.JoinGroup(ctx, fmt.Sprintf("many-%d", i), 8, noop)
			if err != nil {
				show("JoinGroup", t, err)
				break
			}
			gs = append(gs, g)
		}
		joined := time.Since(t)
		total := 0
		for time.Since(t) < 60*time.Second {
			total = 0
			for _, g := range gs {
				total += len(g.Held())
			}
			if total == 8**groups {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(t)
		mcc.mu.Lock()
		ka0 := mcc.n["keep-alive"]
		mcc.mu.Unlock()
		time.Sleep(6 * time.Second)
		mcc.mu.Lock()
		ka1 := mcc.n["keep-alive"]
		calls := fmt.Sprint(mcc.n)
		mcc.mu.Unlock()
		fmt.Printf("    joins returned in %.3fs; %d of %d partitions held after %.2fs; keep-alives in the next 6 s: %d (renewal 1 s); goroutines %d → %d; calls %s; client err %v\n",
			joined.Seconds(), total, 8**groups, took.Seconds(), ka1-ka0, gor0, runtime.NumGoroutine(), calls, trim(mc.Err()))
		t = time.Now()
		var wg sync.WaitGroup
		var lerrs atomic.Int64
		for _, g := range gs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if g.Leave(ctx) != nil {
					lerrs.Add(1)
				}
			}()
		}
		wg.Wait()
		fmt.Printf("    all Leave in %.2fs (%d errors); Close: %v\n", time.Since(t).Seconds(), lerrs.Load(), trim(mc.Close(ctx)))
	}

	if run("huge") && *huge > 0 {
		fmt.Printf("-- one member, a group of %d partitions (TTL 15 s default)\n", *huge)
		hc, hcc, err := newClient(simba.WithOwner("huge"), simba.WithTTL(15*time.Second))
		if err != nil {
			return err
		}
		if *leaveAfter > 0 {
			// Leave while the group is still taking its partitions: what runs after the Leave?
			t := time.Now()
			g, err := hc.JoinGroup(ctx, "huge-early", *huge, noop)
			if err != nil {
				return err
			}
			time.Sleep(*leaveAfter)
			hcc.mu.Lock()
			acq0, rel0 := hcc.n["acquire"], hcc.n["release"]
			hcc.mu.Unlock()
			held0 := len(g.Held())
			t = time.Now()
			lctx, lc := context.WithTimeout(ctx, 3*time.Minute)
			lerr := g.Leave(lctx)
			lc()
			hcc.mu.Lock()
			acq1, rel1 := hcc.n["acquire"], hcc.n["release"]
			hcc.mu.Unlock()
			fmt.Printf("    Leave %s after the join: %d held then, %d acquires done; the Leave took %.2fs (%v), during it %d more acquires and %d releases (%d before)\n",
				*leaveAfter, held0, acq0, time.Since(t).Seconds(), trim(lerr), acq1-acq0, rel1-rel0, rel0)
			hcc.mu.Lock()
			fmt.Printf("    calls so far: %v\n", hcc.n)
			hcc.mu.Unlock()
			for _, wait := range []time.Duration{0, 2 * time.Second, 20 * time.Second} {
				time.Sleep(wait)
				snap, err := b.(spi.Inspector).Inspect(ctx)
				if err != nil {
					fmt.Println("    Inspect:", trim(err))
					break
				}
				n := 0
				for _, l := range snap.Leases {
					if strings.HasPrefix(l.Name, "huge-early.") && l.Holder != "" {
						n++
					}
				}
				fmt.Printf("    +%s after Leave returned: %d partitions of the left group still held (Held() %d, Members %v)\n", wait, n, len(g.Held()), g.Members())
			}
		}
		var ms0 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		t := time.Now()
		g, err := hc.JoinGroup(ctx, "huge", *huge, noop)
		if err != nil {
			show("JoinGroup huge", t, err)
		} else {
			d, h := waitHeld(g, *huge, 120*time.Second)
			var ms1 runtime.MemStats
			runtime.ReadMemStats(&ms1)
			fmt.Printf("    held %d of %d after %.2fs; heap %d → %d MiB, goroutines %d; group err %v, client err %v\n", h, *huge, d.Seconds(),
				ms0.HeapAlloc>>20, ms1.HeapAlloc>>20, runtime.NumGoroutine(), trim(g.Err()), trim(hc.Err()))
			if ins, ok := b.(spi.Inspector); ok {
				t := time.Now()
				snap, err := ins.Inspect(ctx)
				if err == nil {
					fmt.Printf("    Inspect: %d leases in %.2fs\n", len(snap.Leases), time.Since(t).Seconds())
				} else {
					fmt.Printf("    Inspect: %v\n", trim(err))
				}
			}
			t = time.Now()
			lctx, lc := context.WithTimeout(ctx, 90*time.Second)
			err := g.Leave(lctx)
			lc()
			fmt.Printf("    Leave %.2fs: %v\n", time.Since(t).Seconds(), trim(err))
		}
		hc.Close(ctx)
	}
	if run("pair") && *huge > 0 {
		// The cost of defect 1 to the other member: B is in the group; A joins and leaves
		// D later (early: many acquires queued) or once settled; how long until B holds all?
		for _, early := range []bool{true, false} {
			bc, _, err := newClient(simba.WithOwner("B"), simba.WithTTL(15*time.Second))
			if err != nil {
				return err
			}
			ac, _, err := newClient(simba.WithOwner("A"), simba.WithTTL(15*time.Second))
			if err != nil {
				return err
			}
			name := fmt.Sprintf("pair-%v", early)
			gb, err := bc.JoinGroup(ctx, name, *huge, noop)
			if err != nil {
				return err
			}
			if !early { // early: A and B join a new group together
				d, h := waitHeld(gb, *huge, 2*time.Minute)
				fmt.Printf("-- pair (early=%v): B alone holds %d of %d after %.2fs\n", early, h, *huge, d.Seconds())
			} else {
				fmt.Printf("-- pair (early=%v): A and B join a new group together, A leaves %s later\n", early, *leaveAfter)
			}
			ga, err := ac.JoinGroup(ctx, name, *huge, noop)
			if err != nil {
				return err
			}
			if early {
				time.Sleep(*leaveAfter)
			} else {
				for len(ga.Held())+len(gb.Held()) != *huge || len(ga.Held()) == 0 {
					time.Sleep(50 * time.Millisecond)
				}
				time.Sleep(time.Second)
			}
			ha, hb := len(ga.Held()), len(gb.Held())
			t := time.Now()
			lerr := ga.Leave(ctx)
			left := time.Since(t)
			d, h := waitHeld(gb, *huge, 2*time.Minute)
			fmt.Printf("    A held %d, B %d; A's Leave took %.2fs (%v); B held all %d %.2fs after the Leave returned (%d)\n",
				ha, hb, left.Seconds(), trim(lerr), *huge, d.Seconds(), h)
			ac.Close(ctx)
			gb.Leave(ctx)
			bc.Close(ctx)
		}
	}
	fmt.Printf("log lines in all: info %d warn %d error %d (/tmp/trial29-hostile-%s.log)\n", lines[1].Load(), lines[2].Load(), lines[3].Load(), *kind)
	return nil
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func trim(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 240 {
		s = s[:240] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}

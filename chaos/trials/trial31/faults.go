package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/simba-go/simba/spi"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/chaos/trials/netproxy"
)

// grantLog records every grant with its time, per worker, for the liveness checks.
type grantLog struct {
	mu     sync.Mutex
	at     map[string][]time.Time // worker → grant times
	errs   *tally
	starts map[string][]lockTry // worker → Locks begun, for "every Lock begun after the heal got in"
}

type lockTry struct {
	begun time.Time
	err   error
}

func (g *grantLog) grant(who string, t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.at[who] = append(g.at[who], t)
}

func (g *grantLog) try(who string, begun time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.starts[who] = append(g.starts[who], lockTry{begun, err})
}

// after reports, for the window from t, the workers without a grant, the first grant's delay
// per client, and the Locks begun in the window that failed.
func (g *grantLog) after(t time.Time, until time.Time) (starved []string, firstPerClient map[string]time.Duration, grants int, failed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	firstPerClient = map[string]time.Duration{}
	for who, ts := range g.at {
		client := who[:2]
		got := false
		for _, x := range ts {
			if x.After(t) && x.Before(until) {
				grants++
				if !got {
					got = true
					if d, ok := firstPerClient[client]; !ok || x.Sub(t) < d {
						firstPerClient[client] = x.Sub(t)
					}
				}
			}
		}
		if !got {
			starved = append(starved, who)
		}
	}
	for _, tries := range g.starts {
		for _, tr := range tries {
			if tr.begun.After(t) && tr.begun.Before(until) && tr.err != nil {
				failed++
			}
		}
	}
	sort.Strings(starved)
	return
}

func faults(args []string) error {
	fs := flag.NewFlagSet("faults", flag.ExitOnError)
	kind := fs.String("b", "mysql", "mysql|redis (a private server)")
	ttl := fs.Duration("ttl", 3*time.Second, "client TTL")
	dir := fs.String("dir", "/tmp/t31", "log directory")
	phases := fs.String("phases", "restart,blackhole,latency", "faults to inject, in this order")
	hold := fs.Duration("hold", 30*time.Millisecond, "pause after each of a section's 3 writes")
	lat := fs.Duration("lat", 150*time.Millisecond, "latency added to each chunk each way in the latency phase")
	fs.Parse(args)
	os.MkdirAll(*dir, 0o755)
	logger, loud, err := newLog(filepath.Join(*dir, "faults-"+*kind+".log"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	root := filepath.Join(*dir, "srv-"+*kind)
	os.RemoveAll(root)
	os.MkdirAll(root, 0o755)
	var srv *servers.Server
	if *kind == "mysql" {
		srv, err = servers.MariaDB(ctx, root)
	} else {
		srv, err = servers.Redis(ctx, root, true)
	}
	if err != nil {
		return err
	}
	defer srv.Close()
	say("faults %s: private server on %s", *kind, srv.Addr())

	const clients, perClient = 3, 6
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("t31-f-%d", i)
	}
	var proxies []*netproxy.Proxy
	var parties []*party
	bkind := "mysql"
	if *kind == "redis" {
		bkind = "redis"
	}
	for i := 0; i < clients; i++ {
		p, err := netproxy.New(srv.Addr())
		if err != nil {
			return err
		}
		defer p.Close()
		proxies = append(proxies, p)
		dsn := "mysql://root@" + p.Addr() + "/test"
		if *kind == "redis" {
			dsn = "redis://" + p.Addr()
		}
		pt, err := newParty(ctx, bkind, dsn, fmt.Sprintf("t31-f%d", i), *ttl, logger)
		if err != nil {
			return err
		}
		parties = append(parties, pt)
	}
	chk := newChecker()
	gl := &grantLog{at: map[string][]time.Time{}, errs: newTally(), starts: map[string][]lockTry{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for ci, pt := range parties {
		for w := 0; w < perClient; w++ {
			wg.Add(1)
			go func(who string, c *simba.Client) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					name := names[rand.IntN(len(names))]
					lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					begun := time.Now()
					h, err := c.Lock(lctx, name)
					cancel()
					gl.try(who, begun, err)
					if err != nil {
						gl.errs.add(errClass(err), err)
						time.Sleep(50 * time.Millisecond)
						continue
					}
					gl.grant(who, time.Now())
					chk.enter(name, who, h.Term)
					for k := 0; k < 3; k++ {
						if h.IsValid() {
							chk.write(name, h.Token())
						}
						time.Sleep(*hold)
					}
					chk.leave(name, who)
					uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					if err := h.Unlock(uctx); err != nil {
						gl.errs.add("unlock "+errClass(err), err)
					}
					cancel()
				}
			}(fmt.Sprintf("c%d-w%d", ci, w), pt.c)
		}
	}
	t0 := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(t0.Add(d))) }
	window := func(label string, from, to time.Time) {
		starved, first, grants, failed := gl.after(from, to)
		say("  %-40s grants=%d, first grant per client after %v, workers without a grant: %d %v, Locks begun and failed: %d",
			label, grants, first, len(starved), starved, failed)
	}
	s0, n0 := parties[1].calls.okSnapshot()
	at(8 * time.Second)
	window("steady 0-8 s", t0, time.Now())
	say("  client 1's successful calls, mean time: %s", parties[1].calls.meanSince(s0, n0))
	for _, ph := range strings.Split(*phases, ",") {
		switch ph {
		case "restart":
			say("  SIGKILL the server; restart it 3 s later")
			down := time.Now()
			srv.Kill()
			time.Sleep(3 * time.Second)
			if err := srv.Start(ctx); err != nil {
				return err
			}
			up := time.Now()
			say("  server serves again %v after the kill", up.Sub(down).Round(time.Millisecond))
			time.Sleep(10 * time.Second)
			window("10 s after the restart", up, time.Now())
		case "blackhole":
			say("  blackhole client 0's link for 2 TTLs")
			proxies[0].Cut()
			time.Sleep(2 * *ttl)
			proxies[0].Heal()
			healed := time.Now()
			time.Sleep(10 * time.Second)
			window("10 s after the blackhole's heal", healed, time.Now())
		case "closecut":
			// Close a client whose link is blackholed while its workers hold and wait: the doc
			// says Close returns within about one renewal interval there, and what it held
			// lapses at the server after the TTL.
			say("  blackhole client 0's link, then Close it with its 6 workers in flight")
			proxies[0].Cut()
			time.Sleep(300 * time.Millisecond)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			t1 := time.Now()
			cerr := parties[0].c.Close(cctx)
			cancel()
			say("  Close returned after %v: %v (SessionCloseError: %v, ErrUnavailable: %v)", time.Since(t1).Round(time.Millisecond),
				trunc(fmt.Sprint(cerr), 200), errorsAs(cerr), errorsIs(cerr, simba.ErrUnavailable))
			var worst time.Duration
			var stuck []string
			for _, n := range names {
				d, why := freeOf(ctx, parties[1], n, "t31-f0", 3**ttl)
				if d < 0 {
					stuck = append(stuck, why)
				} else if d > worst {
					worst = d
				}
			}
			say("  no name held by client 0's session within %v of Close's return (TTL %v); still held after 3 TTLs: %v", worst.Round(time.Millisecond), *ttl, stuck)
			proxies[0].Heal()
			healed := time.Now()
			time.Sleep(5 * time.Second)
			window("5 s after (client 0 closed)", healed, time.Now())
		case "latency":
			say("  %v latency each way on every link for 8 s", *lat)
			before := sessionsOpened(parties)
			s0, n0 := parties[1].calls.okSnapshot()
			for _, p := range proxies {
				p.SetDelay(*lat)
			}
			slowFrom := time.Now()
			time.Sleep(8 * time.Second)
			window("under latency (8 s)", slowFrom, time.Now())
			say("  client 1's successful calls under latency, mean time: %s", parties[1].calls.meanSince(s0, n0))
			for _, p := range proxies {
				p.SetDelay(0)
			}
			say("  open-session calls meanwhile: %d", sessionsOpened(parties)-before)
			fast := time.Now()
			time.Sleep(10 * time.Second)
			window("10 s after the latency", fast, time.Now())
		}
	}
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		say("  workers still running 30 s after stop")
	}
	say("  Lock/Unlock errors over the run: %s", gl.errs)
	gl.errs.examples(out)
	chk.report(out)
	for i, pt := range parties {
		n, errs, _, _ := pt.calls.take()
		say("  client %d: open-session calls %d, calls %s, failed %v", i, n[simba.OpOpenSession], fmtCounts(n, time.Since(t0).Seconds()), errs)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := pt.c.Close(cctx); err != nil {
			say("  client %d close: %v", i, err)
		}
		cancel()
		pt.closeB()
	}
	say("  log lines: %s", loud())
	return nil
}

// sessionsOpened counts the session opens of every party so far (without resetting the counts).
func sessionsOpened(ps []*party) int {
	n := 0
	for _, p := range ps {
		p.calls.mu.Lock()
		n += p.calls.n[simba.OpOpenSession]
		p.calls.mu.Unlock()
	}
	return n
}

// freeOf polls InspectLease through p's backend until name is not held by owner's session, up
// to d; it returns how long that took, or -1 with what it saw.
func freeOf(ctx context.Context, p *party, name, owner string, d time.Duration) (time.Duration, string) {
	li := p.b.(spi.LeaseInspector)
	start := time.Now()
	for {
		info, _, err := li.InspectLease(ctx, name)
		if err == nil && info.Owner != owner {
			return time.Since(start), ""
		}
		if time.Since(start) > d {
			return -1, fmt.Sprintf("%s: %s token %d, %v left, err %v", name, info.Owner, info.Token, info.Remaining, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func errorsAs(err error) bool {
	var sce *simba.SessionCloseError
	return errors.As(err, &sce)
}

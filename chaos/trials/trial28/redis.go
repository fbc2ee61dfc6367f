package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/chaos/trials/netproxy"
	"github.com/simba-go/simba/open"
)

// team 1, from redsync/redislock: job de-duplication on a private Redis without persistence,
// restarted (kill -9 + start) or failed over to a promoted replica while locks are held.
func redisTeam(args []string) error {
	fs := flag.NewFlagSet("redis", flag.ExitOnError)
	fault := fs.String("fault", "restart", "restart (kill -9 + start twice: at once, then after 3 s) or promote (REPLICAOF NO ONE on the replica)")
	clients := fs.Int("clients", 4, "worker clients (each its own backend and session)")
	gor := fs.Int("g", 3, "goroutines per client")
	jobs := fs.Int("jobs", 8, "jobs")
	ttl := fs.Duration("ttl", 2*time.Second, "TTL")
	hold := fs.Duration("hold", 40*time.Millisecond, "fenced work per job")
	params := fs.String("params", "", "DSN query, e.g. wait_replicas=1&wait_timeout=200ms")
	dur := fs.Duration("dur", 28*time.Second, "run length")
	lag := fs.Duration("lag", 0, "promote: the replication link delays each chunk this long (what the master acknowledged in the last lag is lost at the failover)")
	fs.Parse(args)

	ctx, cancel := context.WithTimeout(context.Background(), *dur+2*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp("", "trial28-redis-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	master, err := servers.Redis(ctx, root, false)
	if err != nil {
		return err
	}
	defer master.Close()
	var replica *servers.Server
	var replLink *netproxy.Proxy
	if *fault == "promote" {
		if replica, err = servers.Redis(ctx, root, false); err != nil {
			return err
		}
		defer replica.Close()
		upstream := master.Addr()
		if *lag > 0 {
			p, err := netproxy.New(master.Addr())
			if err != nil {
				return err
			}
			p.SetDelay(*lag)
			replLink = p
			upstream = p.Addr()
		}
		host, port, _ := strings.Cut(upstream, ":")
		if out, err := rcli(replica, "REPLICAOF", host, port); err != nil {
			return fmt.Errorf("replicaof: %v %s", err, out)
		}
		for i := 0; ; i++ {
			out, _ := rcli(replica, "INFO", "replication")
			if strings.Contains(out, "master_link_status:up") {
				break
			}
			if i > 100 {
				return errors.New("replica never synced")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	sw, err := newSwitcher(master.Addr())
	if err != nil {
		return err
	}
	defer sw.Close()
	lb, err := newLogbook(filepath.Join(os.TempDir(), "trial28-redis-"+*fault+".log"))
	if err != nil {
		return err
	}
	dsn := "redis://" + sw.Addr() + "/0"
	if *params != "" {
		dsn += "?" + *params
	}
	fmt.Printf("team redis: %s, fault %s, %d clients × %d goroutines on %d jobs, TTL %s, hold %s; log %s\n",
		dsn, *fault, *clients, *gor, *jobs, *ttl, *hold, lb.f.Name())

	sk := newSink()
	var evs events
	var lockErrs sync.Map // first message per error text → count
	var nerr, ngrant, nlost atomic.Int64
	var lostWhy sync.Map
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var cls []*simba.Client
	for i := range *clients {
		who := fmt.Sprintf("w%d", i+1)
		b, err := open.Open(ctx, dsn, open.WithLogger(lb.logger(who+"-backend")))
		if err != nil {
			return err
		}
		defer b.Close()
		c, err := simba.New(b, simba.WithTTL(*ttl), simba.WithOwner(who), simba.WithLogger(lb.logger(who)), simba.WithListener(evs.listener()))
		if err != nil {
			return err
		}
		cls = append(cls, c)
		for g := range *gor {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(i), uint64(g)))
				for runCtx.Err() == nil {
					job := fmt.Sprintf("job-%d", r.IntN(*jobs))
					lctx, lcancel := context.WithTimeout(runCtx, 2*time.Second)
					h, err := c.Lock(lctx, job)
					lcancel()
					if err != nil {
						if runCtx.Err() == nil {
							nerr.Add(1)
							k := errText(err)
							n, _ := lockErrs.LoadOrStore(k, new(atomic.Int64))
							n.(*atomic.Int64).Add(1)
						}
						continue
					}
					ngrant.Add(1)
					for end := time.Now().Add(*hold); h.IsValid(); {
						sk.write(job, who, h.Token())
						if time.Now().After(end) {
							break
						}
						time.Sleep(min(*hold, 50*time.Millisecond))
					}
					if !h.IsValid() {
						nlost.Add(1)
						time.Sleep(100 * time.Millisecond) // let the event arrive
						k := "lost: ctx " + errText(context.Cause(h.Context())) + "; its EventRevoked's reason before Unlock: " + evs.reason(h.Token())
						n, _ := lostWhy.LoadOrStore(k, new(atomic.Int64))
						n.(*atomic.Int64).Add(1)
					}
					if err := h.Unlock(context.Background()); err != nil {
						k := "unlock: " + errText(err)
						n, _ := lostWhy.LoadOrStore(k, new(atomic.Int64))
						n.(*atomic.Int64).Add(1)
					}
				}
			}()
		}
	}
	t0 := time.Now()
	type faultAt struct {
		what          string
		kill, restart time.Time
	}
	var faults []faultAt
	sleepUntil := func(d time.Duration) { time.Sleep(time.Until(t0.Add(d))) }
	switch *fault {
	case "restart":
		for _, down := range []time.Duration{0, 3 * time.Second} {
			if down == 0 {
				sleepUntil(6 * time.Second)
			} else {
				sleepUntil(16 * time.Second)
			}
			lb.reset()
			evs.reset()
			f := faultAt{what: fmt.Sprintf("kill -9, down %s, start (all keys lost)", down), kill: time.Now()}
			lb.mark("kill -9 redis")
			master.Kill()
			time.Sleep(down)
			if err := master.Start(ctx); err != nil {
				return err
			}
			f.restart = time.Now()
			lb.mark("redis started")
			faults = append(faults, f)
			time.Sleep(5 * time.Second)
			fmt.Printf("after %s (%.2fs after the restart):\n  log lines:\n", f.what, time.Since(f.restart).Seconds())
			printCounts(os.Stdout, lb.reset())
			fmt.Println("  events:")
			printCounts(os.Stdout, evs.reset())
		}
	case "promote":
		sleepUntil(6 * time.Second)
		lb.reset()
		evs.reset()
		f := faultAt{what: "master kill -9, replica promoted (REPLICAOF NO ONE) 0.5 s later, clients switched", kill: time.Now()}
		mo, _ := rcli(master, "INFO", "replication")
		ro, _ := rcli(replica, "INFO", "replication")
		fmt.Printf("before the kill: master %s, replica %s\n", offset(mo), offset(ro))
		lb.mark("kill -9 master")
		if replLink != nil {
			replLink.Close() // what the link still holds is lost with the master
		}
		master.Kill()
		time.Sleep(500 * time.Millisecond)
		if out, err := rcli(replica, "REPLICAOF", "NO", "ONE"); err != nil {
			return fmt.Errorf("promote: %v %s", err, out)
		}
		sw.Switch(replica.Addr())
		f.restart = time.Now()
		lb.mark("replica promoted, clients switched")
		faults = append(faults, f)
		time.Sleep(5 * time.Second)
		fmt.Printf("after %s:\n  log lines:\n", f.what)
		printCounts(os.Stdout, lb.reset())
		fmt.Println("  events:")
		printCounts(os.Stdout, evs.reset())
	default:
		return fmt.Errorf("unknown fault %q", *fault)
	}
	sleepUntil(*dur)
	stop()
	wg.Wait()
	for _, c := range cls {
		if err := c.Close(context.Background()); err != nil {
			fmt.Println("close:", err)
		}
	}
	recs := sk.snapshot()
	fmt.Printf("grants %d, Lock errors %d, locks lost while held %d\n", ngrant.Load(), nerr.Load(), nlost.Load())
	lostWhy.Range(func(k, v any) bool {
		fmt.Printf("  %5d × %s\n", v.(*atomic.Int64).Load(), k)
		return true
	})
	lockErrs.Range(func(k, v any) bool {
		fmt.Printf("  %5d × %s\n", v.(*atomic.Int64).Load(), k)
		return true
	})
	for _, f := range faults {
		after := firstNewTenure(recs, f.kill)
		fmt.Printf("%s at %s (serving again at %s): the first write of a tenure granted after the kill came %.3fs after the kill, %.3fs after the restart/promotion\n",
			f.what, f.kill.Format("15:04:05.000"), f.restart.Format("15:04:05.000"), after.Sub(f.kill).Seconds(), after.Sub(f.restart).Seconds())
	}
	v := analyse(recs)
	v.print(os.Stdout)
	// Overlaps around each fault: which came from it.
	return nil
}

// rcli runs redis-cli against a private server.
func rcli(s *servers.Server, args ...string) (string, error) {
	out, err := exec.Command("redis-cli", append([]string{"-p", strconv.Itoa(s.Port)}, args...)...).CombinedOutput()
	return string(out), err
}

// errText is an error's text with numbers such as ports and durations folded.
func errText(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	var b strings.Builder
	digit := false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			if !digit {
				b.WriteByte('N')
			}
			digit = true
			continue
		}
		digit = false
		b.WriteRune(r)
	}
	return b.String()
}

// offset is the master_repl_offset (or slave_repl_offset) line of INFO replication.
func offset(info string) string {
	var out []string
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "master_repl_offset") || strings.HasPrefix(l, "slave_repl_offset") || strings.HasPrefix(l, "master_port") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, " ")
}

// Command trial34 is outside trial 34: an SRE team drills server failovers under long-lived
// leaders and partitioned workers, on a private Redis Cluster (3 masters + 3 replicas) and a
// private 3-member etcd, and checks what its monitoring (simbaprom, simbahttp's /readyz and
// /healthz, events, logs) says against the truth (the terms' validity and a fenced resource).
//
//	cd chaos && go run ./trials/trial34 -backends redis,etcd -drills 20
//
// See RESULTS.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	backends := flag.String("backends", "redis,etcd", "backends to drill: redis, etcd")
	drills := flag.Int("drills", 20, "drills per backend (the kinds in turn)")
	kinds := flag.String("kinds", "", "only these drill kinds (comma-separated)")
	ttl := flag.Duration("ttl", 3*time.Second, "the clients' TTL")
	workers := flag.Int("workers", 3, "worker clients")
	partitions := flag.Int("partitions", 8, "partitions of the group")
	waitReplicas := flag.Int("wait-replicas", 0, "Redis: wait_replicas=N in the DSN (0: none)")
	fullCoverage := flag.Bool("full-coverage", true, "Redis: cluster-require-full-coverage (Redis's default: yes)")
	details := flag.Bool("v", true, "print each drill's counters, events and logs")
	flag.Parse()
	goredis.SetLogger(quiet{})
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	failed := false
	for _, b := range strings.Split(*backends, ",") {
		cfg := config{backend: b, drills: *drills, ttl: *ttl, workers: *workers, partitions: *partitions,
			waitReplicas: *waitReplicas, details: *details, fullCoverage: *fullCoverage}
		if *kinds != "" {
			cfg.kinds = strings.Split(*kinds, ",")
		}
		ok, err := run(ctx, cfg, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "trial34:", err)
			os.Exit(1)
		}
		failed = failed || !ok
	}
	if failed {
		os.Exit(3)
	}
}

type config struct {
	backend                       string
	drills, workers, partitions   int
	ttl                           time.Duration
	waitReplicas                  int
	fullCoverage                  bool
	kinds                         []string
	details                       bool
	leaderGapBound, recoveryBound time.Duration // 0: report only
}

type drillKind struct {
	name        string
	fault, heal func() error
	target      func() string
}

// run starts the private servers and the fleet, drills, and reports; ok is false when a drill
// broke a safety property (overlap, stale write admitted, token reuse) or never recovered.
func run(ctx context.Context, cfg config, out *os.File) (ok bool, err error) {
	root, err := os.MkdirTemp("", "trial34-")
	if err != nil {
		return false, err
	}
	if os.Getenv("TRIAL34_KEEP") == "" {
		defer os.RemoveAll(root)
	} else {
		fmt.Fprintf(out, "# servers' directories and logs kept under %s\n", root)
	}
	var dsn string
	var ks []drillKind
	var closeServers func()
	switch cfg.backend {
	case "redis":
		rc, err := startRedisCluster(ctx, root, cfg.fullCoverage)
		if err != nil {
			return false, err
		}
		closeServers = rc.close
		dsn = rc.dsn()
		if cfg.waitReplicas > 0 {
			dsn += fmt.Sprintf("?wait_replicas=%d", cfg.waitReplicas)
		}
		ks = redisDrills(ctx, rc, cfg.ttl)
	case "etcd":
		ec, err := startEtcdCluster(ctx, root)
		if err != nil {
			return false, err
		}
		closeServers = ec.close
		dsn = ec.dsn()
		ks = etcdDrills(ctx, ec, cfg.ttl)
	default:
		return false, fmt.Errorf("unknown backend %q", cfg.backend)
	}
	defer closeServers()
	if len(cfg.kinds) > 0 {
		ks = slices.DeleteFunc(ks, func(k drillKind) bool { return !slices.Contains(cfg.kinds, k.name) })
	} else {
		ks = slices.DeleteFunc(ks, func(k drillKind) bool { return k.name == "etcd-pause-leader" })
	}
	g0, s0 := runtime.NumGoroutine(), sockets()
	f := &fleet{res: newResource(), partitions: cfg.partitions, ttl: cfg.ttl}
	for i := range cfg.workers {
		w, err := newWorker(ctx, fmt.Sprintf("w%d", i), dsn, cfg.ttl, cfg.partitions, f.res)
		if err != nil {
			return false, err
		}
		f.workers = append(f.workers, w)
	}
	fmt.Fprintf(out, "# %s: %d workers, TTL %v, %d partitions, DSN %s, full coverage %v (goroutines %d, sockets %d before the fleet)\n",
		cfg.backend, cfg.workers, cfg.ttl, cfg.partitions, dsn, cfg.fullCoverage, g0, s0)
	var rs []result
	ok = true
	for i := 0; i < cfg.drills && ctx.Err() == nil; i++ {
		k := ks[i%len(ks)]
		r := f.drill(ctx, k.name, k.target(), k.fault, k.heal)
		rs = append(rs, r)
		fmt.Fprintf(out, "%2d %s\n", i+1, r.line())
		if cfg.details {
			fmt.Fprint(out, r.details())
		}
		if r.overlap > 0 || len(r.violations) > 0 || r.notSteady != "" {
			ok = false
		}
	}
	summary(out, cfg, rs)
	for _, w := range f.workers {
		w.close()
	}
	time.Sleep(time.Second)
	runtime.GC()
	fmt.Fprintf(out, "after closing the fleet: goroutines %d (before it %d), sockets %d (before it %d)\n",
		runtime.NumGoroutine(), g0, sockets(), s0)
	return ok, nil
}

func summary(out *os.File, cfg config, rs []result) {
	byKind := map[string][]result{}
	var order []string
	for _, r := range rs {
		if _, ok := byKind[r.kind]; !ok {
			order = append(order, r.kind)
		}
		byKind[r.kind] = append(byKind[r.kind], r)
	}
	fmt.Fprintf(out, "## summary (%s, TTL %v)\n", cfg.backend, cfg.ttl)
	for _, k := range order {
		var gaps, recs []time.Duration
		overlaps, stale, lies, notSteady := 0, 0, 0, 0
		for _, r := range byKind[k] {
			gaps = append(gaps, r.leaderGap)
			recs = append(recs, r.recovered)
			if r.overlap > 0 {
				overlaps++
			}
			stale += len(r.stale)
			if r.heldLie > 100*time.Millisecond {
				lies++
			}
			if r.notSteady != "" {
				notSteady++
			}
		}
		slices.Sort(gaps)
		slices.Sort(recs)
		fmt.Fprintf(out, "%-16s n=%d leader unavailable: min %v median %v max %v (%.2f-%.2f TTL); recovered after heal: median %v max %v; overlaps %d; stale writes refused %d; gauge lies >100ms %d; not steady %d\n",
			k, len(gaps), gaps[0].Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond),
			gaps[0].Seconds()/cfg.ttl.Seconds(), gaps[len(gaps)-1].Seconds()/cfg.ttl.Seconds(),
			recs[len(recs)/2].Round(time.Millisecond), recs[len(recs)-1].Round(time.Millisecond), overlaps, stale, lies, notSteady)
	}
	if len(rs) > 0 {
		fmt.Fprintf(out, "goroutines after each drill: %v\n", collect(rs, func(r result) int { return r.goroutines }))
		fmt.Fprintf(out, "sockets after each drill:    %v\n", collect(rs, func(r result) int { return r.sockets }))
	}
}

func collect(rs []result, f func(result) int) []int {
	var out []int
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out
}

func redisDrills(ctx context.Context, rc *redisCluster, ttl time.Duration) []drillKind {
	var master, replica int
	locate := func() string {
		slot, err := rc.keySlot("simba:lease:{leader}")
		if err != nil {
			return "?"
		}
		master, replica, _ = rc.masterOf(slot)
		return fmt.Sprintf("m%d/r%d", master, replica)
	}
	waitMaster := func(port int) error {
		slot, err := rc.keySlot("simba:lease:{leader}")
		if err != nil {
			return err
		}
		end := time.Now().Add(20 * time.Second)
		for time.Now().Before(end) {
			if m, _, err := rc.masterOf(slot); err == nil && m == port {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("%d not master of slot %d within 20s", port, slot)
	}
	healthy := func() error { return rc.waitHealthy(ctx, 60*time.Second) }
	return []drillKind{
		{name: "redis-kill", target: locate,
			fault: func() error {
				rc.procs[master].kill()
				return waitMaster(replica)
			},
			heal: func() error {
				if err := rc.procs[master].start(); err != nil {
					return err
				}
				return healthy()
			}},
		{name: "redis-failover", target: locate,
			fault: func() error {
				if out, err := cli(replica, "cluster", "failover"); err != nil || out != "OK" {
					return fmt.Errorf("CLUSTER FAILOVER: %q %v", out, err)
				}
				return waitMaster(replica)
			},
			heal: healthy},
		{name: "redis-pause", target: locate,
			fault: func() error {
				rc.procs[master].signal(syscall.SIGSTOP)
				time.Sleep(ttl + time.Second)
				return nil
			},
			heal: func() error {
				rc.procs[master].signal(syscall.SIGCONT)
				return healthy()
			}},
	}
}

func etcdDrills(ctx context.Context, ec *etcdCluster, ttl time.Duration) []drillKind {
	var victim *etcdMember
	var pauses int
	pickLeader := func() string {
		victim, _ = ec.leader()
		if victim == nil {
			victim = ec.members[0]
		}
		return victim.name + "(leader)"
	}
	pickFollower := func() string {
		l, _ := ec.leader()
		for _, m := range ec.members {
			if m != l {
				victim = m
				return m.name + "(follower)"
			}
		}
		return "?"
	}
	healthy := func() error { return ec.waitHealthy(ctx, 60*time.Second) }
	// pause stops the victim for the TTL and 2 s; resume lets it run again.
	pause := func() error {
		victim.p.signal(syscall.SIGSTOP)
		time.Sleep(ttl + 2*time.Second)
		return nil
	}
	resume := func() error {
		victim.p.signal(syscall.SIGCONT)
		return healthy()
	}
	return []drillKind{
		{name: "etcd-kill-leader", target: pickLeader,
			fault: func() error {
				victim.p.kill()
				time.Sleep(ttl)
				return nil
			},
			heal: func() error {
				if err := victim.p.start(); err != nil {
					return err
				}
				return healthy()
			}},
		{name: "etcd-restart", target: pickFollower,
			fault: func() error {
				victim.p.term()
				return victim.p.start()
			},
			heal: healthy},
		{name: "etcd-pause-leader", target: pickLeader, fault: pause, heal: resume},
		{name: "etcd-pause", target: func() string {
			pauses++
			if pauses%2 == 1 {
				return pickLeader()
			}
			return pickFollower()
		},
			fault: pause, heal: resume},
	}
}

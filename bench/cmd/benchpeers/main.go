// Command benchpeers measures Simba beside the lock libraries people already run — redislock,
// redsync, pglock, go-zookeeper's zk.Lock and etcd's concurrency Mutex and Election — on the
// same servers, in one run, interleaved round by round: the cost of an acquire + release
// cycle in same-run baseline operations, the graceful handover latency, the crash failover
// time with a SIGKILLed holder process (and the waiter's calls meanwhile), what each library's
// holder writes after a pause past its TTL (SIGSTOPped between its lock check and its write,
// Kleppmann's GC-pause scenario), and Simba's keep-alive calls per renewal interval with 1,
// 100 and 10,000 held leases. Apart from those, -measures outage (alone: outage.go) runs
// locks under link outages: clients contending through fault proxies, one link blackholed at
// a time, and writes outage.md.
//
// It prints one Markdown table per measure and writes them, with the raw samples as JSON and
// charts as PNG, under -out. Every loop is bounded in count (-rounds) and time (-budget).
// -only and -measures run a part of it (see -h).
// Servers: Redis 127.0.0.1:6379, PostgreSQL 127.0.0.1:5432 (db test), MariaDB 127.0.0.1:3306
// (root, db test), ZooKeeper 127.0.0.1:2181; SQLite on a temporary file and etcd embedded in
// a child process. Run it with `make bench-peers`. Outside Unix there is no SIGSTOP: the
// stale measure's rows report an error (errors.ErrUnsupported) instead of a result.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	var (
		o        opts
		only     = flag.String("only", "", "comma-separated servers to measure (default all): "+strings.Join(groupKeys, ", ")+" (postgresql, pg, zk, cluster also accepted)")
		measures = flag.String("measures", "", "comma-separated measures to run (default all): "+strings.Join(measureKeys, ", ")+"; the targets of a measure not run are reported \"not measured\". stale: a holder process of each library is SIGSTOPped between its lock check and its write until a waiter of the same library has taken the lock and written, then let go on: does its stale write land? outage (alone, not in the default set): clients contending for one lock through fault proxies, one link blackholed at a time; writes outage.md (see the -outage-* flags)")
		holder   = flag.String("holder", "", "internal: run as a holder process of this role")
		waitAs   = flag.String("waiter", "", "internal: run as a waiting process of this role")
		idleAs   = flag.String("idle", "", "internal: run as an idle process of this role (a session open, waiting for nothing)")
		altAs    = flag.String("alternate", "", "internal: run as the child process of a between-processes hand-over pair of this role (commands on stdin)")
		staleAs  = flag.String("stale", "", "internal: run as the paused holder process of the stale-write measure for this role")
		holdFor  = flag.String("name", "", "internal: the holder's lock name")
		etcdDir  = flag.String("etcd", "", "internal: run the embedded etcd with its data under this directory")
		rerender = flag.String("report", "", "measure nothing: write the report again from this latest.json of a full run (with the Targets table and its why texts as this binary judges them) into -out")
		oo       outageOpts
	)
	flag.DurationVar(&oo.duration, "outage-duration", 30*time.Second, "outage: how long each row runs")
	flag.DurationVar(&oo.ttl, "outage-ttl", time.Second, "outage: lease/session TTL of every library (whole seconds, for etcd)")
	flag.DurationVar(&oo.lockTimeout, "outage-lock-timeout", 10*time.Second, "outage: each Lock call's context timeout (a longer call is a failed one)")
	flag.IntVar(&oo.clients, "outage-clients", 3, "outage: clients contending for the lock, each through its own fault proxy")
	flag.Uint64Var(&oo.seed, "outage-seed", 0, "outage: the seed of the fault schedule and the section lengths (0: a new one, printed)")
	flag.Float64Var(&oo.stallShare, "outage-stalls", 0, "outage: the share of faults that stall the link (bytes held back and delivered at the heal) instead of blackholing it")
	flag.IntVar(&o.rounds, "rounds", 6, "rounds of every measure (interleaved)")
	flag.DurationVar(&o.budget, "budget", 15*time.Minute, "time for the whole run at most; rounds stop early to keep a third for the waiting and keep-alive measures (when they run)")
	flag.DurationVar(&o.ttl, "ttl", 2*time.Second, "lease/session TTL of every library (whole seconds, for etcd)")
	flag.StringVar(&o.out, "out", "results", "directory for latest.md, latest.json and the charts (a run with -only or -measures writes to results/partial unless -out is given, so the full run's files stay)")
	flag.StringVar(&o.leases, "leases", "1,100,10000", "held-lease counts of the keep-alive measure")
	flag.BoolVar(&o.noEtcd, "no-etcd", false, "leave etcd out")
	flag.DurationVar(&o.zkTick, "zk-ticktime", 200*time.Millisecond, "the ZooKeeper server's tickTime (.ci/zoo.cfg), passed on in Simba's ZooKeeper DSN (tickTime=…: its sessions ask for the TTL less one tick); 0 leaves it out")
	flag.IntVar(&o.handSamples, "handover-samples", defaultHandSamples, "graceful hand-over samples per row per round at most")
	flag.Parse()
	if *etcdDir != "" {
		os.Exit(runEtcd(*etcdDir))
	}
	if *holder != "" {
		os.Exit(runHolder(*holder, *holdFor))
	}
	if *waitAs != "" {
		os.Exit(runWaiter(*waitAs, *holdFor, true))
	}
	if *idleAs != "" {
		os.Exit(runWaiter(*idleAs, "", false))
	}
	if *altAs != "" {
		os.Exit(runAlternate(*altAs, *holdFor))
	}
	if *staleAs != "" {
		os.Exit(runStaleHolder(*staleAs, *holdFor))
	}
	if *rerender != "" {
		if err := rewrite(*rerender, o); err != nil {
			fmt.Fprintln(os.Stderr, "benchpeers:", err)
			os.Exit(1)
		}
		return
	}
	if slices.Contains(splitList(*measures), mOutage) {
		// The outage measure runs alone and writes outage.md and outage.json.
		sel, err := parseSelection(*only, "")
		if err == nil && len(splitList(*measures)) > 1 {
			err = fmt.Errorf("-measures: %s runs alone", mOutage)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchpeers:", err)
			os.Exit(2)
		}
		oo.out = o.out
		if err := runOutage(oo, sel, o.zkTick, o.noEtcd); err != nil {
			fmt.Fprintln(os.Stderr, "benchpeers:", err)
			os.Exit(1)
		}
		return
	}
	sel, err := parseSelection(*only, *measures)
	if err == nil && o.handSamples < 1 {
		err = fmt.Errorf("-handover-samples %d: at least 1", o.handSamples)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchpeers:", err)
		os.Exit(2)
	}
	o.sel = sel
	outSet := false
	flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if !outSet && !sel.all() {
		o.out = filepath.Join(o.out, "partial")
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "benchpeers:", err)
		os.Exit(1)
	}
}

// defaultHandSamples is -handover-samples' default.
const defaultHandSamples = 50

// cycleWarmup and handWarmup are the untimed cycles and hand-overs that open a row's slice:
// its clients are new in every slice (see run), and a first call that dials a connection or
// loads a script is not what the row measures.
const (
	cycleWarmup = 20
	handWarmup  = 2
)

// rowKey names a row of a table across the rounds that set it up afresh.
type rowKey struct{ group, name string }

// opts are a run's settings, from the flags.
type opts struct {
	rounds      int
	budget, ttl time.Duration
	out, leases string
	noEtcd      bool
	handSamples int
	zkTick      time.Duration
	sel         selection
}

// runHolder takes the lock and keeps it until the parent kills the process (at most ten
// minutes).
func runHolder(role, name string) int {
	c, err := confFromEnv()
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	f, ok := c.roles()[role]
	if !ok {
		fmt.Println("error: unknown role", role)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	err = f(ctx, name)
	cancel()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("held")
	time.Sleep(10 * time.Minute)
	return 0
}

type cycleRes struct {
	Group, Name string
	Baseline    bool
	USPerOp     []float64 `json:"us_per_op"`
	Ratios      []float64 `json:"ratios"`
	// ByRound is µs per cycle by round (0: the round failed), for same-round ratios between
	// rows.
	ByRound []float64 `json:"us_by_round"`
	// CmdsPerOp is the Redis commands the row's client sent per cycle, by round (Redis rows
	// only).
	CmdsPerOp   []float64 `json:"redis_commands_per_op,omitempty"`
	MedianCmds  float64   `json:",omitempty"`
	Errors      int
	LastError   string `json:",omitempty"`
	MedianUS    float64
	MedianRatio float64
}

type handRes struct {
	Group, Name   string
	MS            []float64 `json:"samples_ms"`
	Errors        int
	LastError     string `json:",omitempty"`
	P50, P99, Max float64
}

type failRes struct {
	Group, Name    string
	TTLRatios      []float64 `json:"ttl_ratios"`
	AcqPerTTL      []float64 `json:"acquire_calls_per_ttl"`
	AllPerTTL      []float64 `json:"calls_per_ttl"`
	Counted        bool
	Errors         int
	LastError      string `json:",omitempty"`
	P50, Max       float64
	MedAcq, MedAll float64
}

type kaRes struct {
	Group             string
	Leases, Held      int
	KeepAlivePerRenew float64
	CallsPerRenew     float64
	// Redis only: the servers that got commands during the count, and per interval the most
	// pipelines any one of them got and the single commands (one round trip each) in all.
	Servers           int     `json:",omitempty"`
	MaxPipesPerServer float64 `json:",omitempty"`
	SinglesPerRenew   float64 `json:",omitempty"`
	PerServerPipes    []int64 `json:",omitempty"`
	Error             string  `json:",omitempty"`
}

// waitRes is the cost of a process that waits for a lock a live holder process holds.
type waitRes struct {
	Group string
	// Seconds the waiter was watched, its CPU time meanwhile (user + system), as a share of one
	// core, and its backend calls per TTL.
	Seconds   float64
	CPUShare  float64
	AcqPerTTL float64
	AllPerTTL float64
	// IdleCPUShare is the CPU share of an idle process watched beside it: the same client and
	// TTL, its session open and kept alive, waiting for nothing (SQLite on a file of its own):
	// what any process of the backend pays, waiting or not. IdleError: that process failed,
	// and there is no idle figure.
	IdleCPUShare float64
	IdleError    string `json:",omitempty"`
	Error        string `json:",omitempty"`
}

// addedCPU is the CPU share waiting adds to a process: the waiter's less the idle process's
// (ok false without an idle figure).
func (w *waitRes) addedCPU() (share float64, ok bool) {
	if w.Error != "" || w.IdleError != "" {
		return 0, false
	}
	return w.CPUShare - w.IdleCPUShare, true
}

type report struct {
	Date, Machine, CPU, Go, Simba string
	CPUs                          int
	Peers                         map[string]string
	TTL                           string
	Rounds                        int
	Elapsed                       string
	Cycle                         []*cycleRes
	Handover                      []*handRes
	Failover                      []*failRes
	KeepAlive                     []*kaRes
	Waiting                       []*waitRes
	Targets                       []*targetRes
	Skipped                       map[string]string
	// HandoverSamples is -handover-samples: hand-over samples per row per round at most.
	HandoverSamples int
	// ZKTickTime is -zk-ticktime, which Simba's ZooKeeper DSN passes on ("0s": left out).
	ZKTickTime string
	// Selected is the run's -only and -measures as the header states them (empty: all).
	Selected string `json:",omitempty"`
	// Stale is the stale-write measure, by row.
	Stale []*staleRes `json:",omitempty"`
	// sel is the selection itself and leases -leases' counts, for the targets.
	sel    selection
	leases []int
}

func run(o opts) error {
	rounds, budget, ttl, sel := o.rounds, o.budget, o.ttl, o.sel
	start := time.Now()
	deadline := start.Add(budget)
	roundsEnd := deadline
	if sel.measure(mWaiting) || sel.measure(mKeepAlive) {
		roundsEnd = start.Add(budget * 2 / 3)
	}
	dir, err := os.MkdirTemp("", "simba-benchpeers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c := conf{ttl: ttl, dir: dir, run: strconv.FormatInt(time.Now().Unix()%1e6, 36), zkTick: o.zkTick}
	rep := &report{Skipped: map[string]string{}, TTL: ttl.String(), HandoverSamples: o.handSamples, ZKTickTime: o.zkTick.String(), Selected: sel.describe(), sel: sel, leases: parseLeases(o.leases)}
	switch {
	case !sel.group(groupEtc):
	case o.noEtcd:
		rep.Skipped["etcd (embedded)"] = "left out (-no-etcd)"
	default:
		url, stop, err := spawnEtcd(dir)
		if err != nil {
			rep.Skipped["etcd (embedded)"] = "embedded etcd did not start: " + err.Error()
			break
		}
		defer stop()
		c.etcdURL = url
	}
	ctx := context.Background()
	// The rows of a server are set up afresh for each of its slices of a round and closed
	// after it, so that while one server's rows are timed no other row's clients run in this
	// process (their keep-alives, pings, hint listeners and garbage would land in its tail).
	// Results are gathered by row across rounds.
	var (
		cres []*cycleRes
		hres []*handRes
		fres []*failRes
	)
	done := 0 // rounds completed
	cycleOf := map[rowKey]*cycleRes{}
	handOf := map[rowKey]*handRes{}
	failOf := map[rowKey]*failRes{}
	staleOf := map[rowKey]*staleRes{}
	var sres []*staleRes
	setupRows := func(s selection, r *resources) ([]cycleRow, []handRow, []failRow) {
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cy, hand, fail, skipped := setup(sctx, c, s, r)
		cy, hand, fail = s.filterRows(cy, hand, fail)
		sortRows(cy, hand, fail)
		for k, v := range skipped {
			rep.Skipped[k] = v
		}
		for _, r := range cy {
			k := rowKey{r.group, r.name}
			if cycleOf[k] == nil {
				// ByRound gets a 0 for each earlier round, when the row was not set up.
				cycleOf[k] = &cycleRes{Group: r.group, Name: r.name, Baseline: r.baseline, ByRound: make([]float64, done)}
				cres = append(cres, cycleOf[k])
			}
		}
		for _, r := range hand {
			k := rowKey{r.group, r.name}
			if handOf[k] == nil {
				handOf[k] = &handRes{Group: r.group, Name: r.name}
				hres = append(hres, handOf[k])
			}
		}
		for _, r := range fail {
			k := rowKey{r.group, r.name}
			if failOf[k] == nil {
				failOf[k] = &failRes{Group: r.group, Name: r.name}
				fres = append(fres, failOf[k])
			}
		}
		return cy, hand, fail
	}
	var groups []string
	for _, g := range groupOrder {
		if sel.group(g) && (g != groupEtc || c.etcdURL != "") {
			groups = append(groups, g)
		}
	}
	slotted := sel.measure(mCycle) || sel.measure(mHandover)
	if len(groups) == 0 || !slotted && !sel.measure(mFailover) && !sel.measure(mStale) {
		rounds = 0 // no measure of the rounds selected
	}
	for round := 0; round < rounds && time.Now().Before(roundsEnd); round++ {
		fmt.Fprintf(os.Stderr, "round %d/%d (%v elapsed)\n", round+1, rounds, time.Since(start).Round(time.Second))
		// Cycle, then graceful handover, one server at a time (servers and rows in a rotated
		// order, so none always runs first).
		for k := range groups {
			if !slotted {
				break
			}
			g := groups[(k+round)%len(groups)]
			gres := new(resources)
			cy, hand, _ := setupRows(sel.narrow(g, mCycle, mHandover), gres)
			perOp := make([]float64, len(cy))
			for k := range cy {
				i := (k + round) % len(cy)
				perOp[i] = cycleSlice(ctx, cy[i], cycleOf[rowKey{cy[i].group, cy[i].name}])
			}
			for i, r := range cy {
				res := cycleOf[rowKey{r.group, r.name}]
				res.ByRound = append(res.ByRound, perOp[i])
				if perOp[i] <= 0 {
					continue
				}
				res.USPerOp = append(res.USPerOp, perOp[i])
				for j, b := range cy {
					if b.baseline && b.group == r.group && perOp[j] > 0 {
						res.Ratios = append(res.Ratios, perOp[i]/perOp[j])
					}
				}
			}
			for k := range hand {
				i := (k + round) % len(hand)
				handSlice(ctx, hand[i], handOf[rowKey{hand[i].group, hand[i].name}], ttl, o.handSamples)
			}
			gres.close()
		}
		for _, r := range cres {
			for len(r.ByRound) < done+1 {
				r.ByRound = append(r.ByRound, 0) // not set up this round
			}
		}
		// Crash failover: every row at once, each with its own holder process, all killed after
		// the same random delay.
		if sel.measure(mFailover) && len(groups) > 0 {
			fr := new(resources)
			_, _, fail := setupRows(sel.narrow("", mFailover), fr)
			delay := 300*time.Millisecond + rand.N(ttl/2)
			var wg sync.WaitGroup
			for i := range fail {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res := failOf[rowKey{fail[i].group, fail[i].name}]
					fctx, cancel := context.WithTimeout(ctx, 5*ttl+30*time.Second)
					defer cancel()
					name := fmt.Sprintf("bench-%s-fo-%d-%d", c.run, i, round)
					s, err := runFailover(fctx, c.env(), fail[i], name, ttl, delay)
					if err != nil {
						res.Errors++
						res.LastError = err.Error()
						return
					}
					res.TTLRatios = append(res.TTLRatios, s.ttlRatio)
					if s.counted {
						res.Counted = true
						res.AcqPerTTL = append(res.AcqPerTTL, s.acqPerTTL)
						res.AllPerTTL = append(res.AllPerTTL, s.allPerTTL)
					}
				}()
			}
			wg.Wait()
			fr.close()
		}
		// Stale writes after a pause past the TTL: every row at once, each with its own holder
		// process.
		if sel.measure(mStale) && len(groups) > 0 {
			if err := staleRound(ctx, c, sel, round, staleOf, &sres); err != nil {
				rep.Skipped["stale writes, round "+strconv.Itoa(round+1)] = err.Error()
			}
		}
		done++
	}
	sort.SliceStable(cres, func(i, j int) bool {
		return rank(cres[i].Group, cres[i].Name, cres[i].Baseline) < rank(cres[j].Group, cres[j].Name, cres[j].Baseline)
	})
	sort.SliceStable(hres, func(i, j int) bool {
		return rank(hres[i].Group, hres[i].Name, false) < rank(hres[j].Group, hres[j].Name, false)
	})
	sort.SliceStable(fres, func(i, j int) bool {
		return rank(fres[i].Group, fres[i].Name, false) < rank(fres[j].Group, fres[j].Name, false)
	})
	rep.Rounds = done
	// The cost of waiting: one waiting process per Simba backend, all at once.
	sbs := slices.DeleteFunc(c.simbaBackends(), func(sb simbaBackend) bool { return !sel.group(sb.group) })
	if sel.measure(mWaiting) && len(sbs) > 0 && time.Until(deadline) > waitSettle+waitWatch(ttl)+25*time.Second {
		fmt.Fprintf(os.Stderr, "waiting cost (%v elapsed)\n", time.Since(start).Round(time.Second))
		rep.Waiting = make([]*waitRes, len(sbs))
		// A SQLite file of its own, which only the holder and the waiter write: the harness's
		// other SQLite clients (cycle, handover) renew their sessions in the run's file, and
		// every commit there would wake the waiter. The idle processes have one each too:
		// their keep-alives would wake the waiter.
		wc := c
		wc.dir = filepath.Join(c.dir, "wait")
		if err := os.MkdirAll(wc.dir, 0o755); err != nil {
			return err
		}
		var wg sync.WaitGroup
		for i, sb := range sbs {
			ic := c
			ic.dir = filepath.Join(c.dir, fmt.Sprintf("idle-%d", i))
			if err := os.MkdirAll(ic.dir, 0o755); err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, waitSettle+waitWatch(ttl)+60*time.Second)
				defer cancel()
				w, err := measureWaiting(wctx, wc.env(), ic.env(), sb.role, fmt.Sprintf("bench-%s-wait-%d", c.run, i), ttl)
				if err != nil {
					w = &waitRes{Error: err.Error()}
				}
				w.Group = sb.group
				rep.Waiting[i] = w
			}()
		}
		wg.Wait()
	}
	// Keep-alive calls with many held leases (Simba only), within what is left of the budget.
	for _, sb := range sbs {
		if !sel.measure(mKeepAlive) {
			break
		}
		for _, n := range rep.leases {
			r := &kaRes{Group: sb.group, Leases: n}
			rep.KeepAlive = append(rep.KeepAlive, r)
			left := time.Until(deadline)
			if left < 5*time.Second {
				r.Error = "budget spent"
				continue
			}
			fmt.Fprintf(os.Stderr, "keep-alive: %s with %d leases\n", sb.group, n)
			kctx, cancel := context.WithTimeout(ctx, min(left, 120*time.Second))
			err := keepAliveCalls(kctx, sb.open, ttl, fmt.Sprintf("bench-%s-ka-%d", c.run, n), n, r)
			cancel()
			if err != nil {
				r.Error = err.Error()
			}
		}
	}
	for _, r := range cres {
		r.MedianUS, r.MedianRatio = pct(r.USPerOp, 50), pct(r.Ratios, 50)
		r.MedianCmds = pct(r.CmdsPerOp, 50)
	}
	for _, r := range hres {
		r.P50, r.P99, r.Max = pct(r.MS, 50), pct(r.MS, 99), pct(r.MS, 100)
	}
	for _, r := range fres {
		r.P50, r.Max = pct(r.TTLRatios, 50), pct(r.TTLRatios, 100)
		r.MedAcq, r.MedAll = pct(r.AcqPerTTL, 50), pct(r.AllPerTTL, 50)
	}
	sort.SliceStable(sres, func(i, j int) bool {
		return rank(sres[i].Group, sres[i].Name, false) < rank(sres[j].Group, sres[j].Name, false)
	})
	rep.Cycle, rep.Handover, rep.Failover, rep.Stale = cres, hres, fres, sres
	rep.Elapsed = time.Since(start).Round(time.Second).String()
	describe(rep)
	return write(rep, o.out)
}

// cycleSlice runs one row's cycles for up to 250 ms or 3,000 cycles and returns µs per cycle
// (0 on error).
func cycleSlice(ctx context.Context, r cycleRow, res *cycleRes) float64 {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fail := func(err error) float64 {
		res.Errors++
		res.LastError = err.Error()
		return 0
	}
	if r.prep != nil {
		if err := r.prep(sctx); err != nil {
			return fail(err)
		}
	}
	// The row's clients are new in every slice (see run): warm them up untimed.
	for range cycleWarmup {
		if err := r.op(sctx); err != nil {
			return fail(err)
		}
	}
	var c0 int64
	if r.cmds != nil {
		c0 = r.cmds()
	}
	t0 := time.Now()
	n := 0
	for n < 3000 && (n < 10 || time.Since(t0) < 250*time.Millisecond) {
		if err := r.op(sctx); err != nil {
			return fail(err)
		}
		n++
	}
	us := float64(time.Since(t0).Microseconds()) / float64(n)
	if r.cmds != nil {
		res.CmdsPerOp = append(res.CmdsPerOp, float64(r.cmds()-c0)/float64(n))
	}
	return us
}

// handSlice takes up to n handover samples of one row, for at most 2 s after the first per 10
// samples, after handWarmup untimed ones (the row's clients are new in every slice: see run).
func handSlice(ctx context.Context, r handRow, res *handRes, ttl time.Duration, n int) {
	for k := 0; k < handWarmup; k++ {
		sctx, cancel := context.WithTimeout(ctx, 4*ttl+10*time.Second)
		_, err := r.sample(sctx)
		cancel()
		if err != nil {
			res.Errors++
			res.LastError = err.Error()
			n = 0 // no timed samples, but finish below
			break
		}
	}
	t0 := time.Now()
	limit := 2 * time.Second * time.Duration(max(1, (n+9)/10))
	for k := 0; k < n && (k == 0 || time.Since(t0) < limit); k++ {
		sctx, cancel := context.WithTimeout(ctx, 4*ttl+10*time.Second)
		d, err := r.sample(sctx)
		cancel()
		if err != nil {
			res.Errors++
			res.LastError = err.Error()
			break
		}
		res.MS = append(res.MS, float64(d.Microseconds())/1000)
	}
	if r.finish != nil {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r.finish(fctx)
		cancel()
	}
}

// parseLeases reads -leases: the positive counts of a comma-separated list.
func parseLeases(list string) []int {
	var sizes []int
	for _, s := range strings.Split(list, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			sizes = append(sizes, n)
		}
	}
	return sizes
}

// pct is the nearest-rank percentile p of xs (0 when empty).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(k, len(s)-1))]
}

// groupOrder is the order of the servers in every table.
var groupOrder = []string{"Redis", "Redis Cluster", "PostgreSQL", "MariaDB", "SQLite", "ZooKeeper", "etcd (embedded)"}

// rank orders a server's rows: its baseline, the peers, Simba's SPI, Simba's public API.
func rank(group, name string, baseline bool) int {
	g := len(groupOrder)
	for i, o := range groupOrder {
		if o == group {
			g = i
		}
	}
	k := 1
	switch {
	case baseline:
		k = 0
	case strings.HasPrefix(name, "Simba backend"):
		k = 2
	case strings.Contains(name, "Simba"):
		k = 3
	}
	return g*10 + k
}

// isBaseline tells a hand-over row that times a server's baseline op alone (floorRow).
func isBaseline(name string) bool { return strings.HasPrefix(name, "baseline: ") }

func sortRows(cy []cycleRow, hand []handRow, fail []failRow) {
	sort.SliceStable(cy, func(i, j int) bool {
		return rank(cy[i].group, cy[i].name, cy[i].baseline) < rank(cy[j].group, cy[j].name, cy[j].baseline)
	})
	sort.SliceStable(hand, func(i, j int) bool {
		return rank(hand[i].group, hand[i].name, isBaseline(hand[i].name)) < rank(hand[j].group, hand[j].name, isBaseline(hand[j].name))
	})
	sort.SliceStable(fail, func(i, j int) bool {
		return rank(fail[i].group, fail[i].name, false) < rank(fail[j].group, fail[j].name, false)
	})
}

// rewrite writes the report of the full run saved at path (its latest.json) into o.out again:
// the tables as they were, the Targets table judged anew, with this binary's bounds and why
// texts (which are static, edited by hand between runs). A partial run's JSON is refused: its
// selection is not kept in a form the targets can use.
func rewrite(path string, o opts) error {
	js, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	rep := new(report)
	if err := json.Unmarshal(js, rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if rep.Selected != "" {
		return fmt.Errorf("%s is a partial run's (%s): only a full run's report is written again", path, rep.Selected)
	}
	if rep.sel, err = parseSelection("", ""); err != nil {
		return err
	}
	rep.leases = parseLeases(o.leases)
	return write(rep, o.out)
}

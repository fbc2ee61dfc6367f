package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/chaos/history"
	"github.com/simba-go/simba/chaos/resource"
	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/internal/faultproxy"
)

// Fault kinds.
var allFaults = []string{"kill", "pause", "partition", "oneway", "delay", "bandwidth", "restart"}

// backendSetup is what a backend needs for a run.
type backendSetup struct {
	servers []*servers.Server // private servers (restartable)
	// dsn builds a worker's DSN from the addresses it reaches the servers at.
	dsn func(addrs []string) string
	// fixed is the addresses when the servers are shared or embedded (no proxy possible).
	fixed []string
	// own is the fenced resource on the backend's own database (SQL), given the address.
	own     func(addr string) string
	durable bool
	// nodes are shared servers (the Redis Cluster's nodes) each worker reaches through fault
	// proxies of its own, without owning them: no restarts. The worker's client dials a node's
	// proxy whenever it would dial the node (worker -redirect), so the addresses the nodes
	// announce (and redirect to) lead through the proxies too.
	nodes []string
}

func (b *backendSetup) proxied() bool { return len(b.servers) > 0 || len(b.nodes) > 0 }

// targets are the addresses each worker gets a proxy to.
func (b *backendSetup) targets() []string {
	if len(b.nodes) > 0 {
		return b.nodes
	}
	var t []string
	for _, s := range b.servers {
		t = append(t, s.Addr())
	}
	return t
}

type workerProc struct {
	id, base    string
	incarnation int
	cmd         *exec.Cmd
	proxies     []*faultproxy.Proxy
	done        chan struct{}
}

type runner struct {
	backend, mode, name, dir string
	ttl                      time.Duration
	churn                    time.Duration // the workers' -churn (0: none)
	rng                      *rand.Rand
	seed                     uint64
	setup                    *backendSetup
	fences                   []string
	partitions               int
	bin                      string

	mu      sync.Mutex
	events  []history.Event
	hist    *os.File
	open    map[string]map[string]int64 // name → worker → token of its open term
	lastAcq map[string]int64            // name → mono of the last acquisition
	workers []*workerProc
	wg      sync.WaitGroup
}

func (r *runner) record(e history.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Mono == 0 {
		e.Mono = history.Now()
	}
	r.events = append(r.events, e)
	b, _ := json.Marshal(e)
	r.hist.Write(append(b, '\n'))
	switch e.Kind {
	case history.Acquired:
		if r.open[e.Name] == nil {
			r.open[e.Name] = map[string]int64{}
		}
		r.open[e.Name][e.Worker] = e.Token
		r.lastAcq[e.Name] = e.Mono
	case history.Ended:
		delete(r.open[e.Name], e.Worker)
	case history.Write:
		if !e.Valid {
			delete(r.open[e.Name], e.Worker)
		}
	}
}

func (r *runner) startWorker(ctx context.Context, w *workerProc) error {
	w.incarnation++
	w.id = fmt.Sprintf("%s.%d", w.base, w.incarnation)
	addrs := r.setup.fixed
	if r.setup.proxied() && len(r.setup.nodes) == 0 {
		addrs = nil
		for _, p := range w.proxies {
			addrs = append(addrs, p.Addr())
		}
	}
	args := []string{"worker", "-id", w.id, "-dsn", r.setup.dsn(addrs), "-mode", r.mode, "-name", r.name,
		"-ttl", r.ttl.String(), "-partitions", strconv.Itoa(r.partitions), "-seed", strconv.FormatUint(r.rng.Uint64(), 10)}
	if r.churn > 0 {
		args = append(args, "-churn", r.churn.String())
	}
	if len(r.setup.nodes) > 0 {
		var m []string
		for _, p := range w.proxies {
			m = append(m, p.Target()+"="+p.Addr())
		}
		args = append(args, "-redirect", strings.Join(m, ","))
	}
	for _, f := range r.fences {
		args = append(args, "-fence", f)
	}
	if r.setup.own != nil {
		args = append(args, "-fence", r.setup.own(addrs[0]))
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = workerAttr()
	errLog, err := os.OpenFile(filepath.Join(r.dir, w.base+".stderr"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd.Stderr = errLog
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	w.cmd = cmd
	w.done = make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e history.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				r.record(e)
			}
		}
		cmd.Wait()
		errLog.Close()
		close(w.done)
	}()
	return nil
}

// holder picks the worker to hit: the holder of the name (election, lock) or the worker
// holding the most partitions (group); nil if nobody holds anything now.
func (r *runner) holder() (*workerProc, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := map[string]int{}
	var name string
	names := make([]string, 0, len(r.open))
	for n := range r.open {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for w := range r.open[n] {
			count[w]++
			if name == "" || r.mode != "group" {
				name = n
			}
		}
	}
	var best *workerProc
	for _, w := range r.workers {
		if count[w.id] > 0 && (best == nil || count[w.id] > count[best.id]) {
			best = w
		}
	}
	if best == nil {
		return nil, ""
	}
	if r.mode == "group" {
		for _, n := range names {
			if _, ok := r.open[n][best.id]; ok {
				return best, n
			}
		}
	}
	return best, name
}

func (r *runner) waitHolder(ctx context.Context, limit time.Duration) (*workerProc, string) {
	end := time.Now().Add(limit)
	for time.Now().Before(end) && ctx.Err() == nil {
		if w, n := r.holder(); w != nil {
			return w, n
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, ""
}

func (r *runner) sleep(d time.Duration) { time.Sleep(d) }

func (r *runner) jitter(base time.Duration, spread float64) time.Duration {
	return time.Duration(float64(base) * (1 + spread*r.rng.Float64()))
}

func (r *runner) setProxies(w *workerProc, f faultproxy.Fault) {
	for _, p := range w.proxies {
		p.Set(f)
	}
}

// round injects one fault and heals it.
func (r *runner) round(ctx context.Context, fault string) error {
	w, name := r.waitHolder(ctx, 4*r.ttl)
	if w == nil && fault != "restart" {
		// Nobody holds anything: liveness is the checker's to judge; record and go on.
		r.record(history.Event{Kind: history.Fault, Fault: fault + " (no holder)"})
		r.record(history.Event{Kind: history.Heal, Fault: fault})
		r.sleep(2 * r.ttl)
		return nil
	}
	ev := history.Event{Kind: history.Fault, Fault: fault}
	if w != nil && fault != "restart" {
		ev.Worker, ev.Name = w.id, name
	}
	switch fault {
	case "kill":
		r.record(ev)
		w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
		r.sleep(r.jitter(r.ttl/2, 1))
		if err := r.startWorker(ctx, w); err != nil {
			return err
		}
	case "pause":
		r.record(ev)
		w.cmd.Process.Signal(syscall.SIGSTOP)
		r.sleep(r.jitter(3*r.ttl/2, 0.5))
		w.cmd.Process.Signal(syscall.SIGCONT)
	case "partition", "oneway", "delay", "bandwidth":
		f := map[string]faultproxy.Fault{
			"partition": {Cut: true},
			"oneway":    {Down: faultproxy.Stall},
			"delay":     {Delay: r.ttl / 4},
			"bandwidth": {BytesPerSecond: 2048},
		}[fault]
		r.record(ev)
		r.setProxies(w, f)
		r.sleep(r.jitter(3*r.ttl/2, 0.5))
		r.setProxies(w, faultproxy.Fault{})
	case "restart":
		s := r.setup.servers[r.rng.IntN(len(r.setup.servers))]
		ev.Fault = "restart " + s.Kind
		if len(r.setup.servers) > 1 && r.rng.IntN(2) == 0 {
			// Half the restarts of an ensemble hit its leader.
			for _, l := range r.setup.servers {
				if l.ZKMode() == "leader" {
					s, ev.Fault = l, "restart zookeeper leader"
				}
			}
		}
		r.record(ev)
		s.Kill()
		r.sleep(r.jitter(r.ttl/2, 1))
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	r.record(history.Event{Kind: history.Heal, Fault: fault})
	// Give the run time to recover: every name held again (every partition, for a group), or
	// past the liveness bound, so that the next fault never cuts a liveness window short
	// unless the bound has passed.
	healed := time.Now()
	for time.Since(healed) < 2*r.ttl+r.ttl/2 {
		if r.allHeld() && time.Since(healed) > r.ttl/2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// allHeld reports whether every name of the run has a holder now: each partition of a group,
// the one name otherwise.
func (r *runner) allHeld() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mode != "group" {
		return len(r.open[r.name]) > 0
	}
	for p := range r.partitions {
		if len(r.open[r.name+"."+strconv.Itoa(p)]) == 0 {
			return false
		}
	}
	return true
}

// faultsFor lists the faults a backend supports: no proxy for the embedded SQLite, no
// restart of a shared (the Redis Cluster) or embedded server.
func faultsFor(b *backendSetup) []string {
	switch {
	case len(b.servers) > 0:
		return allFaults
	case b.proxied():
		return slices.DeleteFunc(slices.Clone(allFaults), func(f string) bool { return f == "restart" })
	}
	return []string{"kill", "pause"}
}

func runChaos(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	backend := fs.String("backend", "sqlite", "sqlite, postgres, mariadb, redis, redis-nodurable, redis-cluster, zookeeper, zookeeper-ensemble, etcd")
	rounds := fs.Int("rounds", 1, "rounds of each fault")
	seed := fs.Uint64("seed", 0, "seed (0: from the clock)")
	ttl := fs.Duration("ttl", time.Second, "session TTL of the workers")
	mode := fs.String("mode", "election", "election, lock or group")
	nworkers := fs.Int("workers", 3, "worker processes")
	faultList := fs.String("faults", "", "comma-separated faults (default: every fault the backend supports)")
	out := fs.String("out", "", "directory for the history and logs (default: a temporary one)")
	resultFile := fs.String("result", "", "append the run's result as one JSON line to this file")
	churn := fs.Duration("churn", 0, "election and group modes: each worker stops its election or leaves its group about every churn (0.5-1.5 x), often with a ctx that has ended, and starts or joins again at once (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	replay := fmt.Sprintf("make chaos BACKEND=%s MODE=%s ROUNDS=%d SEED=%d TTL=%s", *backend, *mode, *rounds, *seed, *ttl)
	if *faultList != "" {
		replay += " FAULTS=" + *faultList
	}
	if *churn > 0 {
		if *mode == "lock" {
			return fmt.Errorf("-churn: election or group mode, not lock (a lock worker lets go of its lock already)")
		}
		replay += " CHURN=" + churn.String()
	}
	if m := os.Getenv(mutantEnv); m != "" {
		replay = mutantEnv + "=" + m + " " + replay
		switch {
		case m == mutantReleaseIgnoresToken && *backend != "postgres":
			// Its workers would exit at startup, and a run of no terms judges nothing.
			return fmt.Errorf("mutant %s: PostgreSQL only (-backend postgres), not %s", m, *backend)
		case m != mutantReleaseIgnoresToken && m != mutantIgnoreDeadline:
			return fmt.Errorf("unknown %s %q: want %s or %s", mutantEnv, m, mutantIgnoreDeadline, mutantReleaseIgnoresToken)
		}
	}
	fmt.Printf("chaos: backend %s, mode %s, seed %d, TTL %v\nchaos: replay with: %s\n", *backend, *mode, *seed, *ttl, replay)

	dir := *out
	if dir == "" {
		d, err := os.MkdirTemp("", "simba-chaos-")
		if err != nil {
			return err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The private servers run as their own users (postgres, mysql) when started by root.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	runID := fmt.Sprintf("%d_%d", os.Getpid(), *seed%1000000)
	setup, err := setupBackend(ctx, *backend, dir, runID)
	if err != nil {
		return fmt.Errorf("backend %s: %w", *backend, err)
	}
	defer func() {
		for _, s := range setup.servers {
			s.Close()
		}
	}()
	r := &runner{backend: *backend, mode: *mode, churn: *churn, name: "chaos-" + runID, dir: dir, ttl: *ttl, seed: *seed,
		rng: rand.New(rand.NewPCG(*seed, 19)), setup: setup, partitions: 4, bin: bin,
		open: map[string]map[string]int64{}, lastAcq: map[string]int64{}}
	r.fences = []string{
		"pg|pgx|" + sharedPostgres() + "|chaos_fence_" + runID,
		"redis|redis|" + sharedRedis() + "|simba-chaos:" + runID + ":",
	}
	for _, f := range r.fences {
		if err := setupFence(ctx, f); err != nil {
			return err
		}
	}
	r.hist, err = os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return err
	}
	defer r.hist.Close()
	for i := range *nworkers {
		w := &workerProc{base: fmt.Sprintf("w%d", i+1)}
		for _, t := range setup.targets() {
			p, err := faultproxy.Start(t)
			if err != nil {
				return err
			}
			defer p.Close()
			w.proxies = append(w.proxies, p)
		}
		r.workers = append(r.workers, w)
	}
	if setup.own != nil {
		if err := setupFence(ctx, setup.own(setup.addrOf())); err != nil {
			return err
		}
	}
	for _, w := range r.workers {
		if err := r.startWorker(ctx, w); err != nil {
			return err
		}
	}
	faults := faultsFor(setup)
	if *faultList != "" {
		faults = strings.Split(*faultList, ",")
		for _, f := range faults {
			if !slices.Contains(faultsFor(setup), f) {
				return fmt.Errorf("backend %s cannot take fault %q (it takes %s)", *backend, f, strings.Join(faultsFor(setup), ","))
			}
		}
	}
	var schedule []string
	for range *rounds {
		schedule = append(schedule, faults...)
	}
	r.rng.Shuffle(len(schedule), func(i, j int) { schedule[i], schedule[j] = schedule[j], schedule[i] })
	start := time.Now()
	if w, _ := r.waitHolder(ctx, 10**ttl+30*time.Second); w == nil {
		fmt.Println("chaos: no worker ever acquired; see", dir)
	}
	for i, f := range schedule {
		if err := r.round(ctx, f); err != nil {
			return fmt.Errorf("round %d (%s): %w; replay with: %s", i+1, f, err, replay)
		}
	}
	r.sleep(2 * *ttl)
	for _, w := range r.workers {
		w.cmd.Process.Signal(syscall.SIGCONT)
		w.cmd.Process.Signal(syscall.SIGTERM)
	}
	var hung atomic.Bool
	stopAll := time.AfterFunc(5**ttl+5*time.Second, func() {
		hung.Store(true)
		for _, w := range r.workers {
			w.cmd.Process.Signal(syscall.SIGKILL)
		}
	})
	r.wg.Wait()
	stopAll.Stop()

	r.mu.Lock()
	evs := append([]history.Event(nil), r.events...)
	r.mu.Unlock()
	history.Sort(evs)
	cfg := history.Config{TTL: *ttl}
	if *mode == "group" {
		for p := range r.partitions {
			cfg.Names = append(cfg.Names, r.name+"."+strconv.Itoa(p))
		}
	}
	rep := history.Check(evs, cfg)
	rep.Violations = append(rep.Violations, r.workerHealth(hung.Load())...)
	resMode := *mode
	if *churn > 0 { // a row of its own in the table
		resMode += "+churn " + churn.String()
	}
	res := summarize(*backend, resMode, *seed, *ttl, schedule, setup.durable, rep, time.Since(start))
	res.Restarted = len(setup.servers) > 0
	printResult(res, rep, dir)
	if *resultFile != "" {
		if err := appendResult(*resultFile, res); err != nil {
			return err
		}
	}
	if rep.OK() && rep.Terms == 0 {
		// No worker ever held the name (they failed at startup, or never reached the
		// backend): the checks had nothing to judge, which is no pass.
		return fmt.Errorf("no term was granted in %v: the workers never acquired (their logs are in %s); replay with: %s", time.Since(start).Round(time.Second), dir, replay)
	}
	if !rep.OK() {
		for _, s := range setup.servers {
			s.Keep = true // the server's files (Redis's AOF, a database) go with the history
			fmt.Println("chaos: kept the data of", s.Kind, "at", s.Dir())
		}
		return fmt.Errorf("%d violations (linearizable: %s); history in %s; replay with: %s", len(rep.Violations), rep.Linearizable, dir, replay)
	}
	for _, f := range r.fences {
		dropFence(ctx, f)
	}
	if *out == "" {
		os.RemoveAll(dir)
	}
	return nil
}

// workerMarks are the lines of a worker's stderr that fail a run: a panic or fatal error
// (the worker dies, and its base is not restarted, so the run goes on with one worker less and
// the history alone would not say why), a data race (a -race build), and the worker's own
// report of a client Close that failed at the end (worker.go: a Close that did not finish
// within 2 × TTL is a hang of the library's shutdown).
// A worker with -churn also reports a restart of its election or a rejoin of its group that
// failed for a reason other than the end of the run ("chaos: churn:"): a Stop or Leave whose ctx
// had ended must not keep the next NewElection or JoinGroup of the name from succeeding.
var workerMarks = []string{"panic:", "fatal error:", "WARNING: DATA RACE", "chaos: client close:", "chaos: churn:"}

// workerHealth reports what the history cannot show: workers that did not exit within the
// bound after SIGTERM (hung: the harness killed them) or whose stderr has a workerMarks line.
func (r *runner) workerHealth(hung bool) []history.Violation {
	var vs []history.Violation
	for _, w := range r.workers {
		if st := w.cmd.ProcessState; hung && st != nil && !st.Exited() {
			vs = append(vs, history.Violation{Check: "worker", Name: w.id,
				Detail: "did not exit within 5×TTL+5s of SIGTERM (killed): a hung shutdown"})
		}
		b, err := os.ReadFile(filepath.Join(r.dir, w.base+".stderr"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, m := range workerMarks {
				if strings.Contains(line, m) {
					vs = append(vs, history.Violation{Check: "worker", Name: w.base, Detail: line})
				}
			}
		}
	}
	return vs
}

// dropFence removes a passed run's table or keys from a shared server.
func dropFence(ctx context.Context, spec string) {
	res, err := resource.Open(spec)
	if err != nil {
		return
	}
	defer res.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = res.Drop(dctx)
}

// result is one run's line in the results file that docs/reliability.md is made from.
type result struct {
	Backend      string             `json:"backend"`
	Mode         string             `json:"mode"`
	Seed         uint64             `json:"seed"`
	TTL          string             `json:"ttl"`
	Rounds       map[string]int     `json:"rounds"`
	Violations   []string           `json:"violations"`
	Linearizable string             `json:"linearizable"`
	Durable      bool               `json:"durable"`
	Restarted    bool               `json:"restarted"`   // the run could restart its servers
	Failover     map[string][]int64 `json:"failover_ms"` // per fault, ms from fault to new holder
	Terms        int                `json:"terms"`
	Writes       int                `json:"writes"`
	Accepted     int                `json:"accepted"`
	Seconds      float64            `json:"seconds"`
}

func summarize(backend, mode string, seed uint64, ttl time.Duration, schedule []string, durable bool, rep history.Report, took time.Duration) result {
	res := result{Backend: backend, Mode: mode, Seed: seed, TTL: ttl.String(), Rounds: map[string]int{},
		Linearizable: rep.Linearizable, Durable: durable, Failover: map[string][]int64{},
		Terms: rep.Terms, Writes: rep.Writes, Accepted: rep.Accepted, Seconds: took.Seconds()}
	for _, f := range schedule {
		res.Rounds[f]++
	}
	for _, v := range rep.Violations {
		res.Violations = append(res.Violations, v.String())
	}
	for _, f := range rep.Failovers {
		if f.Found {
			res.Failover[f.Fault] = append(res.Failover[f.Fault], f.After.Milliseconds())
		}
	}
	return res
}

func printResult(res result, rep history.Report, dir string) {
	fmt.Printf("chaos: %s/%s: %d terms, %d writes (%d accepted), linearizable %s, durable %v, %.0fs\n",
		res.Backend, res.Mode, res.Terms, res.Writes, res.Accepted, res.Linearizable, res.Durable, res.Seconds)
	faults := make([]string, 0, len(res.Rounds))
	for f := range res.Rounds {
		faults = append(faults, f)
	}
	sort.Strings(faults)
	ttlD, _ := time.ParseDuration(res.TTL)
	for _, f := range faults {
		fo := slices.Clone(res.Failover[f])
		slices.Sort(fo)
		line := fmt.Sprintf("  %-10s %3d rounds", f, res.Rounds[f])
		if len(fo) > 0 {
			line += fmt.Sprintf("  failover p50 %.2f×TTL max %.2f×TTL (%d)", float64(fo[len(fo)/2])/float64(ttlD.Milliseconds()),
				float64(fo[len(fo)-1])/float64(ttlD.Milliseconds()), len(fo))
		}
		fmt.Println(line)
	}
	for i, v := range rep.Violations {
		if i == 20 {
			fmt.Printf("  ... %d more\n", len(rep.Violations)-20)
			break
		}
		fmt.Println("  VIOLATION", v)
	}
	fmt.Println("chaos: history in", filepath.Join(dir, "history.jsonl"), "(kept with -out, or when a check fails)")
}

func appendResult(path string, res result) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	b, _ := json.Marshal(res)
	_, err = f.Write(append(b, '\n'))
	return err
}

func setupFence(ctx context.Context, spec string) error {
	res, err := resource.Open(spec)
	if err != nil {
		return err
	}
	defer res.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return res.Setup(sctx)
}

func sharedPostgres() string {
	if v := os.Getenv("SIMBA_TEST_POSTGRES"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func sharedRedis() string {
	if v := os.Getenv("SIMBA_CHAOS_REDIS"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

func sharedCluster() string {
	if v := os.Getenv("SIMBA_TEST_REDIS_CLUSTER"); v != "" {
		return v
	}
	return "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
}

func (b *backendSetup) addrOf() string {
	if len(b.servers) > 0 {
		return b.servers[0].Addr()
	}
	return b.fixed[0]
}

func setupBackend(ctx context.Context, backend, dir, runID string) (*backendSetup, error) {
	switch backend {
	case "sqlite":
		path := filepath.Join(dir, "simba.db")
		return &backendSetup{fixed: []string{path}, durable: true,
			dsn: func([]string) string { return "sqlite://" + path },
			own: func(string) string { return "own|sqlite|file:" + path + "?_pragma=busy_timeout(5000)|chaos_fence" }}, nil
	case "postgres":
		s, err := servers.Postgres(ctx, dir)
		if err != nil {
			return nil, err
		}
		return &backendSetup{servers: []*servers.Server{s}, durable: true,
			dsn: func(a []string) string { return "postgres://postgres@" + a[0] + "/test?sslmode=disable" },
			own: func(a string) string { return "own|pgx|postgres://postgres@" + a + "/test?sslmode=disable|chaos_fence" }}, nil
	case "mariadb":
		s, err := servers.MariaDB(ctx, dir)
		if err != nil {
			return nil, err
		}
		return &backendSetup{servers: []*servers.Server{s}, durable: true,
			dsn: func(a []string) string { return "mysql://root@" + a[0] + "/test" },
			own: func(a string) string { return "own|mysql|root@tcp(" + a + ")/test?clientFoundRows=true|chaos_fence" }}, nil
	case "redis", "redis-nodurable":
		s, err := servers.Redis(ctx, dir, backend == "redis")
		if err != nil {
			return nil, err
		}
		return &backendSetup{servers: []*servers.Server{s}, durable: s.Durable,
			dsn: func(a []string) string { return "redis://" + a[0] }}, nil
	case "redis-cluster":
		seeds := strings.Split(sharedCluster(), ",")
		nodes, err := clusterNodes(ctx, seeds)
		if err != nil {
			return nil, err
		}
		return &backendSetup{fixed: seeds, nodes: nodes, durable: false,
			dsn: func(a []string) string { return "redis+cluster://" + strings.Join(a, ",") }}, nil
	case "zookeeper":
		s, err := servers.ZooKeeper(ctx, dir)
		if err != nil {
			return nil, err
		}
		return &backendSetup{servers: []*servers.Server{s}, durable: true,
			dsn: func(a []string) string { return "zk://" + a[0] + "/simba-chaos-" + runID }}, nil
	case "etcd":
		s, err := servers.Etcd(ctx, dir)
		if err != nil {
			return nil, err
		}
		return &backendSetup{servers: []*servers.Server{s}, durable: true,
			dsn: func(a []string) string { return "etcd://" + a[0] + "/simba-chaos-" + runID }}, nil
	case "zookeeper-ensemble":
		ss, err := servers.ZooKeeperEnsemble(ctx, dir)
		if err != nil {
			return nil, err
		}
		return &backendSetup{servers: ss, durable: true,
			dsn: func(a []string) string { return "zk://" + strings.Join(a, ",") + "/simba-chaos-" + runID }}, nil
	}
	return nil, errors.New("unknown backend")
}

// clusterNodes lists the addresses of every node of the Redis Cluster seeds belong to
// (masters and replicas), as the nodes announce them.
func clusterNodes(ctx context.Context, seeds []string) ([]string, error) {
	c := redis.NewClient(&redis.Options{Addr: seeds[0]})
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	slots, err := c.ClusterSlots(cctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redis cluster nodes: %w", err)
	}
	seen := map[string]bool{}
	var nodes []string
	for _, s := range slots {
		for _, n := range s.Nodes {
			if !seen[n.Addr] {
				seen[n.Addr] = true
				nodes = append(nodes, n.Addr)
			}
		}
	}
	sort.Strings(nodes)
	if len(nodes) == 0 {
		return nil, errors.New("redis cluster nodes: CLUSTER SLOTS lists none")
	}
	return nodes, nil
}

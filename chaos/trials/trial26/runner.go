package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/simba-go/simba/chaos/trials/netproxy"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

type event struct {
	T      int64  `json:"t"`
	Ev     string `json:"ev"`
	ID     string `json:"id"`
	Token  int64  `json:"token"`
	HTTP   string `json:"http"`
	Cause  string `json:"cause"`
	StopMS int64  `json:"stop_ms"`
	Valid  bool   `json:"valid"`
	Stale  int    `json:"stale"`
	Writes int    `json:"writes"`
	slot   string
}

type attempt struct {
	t      int64
	token  int64
	from   string
	status int
}

type sample struct {
	t       int64
	slot    string
	gen     int
	healthy int // http status of /healthz, 0 unreachable
	held    int // simba_term_held, -1 unknown
	up      int // simba_session_up
}

type replica struct {
	slot  string
	gen   int
	cmd   *exec.Cmd
	http  string
	px    *netproxy.Proxy
	done  chan struct{}
	ready chan struct{}
	stopT int64 // when SIGSTOP was sent (0: not stopped)
	extra []string
}

type runner struct {
	backend, dsnFmt, target, name, dir string
	ttl                                time.Duration

	mu       sync.Mutex
	events   []event
	attempts []attempt
	samples  []sample
	reps     map[string]*replica
	marks    []mark
	results  []map[string]any
	admitted int64 // highest admitted token
	backs    int   // admitted tokens lower than one admitted before (must be 0)
}

type mark struct {
	t    int64
	name string
}

func (r *runner) now() int64 { return time.Now().UnixNano() }

func (r *runner) mark(name string) {
	r.mu.Lock()
	r.marks = append(r.marks, mark{r.now(), name})
	r.mu.Unlock()
	fmt.Printf("%s === %s\n", time.Now().Format("15:04:05.000"), name)
}

func (r *runner) result(m map[string]any) {
	r.mu.Lock()
	r.results = append(r.results, m)
	r.mu.Unlock()
	b, _ := json.Marshal(m)
	fmt.Printf("RESULT %s\n", b)
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	be := fs.String("backend", "pg", "pg, etcd or rc")
	scen := fs.String("scenarios", "all", "comma-separated scenarios")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	dir := fs.String("dir", "", "output directory (default a temp dir)")
	rollFor := fs.Duration("rollout", 2*time.Minute, "rollout length")
	repeat := fs.Int("repeat", 1, "run the scenarios this many times")
	fs.Parse(args)
	r := &runner{backend: *be, ttl: *ttl, reps: map[string]*replica{}}
	r.name = fmt.Sprintf("trial26-ctl-%s-%d", *be, time.Now().Unix())
	switch *be {
	case "pg":
		r.target, r.dsnFmt = "127.0.0.1:5432", "postgres://postgres@%s/test?sslmode=disable"
	case "etcd":
		r.target, r.dsnFmt = "127.0.0.1:2379", "etcd://%s/trial26"
	case "rc":
		r.dsnFmt = "redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	default:
		return fmt.Errorf("backend %q", *be)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "trial26-"+*be+"-")
		if err != nil {
			return err
		}
		*dir = d
	}
	os.MkdirAll(*dir, 0o755)
	r.dir = *dir
	fmt.Println("output in", r.dir, "name", r.name)

	// The sink: a fencehttp guard that verifies new tokens with the lock service (a direct
	// connection, not through the replicas' proxies), in front of a handler that records writes.
	ctx := context.Background()
	direct, err := open.Open(ctx, r.dsn(r.target), open.WithAutoMigrate())
	if err != nil {
		return err
	}
	defer direct.Close()
	guard := &fencehttp.Guard{
		Verify:   fence.LeaseVerifier(direct.(spi.Inspector), nil),
		Resource: func(*http.Request) string { return r.name },
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tok, _ := fencehttp.Token(req.Context())
		r.mu.Lock()
		if tok < r.admitted {
			r.backs++
		}
		if tok > r.admitted {
			r.admitted = tok
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	wrapped := guard.Wrap(inner)
	sinkLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(sinkLn, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tok, _, _ := fencehttp.ParseToken(req.Header)
		rec := &statusRec{ResponseWriter: w, status: 200}
		wrapped.ServeHTTP(rec, req)
		r.mu.Lock()
		r.attempts = append(r.attempts, attempt{r.now(), tok, req.URL.Query().Get("r"), rec.status})
		r.mu.Unlock()
	}))
	sinkURL := "http://" + sinkLn.Addr().String()

	for _, s := range []string{"r1", "r2", "r3"} {
		rep := &replica{slot: s}
		if r.target != "" {
			px, err := netproxy.New(r.target)
			if err != nil {
				return err
			}
			defer px.Close()
			rep.px = px
		}
		r.reps[s] = rep
		if err := r.start(rep, sinkURL); err != nil {
			return err
		}
	}
	stopPoll := make(chan struct{})
	go r.poll(stopPoll)

	lead, _ := r.waitLeader(0, "", 30*time.Second)
	if lead == "" {
		return fmt.Errorf("no leader in 30 s")
	}
	r.mark("baseline")
	time.Sleep(3 * time.Second)

	want := map[string]bool{}
	for _, s := range strings.Split(*scen, ",") {
		want[s] = true
	}
	do := func(s string) bool { return want["all"] || want[s] }
	proxied := r.target != ""
	for rep := 0; rep < *repeat; rep++ {

		if do("sigterm") {
			r.signalLeader("sigterm", syscall.SIGTERM, sinkURL)
		}
		if do("kill9") {
			r.signalLeader("kill9", syscall.SIGKILL, sinkURL)
		}
		if do("sigstop") {
			r.sigstop(sinkURL)
		}
		if proxied {
			for _, f := range []float64{0.5, 1, 3} {
				if do(fmt.Sprintf("blackhole-%g", f)) || do("blackhole") {
					r.blackhole(f)
				}
			}
			if do("slow50") || do("slow") {
				r.slow("slow50", 50*time.Millisecond, true, 10*time.Second)
			}
			if do("slow50-kill9") || do("slow") {
				for _, rep := range r.live() {
					rep.px.SetDelay(50 * time.Millisecond)
				}
				time.Sleep(2 * time.Second)
				r.signalLeader("slow50-kill9", syscall.SIGKILL, sinkURL)
				for _, rep := range r.live() {
					rep.px.SetDelay(0)
				}
				time.Sleep(2 * r.ttl)
			}
			if do("slowhalf") || do("slow") {
				r.slow("slowhalf", r.ttl/2, false, 15*time.Second)
			}
			if do("partition-one") {
				r.partitionOne()
			}
			if do("flap") {
				r.flap()
			}
			if want["partition-repeat"] {
				r.partitionRepeat()
			}
			if do("cut-sigterm") {
				r.cutSIGTERM(sinkURL)
			}
			if do("churn-cut") {
				r.churn(sinkURL, true)
			}
		}
		if do("churn") {
			r.churn(sinkURL, false)
		}
		if do("rollout") {
			r.rollout(*rollFor, sinkURL)
		}
	}
	r.mark("end")
	time.Sleep(2 * time.Second)
	close(stopPoll)
	for _, rep := range r.live() {
		rep.cmd.Process.Signal(syscall.SIGCONT)
		rep.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, rep := range r.live() {
		select {
		case <-rep.done:
		case <-time.After(15 * time.Second):
			fmt.Println("replica did not exit in 15 s after SIGTERM:", rep.slot, rep.gen)
			rep.cmd.Process.Kill()
		}
	}
	r.analyse()
	return nil
}

type statusRec struct {
	http.ResponseWriter
	status int
}

func (s *statusRec) WriteHeader(c int) { s.status = c; s.ResponseWriter.WriteHeader(c) }

func (r *runner) dsn(addr string) string {
	if strings.Contains(r.dsnFmt, "%s") {
		return fmt.Sprintf(r.dsnFmt, addr)
	}
	return r.dsnFmt
}

func (r *runner) live() []*replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*replica
	for _, s := range []string{"r1", "r2", "r3"} {
		out = append(out, r.reps[s])
	}
	return out
}

func (r *runner) start(rep *replica, sinkURL string) error {
	rep.gen++
	addr := r.target
	if rep.px != nil {
		addr = rep.px.Addr()
	}
	id := fmt.Sprintf("%s-g%d", rep.slot, rep.gen)
	cmd := exec.Command(os.Args[0], "controller", "-dsn", r.dsn(addr), "-name", r.name, "-id", id,
		"-ttl", r.ttl.String(), "-sink", sinkURL)
	cmd.Args = append(cmd.Args, rep.extra...)
	logf, err := os.Create(filepath.Join(r.dir, id+".log"))
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	rep.cmd, rep.done, rep.ready, rep.stopT = cmd, make(chan struct{}), make(chan struct{}), 0
	done, ready := rep.done, rep.ready
	go func() {
		sc := bufio.NewScanner(out)
		once := false
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			e.slot = rep.slot
			r.mu.Lock()
			r.events = append(r.events, e)
			if e.Ev == "ready" {
				rep.http = e.HTTP
			}
			r.mu.Unlock()
			if e.Ev == "ready" && !once {
				once = true
				close(ready)
			}
		}
		cmd.Wait()
		logf.Close()
		r.mu.Lock()
		r.events = append(r.events, event{T: r.now(), Ev: "process-exit", ID: id, slot: rep.slot})
		r.mu.Unlock()
		if !once {
			close(ready)
		}
		close(done)
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("replica %s not ready", id)
	}
	return nil
}

// leaderNow returns the slot whose last work-start has no work-end after it (one process per
// slot at a time), with the start's time.
func (r *runner) workingAt() map[string]event {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := map[string]event{}
	for _, e := range r.events {
		switch e.Ev {
		case "work-start":
			cur[e.ID] = e
		case "work-end", "process-exit":
			delete(cur, e.ID)
		}
	}
	return cur
}

// waitLeader waits for a work-start after `after` (unix nanos) by a replica other than `not`.
func (r *runner) waitLeader(after int64, not string, max time.Duration) (string, event) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, e := range r.events {
			if e.Ev == "work-start" && e.T > after && e.slot != not {
				r.mu.Unlock()
				return e.slot, e
			}
		}
		r.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	return "", event{}
}

func (r *runner) leader() (*replica, event) {
	for i := 0; i < 500; i++ {
		for _, e := range r.workingAt() {
			return r.reps[e.slot], e
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, event{}
}

func (r *runner) signalLeader(name string, sig syscall.Signal, sinkURL string) {
	r.mark(name)
	L, le := r.leader()
	if L == nil {
		r.result(map[string]any{"scenario": name, "error": "no leader"})
		return
	}
	t0 := r.now()
	L.cmd.Process.Signal(sig)
	slot, ne := r.waitLeader(t0, L.slot, 10*r.ttl)
	res := map[string]any{"scenario": name, "backend": r.backend, "old": le.ID, "old_token": le.Token,
		"new": ne.ID, "new_token": ne.Token, "failover_ms": ms(ne.T - t0)}
	if slot == "" {
		res["error"] = "no new leader in 10 TTL"
	}
	select {
	case <-L.done:
	case <-time.After(15 * time.Second):
		res["exit"] = "did not exit in 15 s"
		L.cmd.Process.Kill()
		<-L.done
	}
	if e, ok := r.findID(le.ID, "stopped"); ok {
		res["stop_ms"] = e.StopMS
	}
	if e, ok := r.findID(le.ID, "work-end"); ok && e.T > le.T {
		res["old_work_end_to_new_start_ms"] = ms(ne.T - e.T)
	}
	r.result(res)
	r.start(L, sinkURL)
	time.Sleep(2 * time.Second)
}

func (r *runner) findID(id, ev string) (event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].ID == id && r.events[i].Ev == ev {
			return r.events[i], true
		}
	}
	return event{}, false
}

func (r *runner) waitEvent(id, ev string, after int64, max time.Duration) (event, bool) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if e, ok := r.findID(id, ev); ok && e.T > after {
			return e, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return event{}, false
}

func (r *runner) sigstop(sinkURL string) {
	r.mark("sigstop")
	L, le := r.leader()
	if L == nil {
		r.result(map[string]any{"scenario": "sigstop", "error": "no leader"})
		return
	}
	staleBefore := r.refused()
	t0 := r.now()
	L.cmd.Process.Signal(syscall.SIGSTOP)
	r.mu.Lock()
	r.events = append(r.events, event{T: t0, Ev: "sigstop", ID: le.ID, slot: L.slot})
	r.mu.Unlock()
	slot, ne := r.waitLeader(t0, L.slot, 10*r.ttl)
	time.Sleep(time.Until(time.Unix(0, t0).Add(2 * r.ttl)))
	t1 := r.now()
	L.cmd.Process.Signal(syscall.SIGCONT)
	we, ok := r.waitEvent(le.ID, "work-end", t1, 3*r.ttl)
	time.Sleep(r.ttl)
	res := map[string]any{"scenario": "sigstop", "backend": r.backend, "old": le.ID, "new": ne.ID,
		"failover_ms": ms(ne.T - t0), "stopped_ms": ms(t1 - t0), "refused_writes": r.refused() - staleBefore}
	if slot == "" {
		res["error"] = "no new leader"
	}
	if ok {
		res["old_work_end_after_cont_ms"] = ms(we.T - t1)
		res["old_work_end_stale"] = we.Stale
	} else {
		res["error_work_end"] = "old work did not end within 3 TTL of SIGCONT"
	}
	r.result(res)
}

func (r *runner) refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.attempts {
		if a.status == http.StatusConflict {
			n++
		}
	}
	return n
}

func (r *runner) stats(rep *replica) map[string]any {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + rep.http + "/stats")
	if err != nil {
		return map[string]any{"err": err.Error()}
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return m
}

func (r *runner) blackhole(f float64) {
	name := fmt.Sprintf("blackhole-%gxTTL", f)
	r.mark(name)
	L, le := r.leader()
	if L == nil {
		r.result(map[string]any{"scenario": name, "error": "no leader"})
		return
	}
	before := r.stats(L)
	d := time.Duration(f * float64(r.ttl))
	t0 := r.now()
	L.px.Cut()
	lastSend := L.px.LastSend()
	slot, ne := r.waitLeader(t0, L.slot, d)
	we, ended := r.waitEvent(le.ID, "work-end", t0, time.Until(time.Unix(0, t0).Add(d)))
	time.Sleep(time.Until(time.Unix(0, t0).Add(d)))
	t1 := r.now()
	L.px.Heal()
	if !ended {
		// The work must end by the lease's expiry at the server, at most TTL after the cut.
		we, ended = r.waitEvent(le.ID, "work-end", t0, time.Until(time.Unix(0, t0).Add(r.ttl+time.Second)))
	}
	if slot == "" {
		slot, ne = r.waitLeader(t0, L.slot, time.Until(time.Unix(0, t0).Add(r.ttl+2*time.Second)))
	}
	res := map[string]any{"scenario": name, "backend": r.backend, "leader": le.ID, "cut_ms": ms(t1 - t0)}
	if ended {
		// The lease at the server lasts at least TTL from the last bytes the leader sent it.
		res["work_end_after_cut_ms"] = ms(we.T - t0)
		res["work_end_before_server_expiry_ms"] = ms(lastSend + int64(r.ttl) - we.T)
		res["work_end_cause"] = we.Cause
	} else {
		res["work_end"] = "work not ended during the cut"
	}
	if slot != "" {
		res["new"] = ne.ID
		res["failover_ms"] = ms(ne.T - t0)
		if ended {
			res["old_end_to_new_start_ms"] = ms(ne.T - we.T)
		}
	}
	time.Sleep(2*r.ttl + 2*time.Second)
	res["stats_before"] = before
	res["stats_after"] = r.stats(L)
	res["healthz_after"] = r.healthz(L)
	// Who leads after the heal.
	cur := r.workingAt()
	var ids []string
	for id := range cur {
		ids = append(ids, id)
	}
	res["working_after"] = ids
	r.result(res)
}

func (r *runner) healthz(rep *replica) string {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + rep.http + "/healthz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

func (r *runner) changes(from, to int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Ev == "work-start" && e.T > from && e.T <= to {
			out = append(out, fmt.Sprintf("%s@%d", e.ID, e.Token))
		}
	}
	return out
}

func (r *runner) slow(name string, d time.Duration, all bool, span time.Duration) {
	r.mark(name)
	L, le := r.leader()
	t0 := r.now()
	reps := []*replica{L}
	if all {
		reps = r.live()
	}
	for _, rep := range reps {
		rep.px.SetDelay(d)
	}
	time.Sleep(span)
	for _, rep := range reps {
		rep.px.SetDelay(0)
	}
	t1 := r.now()
	time.Sleep(2 * r.ttl)
	r.result(map[string]any{"scenario": name, "backend": r.backend, "delay_ms": ms(int64(d)), "leader": le.ID,
		"all": all, "terms_started": r.changes(t0, r.now()), "span_ms": ms(t1 - t0), "healthz_leader_after": r.healthz(L)})
}

func (r *runner) partitionOne() {
	r.mark("partition-one")
	L, le := r.leader()
	var P *replica
	for _, rep := range r.live() {
		if rep != L {
			P = rep
			break
		}
	}
	before := r.stats(P)
	t0 := r.now()
	P.px.Cut()
	time.Sleep(3 * r.ttl)
	hz := r.healthz(P)
	P.px.Heal()
	t1 := r.now()
	time.Sleep(2*r.ttl + 2*time.Second)
	r.result(map[string]any{"scenario": "partition-one", "backend": r.backend, "leader": le.ID, "partitioned": P.slot,
		"terms_started": r.changes(t0, r.now()), "healthz_partitioned_during": hz,
		"healthz_partitioned_after": r.healthz(P), "cut_ms": ms(t1 - t0),
		"stats_before": before, "stats_after": r.stats(P), "metrics_partitioned_after": r.metricLines(P)})
}

// metricLines returns the replica's simba_ metric lines but the histogram buckets.
func (r *runner) metricLines(rep *replica) []string {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + rep.http + "/metrics")
	if err != nil {
		return []string{err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "simba_") && !strings.Contains(l, "_bucket") {
			out = append(out, l)
		}
	}
	return out
}

func (r *runner) flap() {
	r.mark("flap")
	L, le := r.leader()
	before := r.stats(L)
	t0 := r.now()
	for i := 0; i < 15; i++ {
		L.px.Cut()
		time.Sleep(time.Second)
		L.px.Heal()
		time.Sleep(time.Second)
	}
	t1 := r.now()
	time.Sleep(2*r.ttl + 2*time.Second)
	r.result(map[string]any{"scenario": "flap", "backend": r.backend, "leader": le.ID,
		"terms_started": r.changes(t0, r.now()), "span_ms": ms(t1 - t0),
		"stats_before": before, "stats_after": r.stats(L), "healthz_after": r.healthz(L)})
}

func (r *runner) rollout(span time.Duration, sinkURL string) {
	r.mark("rollout")
	t0 := r.now()
	i := 0
	var gaps []int64
	var slow []string
	for time.Since(time.Unix(0, t0)) < span {
		rep := r.live()[i%3]
		i++
		wasLeader := false
		var le event
		for _, e := range r.workingAt() {
			if e.slot == rep.slot {
				wasLeader, le = true, e
			}
		}
		ts := r.now()
		rep.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-rep.done:
		case <-time.After(15 * time.Second):
			slow = append(slow, rep.slot)
			rep.cmd.Process.Kill()
			<-rep.done
		}
		if wasLeader {
			if _, ne := r.waitLeader(ts, rep.slot, 5*r.ttl); ne.T != 0 {
				gaps = append(gaps, ms(ne.T-ts))
			} else {
				gaps = append(gaps, -1)
			}
			_ = le
		}
		if err := r.start(rep, sinkURL); err != nil {
			fmt.Println("restart:", err)
		}
		time.Sleep(3 * time.Second)
	}
	sort.Slice(gaps, func(a, b int) bool { return gaps[a] < gaps[b] })
	r.result(map[string]any{"scenario": "rollout", "backend": r.backend, "replacements": i,
		"leader_handover_ms_sorted": gaps, "slow_exits": slow, "terms_started": len(r.changes(t0, r.now()))})
}

var heldRe = regexp.MustCompile(`(?m)^simba_term_held\{[^}]*\} (\S+)`)
var upRe = regexp.MustCompile(`(?m)^simba_session_up(?:\{[^}]*\})? (\S+)`)

func (r *runner) poll(stop chan struct{}) {
	c := http.Client{Timeout: 400 * time.Millisecond}
	for {
		select {
		case <-stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		for _, rep := range r.live() {
			s := sample{t: r.now(), slot: rep.slot, gen: rep.gen, held: -1, up: -1}
			if resp, err := c.Get("http://" + rep.http + "/healthz"); err == nil {
				s.healthy = resp.StatusCode
				resp.Body.Close()
			}
			if resp, err := c.Get("http://" + rep.http + "/metrics"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if m := heldRe.FindSubmatch(b); m != nil {
					s.held = int(m[1][0] - '0')
				} else {
					s.held = 0
				}
				if m := upRe.FindSubmatch(b); m != nil {
					s.up = int(m[1][0] - '0')
				}
			}
			r.mu.Lock()
			r.samples = append(r.samples, s)
			r.mu.Unlock()
		}
	}
}

func ms(ns int64) int64 { return ns / int64(time.Millisecond) }

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba"
)

// fleet is the team's service: workers on one backend and the fenced resource they write to.
type fleet struct {
	workers    []*worker
	res        *resource
	partitions int
	ttl        time.Duration
}

// watch is what one drill's monitoring saw, sample by sample (every sampleEvery).
type watch struct {
	mu sync.Mutex
	f  *fleet

	faultAt, healAt time.Time

	overlapMax, overlapCur time.Duration
	overlapWhat            string
	// lies: the leader gauge says 1 while the term is not valid, or 0 while it is.
	heldLieMax  map[string]time.Duration
	heldLieCur  map[string]time.Duration
	heldLieWhat map[string]string
	// sumHeld: samples where the sum of leader gauges was 0 while someone led, or 2+.
	gaugeNoneWhileLed, gaugeTwo int
	// first /readyz 503 after the fault, per worker; last 503 after the heal.
	firstNotReady map[string]time.Time
	lastNotReady  map[string]time.Time
	notReadyBody  map[string]string
	// sessionUp 1 while /healthz 503 or the other way round.
	upVsHealth int
	// ownedLie: the worker's simba_partitions_owned differs from the partitions it validly holds.
	ownedLieMax, ownedLieCur map[string]time.Duration
	ownedLieWhat             map[string]string
	samples                  int
	last                     []probe
}

func newWatch(f *fleet) *watch {
	return &watch{f: f, heldLieMax: map[string]time.Duration{}, heldLieCur: map[string]time.Duration{},
		heldLieWhat: map[string]string{}, firstNotReady: map[string]time.Time{}, lastNotReady: map[string]time.Time{},
		notReadyBody: map[string]string{}, ownedLieMax: map[string]time.Duration{}, ownedLieCur: map[string]time.Duration{},
		ownedLieWhat: map[string]string{}}
}

const sampleEvery = 50 * time.Millisecond

func (wa *watch) run(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ps []probe
		for _, w := range wa.f.workers {
			ps = append(ps, w.probe())
		}
		wa.add(ps)
	}
}

func (wa *watch) add(ps []probe) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.samples++
	wa.last = ps
	leaders, held := 0, 0.0
	var who []string
	for i, p := range ps {
		id := wa.f.workers[i].id
		if p.leads {
			leaders++
			who = append(who, fmt.Sprintf("%s#%d", id, p.token))
		}
		held += max(p.held, 0)
		if (p.held == 1) != p.leads {
			wa.heldLieCur[id] += sampleEvery
			if wa.heldLieCur[id] > wa.heldLieMax[id] {
				wa.heldLieMax[id] = wa.heldLieCur[id]
				wa.heldLieWhat[id] = fmt.Sprintf("gauge %v, term valid %v", p.held, p.leads)
			}
		} else {
			wa.heldLieCur[id] = 0
		}
		if int(p.owned) != p.assigned {
			wa.ownedLieCur[id] += sampleEvery
			if wa.ownedLieCur[id] > wa.ownedLieMax[id] {
				wa.ownedLieMax[id] = wa.ownedLieCur[id]
				wa.ownedLieWhat[id] = fmt.Sprintf("partitions_owned %v, partitions held validly %d", p.owned, p.assigned)
			}
		} else {
			wa.ownedLieCur[id] = 0
		}
		if p.ready != 200 && !wa.faultAt.IsZero() {
			if _, ok := wa.firstNotReady[id]; !ok {
				wa.firstNotReady[id] = p.at
				wa.notReadyBody[id] = p.readyBody
			}
			wa.lastNotReady[id] = p.at
		}
		if (p.sessionUp == 1) != (p.health == 200) {
			wa.upVsHealth++
		}
	}
	if leaders > 1 {
		wa.overlapCur += sampleEvery
		if wa.overlapCur > wa.overlapMax {
			wa.overlapMax, wa.overlapWhat = wa.overlapCur, strings.Join(who, " & ")
		}
	} else {
		wa.overlapCur = 0
	}
	if leaders > 0 && held == 0 {
		wa.gaugeNoneWhileLed++
	}
	if held >= 2 {
		wa.gaugeTwo++
	}
}

// steady reports whether the fleet looks healthy to its monitoring and is so in truth: one
// leader whose gauge alone is 1, every partition owned once (metrics and truth), every worker
// ready with its session up and every member seen.
func (wa *watch) steady() (bool, string) {
	wa.mu.Lock()
	ps := wa.last
	wa.mu.Unlock()
	if len(ps) == 0 {
		return false, "no sample"
	}
	leaders, held, owned, assigned := 0, 0.0, 0.0, 0
	for i, p := range ps {
		id := wa.f.workers[i].id
		if p.leads {
			leaders++
		}
		held += p.held
		owned += p.owned
		assigned += p.assigned
		if p.ready != 200 {
			return false, id + " not ready: " + p.readyBody
		}
		if p.sessionUp != 1 {
			return false, id + " session_up 0"
		}
		if int(p.members) != len(ps) {
			return false, fmt.Sprintf("%s sees %v members", id, p.members)
		}
	}
	switch {
	case leaders != 1:
		return false, fmt.Sprintf("%d leaders", leaders)
	case held != 1:
		return false, fmt.Sprintf("sum of leader gauges %v", held)
	case int(owned) != wa.f.partitions:
		return false, fmt.Sprintf("sum of partitions_owned %v", owned)
	case assigned != wa.f.partitions:
		return false, fmt.Sprintf("%d partitions held validly", assigned)
	}
	if g := wa.f.res.since("leader"); g > 500*time.Millisecond {
		return false, fmt.Sprintf("leader unwritten for %v", g)
	}
	for p := range wa.f.partitions {
		if g := wa.f.res.since(fmt.Sprintf("shards.%d", p)); g > 500*time.Millisecond {
			return false, fmt.Sprintf("shards.%d unwritten for %v", p, g)
		}
	}
	return true, ""
}

// waitSteady waits until steady holds (for 1 s in a row) or within passes.
func (wa *watch) waitSteady(ctx context.Context, within time.Duration) (time.Time, string) {
	end := time.Now().Add(within)
	var since time.Time
	var why string
	for time.Now().Before(end) && ctx.Err() == nil {
		ok, w := wa.steady()
		if ok {
			if since.IsZero() {
				since = time.Now()
			}
			if time.Since(since) >= time.Second {
				return since, ""
			}
		} else {
			since, why = time.Time{}, w
		}
		time.Sleep(sampleEvery)
	}
	return time.Time{}, why
}

// result is one drill's account.
type result struct {
	kind, target      string
	leaderGap         time.Duration
	shardGapMax       time.Duration
	recovered         time.Duration // from the heal to steady
	notSteady         string
	overlap           time.Duration
	overlapWhat       string
	stale, violations []string
	heldLie           time.Duration
	heldLieWhat       string
	ownedLie          time.Duration
	ownedLieWhat      string
	gaugeNone         int
	gaugeTwo          int
	readyFirst        time.Duration // fault to the first /readyz 503 (any worker), -1: none
	readyLast         time.Duration // heal to the last /readyz 503, -1: none
	readyBodies       []string
	upVsHealth        int
	counters          map[string]float64 // deltas summed over workers
	logs              map[string]int     // level+msg → count
	events            map[string]int
	goroutines        int
	sockets           int
	leaderTenures     int
	timeline          []string
	note              string
}

// drill runs one fault through fault(), which returns once the fault is in place, and heal(),
// which ends it and returns once the servers are healthy again.
func (f *fleet) drill(ctx context.Context, kind, target string, fault, heal func() error) result {
	r := result{kind: kind, target: target, readyFirst: -1, readyLast: -1}
	wa := newWatch(f)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go wa.run(wctx)
	if _, why := wa.waitSteady(ctx, 60*time.Second); why != "" {
		r.note = "not steady before the fault: " + why
	}
	before := make([]map[string]float64, len(f.workers))
	for i, w := range f.workers {
		before[i] = w.counters()
	}
	f.res.reset()
	start := time.Now()
	wa.mu.Lock()
	wa.faultAt = start
	wa.mu.Unlock()
	if err := fault(); err != nil {
		r.note += " fault: " + err.Error()
	}
	if err := heal(); err != nil {
		r.note += " heal: " + err.Error()
	}
	healed := time.Now()
	wa.mu.Lock()
	wa.healAt = healed
	wa.mu.Unlock()
	at, why := wa.waitSteady(ctx, 60*time.Second)
	if why != "" {
		r.notSteady = why
	} else {
		r.recovered = at.Sub(healed)
	}
	// Keep watching 2 s more: does any signal lie after recovery?
	time.Sleep(2 * time.Second)
	stop()
	wa.mu.Lock()
	r.overlap, r.overlapWhat = wa.overlapMax, wa.overlapWhat
	for id, d := range wa.heldLieMax {
		if d > r.heldLie {
			r.heldLie, r.heldLieWhat = d, id+": "+wa.heldLieWhat[id]
		}
	}
	for id, d := range wa.ownedLieMax {
		if d > r.ownedLie {
			r.ownedLie, r.ownedLieWhat = d, id+": "+wa.ownedLieWhat[id]
		}
	}
	r.gaugeNone, r.gaugeTwo, r.upVsHealth = wa.gaugeNoneWhileLed, wa.gaugeTwo, wa.upVsHealth
	for id, t := range wa.firstNotReady {
		if d := t.Sub(start); r.readyFirst < 0 || d < r.readyFirst {
			r.readyFirst = d
		}
		r.readyBodies = append(r.readyBodies, id+": "+wa.notReadyBody[id])
	}
	for _, t := range wa.lastNotReady {
		if d := t.Sub(healed); d > r.readyLast {
			r.readyLast = d
		}
	}
	wa.mu.Unlock()
	sort.Strings(r.readyBodies)
	r.leaderGap = f.res.gap("leader")
	for p := range f.partitions {
		r.shardGapMax = max(r.shardGapMax, f.res.gap(fmt.Sprintf("shards.%d", p)))
	}
	var tenures map[string]int
	r.stale, r.violations, tenures = f.res.snapshot()
	r.leaderTenures = tenures["leader"]
	r.counters = map[string]float64{}
	for i, w := range f.workers {
		for k, v := range w.counters() {
			if d := v - before[i][k]; d != 0 {
				r.counters[k] += d
			}
		}
	}
	r.logs, r.events = map[string]int{}, map[string]int{}
	for _, w := range f.workers {
		for _, l := range w.logsSince(start) {
			r.logs[l.level.String()+" "+l.msg]++
		}
		for _, e := range w.eventsSince(start) {
			k := e.ev.Kind.String()
			if e.ev.Reason != 0 {
				k += "(" + e.ev.Reason.String() + ")"
			}
			if e.ev.Op != "" {
				k += "[" + e.ev.Op + "]"
			}
			r.events[k]++
			if e.ev.Kind == simba.EventSessionExpired || e.ev.Kind == simba.EventSessionOpened {
				r.timeline = append(r.timeline, fmt.Sprintf("%s %s %s at +%v (session %s)", w.id, e.ev.Kind, e.ev.Reason,
					e.at.Sub(start).Round(time.Millisecond), e.ev.Session))
			}
		}
		w.trim(start)
	}
	runtime.GC()
	r.goroutines = runtime.NumGoroutine()
	r.sockets = sockets()
	return r
}

// sockets counts this process's open sockets.
func sockets() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range es {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

func (r result) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %-10s leader-gap=%-7v shard-gap=%-7v recovered=%-7v tenures=%d overlap=%v stale=%d viol=%d",
		r.kind, r.target, r.leaderGap.Round(time.Millisecond), r.shardGapMax.Round(time.Millisecond),
		r.recovered.Round(time.Millisecond), r.leaderTenures, r.overlap, len(r.stale), len(r.violations))
	fmt.Fprintf(&b, " held-lie=%v owned-lie=%v gauge0-while-led=%d gauge2=%d", r.heldLie, r.ownedLie, r.gaugeNone, r.gaugeTwo)
	if r.readyFirst >= 0 {
		fmt.Fprintf(&b, " readyz-503-after=%v last-503-after-heal=%v", r.readyFirst.Round(time.Millisecond), r.readyLast.Round(time.Millisecond))
	} else {
		b.WriteString(" readyz-503=never")
	}
	fmt.Fprintf(&b, " up-vs-health=%d goroutines=%d sockets=%d", r.upVsHealth, r.goroutines, r.sockets)
	if r.notSteady != "" {
		b.WriteString(" NOT-STEADY: " + r.notSteady)
	}
	if r.note != "" {
		b.WriteString(" NOTE:" + r.note)
	}
	return b.String()
}

func (r result) details() string {
	var b strings.Builder
	keys := func(m map[string]int) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if r.overlapWhat != "" {
		fmt.Fprintf(&b, "    overlap: %s\n", r.overlapWhat)
	}
	if r.heldLieWhat != "" {
		fmt.Fprintf(&b, "    held-lie: %s\n", r.heldLieWhat)
	}
	if r.ownedLieWhat != "" {
		fmt.Fprintf(&b, "    owned-lie: %s\n", r.ownedLieWhat)
	}
	for _, s := range r.timeline {
		fmt.Fprintf(&b, "    timeline: %s\n", s)
	}
	for _, s := range r.stale {
		fmt.Fprintf(&b, "    stale: %s\n", s)
	}
	for _, s := range r.violations {
		fmt.Fprintf(&b, "    VIOLATION: %s\n", s)
	}
	for _, s := range r.readyBodies {
		fmt.Fprintf(&b, "    readyz: %s\n", s)
	}
	var cs []string
	for k := range r.counters {
		cs = append(cs, k)
	}
	slices.Sort(cs)
	for _, k := range cs {
		fmt.Fprintf(&b, "    counter %s +%v\n", k, r.counters[k])
	}
	for _, k := range keys(r.events) {
		fmt.Fprintf(&b, "    event %s x%d\n", k, r.events[k])
	}
	for _, k := range keys(r.logs) {
		fmt.Fprintf(&b, "    log %s x%d\n", k, r.logs[k])
	}
	return b.String()
}

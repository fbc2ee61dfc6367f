package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// logRec is one log line a worker's client wrote.
type logRec struct {
	at    time.Time
	level slog.Level
	msg   string
	attrs string
}

// recorder is a slog.Handler keeping every record in memory.
type recorder struct {
	mu    *sync.Mutex
	recs  *[]logRec
	attrs string
}

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(r.attrs)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	*r.recs = append(*r.recs, logRec{at: time.Now(), level: rec.Level, msg: rec.Message, attrs: b.String()})
	r.mu.Unlock()
	return nil
}
func (r recorder) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(r.attrs)
	for _, a := range as {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.attrs = b.String()
	return r
}
func (r recorder) WithGroup(string) slog.Handler { return r }

// evRec is one event of an election or group.
type evRec struct {
	at time.Time
	ev simba.Event
}

// worker is one "process" of the team's service: its own backend and client, an election
// "leader" whose work writes to the fenced resource, a partition group "shards" likewise,
// simbaprom on a registry of its own and simbahttp's probes.
type worker struct {
	id       string
	backend  spi.Backend
	client   *simba.Client
	reg      *prometheus.Registry
	metrics  *simbaprom.Metrics
	http     *simbahttp.Handler
	election *simba.Election
	group    *simba.PartitionGroup
	cancel   context.CancelFunc

	mu   sync.Mutex
	logs []logRec
	evs  []evRec
}

func newWorker(ctx context.Context, id, dsn string, ttl time.Duration, partitions int, res *resource) (*worker, error) {
	w := &worker{id: id}
	logger := slog.New(recorder{mu: &w.mu, recs: &w.logs})
	b, err := open.Open(ctx, dsn, open.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	w.backend = b
	w.metrics = simbaprom.New(simbaprom.Opts{})
	w.http = simbahttp.New(simbahttp.Opts{Backend: b})
	w.reg = prometheus.NewRegistry()
	w.reg.MustRegister(w.metrics)
	opts := append(append(w.metrics.Options(), w.http.Options()...),
		simba.WithOwner(id), simba.WithTTL(ttl), simba.WithLogger(logger))
	c, err := simba.New(b, opts...)
	if err != nil {
		b.Close()
		return nil, err
	}
	w.client = c
	w.http.Attach(c)
	work := func(name string) func(ctx context.Context, t simba.Term) error {
		return func(ctx context.Context, t simba.Term) error {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				if t.IsValid() {
					res.write(name, t.Token(), id)
				}
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
		}
	}
	e, err := c.NewElection("leader", simba.RunWhileLeader(work("leader")))
	if err != nil {
		return nil, err
	}
	w.election = e
	w.metrics.Track(e)
	w.http.Track(e)
	wctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	g, err := c.JoinGroup(ctx, "shards", partitions, simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
		return work(fmt.Sprintf("shards.%d", p))(ctx, t)
	}))
	if err != nil {
		return nil, err
	}
	w.group = g
	w.metrics.Track(g)
	w.http.Track(g)
	go w.collect(wctx, e.Events(wctx))
	go w.collect(wctx, g.Events(wctx))
	return w, nil
}

func (w *worker) collect(ctx context.Context, ch <-chan simba.Event) {
	for ev := range ch {
		w.mu.Lock()
		w.evs = append(w.evs, evRec{at: time.Now(), ev: ev})
		w.mu.Unlock()
	}
}

func (w *worker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.election.Stop(ctx)
	w.group.Leave(ctx)
	w.client.Close(ctx)
	w.cancel()
	w.backend.Close()
}

// probe is what the team's monitoring sees of a worker at one instant, beside the truth.
type probe struct {
	at        time.Time
	leads     bool  // truth: the election's term is valid
	token     int64 // its token
	held      float64
	sessionUp float64
	ready     int // /readyz status code
	readyBody string
	health    int
	owned     float64 // simba_partitions_owned
	members   float64
	assigned  int // truth: partitions whose term is valid
}

func (w *worker) probe() probe {
	p := probe{at: time.Now()}
	if t, ok := w.election.Term(); ok && t.IsValid() {
		p.leads, p.token = true, t.Token()
	}
	for _, t := range w.group.Held() {
		if t.IsValid() {
			p.assigned++
		}
	}
	mfs, _ := w.reg.Gather()
	p.held = metricValue(mfs, "simba_term_held", map[string]string{"name": "leader"})
	p.sessionUp = metricValue(mfs, "simba_session_up", nil)
	p.owned = metricValue(mfs, "simba_partitions_owned", map[string]string{"group": "shards"})
	p.members = metricValue(mfs, "simba_group_members", map[string]string{"group": "shards"})
	rr := httptest.NewRecorder()
	w.http.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	p.ready, p.readyBody = rr.Code, strings.TrimSpace(rr.Body.String())
	rr = httptest.NewRecorder()
	w.http.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	p.health = rr.Code
	return p
}

// counters returns the worker's counters of interest, keyed "metric{labels}".
func (w *worker) counters() map[string]float64 {
	out := map[string]float64{}
	mfs, _ := w.reg.Gather()
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

func metricValue(mfs []*dto.MetricFamily, name string, labels map[string]string) float64 {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// logsSince returns the worker's log lines at Info or above since t.
func (w *worker) logsSince(t time.Time) []logRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []logRec
	for _, r := range w.logs {
		if !r.at.Before(t) && r.level >= slog.LevelInfo {
			out = append(out, r)
		}
	}
	return out
}

func (w *worker) eventsSince(t time.Time) []evRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []evRec
	for _, e := range w.evs {
		if !e.at.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// trim drops logs and events older than t (20 drills' worth would otherwise pile up).
func (w *worker) trim(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := 0
	for i < len(w.logs) && w.logs[i].at.Before(t) {
		i++
	}
	w.logs = append([]logRec(nil), w.logs[i:]...)
	j := 0
	for j < len(w.evs) && w.evs[j].at.Before(t) {
		j++
	}
	w.evs = append([]evRec(nil), w.evs[j:]...)
}

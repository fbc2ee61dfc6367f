// Package simbaprom exports a Simba client's state and activity as Prometheus metrics.
//
// A Metrics is one client's prometheus.Collector. Hand its Options to simba.New (they add a
// listener and a call observer, both cheap and non-blocking), register it, and serve the
// registry as usual:
//
//	m := simbaprom.New(simbaprom.Opts{})
//	c, err := simba.New(backend, append(m.Options(), simba.WithOwner("node-a"))...)
//	prometheus.MustRegister(m)
//	http.Handle("/metrics", promhttp.Handler())
//
// Every metric has the simba_ prefix, durations are in seconds, counters end in _total, and the
// only label values are the names the client uses (its elections, locks, groups and their
// partitions), the backend operations, the error classes, the revocation reasons and the acquire
// outcomes: the cardinality is bounded by the names a client uses — every name it ever used,
// kept for the client's life, four to eight series each: a client that had led a 256-partition
// group and taken 200 per-entity locks exported 2,338 series (59 with a Names that keeps every
// name out). Set Opts.Names for per-entity locks or large groups. Several clients in one
// registry are told apart by Opts.ConstLabels.
//
// The metrics:
//
//	simba_session_up                              1 while the client has a live backend session
//	simba_sessions_opened_total                   sessions opened
//	simba_sessions_lost_total{reason}             sessions lost (deadline, session-expired)
//	simba_pauses_total                            pauses of the process noticed (simba.EventPaused:
//	                                              SIGSTOP, a VM or container freeze, CPU
//	                                              starvation), those that cost the session
//	                                              and those of a renewal interval or more
//	simba_paused_seconds_total                    their lengths, summed (each a lower bound)
//	simba_term_held{name}                         1 while this client holds name's term, else 0
//	                                              (from Track on, for an election)
//	simba_term_token{name}                        fencing token of this client's latest term of name
//	                                              (a float64: see "The token" below)
//	simba_terms_granted_total{name}               terms of name this client was granted
//	simba_terms_revoked_total{name,reason}        terms of name that ended, by reason
//	simba_acquire_attempts_total{name,outcome}    acquire calls by outcome (granted, held, error)
//	simba_keepalive_duration_seconds{outcome}     histogram of keep-alive call latency, by
//	                                              outcome: ok, or error (a keep-alive that timed
//	                                              out counts its whole timeout here)
//	simba_backend_errors_total{op,class}          failed backend calls by operation (the
//	                                              simba.Op constants) and class: every one
//	                                              but a call a close ended (CallInfo.Closing:
//	                                              a clean Close counts none) or its caller
//	                                              abandoned; this can count more than the
//	                                              events, and more than the WARN and ERROR
//	                                              lines (the log damps
//	                                              repeats: an outage's retryable errors are a
//	                                              WARN per distinct cause and one a minute,
//	                                              a permanent error that repeats is logged at
//	                                              ERROR once a minute, the rest at DEBUG)
//	simba_group_members{group}                    live members of a group this client is in
//	simba_partitions_owned{group}                 partitions of the group assigned to this client
//	                                              by the membership it last read, led or not
//	                                              (an outage that revokes their terms leaves
//	                                              it as it was: count the partitions led with
//	                                              simba_term_held{name=~"group\\.[0-9]+"})
//	simba_events_dropped_total{name}              events dropped by slow Events subscribers of
//	                                              the elections and groups passed to Track
//
// The token. simba_term_token is a gauge, as a Prometheus user expects of a number that only
// grows: changes(simba_term_token[1h]) counts a name's terms, and comparing it across
// instances tells which one holds the latest. Its value is exact for every token Simba's
// backends issue (a float64 holds every integer up to 2^53; SQL and Redis tokens are a
// microsecond clock, which reaches 2^53 in the year 2255; etcd's are revisions and ZooKeeper's
// sequence numbers), but the text exposition prints every value from 10^6 on in e-notation
// (1.796635562688331e+15 for a microsecond token), as Prometheus's own client does for any
// gauge. To match a token against a log line, where it is an integer
// ("ledger#1796635562688331"), read it where Simba prints the integer: simbahttp's /status
// (terms[].token, holders[].token, the timeline) and page, or simba status; a dashboard shows
// the gauge as an integer with 0 decimals and no unit. The token is not a label: a label per
// term would start a new series at each failover.
//
// Options are applied once per client (simba.Once): passed twice to one simba.New, they
// count every event and call once.
//
// The series of sessions_lost_total (both reasons), backend_errors_total (every operation with
// either class) and keepalive_duration_seconds (both outcomes) exist from the start, at 0, so
// that an alert on rate() or increase() of them sees the first loss or error; the series of a
// name appear with the name's first event.
package simbaprom

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// Opts configures a Metrics. The zero value is ready to use.
type Opts struct {
	// ConstLabels are added to every metric, to tell several clients apart in one registry
	// (for example {"client": "orders"}).
	ConstLabels prometheus.Labels
	// Names, if set, says which lease and group names get a label value of their own: a client
	// that locks one name per entity (a worker pool) keeps its cardinality bounded by counting
	// the other names under the label value OtherName and leaving them out of the per-name
	// gauges. Nil means every name.
	Names func(name string) bool
	// KeepAliveBuckets are the upper bounds, in seconds, of the keep-alive latency histogram
	// (both outcomes); nil means DefaultKeepAliveBuckets.
	KeepAliveBuckets []float64
}

// DefaultKeepAliveBuckets are the keep-alive latency buckets, in seconds: 1 ms to 10 s.
var DefaultKeepAliveBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// OtherName is the name label value under which names that Opts.Names rejects are counted.
const OtherName = "_other"

// Call outcomes: the outcome label of simba_acquire_attempts_total (granted, held, error) and
// of simba_keepalive_duration_seconds (ok, error).
const (
	// OutcomeGranted: the acquire granted (or confirmed) the lease.
	OutcomeGranted = "granted"
	// OutcomeHeld: another session holds the lease.
	OutcomeHeld = "held"
	// OutcomeOK: the keep-alive succeeded.
	OutcomeOK = "ok"
	// OutcomeError: the call failed (a call that timed out took its whole timeout).
	OutcomeError = "error"
)

// Metrics is the prometheus.Collector of one Simba client. It is safe for concurrent use.
type Metrics struct {
	sessionUp      prometheus.Gauge
	sessionsOpened prometheus.Counter
	sessionsLost   *prometheus.CounterVec
	pauses         prometheus.Counter
	pausedSeconds  prometheus.Counter
	termHeld       *prometheus.GaugeVec
	termToken      *prometheus.GaugeVec
	termsGranted   *prometheus.CounterVec
	termsRevoked   *prometheus.CounterVec
	acquires       *prometheus.CounterVec
	keepAlive      *prometheus.HistogramVec
	backendErrors  *prometheus.CounterVec
	groupMembers   *prometheus.GaugeVec
	partitions     *prometheus.GaugeVec
	dropped        *prometheus.Desc
	names          func(string) bool

	mu      sync.Mutex
	tracked map[string]*tracked // by name
}

// tracked is an election or group passed to Track; base carries the drops counted by the
// ones it replaced under the same name, so the counter never goes down.
type tracked struct {
	src  Droppable
	base uint64
}

// Droppable is what Track accepts: *simba.Election and *simba.PartitionGroup.
type Droppable interface {
	Name() string
	DroppedEvents() uint64
}

// New returns the metrics of one client; pass Options to simba.New.
func New(o Opts) *Metrics {
	buckets := o.KeepAliveBuckets
	if buckets == nil {
		buckets = DefaultKeepAliveBuckets
	}
	cl := o.ConstLabels
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: cl}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl}, labels)
	}
	m := &Metrics{
		sessionUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "simba_session_up",
			Help: "1 while the client has a live backend session, else 0.", ConstLabels: cl}),
		sessionsOpened: prometheus.NewCounter(prometheus.CounterOpts{Name: "simba_sessions_opened_total",
			Help: "Backend sessions the client opened.", ConstLabels: cl}),
		sessionsLost: counter("simba_sessions_lost_total",
			"Backend sessions the client lost without closing them, by reason.", "reason"),
		pauses: prometheus.NewCounter(prometheus.CounterOpts{Name: "simba_pauses_total",
			Help: "Pauses of the process the client noticed (its timers overdue): those that cost the session and those of a renewal interval or more.", ConstLabels: cl}),
		pausedSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "simba_paused_seconds_total",
			Help: "Lengths of the pauses counted in simba_pauses_total, summed (each at least as long as noticed).", ConstLabels: cl}),
		termHeld: gauge("simba_term_held",
			"1 while this client holds the term of the lease name (it leads), else 0.", "name"),
		termToken: gauge("simba_term_token",
			"Fencing token of this client's latest term of the lease name.", "name"),
		termsGranted: counter("simba_terms_granted_total",
			"Terms of the lease name granted to this client (term changes).", "name"),
		termsRevoked: counter("simba_terms_revoked_total",
			"Terms of the lease name that ended, by reason.", "name", "reason"),
		acquires: counter("simba_acquire_attempts_total",
			"Acquire calls by lease name and outcome (granted, held, error).", "name", "outcome"),
		keepAlive: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "simba_keepalive_duration_seconds",
			Help:    "Latency of keep-alive calls by outcome (ok, error: a timed-out call counts its whole timeout).",
			Buckets: buckets, ConstLabels: cl}, []string{"outcome"}),
		backendErrors: counter("simba_backend_errors_total",
			"Failed backend calls by operation and error class (retryable, permanent).", "op", "class"),
		groupMembers: gauge("simba_group_members",
			"Live members of a partition group this client is in.", "group"),
		partitions: gauge("simba_partitions_owned",
			"Partitions of the group assigned to this client, led or not (simba_term_held says which are led).", "group"),
		dropped: prometheus.NewDesc("simba_events_dropped_total",
			"Events dropped because an Events subscriber of the election or group was full.",
			[]string{"name"}, cl),
		names:   o.Names,
		tracked: make(map[string]*tracked),
	}
	// The series whose labels are known in advance exist from the start, at 0, so that rate()
	// and increase() see their first increment and an alert on them has a series to watch.
	for _, outcome := range []string{OutcomeOK, OutcomeError} {
		m.keepAlive.WithLabelValues(outcome)
	}
	for _, reason := range []simba.RevokeReason{simba.RevokedDeadline, simba.RevokedSessionExpired} {
		m.sessionsLost.WithLabelValues(reason.String())
	}
	for _, op := range backendOps {
		for _, class := range []spi.Class{spi.Retryable, spi.Permanent} {
			m.backendErrors.WithLabelValues(op, class.String())
		}
	}
	return m
}

// backendOps are the operations a client reports (simba.CallInfo.Op): simba_backend_errors_total
// has a series for each with either class from the start.
var backendOps = []string{simba.OpOpenSession, simba.OpKeepAlive, simba.OpCloseSession, simba.OpAcquire,
	simba.OpRelease, simba.OpJoin, simba.OpLeave, simba.OpMembers, simba.OpWithdraw}

// Options are the client options that feed the metrics: a listener and a call observer. Pass
// them to simba.New; a Metrics observes one client. They are applied once per client however
// many times they are passed (simba.Once): Options passed twice to one New count every event
// once, not twice.
func (m *Metrics) Options() []simba.Option {
	return []simba.Option{simba.Once(onceKey{m}, simba.WithListener(m.listen), simba.WithCallObserver(m.observe))}
}

// onceKey is the simba.Once key of a Metrics's options: of a type no other package can make.
type onceKey struct{ m *Metrics }

// Track counts the events dropped by Events subscribers of an election or group (an
// *simba.Election or *simba.PartitionGroup) in simba_events_dropped_total. A later Track of the
// same name replaces the earlier one, keeping its count. For an election whose name has a label
// of its own (Opts.Names), Track also exports simba_term_held{name} as 0 until the client first
// leads it: without it a candidate that never led had no series, so an alert on the sum of the
// candidates' simba_term_held found none when no candidate could lead.
func (m *Metrics) Track(d Droppable) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := d.Name()
	if _, ok := d.(*simba.Election); ok {
		if label, own := m.label(name); own {
			// WithLabelValues creates the series at 0 and leaves an existing one as it is, so a
			// grant the listener already counted keeps its 1.
			m.termHeld.WithLabelValues(label)
		}
	}
	var base uint64
	if old := m.tracked[name]; old != nil {
		base = old.base + old.src.DroppedEvents()
	}
	m.tracked[name] = &tracked{src: d, base: base}
}

// label returns the name label value of name and whether name has a value of its own.
func (m *Metrics) label(name string) (string, bool) {
	if m.names == nil || m.names(name) {
		return name, true
	}
	return OtherName, false
}

// listen runs on the client's loop goroutine: it only updates the metric values.
func (m *Metrics) listen(ev simba.Event) {
	switch ev.Kind {
	case simba.EventSessionOpened:
		m.sessionUp.Set(1)
		m.sessionsOpened.Inc()
	case simba.EventSessionExpired:
		m.sessionUp.Set(0)
		m.sessionsLost.WithLabelValues(ev.Reason.String()).Inc()
	case simba.EventClosed:
		m.sessionUp.Set(0)
	case simba.EventPaused:
		m.pauses.Inc()
		m.pausedSeconds.Add(ev.Paused.Seconds())
	case simba.EventElected:
		name, own := m.label(ev.Name)
		if own {
			m.termHeld.WithLabelValues(name).Set(1)
			m.termToken.WithLabelValues(name).Set(float64(ev.Token))
		}
		m.termsGranted.WithLabelValues(name).Inc()
	case simba.EventRevoked:
		name, own := m.label(ev.Name)
		if own {
			m.termHeld.WithLabelValues(name).Set(0)
		}
		m.termsRevoked.WithLabelValues(name, ev.Reason.String()).Inc()
	case simba.EventMembers:
		if name, own := m.label(ev.Name); own {
			m.groupMembers.WithLabelValues(name).Set(float64(len(ev.Members)))
			m.partitions.WithLabelValues(name).Set(float64(len(ev.Partitions)))
		}
	}
}

// observe runs on a backend call's goroutine. A call its caller abandoned (its context ended)
// or a close ended (CallInfo.Closing) is neither an attempt with an outcome nor a backend
// error: it is not counted.
func (m *Metrics) observe(ci simba.CallInfo) {
	if ci.Abandoned || ci.Closing {
		return
	}
	switch ci.Op {
	case simba.OpKeepAlive:
		outcome := OutcomeOK
		if ci.Err != nil {
			outcome = OutcomeError
		}
		m.keepAlive.WithLabelValues(outcome).Observe(ci.Took.Seconds())
	case simba.OpAcquire:
		outcome := OutcomeHeld
		switch {
		case ci.Err != nil:
			outcome = OutcomeError
		case ci.Token != 0:
			outcome = OutcomeGranted
		}
		name, _ := m.label(ci.Name)
		m.acquires.WithLabelValues(name, outcome).Inc()
	}
	if ci.Err != nil {
		m.backendErrors.WithLabelValues(ci.Op, ci.Class.String()).Inc()
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.sessionUp, m.sessionsOpened, m.sessionsLost, m.pauses, m.pausedSeconds, m.termHeld,
		m.termToken, m.termsGranted, m.termsRevoked, m.acquires, m.keepAlive, m.backendErrors,
		m.groupMembers, m.partitions}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.dropped
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, t := range m.tracked {
		ch <- prometheus.MustNewConstMetric(m.dropped, prometheus.CounterValue,
			float64(t.base+t.src.DroppedEvents()), name)
	}
}

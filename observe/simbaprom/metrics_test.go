package simbaprom_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// Groups, failed calls, names kept out of the labels, and events dropped by a subscriber that
// does not read all show in the metrics.
func TestMetricsOfGroupsErrorsAndDrops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	backend := srv.Backend()
	m := simbaprom.New(simbaprom.Opts{
		ConstLabels: prometheus.Labels{"client": "w1"},
		Names:       func(name string) bool { return !strings.HasPrefix(name, "job-") },
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	c, err := simba.New(backend, append(m.Options(), simba.WithOwner("w1"), simba.WithTTL(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	g, err := c.JoinGroup(ctx, "shards", 4)
	if err != nil {
		t.Fatal(err)
	}
	m.Track(g)
	until(t, "all four partitions", 10*time.Second, func() bool {
		s := scrapeURL(t, hs.URL)
		return s[`simba_partitions_owned{client="w1",group="shards"}`] == 4 &&
			s[`simba_group_members{client="w1",group="shards"}`] == 1
	})

	for i := range 3 {
		h, err := c.Lock(ctx, "job-"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// An election whose Events subscriber never reads: 140 terms make 280 events for a
	// buffer of 256.
	e, err := c.NewElection("leader")
	if err != nil {
		t.Fatal(err)
	}
	m.Track(e)
	subCtx, stopSub := context.WithCancel(ctx)
	defer stopSub()
	_ = e.Events(subCtx)
	for range 140 {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		until(t, "leadership", 10*time.Second, e.IsLeader)
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}

	backend.FailNext(1, errors.New("boom"))
	until(t, "a backend error", 10*time.Second, func() bool {
		s := scrapeURL(t, hs.URL)
		var n float64
		for k, v := range s {
			if strings.HasPrefix(k, "simba_backend_errors_total{") && strings.Contains(k, `class="retryable"`) {
				n += v
			}
		}
		return n >= 1
	})

	s := scrapeURL(t, hs.URL)
	for series, want := range map[string]float64{
		`simba_terms_granted_total{client="w1",name="_other"}`:                      3,
		`simba_terms_revoked_total{client="w1",name="_other",reason="stopped"}`:     3,
		`simba_terms_granted_total{client="w1",name="leader"}`:                      140,
		`simba_terms_revoked_total{client="w1",name="leader",reason="stopped"}`:     140,
		`simba_term_held{client="w1",name="leader"}`:                                0,
		`simba_term_held{client="w1",name="shards.3"}`:                              1,
		`simba_acquire_attempts_total{client="w1",name="_other",outcome="granted"}`: 3,
		`simba_sessions_opened_total{client="w1"}`:                                  1,
		`simba_session_up{client="w1"}`:                                             1,
		`simba_events_dropped_total{client="w1",name="shards"}`:                     0,
	} {
		if got, ok := s[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if d := s[`simba_events_dropped_total{client="w1",name="leader"}`]; d < 280-256 {
		t.Errorf("events dropped %v, want at least %d", d, 280-256)
	}
	for k := range s {
		if strings.Contains(k, `"job-`) {
			t.Errorf("a job name has a label of its own: %s", k)
		}
	}
}

// The counters an alert watches with rate() or increase() have their series at 0 before the
// first loss or error: sessions lost by either reason, and backend errors of every operation
// with either class.
func TestAlertSeriesStartAtZero(t *testing.T) {
	m := simbaprom.New(simbaprom.Opts{ConstLabels: prometheus.Labels{"client": "w1"}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	s := scrapeURL(t, hs.URL)
	want := []string{
		`simba_sessions_lost_total{client="w1",reason="deadline"}`,
		`simba_sessions_lost_total{client="w1",reason="session-expired"}`,
		`simba_pauses_total{client="w1"}`,
		`simba_paused_seconds_total{client="w1"}`,
		`simba_keepalive_duration_seconds_count{client="w1",outcome="ok"}`,
		`simba_keepalive_duration_seconds_count{client="w1",outcome="error"}`,
	}
	for _, op := range []string{simba.OpOpenSession, simba.OpKeepAlive, simba.OpCloseSession, simba.OpAcquire,
		simba.OpRelease, simba.OpJoin, simba.OpLeave, simba.OpMembers, simba.OpWithdraw} {
		for _, class := range []string{"retryable", "permanent"} {
			want = append(want, `simba_backend_errors_total{class="`+class+`",client="w1",op="`+op+`"}`)
		}
	}
	for _, series := range want {
		v, ok := s[series]
		if !ok {
			t.Errorf("no series %s before any event", series)
		} else if v != 0 {
			t.Errorf("%s = %v before any event, want 0", series, v)
		}
	}
}

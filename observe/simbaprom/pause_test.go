package simbaprom_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/simbatest"
)

// TestPausesAreCounted: a client stopped for twice its TTL counts one pause, of at least a
// TTL, and the session it lost (deadline); before, only the loss.
func TestPausesAreCounted(t *testing.T) {
	vc := simbatest.NewVirtualClock()
	clock := clocktest.NewPausing(vc)
	srv := simbatest.NewServer(simbatest.WithClock(vc))
	m := simbaprom.New(simbaprom.Opts{ConstLabels: prometheus.Labels{"client": "w1"}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	const ttl = 3 * time.Second
	c, err := simba.New(srv.Backend(), append(m.Options(), simba.WithClock(clock), simba.WithTTL(ttl), simba.WithOwner("w1"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := clocktest.Close(vc, 10*time.Second, c.Close); err != nil {
			t.Error(err)
		}
	}()
	step := func(what string, cond func(map[string]float64) bool) {
		t.Helper()
		for range 1000 {
			if cond(scrapeURL(t, hs.URL)) {
				return
			}
			vc.Advance(10 * time.Millisecond)
		}
		t.Fatalf("%s did not happen", what)
	}
	step("a session", func(s map[string]float64) bool { return s[`simba_session_up{client="w1"}`] == 1 })
	if s := scrapeURL(t, hs.URL); s[`simba_pauses_total{client="w1"}`] != 0 {
		t.Fatalf("pauses %v before any", s[`simba_pauses_total{client="w1"}`])
	}

	clock.Stop()
	vc.Advance(2 * ttl)
	clock.Resume()
	step("a new session", func(s map[string]float64) bool {
		return s[`simba_sessions_opened_total{client="w1"}`] == 2
	})
	s := scrapeURL(t, hs.URL)
	if s[`simba_pauses_total{client="w1"}`] != 1 || s[`simba_sessions_lost_total{client="w1",reason="deadline"}`] != 1 {
		t.Errorf("pauses %v, sessions lost at their deadline %v: want 1 and 1", s[`simba_pauses_total{client="w1"}`],
			s[`simba_sessions_lost_total{client="w1",reason="deadline"}`])
	}
	if p := s[`simba_paused_seconds_total{client="w1"}`]; p < ttl.Seconds() || p > (2*ttl).Seconds() {
		t.Errorf("paused %v s in all, want between one and two TTLs (%v s of virtual time stopped)", p, (2 * ttl).Seconds())
	}
}

package simbaprom_test

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// stoppableClock is a virtual clock whose timers, while the client is stopped, run nothing
// until it resumes: then they run late, as in a process resumed after SIGSTOP.
type stoppableClock struct {
	*simbatest.VirtualClock
	mu      sync.Mutex
	stopped bool
	held    []func()
}

func (c *stoppableClock) AfterFunc(d time.Duration, f func()) spi.Timer {
	return c.VirtualClock.AfterFunc(d, func() {
		c.mu.Lock()
		if c.stopped {
			c.held = append(c.held, f)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		f()
	})
}

// TestPausesAreCounted: a client stopped for twice its TTL counts one pause, of at least a
// TTL, and the session it lost (deadline); before, only the loss.
func TestPausesAreCounted(t *testing.T) {
	vc := simbatest.NewVirtualClock()
	clock := &stoppableClock{VirtualClock: vc}
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

	clock.mu.Lock()
	clock.stopped = true
	clock.mu.Unlock()
	vc.Advance(2 * ttl)
	clock.mu.Lock()
	held := clock.held
	clock.held, clock.stopped = nil, false
	clock.mu.Unlock()
	for _, f := range held {
		f()
	}
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

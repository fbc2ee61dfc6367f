package simbaprom_test

import (
	"context"
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

// TestTrackedCandidateExportsTermHeldZero: a tracked election's simba_term_held is 0 while the
// client has not led it yet (the package doc: "1 while this client holds name's term, else 0").
// Trial 30 found the series absent on the candidates that never led, so an on-call alert on
// sum(simba_term_held{name=…}) == 0 saw no series at all when no candidate could lead.
func TestTrackedCandidateExportsTermHeldZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	leader, err := simba.New(srv.Backend(), simba.WithOwner("w1"), simba.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close(ctx)
	held, err := leader.Lock(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)

	m := simbaprom.New(simbaprom.Opts{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	c, err := simba.New(srv.Backend(), append(m.Options(), simba.WithOwner("w2"), simba.WithTTL(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	e, err := c.NewElection("ledger")
	if err != nil {
		t.Fatal(err)
	}
	m.Track(e)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "a session", 10*time.Second, func() bool { return scrapeURL(t, hs.URL)["simba_session_up"] == 1 })
	s := scrapeURL(t, hs.URL)
	v, ok := s[`simba_term_held{name="ledger"}`]
	if !ok || v != 0 || e.IsLeader() {
		t.Fatalf("simba_term_held of a tracked candidate that does not lead: %v (present %v, leader %v), want 0", v, ok, e.IsLeader())
	}

	// A name kept out of the labels gets no series of its own.
	m2 := simbaprom.New(simbaprom.Opts{Names: func(string) bool { return false }})
	c2, err := simba.New(srv.Backend(), m2.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	e2, err := c2.NewElection("ledger")
	if err != nil {
		t.Fatal(err)
	}
	m2.Track(e2)
	ch := make(chan prometheus.Metric, 100)
	go func() { m2.Collect(ch); close(ch) }()
	for mt := range ch {
		if d := mt.Desc().String(); strings.Contains(d, "simba_term_held") {
			t.Fatalf("a name kept out of the labels exported %s", d)
		}
	}
}

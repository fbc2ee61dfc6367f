package simbaprom_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// One Metrics's Options passed twice to simba.New count every event and call once (trial 30
// passed them twice by a slip of an append, and every counter doubled).
func TestOptionsPassedTwiceCountOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	m := simbaprom.New(simbaprom.Opts{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	opts := append(m.Options(), m.Options()...)
	c, err := simba.New(srv.Backend(), append(opts, simba.WithOwner("w1"), simba.WithTTL(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	h, err := c.Lock(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var s map[string]float64
	until(t, "the release counted", 10*time.Second, func() bool {
		s = scrapeURL(t, hs.URL)
		return s[`simba_terms_revoked_total{name="ledger",reason="stopped"}`] > 0
	})
	for series, want := range map[string]float64{
		`simba_sessions_opened_total`:                                   1,
		`simba_terms_granted_total{name="ledger"}`:                      1,
		`simba_terms_revoked_total{name="ledger",reason="stopped"}`:     1,
		`simba_acquire_attempts_total{name="ledger",outcome="granted"}`: 1,
	} {
		if got := s[series]; got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

package simbaprom_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
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

// TestSeriesCountAsQuoted: the README and the package doc say how many series a client exports
// after it led a 256-partition group and took 200 per-entity locks, without Opts.Names and with
// a Names that keeps every name out. This runs that client and checks both numbers, so that
// the quote follows the metrics (it said 2,183, from a trial whose scrape nobody could repeat).
func TestSeriesCountAsQuoted(t *testing.T) {
	all := seriesAfterGroupAndLocks(t, nil)
	none := seriesAfterGroupAndLocks(t, func(string) bool { return false })
	t.Logf("series: %d without Names, %d with Names keeping every name out", all, none)
	quote := fmt.Sprintf("256-partition group and taken 200 per-entity locks exported %s series", thousands(all))
	quoteNames := fmt.Sprintf("(%s with a `Names` that keeps every name out)", thousands(none))
	for file, wants := range map[string][]string{
		"../../README.md": {quote, quoteNames},
		"simbaprom.go":    {quote, strings.ReplaceAll(quoteNames, "`", "")},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n// ", " ")), " ")
		for _, want := range wants {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not say %q", file, want)
			}
		}
	}
}

// seriesAfterGroupAndLocks runs a client that leads a group of 256 partitions, takes and
// releases 200 locks (one per entity), and leaves the group, and returns the number of series
// (samples of the text format, a histogram's buckets each) its metrics export then.
func seriesAfterGroupAndLocks(t *testing.T, names func(string) bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	m := simbaprom.New(simbaprom.Opts{Names: names})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	c, err := simba.New(srv.Backend(), append(m.Options(), simba.WithTTL(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	g, err := c.JoinGroup(ctx, "orders", 256)
	if err != nil {
		t.Fatal(err)
	}
	until(t, "the client to lead all 256 partitions", 30*time.Second, func() bool { return len(g.Held()) == 256 })
	for i := range 200 {
		h, err := c.Lock(ctx, fmt.Sprintf("invoice-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	// The listener has seen every partition's term end and the last unlock.
	revoked := `simba_terms_revoked_total{name="%s",reason="stopped"}`
	var s map[string]float64
	until(t, "the metrics to show every term ended", 10*time.Second, func() bool {
		s = scrapeURL(t, hs.URL)
		if names != nil {
			return s[fmt.Sprintf(revoked, simbaprom.OtherName)] == 256+200
		}
		for p := range 256 {
			if s[fmt.Sprintf(revoked, fmt.Sprintf("orders.%d", p))] != 1 {
				return false
			}
		}
		return s[fmt.Sprintf(revoked, "invoice-199")] == 1
	})
	return len(s)
}

// thousands writes n with a comma between groups of three digits, as the docs do.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

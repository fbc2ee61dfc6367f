package simbaprom_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/observe/simbaprom"
)

// node is one client with its metrics served over HTTP, as a service would.
type node struct {
	owner    string
	client   *simba.Client
	election *simba.Election
	srv      *httptest.Server
}

func startNode(t *testing.T, ctx context.Context, dsn, owner string) *node {
	t.Helper()
	b, err := simbasql.Open(ctx, dsn, simbasql.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m := simbaprom.New(simbaprom.Opts{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	c, err := simba.New(b, append(m.Options(), simba.WithOwner(owner), simba.WithTTL(2*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	e, err := c.NewElection("leader")
	if err != nil {
		t.Fatal(err)
	}
	m.Track(e)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &node{owner: owner, client: c, election: e, srv: srv}
}

// scrape reads the node's /metrics in the text format: series (name with labels) to value.
func scrape(t *testing.T, n *node) map[string]float64 {
	t.Helper()
	return scrapeURL(t, n.srv.URL)
}

// scrapeURL reads metrics in the text format from url: series (name with labels) to value.
func scrapeURL(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	out := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// until polls cond until it holds or the deadline passes.
func until(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

const (
	held  = `simba_term_held{name="leader"}`
	token = `simba_term_token{name="leader"}`
)

// Two clients on one SQLite file run an election; both serve their metrics. The leader's
// simba_term_held is 1 with its token; once it closes, the scrapes show the gauge moved to the
// other client with a greater token, and the old leader's term revoked.
func TestMetricsFollowFailoverOnSQLite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
	nodes := []*node{startNode(t, ctx, dsn, "node-a"), startNode(t, ctx, dsn, "node-b")}

	var leader, follower *node
	var first map[string]float64
	until(t, "a leader in the metrics", 20*time.Second, func() bool {
		a, b := scrape(t, nodes[0]), scrape(t, nodes[1])
		switch {
		case a[held] == 1 && b[held] == 0:
			leader, follower, first = nodes[0], nodes[1], a
		case b[held] == 1 && a[held] == 0:
			leader, follower, first = nodes[1], nodes[0], b
		default:
			return false
		}
		return true
	})
	t1 := first[token]
	term, ok := leader.election.Term()
	if !ok || float64(term.Token()) != t1 {
		t.Fatalf("gauge token %v, election term %v (%v)", t1, term.Token(), ok)
	}
	if first["simba_session_up"] != 1 || first[`simba_terms_granted_total{name="leader"}`] != 1 {
		t.Fatalf("leader metrics: %v", first)
	}
	until(t, "the follower to find the lease held", 20*time.Second, func() bool {
		return scrape(t, follower)[`simba_acquire_attempts_total{name="leader",outcome="held"}`] >= 1
	})
	t.Logf("%s leads with token %.0f", leader.owner, t1)

	// Fail over: the leader closes (its term ends, its lease is released).
	if err := leader.client.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var second map[string]float64
	until(t, "the follower to take over", 20*time.Second, func() bool {
		second = scrape(t, follower)
		return second[held] == 1
	})
	old := scrape(t, leader)
	t2 := second[token]
	if t2 <= t1 {
		t.Fatalf("new token %v not greater than %v", t2, t1)
	}
	if old[held] != 0 || old[token] != t1 || old[`simba_terms_revoked_total{name="leader",reason="closed"}`] != 1 {
		t.Fatalf("old leader after failover: held %v token %v revoked %v", old[held], old[token],
			old[`simba_terms_revoked_total{name="leader",reason="closed"}`])
	}
	if old["simba_session_up"] != 0 || second["simba_session_up"] != 1 {
		t.Fatalf("session_up: old %v new %v", old["simba_session_up"], second["simba_session_up"])
	}
	if second[`simba_acquire_attempts_total{name="leader",outcome="granted"}`] < 1 {
		t.Fatalf("new leader's acquire metrics: %v", second)
	}
	// The take-over can come before the new leader's first keep-alive (SQLite wakes a waiter
	// within milliseconds of a release): wait for one.
	until(t, "the new leader's keep-alive in the histogram", 20*time.Second, func() bool {
		return scrape(t, follower)[`simba_keepalive_duration_seconds_count{outcome="ok"}`] >= 1
	})
	if _, ok := second[`simba_events_dropped_total{name="leader"}`]; !ok {
		t.Fatalf("no events-dropped series: %v", second)
	}
	t.Logf("failover: %s token %.0f -> %s token %.0f", leader.owner, t1, follower.owner, t2)
}

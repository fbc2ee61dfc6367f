package main

import (
	"context"
	"strings"
	"testing"

	"github.com/simba-go/simba/spi"
)

// fakeBackend is a backend with no behaviour: only its method set matters here.
type fakeBackend struct{ spi.Backend }

type fakeHinter struct{ fakeBackend }

func (fakeHinter) Hints(context.Context) (<-chan spi.Hint, error) { return nil, nil }

type fakeQueuer struct{ fakeBackend }

func (fakeQueuer) AcquireQueued(context.Context, spi.SessionID, string) (spi.Acquire, error) {
	return spi.Acquire{Kind: spi.Granted}, nil
}
func (fakeQueuer) Withdraw(context.Context, spi.SessionID, string) error { return nil }

type fakeBoth struct{ fakeQueuer }

func (fakeBoth) Hints(context.Context) (<-chan spi.Hint, error) { return nil, nil }

// The counting decorator must keep the capabilities the client looks for, or the harness
// would measure a client that polls or does not queue.
func TestCountBackendKeepsCapabilities(t *testing.T) {
	for _, c := range []struct {
		name          string
		b             spi.Backend
		hints, queues bool
	}{
		{"plain", fakeBackend{}, false, false},
		{"hinter", fakeHinter{}, true, false},
		{"queuer", fakeQueuer{}, false, true},
		{"both", fakeBoth{}, true, true},
	} {
		n := new(calls)
		w := countBackend(c.b, n)
		_, h := w.(spi.Hinter)
		q, qs := w.(spi.Queuer)
		if h != c.hints || qs != c.queues {
			t.Errorf("%s: Hinter %v, Queuer %v; want %v, %v", c.name, h, qs, c.hints, c.queues)
		}
		if qs {
			if _, err := q.AcquireQueued(context.Background(), "s", "n"); err != nil {
				t.Fatal(err)
			}
			if a, _, all := n.snapshot(); a != 1 || all != 1 {
				t.Errorf("%s: AcquireQueued counted as %d acquire, %d calls; want 1, 1", c.name, a, all)
			}
		}
	}
}

func find(ts []*targetRes, id string) *targetRes {
	for _, t := range ts {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func TestTargetsJudgeSameRoundNumbers(t *testing.T) {
	r := &report{
		TTL: "2s",
		Cycle: []*cycleRes{
			// Round 2 failed for the SPI row: only rounds 1 and 3 count.
			{Group: "Redis", Name: rowSPI, ByRound: []float64{100, 0, 100}},
			{Group: "Redis", Name: rowLock, ByRound: []float64{110, 500, 112}},
			{Group: "Redis", Name: redislockShaped, ByRound: []float64{50, 50, 50}},
		},
		Failover: []*failRes{
			{Group: "Redis", Name: rowLock, TTLRatios: []float64{0.8, 1.03}, Max: 1.03, P50: 0.8, Counted: true, AcqPerTTL: []float64{2, 3.5}},
		},
		Handover: []*handRes{
			{Group: "SQLite", Name: rowLock, MS: []float64{3, 4}, P99: 4},
			{Group: "SQLite", Name: rowStop, MS: []float64{3, 25}, P99: 25},
		},
		KeepAlive: []*kaRes{
			{Group: "Redis Cluster", Leases: 10000, KeepAlivePerRenew: 1, MaxPipesPerServer: 1, Servers: 3},
			{Group: "PostgreSQL", Leases: 10000, Error: "held 5 of 10000 leases"},
		},
	}
	ts := targets(r)
	for _, c := range []struct {
		id   string
		met  bool
		says string
	}{
		{"lock-vs-spi/redis", true, "1.10×"},
		{"redis-vs-redislock", false, "2.24×"},
		{"failover/redis", false, "10 ms over"},
		{"failover-calls/redis", false, "0.5 over"},
		{"handover/sqlite", false, "5.0 ms over"},
		{"keepalive/redis-cluster", true, "1.00"},
	} {
		got := find(ts, c.id)
		if got == nil || got.Met == nil {
			t.Errorf("%s: not judged (%+v)", c.id, got)
			continue
		}
		if *got.Met != c.met || !strings.Contains(got.Measured+" "+got.Verdict, c.says) {
			t.Errorf("%s: met %v, %q / %q; want met %v and %q", c.id, *got.Met, got.Measured, got.Verdict, c.met, c.says)
		}
	}
	if got := find(ts, "keepalive/postgresql"); got == nil || got.Met != nil || !strings.Contains(got.Verdict, "not measured") {
		t.Errorf("keepalive/postgresql: %+v, want not measured", got)
	}
	if got := find(ts, "postgresql-vs-pglock"); got == nil || got.Met != nil {
		t.Errorf("postgresql-vs-pglock without rows: %+v, want not measured", got)
	}
}

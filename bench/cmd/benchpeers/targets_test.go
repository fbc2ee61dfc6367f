package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			{Group: "SQLite", Name: rowLockXProc, MS: []float64{4, 12}, P50: 4, P99: 12, Max: 12},
			{Group: "MariaDB", Name: rowLockXProc, MS: []float64{4, 21}, P50: 4, P99: 21, Max: 21},
			{Group: "ZooKeeper", Name: rowLock, MS: []float64{3, 6}, P99: 6},
			{Group: "ZooKeeper", Name: "go-zookeeper `zk.Lock`", MS: []float64{2, 9}, P99: 9},
			{Group: "ZooKeeper", Name: "baseline: create + delete, one op alone", MS: []float64{1, 7}, P50: 1, P99: 7},
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
		{"handover/zookeeper", false, "peers' p99 ms in this run: go-zookeeper zk.Lock 9.00; the server's own write alone (create + delete) in this run: p50 1.00, p99 7.00 ms"},
		{"handover-xproc/sqlite", true, "p99 12.0 ms"},
		{"handover-xproc/mariadb", false, "1.0 ms over"},
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
	if got := find(ts, "handover/sqlite"); got == nil || strings.Contains(got.Measured, "peers") || strings.Contains(got.Measured, "own write") {
		t.Errorf("handover/sqlite names peers it has none of: %+v", got)
	}
	if got := find(ts, "keepalive/postgresql"); got == nil || got.Met != nil || !strings.Contains(got.Verdict, "not measured") {
		t.Errorf("keepalive/postgresql: %+v, want not measured", got)
	}
	if got := find(ts, "handover-xproc/postgresql"); got == nil || got.Met != nil {
		t.Errorf("handover-xproc/postgresql without a row: %+v, want not measured", got)
	}
	if got := find(ts, "postgresql-vs-pglock"); got == nil || got.Met != nil {
		t.Errorf("postgresql-vs-pglock without rows: %+v, want not measured", got)
	}
}

func TestParseSelection(t *testing.T) {
	all, err := parseSelection("", " ")
	if err != nil || !all.all() || all.describe() != "" || !all.group("ZooKeeper") || !all.measure(mWaiting) {
		t.Fatalf("default selection: %+v, %v; want everything", all, err)
	}
	s, err := parseSelection("redis, Postgres,zk", "failover,keepalive")
	if err != nil {
		t.Fatal(err)
	}
	for g, want := range map[string]bool{"Redis": true, "PostgreSQL": true, "ZooKeeper": true, "Redis Cluster": false, "MariaDB": false, groupEtc: false} {
		if s.group(g) != want {
			t.Errorf("group %q selected %v, want %v", g, s.group(g), want)
		}
	}
	for _, m := range measureKeys {
		if want := m == mFailover || m == mKeepAlive; s.measure(m) != want {
			t.Errorf("measure %q selected %v, want %v", m, s.measure(m), want)
		}
	}
	if got, want := s.describe(), "servers redis, postgres, zookeeper (-only); measures failover, keepalive (-measures)"; got != want {
		t.Errorf("describe: %q, want %q", got, want)
	}
	for _, bad := range [][2]string{{"redis,mongo", ""}, {"", "cycle,latency"}} {
		if _, err := parseSelection(bad[0], bad[1]); err == nil {
			t.Errorf("parseSelection(%q, %q): no error", bad[0], bad[1])
		}
	}
}

func TestFilterRows(t *testing.T) {
	s, err := parseSelection("mariadb", "failover,handover")
	if err != nil {
		t.Fatal(err)
	}
	cy := []cycleRow{{group: "MariaDB"}, {group: "Redis"}}
	hand := []handRow{{group: "MariaDB", name: rowLock}, {group: "SQLite", name: rowLock}}
	fail := []failRow{{group: "Redis"}, {group: "MariaDB"}}
	cy, hand, fail = s.filterRows(cy, hand, fail)
	if len(cy) != 0 || len(hand) != 1 || hand[0].group != "MariaDB" || len(fail) != 1 || fail[0].group != "MariaDB" {
		t.Errorf("kept cycle %v, handover %v, failover %v; want MariaDB's handover and failover rows", cy, hand, fail)
	}
}

// A partial run judges the targets of the servers it selected: what it measured is judged,
// the measures it left out are not measured, the other servers' targets are left out.
func TestTargetsOfPartialRun(t *testing.T) {
	sel, err := parseSelection("redis-cluster", "failover")
	if err != nil {
		t.Fatal(err)
	}
	r := &report{
		TTL: "2s",
		sel: sel,
		Failover: []*failRes{
			// 3 acquire calls in 0.998 TTL: just over 3 per TTL.
			{Group: "Redis Cluster", Name: rowLock, TTLRatios: []float64{0.7, 0.998}, Max: 0.998, P50: 0.7, Counted: true, AcqPerTTL: []float64{2.8, 3 / 0.998}, MedAcq: 2.8},
		},
	}
	ts := targets(r)
	for _, x := range ts {
		if !strings.Contains(x.ID, "redis-cluster") {
			t.Errorf("target %s of a server -only left out", x.ID)
		}
	}
	calls := find(ts, "failover-calls/redis-cluster")
	if calls == nil || calls.Met == nil || *calls.Met || !strings.Contains(calls.Verdict, "0.01 over (3.01, 0.2% above 3.00)") {
		t.Errorf("failover-calls/redis-cluster: %+v; want not met, 0.01 over 3.00", calls)
	}
	if f := find(ts, "failover/redis-cluster"); f == nil || f.Met == nil || !*f.Met {
		t.Errorf("failover/redis-cluster: %+v; want met", f)
	}
	for _, id := range []string{"keepalive/redis-cluster", "waiting-calls/redis-cluster"} {
		if x := find(ts, id); x == nil || x.Met != nil || !strings.Contains(x.Verdict, "not measured (-measures left") {
			t.Errorf("%s: %+v; want not measured, -measures left it out", id, x)
		}
	}
}

func TestDecimals(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want int
	}{{2.8, 1}, {3, 1}, {2.999, 1}, {3.2, 1}, {3.04, 2}, {3.005, 3}, {3.0001, 3}} {
		if got := decimals(c.v, 3); got != c.want {
			t.Errorf("decimals(%v, 3) = %d, want %d", c.v, got, c.want)
		}
	}
}

// handSlice takes -handover-samples samples per round, not a fixed 10, after handWarmup
// untimed ones that it does not record.
func TestHandSliceTakesTheAskedSamples(t *testing.T) {
	n := 0
	row := handRow{group: "Redis", name: rowLock, sample: func(context.Context) (time.Duration, error) {
		n++
		return time.Duration(n) * time.Millisecond, nil
	}}
	res := new(handRes)
	handSlice(context.Background(), row, res, time.Second, 25)
	first, last := float64(handWarmup+1), float64(handWarmup+25)
	if len(res.MS) != 25 || res.MS[0] != first || res.MS[24] != last {
		t.Errorf("samples %v, want 25 (%v … %v ms: the first %d are warm-ups)", res.MS, first, last, handWarmup)
	}
}

// A failed warm-up ends the slice: an error, no samples, and the row's finish still runs.
func TestHandSliceStopsOnAFailedWarmup(t *testing.T) {
	finished := false
	row := handRow{group: "Redis", name: rowLock,
		sample: func(context.Context) (time.Duration, error) { return 0, errors.New("refused") },
		finish: func(context.Context) { finished = true }}
	res := new(handRes)
	handSlice(context.Background(), row, res, time.Second, 25)
	if res.Errors != 1 || res.LastError != "refused" || len(res.MS) != 0 || !finished {
		t.Errorf("errors %d (%q), samples %v, finished %v; want 1 (refused), none, true", res.Errors, res.LastError, res.MS, finished)
	}
}

// narrow keeps one server (when named) and the asked measures that the run selects.
func TestSelectionNarrow(t *testing.T) {
	s, err := parseSelection("pg,zk", "cycle,failover")
	if err != nil {
		t.Fatal(err)
	}
	n := s.narrow("ZooKeeper", mCycle, mHandover)
	if !n.group("ZooKeeper") || n.group("PostgreSQL") || n.group("Redis") {
		t.Errorf("narrow(ZooKeeper) selects groups %v", n.groups)
	}
	if !n.measure(mCycle) || n.measure(mHandover) || n.measure(mFailover) {
		t.Errorf("narrow(cycle, handover) of cycle,failover selects measures %v", n.measures)
	}
	if n := s.narrow("Redis", mCycle); n.group("Redis") {
		t.Error("narrow(Redis) selects Redis, which the run left out")
	}
	all := selection{}.narrow("", mFailover)
	if !all.group("etcd (embedded)") || !all.group("SQLite") || !all.measure(mFailover) || all.measure(mCycle) {
		t.Errorf("narrow(\"\", failover) of everything: groups %v, measures %v", all.groups, all.measures)
	}
}

// The SQLite waiting-CPU target is judged on what waiting adds (the waiting process's CPU less
// the idle process's, both shown), and on the whole waiting process when there is no idle
// figure.
func TestIdleCPUJudgesWhatWaitingAdds(t *testing.T) {
	for _, c := range []struct {
		name string
		w    *waitRes
		met  bool
		says []string
	}{
		{"added under the line", &waitRes{Group: "SQLite", Seconds: 4, CPUShare: 0.015, IdleCPUShare: 0.007},
			true, []string{"waiting adds 0.80 %", "waiting 1.50 %", "idle with a session open 0.70 %", "met (0.80 % ≤ 1.00 %)"}},
		{"added over the line", &waitRes{Group: "SQLite", Seconds: 4, CPUShare: 0.018, IdleCPUShare: 0.002},
			false, []string{"waiting adds 1.60 %", "waiting 1.80 %", "0.60 % over"}},
		{"no idle figure", &waitRes{Group: "SQLite", Seconds: 4, CPUShare: 0.015, IdleError: "idle process said \"\""},
			false, []string{"waiting 1.50 %", "judged whole", "0.50 % over"}},
	} {
		r := &report{TTL: "2s", Waiting: []*waitRes{c.w}}
		got := find(targets(r), "idle-cpu/sqlite")
		if got == nil || got.Met == nil {
			t.Errorf("%s: not judged (%+v)", c.name, got)
			continue
		}
		text := got.Measured + " / " + got.Verdict
		if *got.Met != c.met {
			t.Errorf("%s: met %v (%s), want %v", c.name, *got.Met, text, c.met)
		}
		for _, s := range c.says {
			if !strings.Contains(text, s) {
				t.Errorf("%s: %q lacks %q", c.name, text, s)
			}
		}
	}
}

func TestXProcAnswer(t *testing.T) {
	p := &xprocPair{lines: make(chan string, 4)}
	ctx := context.Background()
	p.lines <- "held 1700000000123456789"
	at, err := p.answer(ctx, "held")
	if err != nil || at.UnixNano() != 1700000000123456789 {
		t.Errorf("held: %v, %v", at.UnixNano(), err)
	}
	p.lines <- "error: lock: session expired"
	if _, err := p.answer(ctx, "held"); err == nil || !strings.Contains(err.Error(), "session expired") {
		t.Errorf("an error line: %v, want it", err)
	}
	p.lines <- "unlocked 12"
	if _, err := p.answer(ctx, "held"); err == nil {
		t.Error("the wrong answer was taken")
	}
	close(p.lines)
	if _, err := p.answer(ctx, "held"); err == nil {
		t.Error("ended output was taken for an answer")
	}
}

// TestRewriteFullRunOnly: -report writes a full run's report again, the same as the run wrote
// it, and refuses a partial run's.
func TestRewriteFullRunOnly(t *testing.T) {
	dir := t.TempDir()
	full := &report{TTL: "2s", Handover: []*handRes{{Group: "SQLite", Name: rowLock, MS: []float64{3, 4}, P50: 3, P99: 4, Max: 4}}}
	var err error
	if full.sel, err = parseSelection("", ""); err != nil {
		t.Fatal(err)
	}
	full.leases = parseLeases("1,100,10000")
	if err := write(full, filepath.Join(dir, "run")); err != nil {
		t.Fatal(err)
	}
	o := opts{out: filepath.Join(dir, "again"), leases: "1,100,10000"}
	if err := rewrite(filepath.Join(dir, "run", "latest.json"), o); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"latest.md", "latest.json"} {
		a, _ := os.ReadFile(filepath.Join(dir, "run", f))
		b, _ := os.ReadFile(filepath.Join(dir, "again", f))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("%s written again differs (%d and %d bytes)", f, len(a), len(b))
		}
	}
	partial := *full
	partial.Selected = "-only sqlite"
	js, _ := json.Marshal(&partial)
	path := filepath.Join(dir, "partial.json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(path, o); err == nil || !strings.Contains(err.Error(), "partial") {
		t.Errorf("rewrite of a partial run: %v; want refused", err)
	}
}

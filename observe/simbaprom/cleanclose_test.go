package simbaprom_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/observe/simbaprom"
)

// TestCleanCloseCountsNoBackendError: a client on SQLite leading an election and owning a
// group's 16 partitions closes cleanly; simba_backend_errors_total stays 0. The releases still
// in flight when the session's close ended Close were cut (context canceled) and counted, as
// permanent release errors with no log line above DEBUG: 2, 15 and 15 in this test's three
// runs before CallInfo.Closing (trial27 saw 1 at a clean SIGTERM shutdown of an election).
func TestCleanCloseCountsNoBackendError(t *testing.T) {
	for run := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b, err := simbasql.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "simba.db"), simbasql.WithAutoMigrate())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		m := simbaprom.New(simbaprom.Opts{})
		reg := prometheus.NewRegistry()
		reg.MustRegister(m)
		hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		defer hs.Close()
		c, err := simba.New(b, append(m.Options(), simba.WithOwner("w1"), simba.WithTTL(2*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		e, err := c.NewElection("leader", simba.RunWhileLeader(func(ctx context.Context, _ simba.Term) error {
			<-ctx.Done()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		m.Track(e)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		g, err := c.JoinGroup(ctx, "shards", 16)
		if err != nil {
			t.Fatal(err)
		}
		m.Track(g)
		until(t, "leadership and 16 partitions", 30*time.Second, func() bool {
			s := scrapeURL(t, hs.URL)
			return s[`simba_term_held{name="leader"}`] == 1 && s[`simba_partitions_owned{group="shards"}`] == 16
		})
		if err := c.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		series, errs := 0, 0.0
		for k, v := range scrapeURL(t, hs.URL) {
			if strings.HasPrefix(k, "simba_backend_errors_total{") {
				series++
				errs += v
				if v != 0 {
					t.Errorf("run %d: %s = %v after a clean Close, want 0", run, k, v)
				}
			}
		}
		if series == 0 {
			t.Fatal("no simba_backend_errors_total series")
		}
		t.Logf("run %d: %d series, %v backend errors", run, series, errs)
	}
}

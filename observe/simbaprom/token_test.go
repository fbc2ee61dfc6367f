package simbaprom_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
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

// The package doc's claim about simba_term_token: a microsecond token (SQLite's, as SQL's and
// Redis's) is printed in e-notation by the text exposition, and reads back as the exact integer
// the term carries, so the gauge is exact though its text is not the log line's.
func TestTermTokenExpositionIsExact(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	backend, err := simbasql.Open(ctx, "sqlite://"+t.TempDir()+"/t.db", simbasql.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	m := simbaprom.New(simbaprom.Opts{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	c, err := simba.New(backend, append(m.Options(), simba.WithTTL(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	h, err := c.Lock(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(ctx)
	resp, err := http.Get(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text string
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), `simba_term_token{name="ledger"} `); ok {
			text = v
		}
	}
	if !strings.Contains(text, "e+") {
		t.Fatalf("token %d exposed as %q: the doc says e-notation", h.Token(), text)
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		t.Fatal(err)
	}
	if int64(v) != h.Token() || float64(int64(v)) != v {
		t.Fatalf("exposed %q reads back as %d, the term's token is %d", text, int64(v), h.Token())
	}
	t.Logf("token %d exposed as %s", h.Token(), text)
}

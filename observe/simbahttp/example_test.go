package simbahttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// A service serves its client's metrics, health and status next to its own routes.
func Example() {
	ctx := context.Background()
	backend := simbatest.NewServer(simbatest.WithClock(spi.SystemClock())).Backend()

	m := simbaprom.New(simbaprom.Opts{})
	h := simbahttp.New(simbahttp.Opts{Backend: backend})
	c, err := simba.New(backend, append(append(m.Options(), h.Options()...), simba.WithOwner("node-a"))...)
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	h.Attach(c)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/simba/", http.StripPrefix("/simba", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	held, err := c.Lock(ctx, "report")
	if err != nil {
		panic(err)
	}

	resp, _ := http.Get(srv.URL + "/simba/healthz")
	fmt.Println("healthz:", resp.StatusCode)
	resp.Body.Close()

	resp, _ = http.Get(srv.URL + "/simba/status")
	var st simbahttp.Status
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	for _, hd := range st.Holders {
		fmt.Println("holder:", hd.Name, hd.Owner, hd.Token == held.Token(), hd.Self)
	}

	resp, _ = http.Get(srv.URL + "/metrics")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "simba_term_held") || strings.HasPrefix(sc.Text(), "simba_session_up") {
			fmt.Println(sc.Text())
		}
	}
	resp.Body.Close()
	// Output:
	// healthz: 200
	// holder: report node-a true true
	// simba_session_up 1
	// simba_term_held{name="report"} 1
}

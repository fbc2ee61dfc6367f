package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// The -churn flags select churn mode: instead of timing calls, run lock churn through the proxies at
// each (one-way latency, TTL) pair and count what the README's rule predicts: grants, calls
// that failed, sessions lost.
var (
	churn       = flag.Duration("churn", 0, "run lock churn for this long per (latency, TTL) pair instead of timing calls")
	churnDelays = flag.String("churn-delays", "0,50ms", "comma-separated one-way latencies for -churn")
	churnTTLs   = flag.String("churn-ttls", "3s,6s", "comma-separated TTLs for -churn")
	churnShape  = flag.String("churn-shape", "3x6x10", "clients x workers per client x names, for -churn")
)

type churnResult struct {
	delay, ttl                  time.Duration
	grants, lockTimeouts        int64
	acquireFails, keepAliveFail int64
	sessionsLost                int64
	keepAlives                  []time.Duration // the successful ones
	conns                       int64           // connections the proxies accepted during the run
}

func runChurn(backend string) error {
	var clients, workers, names int
	if _, err := fmt.Sscanf(*churnShape, "%dx%dx%d", &clients, &workers, &names); err != nil {
		return fmt.Errorf("-churn-shape %q: %w", *churnShape, err)
	}
	var results []churnResult
	for _, ds := range strings.Split(*churnDelays, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(ds))
		if err != nil {
			return err
		}
		for _, ts := range strings.Split(*churnTTLs, ",") {
			ttl, err := time.ParseDuration(strings.TrimSpace(ts))
			if err != nil {
				return err
			}
			res, err := churnOnce(backend, d, ttl, clients, workers, names)
			if err != nil {
				return err
			}
			results = append(results, res)
		}
	}
	fmt.Printf("\n%s churn: %d clients × %d workers on %d names, %v per row; Lock ctx one TTL\n", backend, clients, workers, names, *churn)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "RTT added\tTTL\tgrants\tLocks timed out\tacquires failed\tkeep-alives failed\tsessions lost\tkeep-alive p50\tmax\tnew conns\t")
	for _, r := range results {
		var p50, mx time.Duration
		if len(r.keepAlives) > 0 {
			p50, mx = median(r.keepAlives), slices.Max(r.keepAlives)
		}
		fmt.Fprintf(w, "%v\t%v\t%d\t%d\t%d\t%d\t%d\t%.0fms\t%.0fms\t%d\t\n", 2*r.delay, r.ttl, r.grants, r.lockTimeouts,
			r.acquireFails, r.keepAliveFail, r.sessionsLost, float64(p50)/1e6, float64(mx)/1e6, r.conns)
	}
	w.Flush()
	return nil
}

func churnOnce(backend string, delay, ttl time.Duration, clients, workers, names int) (res churnResult, err error) {
	res.delay, res.ttl = delay, ttl
	ctx, cancel := context.WithTimeout(context.Background(), *churn+time.Minute)
	defer cancel()
	r := &run{ctx: ctx, kind: backend, proxies: map[string]*latencyProxy{},
		prefix: fmt.Sprintf("rttc-%d-%d", os.Getpid(), time.Now().UnixMilli()%100000)}
	defer func() {
		for _, p := range r.proxies {
			p.close()
		}
	}()
	var mu sync.Mutex
	var st churnResult // the observer's counts, under mu: calls go on while the clients close
	observe := func(ci simba.CallInfo) {
		if ci.Closing || ci.Abandoned {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ci.Op == simba.OpKeepAlive && ci.Err != nil:
			st.keepAliveFail++
		case ci.Op == simba.OpKeepAlive:
			st.keepAlives = append(st.keepAlives, ci.Took)
		case ci.Op == simba.OpAcquire && ci.Err != nil:
			st.acquireFails++
		}
	}
	var lost atomic.Int64
	listen := func(ev simba.Event) {
		if ev.Kind == simba.EventSessionExpired {
			lost.Add(1)
		}
	}
	var cs []*simba.Client
	var bs []spi.Backend
	defer func() {
		r.delay.Store(0)
		for _, c := range cs {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			c.Close(cctx) //nolint:errcheck // a session not closed lapses at its TTL
			ccancel()
		}
		for _, b := range bs {
			b.Close()
		}
	}()
	for range clients {
		b, err := r.openBackend(backend)
		if err != nil {
			return res, err
		}
		bs = append(bs, b)
		c, err := simba.New(b, simba.WithTTL(ttl), simba.WithCallObserver(observe), simba.WithListener(listen),
			simba.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return res, err
		}
		cs = append(cs, c)
	}
	// Sessions open at +0, then the latency is set for the run.
	for _, c := range cs {
		h, err := c.Lock(ctx, r.prefix+"-warm")
		if err != nil {
			return res, err
		}
		h.Unlock(ctx) //nolint:errcheck
	}
	r.delay.Store(int64(delay))
	mu.Lock()
	st.keepAlives = nil // from here on
	mu.Unlock()
	conns0 := r.accepted()
	end := time.Now().Add(*churn)
	var grants, timeouts atomic.Int64
	var wg sync.WaitGroup
	for ci, c := range cs {
		for wi := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := ci*workers + wi; time.Now().Before(end); i++ {
					lctx, lcancel := context.WithTimeout(ctx, ttl)
					h, err := c.Lock(lctx, fmt.Sprintf("%s-%d", r.prefix, i%names))
					lcancel()
					if err != nil {
						timeouts.Add(1)
						continue
					}
					grants.Add(1)
					h.Unlock(ctx) //nolint:errcheck // a failed release lapses with the session
				}
			}()
		}
	}
	wg.Wait()
	res.conns = r.accepted() - conns0
	res.grants, res.lockTimeouts, res.sessionsLost = grants.Load(), timeouts.Load(), lost.Load()
	mu.Lock()
	res.keepAliveFail, res.keepAlives, res.acquireFails = st.keepAliveFail, st.keepAlives, st.acquireFails
	mu.Unlock()
	return res, nil
}

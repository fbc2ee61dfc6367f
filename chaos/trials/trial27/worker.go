package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/open"
)

// write is what a worker sends the sink: a write to resource res with token, by proc; phase
// "w" (an election's or partition's periodic write), "start"/"end" (a lock's critical section).
type write struct {
	Res   string `json:"res"`
	Token int64  `json:"token"`
	Proc  string `json:"proc"`
	Phase string `json:"phase"`
}

var httpc = &http.Client{Timeout: 2 * time.Second}

func post(sink string, w write) int {
	b, _ := json.Marshal(w)
	resp, err := httpc.Post(sink+"/w", "application/json", bytes.NewReader(b))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// worker is one process of the trial: a client doing one workload (elect, lock or group) and
// writing what it does to the sink with its tokens.
func worker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	dsn := fs.String("dsn", "", "backend DSN")
	id := fs.String("id", "w1", "process id (the client's owner)")
	mode := fs.String("mode", "elect", "elect, lock or group")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	sink := fs.String("sink", "", "sink URL")
	gs := fs.Int("g", 20, "lock: goroutines")
	names := fs.Int("names", 30, "lock: names")
	hold := fs.Duration("hold", 5*time.Millisecond, "lock: critical section")
	level := fs.String("level", "info", "log level")
	_ = fs.Parse(args)

	var lv slog.Level
	_ = lv.UnmarshalText([]byte(*level))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	be, err := open.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer be.Close()
	m := simbaprom.New(simbaprom.Opts{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	c, err := simba.New(be, append(m.Options(), simba.WithTTL(*ttl), simba.WithOwner(*id), simba.WithLogger(log))...)
	if err != nil {
		return err
	}
	var grants, refused atomic.Int64
	var wg sync.WaitGroup
	switch *mode {
	case "elect":
		e, err := c.NewElection("t27-elect", simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
			grants.Add(1)
			for ctx.Err() == nil && t.IsValid() {
				if post(*sink, write{Res: "elect", Token: t.Token(), Proc: *id, Phase: "w"}) == http.StatusConflict {
					refused.Add(1)
				}
				time.Sleep(50 * time.Millisecond)
			}
			return nil
		}))
		if err != nil {
			return err
		}
		if err := e.Start(ctx); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = e.Stop(sctx)
		}()
	case "group":
		g, err := c.JoinGroup(ctx, "t27-group", 16, simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
			grants.Add(1)
			res := fmt.Sprintf("p%02d", p)
			for ctx.Err() == nil && t.IsValid() {
				if post(*sink, write{Res: res, Token: t.Token(), Proc: *id, Phase: "w"}) == http.StatusConflict {
					refused.Add(1)
				}
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		}))
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = g.Leave(sctx)
		}()
	case "lock":
		for i := 0; i < *gs; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					name := fmt.Sprintf("t27-lock-%02d", rand.IntN(*names))
					h, err := c.Lock(ctx, name)
					if err != nil {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					grants.Add(1)
					tok := h.Token()
					if post(*sink, write{Res: name, Token: tok, Proc: *id, Phase: "start"}) == http.StatusConflict {
						refused.Add(1)
					}
					time.Sleep(*hold)
					post(*sink, write{Res: name, Token: tok, Proc: *id, Phase: "end"})
					uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_ = h.Unlock(uctx)
					cancel()
				}
			}()
		}
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Close(cctx)
			stats(*id, reg, grants.Load(), refused.Load(), true)
			return nil
		case <-tick.C:
			stats(*id, reg, grants.Load(), refused.Load(), false)
		}
	}
}

// stats prints one JSON line: goroutines, fds, the worker's own counts and the metrics'.
func stats(id string, reg *prometheus.Registry, grants, refused int64, final bool) {
	ents, _ := os.ReadDir("/proc/self/fd")
	out := map[string]any{"stats": id, "final": final, "goroutines": runtime.NumGoroutine(), "fds": len(ents),
		"grants": grants, "refused": refused, "t": time.Now().UnixMilli()}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		var sum float64
		for _, mm := range mf.Metric {
			sum += value(mm)
		}
		switch mf.GetName() {
		case "simba_terms_granted_total", "simba_backend_errors_total", "simba_term_held",
			"simba_sessions_lost_total", "simba_sessions_opened_total", "simba_session_up", "simba_pauses_total":
			out[mf.GetName()] = sum
		}
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

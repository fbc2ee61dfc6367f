package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
	"github.com/simba-go/simba/open"
)

// levelCounter counts a logger's lines per level, and passes them on.
type levelCounter struct {
	h slog.Handler
	n *[4]atomic.Int64 // DEBUG, INFO, WARN, ERROR
}

func (c levelCounter) Enabled(ctx context.Context, l slog.Level) bool { return c.h.Enabled(ctx, l) }
func (c levelCounter) Handle(ctx context.Context, r slog.Record) error {
	i := min(max(int(r.Level+4)/4, 0), 3)
	c.n[i].Add(1)
	return c.h.Handle(ctx, r)
}
func (c levelCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return levelCounter{h: c.h.WithAttrs(as), n: c.n}
}
func (c levelCounter) WithGroup(g string) slog.Handler {
	return levelCounter{h: c.h.WithGroup(g), n: c.n}
}

// worker is one worker process: it joins the group and, for each partition it leads, writes a
// fenced record (fencehttp, its term's token) every -every while its term is valid. It prints a
// STATS line every -stats: goroutines, heap, backend calls per op, log lines per level, writes.
func worker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	dsn := fs.String("dsn", "", "DSN")
	id := fs.String("id", "w", "owner")
	sinkURL := fs.String("sink", "", "sink URL")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	parts := fs.Int("p", 64, "partitions")
	group := fs.String("group", "jobs", "group")
	every := fs.Duration("every", 300*time.Millisecond, "write interval per partition")
	statsEvery := fs.Duration("stats", 5*time.Second, "stats interval")
	lag := fs.Duration("lag", 0, "time between the IsValid check and the write it allows (a slow write path)")
	fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var lines [4]atomic.Int64
	logger := slog.New(levelCounter{h: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}), n: &lines})
	b, err := open.Open(ctx, *dsn, open.WithLogger(logger))
	if err != nil {
		return err
	}
	defer b.Close()
	var cmu sync.Mutex
	calls := map[string]int{}
	callErrs := 0
	c, err := simba.New(b, simba.WithTTL(*ttl), simba.WithOwner(*id), simba.WithLogger(logger),
		simba.WithCallObserver(func(ci simba.CallInfo) {
			cmu.Lock()
			calls[ci.Op]++
			if ci.Err != nil {
				callErrs++
			}
			cmu.Unlock()
		}))
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &fencehttp.Transport{}, Timeout: 2 * time.Second}
	var writes, stale, staleValid, failed atomic.Int64
	g, err := c.JoinGroup(ctx, *group, *parts, simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
		u := *sinkURL + "?p=" + strconv.Itoa(p) + "&who=" + *id
		for t.IsValid() {
			if *lag > 0 {
				time.Sleep(*lag)
			}
			req, _ := http.NewRequestWithContext(fencehttp.WithToken(context.WithoutCancel(ctx), t.Token()), "POST", u, nil)
			resp, err := hc.Do(req)
			switch {
			case err == nil:
				resp.Body.Close()
				writes.Add(1)
			case errors.Is(err, fence.ErrStaleToken):
				stale.Add(1)
				if t.IsValid() {
					staleValid.Add(1)
				}
				fmt.Fprintf(os.Stderr, "STALE %s p=%d token=%d valid=%v: %v\n", time.Now().Format("15:04:05.000"), p, t.Token(), t.IsValid(), err)
			default:
				failed.Add(1)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(*every):
			}
		}
		return nil
	}))
	if err != nil {
		return err
	}
	samples := []metrics.Sample{{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/objects:bytes"}}
	start := time.Now()
	tick := time.NewTicker(*statsEvery)
	defer tick.Stop()
	var lastCalls map[string]int
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			metrics.Read(samples)
			cmu.Lock()
			cur := map[string]int{}
			for k, v := range calls {
				cur[k] = v
			}
			ce := callErrs
			cmu.Unlock()
			var ops []string
			for k, v := range cur {
				ops = append(ops, fmt.Sprintf("%s=%d", k, v-lastCalls[k]))
			}
			sort.Strings(ops)
			lastCalls = cur
			fmt.Printf("STATS %s t=%.0f gor=%d heap=%d held=%d members=%d writes=%d stale=%d stale_valid=%d failed=%d callerrs=%d log_info=%d log_warn=%d log_error=%d calls %s\n",
				*id, time.Since(start).Seconds(), samples[0].Value.Uint64(), samples[1].Value.Uint64(), len(g.Held()), len(g.Members()),
				writes.Load(), stale.Load(), staleValid.Load(), failed.Load(), ce, lines[1].Load(), lines[2].Load(), lines[3].Load(), strings.Join(ops, " "))
		}
	}
	t0 := time.Now()
	lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = g.Leave(lctx)
	fmt.Printf("LEFT %s in %.3fs: %v\n", *id, time.Since(t0).Seconds(), err)
	return c.Close(lctx)
}

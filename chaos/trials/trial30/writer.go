package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencesql"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// out writes one JSON object per line on stdout: what the controller reads.
type out struct {
	mu sync.Mutex
	id string
}

func (o *out) emit(kind string, kv map[string]any) {
	kv["kind"], kv["who"], kv["t"] = kind, o.id, time.Now().UnixNano()
	b, _ := json.Marshal(kv)
	o.mu.Lock()
	os.Stdout.Write(append(b, '\n'))
	o.mu.Unlock()
}

// writer is one ledger writer process: a candidate of one election whose leader work appends to
// the ledger through fencesql with the term's token, as README "Fencing your resource" says.
func writer(args []string) error {
	fs := flag.NewFlagSet("writer", flag.ExitOnError)
	dsn := fs.String("dsn", "", "lock backend DSN")
	id := fs.String("id", "w1", "owner")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	name := fs.String("election", "t30-ledger", "election name (also the fence resource)")
	ledger := fs.String("ledger", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "ledger database (pgx stdlib DSN)")
	table := fs.String("table", "", "ledger table")
	every := fs.Duration("every", 50*time.Millisecond, "write interval")
	lag := fs.Duration("lag", 100*time.Millisecond, "wait between the IsValid check and the write (a slow write path)")
	addr := fs.String("http", "127.0.0.1:0", "metrics and status page address")
	mode := fs.String("mode", "elect", "elect: an election's leader work writes; lock: Lock, a settlement batch of -batch writes, Unlock, again")
	batch := fs.Int("batch", 5, "writes per settlement batch (-mode lock)")
	bump := fs.Bool("bump", false, "the leader work's first act is an empty fenced write (raises the fence to the new token at once)")
	fs.Parse(args)
	o := &out{id: *id}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b, err := open.Open(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer b.Close()
	db, err := sql.Open("pgx", *ledger)
	if err != nil {
		return err
	}
	defer db.Close()
	f, err := fencesql.New(db, "postgres")
	if err != nil {
		return err
	}
	f.Verify = fence.LeaseVerifier(b.(spi.Inspector), nil) // resource = the election's lease name

	m := simbaprom.New(simbaprom.Opts{})
	h := simbahttp.New(simbahttp.Opts{Backend: b})
	opts := append(append(m.Options(), h.Options()...), simba.WithOwner(*id), simba.WithTTL(*ttl), simba.WithLogger(log))
	c, err := simba.New(b, opts...)
	if err != nil {
		return fmt.Errorf("new: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	h.Attach(c)

	var nOK, nStale, nUnver, nErr int64
	var cmu sync.Mutex
	work := func(wctx context.Context, t simba.Term) error {
		o.emit("work-start", map[string]any{"token": t.Token()})
		defer o.emit("work-end", map[string]any{"token": t.Token()})
		if *bump {
			c2, cancel := context.WithTimeout(wctx, 5*time.Second)
			err := f.Write(c2, *name, t.Token(), func(context.Context, *sql.Tx) error { return nil })
			cancel()
			o.emit("bump", map[string]any{"token": t.Token(), "err": fmt.Sprint(err)})
		}
		for {
			select {
			case <-wctx.Done():
				return nil
			case <-time.After(*every):
			}
			if !t.IsValid() {
				continue
			}
			time.Sleep(*lag) // a slow write path: the term may end here
			// A write already under way when the term ends: it is not cut short by the term's
			// ctx, so the fence, not the lock, must stop it.
			c2, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := f.Write(c2, *name, t.Token(), func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO "+*table+" (writer, token) VALUES ($1, $2)", *id, t.Token())
				return err
			})
			cancel()
			cmu.Lock()
			switch {
			case err == nil:
				nOK++
			case errors.Is(err, fence.ErrStaleToken):
				nStale++
				o.emit("stale", map[string]any{"token": t.Token(), "err": err.Error(), "valid": t.IsValid()})
			case errors.Is(err, fence.ErrUnverifiedToken):
				nUnver++
				o.emit("unverified", map[string]any{"token": t.Token(), "err": err.Error(), "valid": t.IsValid()})
			default:
				nErr++
				o.emit("write-error", map[string]any{"token": t.Token(), "err": err.Error(), "valid": t.IsValid()})
			}
			cmu.Unlock()
		}
	}
	e, err := c.NewElection(*name, simba.RunWhileLeader(work),
		simba.OnElected(func(_ context.Context, t simba.Term) {
			o.emit("elected", map[string]any{"token": t.Token()})
		}),
		simba.OnRevoked(func(_ context.Context, t simba.Term, r simba.RevokeReason) {
			o.emit("revoked", map[string]any{"token": t.Token(), "reason": fmt.Sprint(r)})
		}))
	if err != nil {
		return fmt.Errorf("election: %w", err)
	}
	m.Track(e)
	h.Track(e)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/simba/", http.StripPrefix("/simba", h))
	go http.Serve(ln, mux)

	stats := func(when string) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		cmu.Lock()
		o.emit("stats", map[string]any{"when": when, "goroutines": runtime.NumGoroutine(), "heap_kib": ms.HeapAlloc / 1024,
			"ok": nOK, "stale": nStale, "unverified": nUnver, "errors": nErr})
		cmu.Unlock()
	}
	o.emit("ready", map[string]any{"http": ln.Addr().String()})
	stats("start")
	go func() {
		for ev := range e.Events(ctx) {
			if ev.Kind == simba.EventBackendError || ev.Kind == simba.EventPaused || ev.Kind == simba.EventSessionExpired {
				o.emit("event", map[string]any{"ev": ev.String()})
			}
		}
	}()
	switch *mode {
	case "elect":
		if err := e.Start(ctx); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	case "lock":
		// A settlement batch under Lock, as README's Quick start: the election above is never
		// started (it only serves the metrics' Track), so the batches use a name of their own.
		lockName := *name + "-settle"
		go func() {
			for ctx.Err() == nil {
				held, err := c.Lock(ctx, lockName)
				if err != nil {
					if ctx.Err() == nil {
						o.emit("write-error", map[string]any{"err": "lock: " + err.Error()})
						time.Sleep(100 * time.Millisecond)
					}
					continue
				}
				o.emit("elected", map[string]any{"token": held.Token()})
				for i := 0; i < *batch && held.IsValid(); i++ {
					time.Sleep(*lag)
					c2, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := f.Write(c2, lockName, held.Token(), func(ctx context.Context, tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, "INSERT INTO "+*table+" (writer, token) VALUES ($1, $2)", *id, held.Token())
						return err
					})
					cancel()
					cmu.Lock()
					switch {
					case err == nil:
						nOK++
					case errors.Is(err, fence.ErrStaleToken):
						nStale++
						o.emit("stale", map[string]any{"token": held.Token(), "err": err.Error(), "valid": held.IsValid()})
					default:
						nErr++
						o.emit("write-error", map[string]any{"token": held.Token(), "err": err.Error(), "valid": held.IsValid()})
					}
					cmu.Unlock()
				}
				uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := held.Unlock(uctx); err != nil {
					o.emit("revoked", map[string]any{"token": held.Token(), "reason": "unlock: " + err.Error()})
				}
				cancel()
			}
		}()
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			stats("tick")
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	serr := e.Stop(cctx)
	cerr := c.Close(cctx)
	o.emit("closed", map[string]any{"stop_err": fmt.Sprint(serr), "close_err": fmt.Sprint(cerr), "took_ms": time.Since(t0).Milliseconds()})
	stats("end")
	return nil
}

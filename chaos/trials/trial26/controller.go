package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/open"
)

// emitter writes one JSON object per line on stdout: what the runner reads.
type emitter struct {
	mu sync.Mutex
	id string
}

func (e *emitter) emit(ev string, kv ...any) {
	m := map[string]any{"t": time.Now().UnixNano(), "ev": ev, "id": e.id}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	e.mu.Lock()
	os.Stdout.Write(append(b, '\n'))
	e.mu.Unlock()
}

// redisLog routes go-redis's process-wide log into slog at DEBUG, as the README advises.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.Debug("go-redis: " + fmt.Sprintf(format, v...))
}

func controller(args []string) error {
	fs := flag.NewFlagSet("controller", flag.ExitOnError)
	dsn := fs.String("dsn", "", "lock service DSN")
	name := fs.String("name", "trial26-controller", "election name")
	id := fs.String("id", "r1", "replica id (owner)")
	ttl := fs.Duration("ttl", 3*time.Second, "session TTL")
	httpAddr := fs.String("http", "127.0.0.1:0", "metrics/healthz listen address")
	sink := fs.String("sink", "", "fenced sink URL")
	every := fs.Duration("every", 100*time.Millisecond, "write period of the leader work")
	gap := fs.Duration("gap", 40*time.Millisecond, "time between the validity check and the write (work done)")
	level := fs.String("log", "info", "log level")
	migrate := fs.Bool("migrate", true, "apply the SQL schema at start (open.WithAutoMigrate)")
	fs.Parse(args)

	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv})).With("replica", *id)
	goredis.SetLogger(redisLog{logger})
	em := &emitter{id: *id}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// The backend is opened without ping: a server that is down shows in the client's calls.
	openCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	oopts := []open.Option{open.WithLogger(logger)}
	if *migrate {
		oopts = append(oopts, open.WithAutoMigrate())
	}
	backend, err := open.Open(openCtx, *dsn, oopts...)
	cancel()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer backend.Close()

	metrics := simbaprom.New(simbaprom.Opts{})
	health := simbahttp.New(simbahttp.Opts{Backend: backend})
	opts := append(append(metrics.Options(), health.Options()...),
		simba.WithOwner(*id), simba.WithTTL(*ttl), simba.WithLogger(logger))
	client, err := simba.New(backend, opts...)
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	health.Attach(client)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	httpc := &http.Client{Transport: &fencehttp.Transport{}, Timeout: 5 * time.Second}
	work := func(ctx context.Context, t simba.Term) error {
		em.emit("work-start", "token", t.Token(), "rem_ms", t.Remaining().Milliseconds())
		writes, stale, failed := 0, 0, 0
		defer func() {
			em.emit("work-end", "token", t.Token(), "valid", t.IsValid(), "writes", writes, "stale", stale, "failed", failed,
				"cause", fmt.Sprint(context.Cause(ctx)))
		}()
		tick := time.NewTicker(*every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			if !t.IsValid() {
				continue
			}
			time.Sleep(*gap) // the work between the check and the write
			req, _ := http.NewRequestWithContext(fencehttp.WithToken(ctx, t.Token()), http.MethodPut,
				*sink+"/write?r="+*id, strings.NewReader(*id))
			resp, err := httpc.Do(req)
			switch {
			case errors.Is(err, fence.ErrStaleToken):
				stale++
				em.emit("stale", "token", t.Token())
				logger.Warn("write refused as stale", "token", t.Token(), "err", err)
			case err != nil:
				failed++
			default:
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					writes++
				} else {
					failed++
				}
			}
		}
	}
	election, err := client.NewElection(*name, simba.RunWhileLeader(work))
	if err != nil {
		return fmt.Errorf("new election: %w", err)
	}
	metrics.Track(election)
	health.Track(election)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/simba/", http.StripPrefix("/simba", health))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/healthz"
		health.ServeHTTP(w, r2)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		fds, socks := countFDs()
		json.NewEncoder(w).Encode(map[string]any{"goroutines": runtime.NumGoroutine(), "fds": fds, "sockets": socks,
			"leader": election.IsLeader()})
	})
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	em.emit("ready", "http", ln.Addr().String(), "pid", os.Getpid())

	if err := election.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	<-ctx.Done()
	em.emit("sigterm")
	// Graceful hand-over: Stop waits for the work to return and releases the lease.
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	t0 := time.Now()
	if err := election.Stop(sctx); err != nil {
		logger.Error("stop", "err", err)
	}
	em.emit("stopped", "stop_ms", time.Since(t0).Milliseconds())
	if err := client.Close(sctx); err != nil {
		logger.Error("close", "err", err)
	}
	srv.Close()
	em.emit("exit")
	return nil
}

func countFDs() (fds, sockets int) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1, -1
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			sockets++
		}
	}
	return len(ents), sockets
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	redisbackend "github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/chaos/history"
	"github.com/simba-go/simba/chaos/resource"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// mutantEnv names the environment variable that breaks a worker on purpose, for the mutation
// test of the harness: "ignore-deadline" makes it believe its term valid for one TTL past the
// last time the term itself said so, and keep writing after the term is revoked;
// "release-ignores-token" gives it a backend whose release ignores the token (mutant.go).
const mutantEnv = "CHAOS_MUTANT"

// recorder writes history events to stdout, one line per write call so that a SIGKILL tears
// at most the line being written.
type recorder struct {
	mu     sync.Mutex
	worker string
	out    io.Writer // nil: os.Stdout
}

func (r *recorder) emit(e history.Event) {
	e.Worker = r.worker
	if e.Mono == 0 {
		e.Mono = history.Now()
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(e)
	r.mu.Lock()
	if r.out != nil {
		r.out.Write(b.Bytes())
	} else {
		os.Stdout.Write(b.Bytes())
	}
	r.mu.Unlock()
}

type worker struct {
	rec      *recorder
	ttl      time.Duration
	every    time.Duration
	res      []resource.Resource
	mutant   bool
	lastSeen sync.Map // name → mono of the last time the term said valid (mutant only)
	churn    time.Duration
	churnRng *rand.Rand
	errOut   io.Writer // churnFailed's lines; nil: os.Stderr
}

// churnWait waits about one churn period (0.5–1.5 × churn, from the worker's seed) and reports
// whether the worker should stop its election or leave its group now: false once ctx has ended,
// and always false without -churn (it waits for ctx then).
func (w *worker) churnWait(ctx context.Context) bool {
	if w.churn <= 0 {
		<-ctx.Done()
		return false
	}
	t := time.NewTimer(time.Duration(float64(w.churn) * (0.5 + w.churnRng.Float64())))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// churnCtx is the ctx of a churn's Stop or Leave: in turn one that has ended already, one that
// ends within 2 ms (both return before the loop may have taken the request, which goes on: the
// next NewElection or JoinGroup of the name waits for it), and one of 3 × TTL.
func (w *worker) churnCtx() (context.Context, context.CancelFunc) {
	switch w.churnRng.IntN(3) {
	case 0:
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	case 1:
		return context.WithTimeout(context.Background(), time.Duration(w.churnRng.Int64N(int64(2*time.Millisecond))))
	default:
		return context.WithTimeout(context.Background(), 3*w.ttl)
	}
}

// churnFailed reports a NewElection, Start or JoinGroup after a churn that failed for another
// reason than the end of the run: the runner fails the run on the line (workerMarks).
func (w *worker) churnFailed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	out := w.errOut
	if out == nil {
		out = os.Stderr
	}
	fmt.Fprintf(out, "chaos: churn: %s after a stop or leave: %v\n", what, err)
}

// belief is what the worker believes of its term now: valid, and for how long.
func (w *worker) belief(ctx context.Context, t simba.Term) (int64, bool, time.Duration) {
	m := history.Now()
	rem := t.Remaining()
	if !w.mutant {
		return m, rem > 0, rem
	}
	if rem > 0 {
		w.lastSeen.Store(t.Name(), m)
		return m, true, w.ttl
	}
	last, _ := w.lastSeen.Load(t.Name())
	if l, ok := last.(int64); ok && m-l < int64(w.ttl) {
		return m, true, time.Duration(l + int64(w.ttl) - m)
	}
	return m, false, 0
}

// work writes the term's token to every resource while the worker believes its term valid;
// it returns when the belief ends (or, for a sound worker, when ctx ends).
func (w *worker) work(ctx context.Context, t simba.Term) {
	// The work may start before the OnElected callback runs: the term is held from here on.
	w.rec.emit(history.Event{Kind: history.Acquired, Name: t.Name(), Token: t.Token(), Remaining: int64(t.Remaining())})
	for {
		m, valid, rem := w.belief(ctx, t)
		if !valid {
			w.rec.emit(history.Event{Kind: history.Write, Name: t.Name(), Token: t.Token(), Mono: m})
			return
		}
		for _, r := range w.res {
			wctx, cancel := context.WithTimeout(context.Background(), w.ttl)
			ok, err := r.Write(wctx, t.Name(), t.Token(), w.rec.worker)
			cancel()
			e := history.Event{Kind: history.Write, Name: t.Name(), Token: t.Token(), Mono: m, Valid: true,
				Remaining: int64(rem), Resource: r.Label(), Accepted: ok, Done: history.Now()}
			if err != nil {
				e.Err = err.Error()
			}
			w.rec.emit(e)
		}
		if ctx.Err() != nil && !w.mutant {
			return
		}
		time.Sleep(w.every)
	}
}

func runWorker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	id := fs.String("id", "", "worker id (with its incarnation)")
	dsn := fs.String("dsn", "", "backend DSN")
	mode := fs.String("mode", "election", "election, lock or group")
	name := fs.String("name", "chaos", "election, lock or group name")
	partitions := fs.Int("partitions", 4, "partitions of a group")
	ttl := fs.Duration("ttl", time.Second, "session TTL")
	seed := fs.Uint64("seed", 1, "seed of the client's jitter and of the lock holds")
	var fences multiFlag
	fs.Var(&fences, "fence", "a fenced resource, label|driver|dsn|table (repeatable)")
	redirect := fs.String("redirect", "", "Redis Cluster: node=proxy,... (dial each node through its proxy)")
	churn := fs.Duration("churn", 0, "election, group: stop or leave about every churn, then start or join again (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	w := &worker{rec: &recorder{worker: *id}, ttl: *ttl, every: *ttl / 20, mutant: os.Getenv(mutantEnv) == mutantIgnoreDeadline,
		churn: *churn, churnRng: rand.New(rand.NewPCG(*seed, 11))}
	for _, f := range fences {
		r, err := resource.Open(f)
		if err != nil {
			return err
		}
		defer r.Close()
		w.res = append(w.res, r)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	openBackend := func() (spi.Backend, error) {
		if *redirect != "" {
			return openRedirected(*dsn, *redirect, logger)
		}
		return open.Open(ctx, *dsn, open.WithAutoMigrate(), open.WithLogger(logger))
	}
	b, err := openBackend()
	for err != nil && ctx.Err() == nil { // a server being restarted: try again
		time.Sleep(100 * time.Millisecond)
		b, err = openBackend()
	}
	if err != nil {
		return err
	}
	if os.Getenv(mutantEnv) == mutantReleaseIgnoresToken {
		mb, err := newTokenBlind(b, *dsn)
		if err != nil {
			b.Close()
			return err
		}
		b = mb
	}
	defer b.Close()
	opts := []simba.Option{simba.WithTTL(*ttl), simba.WithOwner(*id), simba.WithSeed(*seed), simba.WithLogger(logger)}
	if os.Getenv(traceEnv) != "" {
		opts = append(opts, traceOptions(*id)...)
	}
	c, err := simba.New(b, opts...)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2**ttl)
		defer cancel()
		// A Close that fails here (its ctx ended first: the client's shutdown hung) is
		// printed for the runner (run.go's workerMarks) to fail the run on. A session whose
		// close call failed (a *SessionCloseError: the faults may cut the link at the end)
		// lapses at its TTL, which the run's checks allow for: it is logged, not a failure.
		var sce *simba.SessionCloseError
		if err := c.Close(cctx); errors.As(err, &sce) {
			fmt.Fprintln(os.Stderr, "chaos: session not closed:", err)
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "chaos: client close:", err)
		}
	}()
	switch *mode {
	case "election":
		return w.election(ctx, c, *name)
	case "lock":
		return w.lock(ctx, c, *name, *seed)
	case "group":
		return w.group(ctx, c, *name, *partitions)
	}
	return fmt.Errorf("unknown mode %q", *mode)
}

func (w *worker) election(ctx context.Context, c *simba.Client, name string) error {
	for churned := false; ; churned = true {
		w.rec.emit(history.Event{Kind: history.Begin, Name: name})
		e, err := c.NewElection(name,
			simba.OnElected(func(_ context.Context, t simba.Term) {
				w.rec.emit(history.Event{Kind: history.Acquired, Name: name, Token: t.Token(), Remaining: int64(t.Remaining())})
			}),
			simba.OnRevoked(func(_ context.Context, t simba.Term, _ simba.RevokeReason) {
				w.rec.emit(history.Event{Kind: history.Ended, Name: name, Token: t.Token()})
			}),
			simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
				w.work(ctx, t)
				return nil
			}))
		if err == nil {
			err = e.Start(ctx)
		}
		if err != nil {
			if !churned {
				return err
			}
			w.churnFailed(ctx, "NewElection or Start", err)
			return nil
		}
		if !w.churnWait(ctx) {
			return nil
		}
		sctx, cancel := w.churnCtx()
		_ = e.Stop(sctx) // an ended ctx's error: the Stop goes on, the next NewElection waits for it
		cancel()
	}
}

func (w *worker) lock(ctx context.Context, c *simba.Client, name string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	for ctx.Err() == nil {
		w.rec.emit(history.Event{Kind: history.Begin, Name: name})
		h, err := c.Lock(ctx, name)
		if err != nil {
			time.Sleep(w.every)
			continue
		}
		t := h.Term
		w.rec.emit(history.Event{Kind: history.Acquired, Name: name, Token: t.Token(), Remaining: int64(t.Remaining())})
		hold, cancel := context.WithTimeout(t.Context(), time.Duration(float64(w.ttl)*(0.5+rng.Float64())))
		w.work(hold, t)
		cancel()
		w.rec.emit(history.Event{Kind: history.Ended, Name: name, Token: t.Token()})
		uctx, ucancel := context.WithTimeout(context.Background(), w.ttl)
		_ = h.Unlock(uctx)
		ucancel()
		time.Sleep(time.Duration(rng.Int64N(int64(w.ttl / 4))))
	}
	return nil
}

func (w *worker) group(ctx context.Context, c *simba.Client, name string, partitions int) error {
	pname := func(p int) string { return name + "." + strconv.Itoa(p) }
	for churned := false; ; churned = true {
		for p := range partitions {
			w.rec.emit(history.Event{Kind: history.Begin, Name: pname(p)})
		}
		g, err := c.JoinGroup(ctx, name, partitions,
			simba.OnAssigned(func(_ context.Context, p int, t simba.Term) {
				w.rec.emit(history.Event{Kind: history.Acquired, Name: pname(p), Token: t.Token(), Remaining: int64(t.Remaining())})
			}),
			simba.OnUnassigned(func(_ context.Context, p int, t simba.Term, _ simba.RevokeReason) {
				w.rec.emit(history.Event{Kind: history.Ended, Name: pname(p), Token: t.Token()})
			}),
			simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
				w.work(ctx, t)
				return nil
			}))
		if err != nil {
			if !churned {
				return err
			}
			w.churnFailed(ctx, "JoinGroup", err)
			return nil
		}
		if !w.churnWait(ctx) {
			return nil
		}
		lctx, cancel := w.churnCtx()
		_ = g.Leave(lctx) // an ended ctx's error: leaving goes on, the next JoinGroup waits for it
		cancel()
	}
}

type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// openRedirected opens a Redis Cluster backend whose client dials every node through the
// proxy redirect names for it ("node=proxy,..."): the seeds, and every address the nodes
// announce or redirect to. A node missing from the map is dialed directly (and logged).
func openRedirected(dsn, redirect string, logger *slog.Logger) (spi.Backend, error) {
	to := map[string]string{}
	for _, kv := range strings.Split(redirect, ",") {
		node, px, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("-redirect %q: want node=proxy,...", redirect)
		}
		to[node] = px
	}
	cfg, err := redisbackend.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.ClusterOptions == nil {
		return nil, fmt.Errorf("-redirect needs a redis+cluster:// DSN, not %q", dsn)
	}
	var d net.Dialer
	cfg.ClusterOptions.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if px, ok := to[addr]; ok {
			addr = px
		} else {
			logger.Warn("chaos: a cluster node without a proxy", "addr", addr)
		}
		return d.DialContext(ctx, network, addr)
	}
	return redisbackend.OpenConfig(cfg, redisbackend.WithLogger(logger))
}

// traceEnv, when set in the environment of `chaos run`, makes every worker print its client's
// events and backend calls to its stderr (w*.stderr in the run's directory), each with the
// host's monotonic time in ms (the history's clock): what a failover is made of.
const traceEnv = "CHAOS_TRACE"

func traceOptions(id string) []simba.Option {
	ms := func() float64 { return float64(history.Now()) / 1e6 }
	return []simba.Option{
		simba.WithListener(func(e simba.Event) {
			fmt.Fprintf(os.Stderr, "trace %.1f %s event %v\n", ms(), id, e)
		}),
		simba.WithCallObserver(func(ci simba.CallInfo) {
			fmt.Fprintf(os.Stderr, "trace %.1f %s call %s %s took=%v token=%d err=%v\n", ms(), id, ci.Op, ci.Name, ci.Took, ci.Token, ci.Err)
		}),
	}
}

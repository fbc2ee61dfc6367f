package main

// The outage measure (-measures outage, run alone): N clients of one library contend for one
// lock, each through its own TCP fault proxy (proxy.go), while a seeded schedule blackholes
// (or stalls) one client's link at a time. Every row, Simba on each proxiable backend and each
// peer on its server, runs the same schedule for the same time, one row after the other. It
// writes outage.md and outage.json under -out.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cirello.io/pglock"
	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/simba-go/simba"
	simbaetcd "github.com/simba-go/simba/backend/etcd"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/spi"
)

// mOutage is the outage measure's -measures key; it runs alone (see main).
const mOutage = "outage"

// The outage scenario's fixed shape: sections of 50–300 ms, faults of 0.3–3 s every 1–3 s
// (from one heal to the next fault).
const (
	outSectionMin, outSectionMax = 50 * time.Millisecond, 300 * time.Millisecond
	outFaultMin, outFaultMax     = 300 * time.Millisecond, 3 * time.Second
	outGapMin, outGapMax         = 1 * time.Second, 3 * time.Second
)

// outageOpts are the outage measure's settings, from the flags.
type outageOpts struct {
	duration, ttl, lockTimeout time.Duration
	clients                    int
	seed                       uint64
	stallShare                 float64
	out                        string
}

// faultEvent is one fault of the schedule: client's link goes down at At (from the row's
// start) for For, blackholed or stalled.
type faultEvent struct {
	At, For time.Duration
	Client  int
	Stall   bool
}

// outageSchedule is the seeded fault schedule every row runs: one fault at a time, on a
// client drawn at random, stalls a share stallShare of them.
func outageSchedule(seed uint64, d time.Duration, clients int, stallShare float64) []faultEvent {
	rng := rand.New(rand.NewPCG(seed, 0))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var ev []faultEvent
	for t := between(outGapMin, outGapMax); t < d; {
		f := faultEvent{At: t, For: between(outFaultMin, outFaultMax), Client: rng.IntN(clients), Stall: rng.Float64() < stallShare}
		if t+f.For > d {
			f.For = d - t
		}
		ev = append(ev, f)
		t += f.For + between(outGapMin, outGapMax)
	}
	return ev
}

// outLease is a lock a client of a row holds: its fencing token (0: the library has none).
type outLease struct{ token int64 }

// outClient is one contender of a row, on its own link.
type outClient interface {
	// lock waits for the lock (ctx bounds it, unless the library takes no context).
	lock(ctx context.Context) (outLease, error)
	unlock(ctx context.Context) error
	close()
}

// outRow is one line of the table: how to open a client through a proxy at addr, the
// server's address, whether the library has sessions (whose losses are counted in the client's
// sessLog) and fencing tokens; inspect, for Simba, opens a backend straight to the server (not
// through a proxy) that tells which sessions it still has.
type outRow struct {
	group, name, target string
	sessions, tokens    bool
	open                func(ctx context.Context, addr, lockName string, sl *sessLog) (outClient, error)
	inspect             func(ctx context.Context) (spi.Backend, error)
}

// outRes is a row's result.
type outRes struct {
	Group, Name string
	// Grants are the Locks that returned the lock; Failed those that returned an error or
	// took longer than the Lock timeout (a library whose Lock takes no context: zk.Lock);
	// Stuck the Lock or Unlock calls still running when the row ended (past the timeout).
	Grants, Failed, Stuck int
	LastError             string `json:",omitempty"`
	// UnlockErrors are the releases that failed (the lock then lapses on the server).
	UnlockErrors int
	// WaitsMS are the granted Locks' waits; P50, P99, Max of them.
	WaitsMS       []float64 `json:"waits_ms"`
	P50, P99, Max float64
	// HealToGrantMS are, for the Locks during which the caller's own link healed, the time
	// from the last such heal to the grant; HealMax is their maximum.
	HealToGrantMS []float64 `json:"heal_to_grant_ms"`
	HealMax       float64
	// Overlaps: a client entered its section while another was inside (the harness's shared
	// in-memory check). Unfenced: overlaps where both clients' fenced writes (one on entry,
	// one on exit, refused when their token is below the highest seen) were all accepted, or,
	// for a library without tokens, every overlap.
	Overlaps, Unfenced int
	// Tokens: the library hands out fencing tokens. SessionsLost: its sessions that expired
	// (-1: the library has none).
	Tokens       bool
	SessionsLost int64
	// SessionsServerExpired, for Simba, are the sessions lost (SessionsLost: given up at the
	// client's local deadline) that the server had expired before the client got its next
	// call through (see sessLog); -1 for the peers, whose SessionsLost are their servers'.
	SessionsServerExpired int64
	// Faults is the schedule's faults applied during the row.
	Faults int
	// Error: the row could not be set up.
	Error string `json:",omitempty"`
}

// outageReport is outage.json.
type outageReport struct {
	Date, Machine, CPU, Go, Simba string
	CPUs                          int
	Peers                         map[string]string
	Seed                          uint64
	TTL, Duration, LockTimeout    string
	Clients                       int
	StallShare                    float64
	Schedule                      []faultEvent
	Rows                          []*outRes
	Skipped                       map[string]string
	Elapsed                       string
	Selected                      string `json:",omitempty"`
}

// openSimba opens Simba's backend for a DSN of the outage measure.
func openSimba(ctx context.Context, d string) (spi.Backend, error) {
	switch {
	case strings.HasPrefix(d, "redis"):
		return openSimbaRedis(d)
	case strings.HasPrefix(d, "zk"):
		return zookeeper.New(d)
	case strings.HasPrefix(d, "etcd"):
		return simbaetcd.New(d)
	default:
		return simbasql.Open(ctx, d, simbasql.WithAutoMigrate())
	}
}

// outageRows are the rows of the selected servers: Simba on each proxiable backend, then the
// peers, in groupOrder's order.
func outageRows(c conf, o outageOpts, sel selection, skipped map[string]string) []outRow {
	ttl := o.ttl
	simbaRow := func(group, target string, dsn func(addr string) string) outRow {
		return outRow{group: group, name: rowLock, target: target, sessions: true, tokens: true,
			open: func(ctx context.Context, addr, name string, sl *sessLog) (outClient, error) {
				b, err := openSimba(ctx, dsn(addr))
				if err != nil {
					return nil, err
				}
				cl, err := simba.New(b, simba.WithTTL(ttl), simba.WithLogger(quiet), simba.WithListener(func(e simba.Event) {
					if e.Kind == simba.EventSessionExpired {
						sl.sessionLost(string(e.Session))
					}
				}), simba.WithCallObserver(sl.called))
				if err != nil {
					_ = b.Close()
					return nil, err
				}
				return &simbaOut{c: cl, b: b, name: name}, nil
			},
			inspect: func(ctx context.Context) (spi.Backend, error) { return openSimba(ctx, dsn(target)) }}
	}
	var rows []outRow
	add := func(r outRow) {
		if sel.group(r.group) {
			rows = append(rows, r)
		}
	}
	etcdTarget := strings.TrimPrefix(c.etcdURL, "http://")
	add(simbaRow("Redis", redisAddr, func(a string) string { return "redis://" + a }))
	add(simbaRow("PostgreSQL", "127.0.0.1:5432", func(a string) string { return "postgres://postgres@" + a + "/test?sslmode=disable" }))
	add(simbaRow("MariaDB", "127.0.0.1:3306", func(a string) string { return "mysql://root@" + a + "/test" }))
	add(simbaRow("ZooKeeper", zkAddr, func(a string) string {
		if c.zkTick > 0 {
			return "zk://" + a + "?tickTime=" + c.zkTick.String()
		}
		return "zk://" + a
	}))
	if etcdTarget != "" {
		add(simbaRow(groupEtc, etcdTarget, func(a string) string { return "etcd://" + a + "/simba-bench" }))
	}
	if sel.group("SQLite") {
		skipped["SQLite"] = "no link to cut: SQLite is a file on this machine, not a server behind a TCP connection"
	}
	if sel.group("Redis Cluster") {
		skipped["Redis Cluster"] = "not behind one proxy per client: the cluster's nodes announce their own addresses (MOVED, CLUSTER SLOTS), so a client dials past a proxy in front of the node it was given"
	}
	add(outRow{group: "Redis", name: "redislock (retry every 100 ms, its README's backoff)", target: redisAddr,
		open: func(_ context.Context, addr, name string, _ *sessLog) (outClient, error) {
			cl := goredis.NewClient(&goredis.Options{Addr: addr})
			return &redislockOut{cl: cl, lk: redislock.New(cl), name: name, ttl: ttl}, nil
		}})
	add(outRow{group: "Redis", name: "redsync (default retry delay, 1000 tries)", target: redisAddr,
		open: func(_ context.Context, addr, name string, _ *sessLog) (outClient, error) {
			cl := goredis.NewClient(&goredis.Options{Addr: addr})
			mu := redsync.New(redsyncgoredis.NewPool(cl)).NewMutex(name, redsync.WithExpiry(ttl), redsync.WithTries(1000))
			return &redsyncOut{cl: cl, mu: mu}, nil
		}})
	add(outRow{group: "PostgreSQL", name: rowPG, target: "127.0.0.1:5432",
		open: func(_ context.Context, addr, name string, _ *sessLog) (outClient, error) {
			db, err := sql.Open("postgres", "postgres://postgres@"+addr+"/test?sslmode=disable")
			if err != nil {
				return nil, err
			}
			pc, err := pglock.New(db, pglock.WithLeaseDuration(ttl), pglock.WithHeartbeatFrequency(ttl/3), pglock.WithCustomTable("simba_bench_pglock"))
			if err != nil {
				_ = db.Close()
				return nil, err
			}
			_ = pc.TryCreateTable()
			return &pglockOut{db: db, pc: pc, name: name}, nil
		}})
	add(outRow{group: "ZooKeeper", name: rowZK, target: zkAddr, sessions: true,
		open: func(_ context.Context, addr, name string, sl *sessLog) (outClient, error) {
			conn, ev, err := zk.Connect([]string{addr}, ttl, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
			if err != nil {
				return nil, err
			}
			go func() {
				for e := range ev {
					if e.State == zk.StateExpired {
						sl.lost.Add(1)
					}
				}
			}()
			return &zkOut{conn: conn, path: "/simba-bench/" + name}, nil
		}})
	if etcdTarget != "" {
		add(outRow{group: groupEtc, name: "etcd `concurrency.Mutex` (gRPC keep-alive 10 s / 2 s, as Simba's etcd backend)", target: etcdTarget, sessions: true, tokens: true,
			open: func(ctx context.Context, addr, name string, sl *sessLog) (outClient, error) {
				cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop()})
				if err != nil {
					return nil, err
				}
				e := &etcdOut{cli: cli, key: "/simba-bench/" + name, ttl: int(max(ttl/time.Second, 1)), lost: &sl.lost}
				e.ctx, e.cancel = context.WithCancel(context.Background())
				if err := e.session(); err != nil {
					e.close()
					return nil, err
				}
				return e, nil
			}})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		return rank(rows[i].group, rows[i].name, false) < rank(rows[j].group, rows[j].name, false)
	})
	return rows
}

type simbaOut struct {
	c    *simba.Client
	b    spi.Backend
	h    *simba.Held
	name string
}

func (s *simbaOut) lock(ctx context.Context) (outLease, error) {
	h, err := s.c.Lock(ctx, s.name)
	if err != nil {
		return outLease{}, err
	}
	s.h = h
	return outLease{token: h.Token()}, nil
}

func (s *simbaOut) unlock(ctx context.Context) error { return s.h.Unlock(ctx) }

func (s *simbaOut) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.c.Close(ctx)
	_ = s.b.Close()
}

type redislockOut struct {
	cl   *goredis.Client
	lk   *redislock.Client
	l    *redislock.Lock
	name string
	ttl  time.Duration
}

func (r *redislockOut) lock(ctx context.Context) (outLease, error) {
	l, err := r.lk.Obtain(ctx, r.name, r.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})
	r.l = l
	return outLease{}, err
}

func (r *redislockOut) unlock(ctx context.Context) error { return r.l.Release(ctx) }
func (r *redislockOut) close()                           { _ = r.cl.Close() }

type redsyncOut struct {
	cl *goredis.Client
	mu *redsync.Mutex
}

func (r *redsyncOut) lock(ctx context.Context) (outLease, error) {
	return outLease{}, r.mu.LockContext(ctx)
}

func (r *redsyncOut) unlock(ctx context.Context) error {
	_, err := r.mu.UnlockContext(ctx)
	return err
}

func (r *redsyncOut) close() { _ = r.cl.Close() }

type pglockOut struct {
	db   *sql.DB
	pc   *pglock.Client
	l    *pglock.Lock
	name string
}

func (p *pglockOut) lock(ctx context.Context) (outLease, error) {
	l, err := p.pc.AcquireContext(ctx, p.name)
	p.l = l
	return outLease{}, err
}

func (p *pglockOut) unlock(ctx context.Context) error { return p.pc.ReleaseContext(ctx, p.l) }

// close does not wait for database/sql's Close, which waits for the queries running: the
// proxy's close has ended them by then, or will.
func (p *pglockOut) close() { go func() { _ = p.db.Close() }() }

type zkOut struct {
	conn *zk.Conn
	path string
	l    *zk.Lock
}

// lock ignores ctx: zk.Lock takes none.
func (z *zkOut) lock(context.Context) (outLease, error) {
	z.l = zk.NewLock(z.conn, z.path, zk.WorldACL(zk.PermAll))
	return outLease{}, z.l.Lock()
}

func (z *zkOut) unlock(context.Context) error { return z.l.Unlock() }
func (z *zkOut) close()                       { z.conn.Close() }

type etcdOut struct {
	cli  *clientv3.Client
	s    *concurrency.Session
	mu   *concurrency.Mutex
	key  string
	ttl  int
	lost *atomic.Int64
	// ctx is the client's, for its sessions; cancel ends it at close.
	ctx    context.Context
	cancel context.CancelFunc
}

// session opens a new session on the client's own context (its grant waits as long as the
// client's gRPC connection does: concurrency.NewSession takes no other).
func (e *etcdOut) session() error {
	s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(e.ttl), concurrency.WithContext(e.ctx))
	if err != nil {
		return err
	}
	e.s = s
	return nil
}

// lock opens a new session first when the last one is gone (its lease expired or its
// keep-alive stopped), as a user of the package must.
func (e *etcdOut) lock(ctx context.Context) (outLease, error) {
	if e.s == nil {
		if err := e.session(); err != nil {
			return outLease{}, fmt.Errorf("new session: %w", err)
		}
	}
	select {
	case <-e.s.Done():
		e.lost.Add(1)
		e.s = nil
		if err := e.session(); err != nil {
			return outLease{}, fmt.Errorf("new session: %w", err)
		}
	default:
	}
	e.mu = concurrency.NewMutex(e.s, e.key)
	if err := e.mu.Lock(ctx); err != nil {
		return outLease{}, err
	}
	return outLease{token: e.mu.Header().Revision}, nil
}

func (e *etcdOut) unlock(ctx context.Context) error { return e.mu.Unlock(ctx) }

func (e *etcdOut) close() {
	e.cancel()
	if e.s != nil {
		_ = e.s.Close()
	}
	_ = e.cli.Close()
}

// outSection is one client's stay inside the section: its token and whether its fenced
// writes were all accepted.
type outSection struct {
	token    int64
	accepted bool
}

// outShared is a row's shared in-memory resource: who is inside, the fence's highest token,
// and the overlaps seen.
type outShared struct {
	mu       sync.Mutex
	inside   map[*outSection]bool
	maxToken int64
	pairs    [][2]*outSection
}

// write is a fenced write of s: refused when s's token is below the highest seen (a library
// without tokens writes unfenced).
func (r *outShared) write(s *outSection) {
	if s.token == 0 {
		return
	}
	if s.token < r.maxToken {
		s.accepted = false
		return
	}
	r.maxToken = s.token
}

func (r *outShared) enter(s *outSection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for o := range r.inside {
		r.pairs = append(r.pairs, [2]*outSection{o, s})
	}
	r.inside[s] = true
	r.write(s)
}

func (r *outShared) exit(s *outSection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.write(s)
	delete(r.inside, s)
}

// runOutageRow runs one row: opens its clients through their proxies, runs the schedule and
// the clients' loops for o.duration, and tallies.
func runOutageRow(ctx context.Context, row outRow, o outageOpts, sched []faultEvent, lockName string) *outRes {
	res := &outRes{Group: row.group, Name: row.name, Tokens: row.tokens, SessionsLost: -1, SessionsServerExpired: -1}
	logs := make([]*sessLog, o.clients)
	for i := range logs {
		logs[i] = &sessLog{}
	}
	var checker *sessChecker
	if row.inspect != nil {
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		b, err := row.inspect(ictx)
		cancel()
		if err != nil {
			res.Error = err.Error()
			return res
		}
		defer b.Close()
		in, ok := b.(spi.Inspector)
		if !ok {
			res.Error = "the backend cannot list its sessions (spi.Inspector)"
			return res
		}
		checker = &sessChecker{in: in, logs: logs}
	}
	proxies := make([]*linkProxy, o.clients)
	clients := make([]outClient, o.clients)
	cleanup := func() {
		for _, p := range proxies {
			if p != nil {
				p.close()
			}
		}
		for _, c := range clients {
			if c != nil {
				c.close()
			}
		}
	}
	for i := range proxies {
		p, err := newLinkProxy(row.target)
		if err != nil {
			res.Error = err.Error()
			cleanup()
			return res
		}
		proxies[i] = p
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := row.open(octx, p.addr(), lockName, logs[i])
		cancel()
		if err != nil {
			res.Error = err.Error()
			cleanup()
			return res
		}
		clients[i] = c
	}
	shared := &outShared{inside: map[*outSection]bool{}}
	var mu sync.Mutex // guards res's tallies
	start := time.Now()
	end := start.Add(o.duration)
	rctx, stop := context.WithDeadline(ctx, end)
	defer stop()
	// The schedule.
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		for _, f := range sched {
			if !sleepUntil(rctx, start.Add(f.At)) {
				return
			}
			st := linkBlackhole
			if f.Stall {
				st = linkStall
			}
			proxies[f.Client].set(st)
			mu.Lock()
			res.Faults++
			mu.Unlock()
			ok := sleepUntil(rctx, start.Add(f.At+f.For))
			proxies[f.Client].set(linkUp)
			if !ok {
				return
			}
		}
	}()
	if checker != nil {
		go checker.run(rctx)
	}
	// The clients.
	var running sync.WaitGroup
	busySince := make([]atomic.Int64, o.clients) // unix ns a call began, 0 between calls
	for i, c := range clients {
		running.Add(1)
		go func() {
			defer running.Done()
			rng := rand.New(rand.NewPCG(o.seed, uint64(1+i)))
			for rctx.Err() == nil {
				// The call's context ends at its timeout, or at the row's end: a call that
				// returns after the row's end is not counted (unless it ran past its timeout,
				// which a library that ignores the context may do).
				lctx, cancel := context.WithTimeout(context.Background(), o.lockTimeout)
				stopCut := context.AfterFunc(rctx, cancel)
				t0 := time.Now()
				busySince[i].Store(t0.UnixNano())
				l, err := c.lock(lctx)
				got := time.Now()
				busySince[i].Store(0)
				stopCut()
				cancel()
				took := got.Sub(t0)
				if err != nil || took > o.lockTimeout {
					if rctx.Err() != nil && took <= o.lockTimeout {
						if err == nil {
							_ = c.unlock(context.Background())
						}
						return // cut by the row's end: not a failure
					}
					mu.Lock()
					res.Failed++
					switch {
					case took > o.lockTimeout:
						res.LastError = fmt.Sprintf("Lock returned after %v, past its %v context (%v)", took.Round(time.Millisecond), o.lockTimeout, err)
					default:
						res.LastError = err.Error()
					}
					mu.Unlock()
					if err != nil {
						// An error that came back at once must not spin.
						sleepUntil(rctx, t0.Add(100*time.Millisecond))
						continue
					}
					if rctx.Err() != nil {
						_ = c.unlock(context.Background())
						return
					}
				}
				mu.Lock()
				res.Grants++
				res.WaitsMS = append(res.WaitsMS, msOf(took))
				if h, ok := proxies[i].healedIn(t0, got); ok {
					res.HealToGrantMS = append(res.HealToGrantMS, msOf(got.Sub(h)))
				}
				mu.Unlock()
				s := &outSection{token: l.token, accepted: true}
				shared.enter(s)
				time.Sleep(outSectionMin + time.Duration(rng.Int64N(int64(outSectionMax-outSectionMin)+1)))
				shared.exit(s)
				uctx, ucancel := context.WithTimeout(context.Background(), o.lockTimeout)
				busySince[i].Store(time.Now().UnixNano())
				err = c.unlock(uctx)
				busySince[i].Store(0)
				ucancel()
				if err != nil {
					mu.Lock()
					res.UnlockErrors++
					mu.Unlock()
				}
			}
		}()
	}
	<-rctx.Done()
	<-schedDone
	// Heal every link and let the calls running end; then cut the links (a client stuck on a
	// silenced connection gets an error) and close the clients.
	for _, p := range proxies {
		p.set(linkUp)
	}
	finished := make(chan struct{})
	go func() { running.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(o.lockTimeout + 2*time.Second):
		now := time.Now()
		for i := range busySince {
			if b := busySince[i].Load(); b != 0 && now.Sub(time.Unix(0, b)) > o.lockTimeout {
				res.Stuck++
			}
		}
	}
	cleanup()
	select {
	case <-finished:
	case <-time.After(15 * time.Second):
		if res.LastError == "" {
			res.LastError = "clients still running 15 s after their close"
		}
	}
	if row.sessions {
		res.SessionsLost = 0
		for _, l := range logs {
			res.SessionsLost += l.lost.Load()
		}
	}
	if checker != nil {
		// The sessions given up last may outlive the row at the server by their TTL (etcd's
		// minimum at most).
		res.SessionsServerExpired = checker.settle(ctx, 2*max(o.ttl, 2*time.Second))
	}
	shared.mu.Lock()
	res.Overlaps = len(shared.pairs)
	for _, p := range shared.pairs {
		if p[0].accepted && p[1].accepted {
			res.Unfenced++
		}
	}
	shared.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	res.P50, res.P99, res.Max = pct(res.WaitsMS, 50), pct(res.WaitsMS, 99), pct(res.WaitsMS, 100)
	res.HealMax = pct(res.HealToGrantMS, 100)
	return res
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sleepUntil sleeps until t or ctx's end; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// runOutage runs the outage measure over the selected servers and writes outage.md and
// outage.json under o.out.
func runOutage(o outageOpts, sel selection, zkTick time.Duration, noEtcd bool) error {
	if o.clients < 2 {
		return fmt.Errorf("-outage-clients %d: at least 2", o.clients)
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	goredis.SetLogger(quietRedis{})
	fmt.Fprintf(os.Stderr, "outage: seed %d (-outage-seed %d reproduces the schedule and the sections)\n", o.seed, o.seed)
	start := time.Now()
	dir, err := os.MkdirTemp("", "simba-benchoutage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c := conf{ttl: o.ttl, dir: dir, run: fmt.Sprintf("%x", time.Now().Unix()%1e6), zkTick: zkTick}
	rep := &outageReport{Skipped: map[string]string{}, Seed: o.seed, TTL: o.ttl.String(), Duration: o.duration.String(),
		LockTimeout: o.lockTimeout.String(), Clients: o.clients, StallShare: o.stallShare, Selected: sel.describe()}
	switch {
	case !sel.group(groupEtc):
	case noEtcd:
		rep.Skipped[groupEtc] = "left out (-no-etcd)"
	default:
		url, stopEtcd, err := spawnEtcd(dir)
		if err != nil {
			rep.Skipped[groupEtc] = "embedded etcd did not start: " + err.Error()
			break
		}
		defer stopEtcd()
		c.etcdURL = url
	}
	rep.Schedule = outageSchedule(o.seed, o.duration, o.clients, o.stallShare)
	rows := outageRows(c, o, sel, rep.Skipped)
	for i, r := range rows {
		fmt.Fprintf(os.Stderr, "outage %d/%d: %s / %s (%v elapsed)\n", i+1, len(rows), r.group, plain(r.name), time.Since(start).Round(time.Second))
		res := runOutageRow(context.Background(), r, o, rep.Schedule, fmt.Sprintf("bench-%s-outage-%d", c.run, i))
		rep.Rows = append(rep.Rows, res)
	}
	rep.Elapsed = time.Since(start).Round(time.Second).String()
	var d report
	describe(&d)
	rep.Date, rep.Machine, rep.CPU, rep.Go, rep.Simba, rep.CPUs, rep.Peers = d.Date, d.Machine, d.CPU, d.Go, d.Simba, d.CPUs, d.Peers
	md := outageMarkdown(rep)
	fmt.Print(md)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "outage.md"), []byte(md), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, "outage.json"), append(js, '\n'), 0o644)
}

// secs formats milliseconds: below a second in ms, above it in seconds with one decimal
// ("–" for none).
func secs(ms float64) string {
	switch {
	case ms == 0:
		return "–"
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f s", ms/1000)
}

// quietRedis drops go-redis's own log lines (its pool's dial failures through a link that is
// down, or closed at the row's end), which would fill the terminal.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// scheduleNote sums the schedule up: its faults, their shortest and longest, and the links'
// time down in all.
func scheduleNote(ev []faultEvent, clients int) string {
	if len(ev) == 0 {
		return "no faults"
	}
	lo, hi, sum := ev[0].For, ev[0].For, time.Duration(0)
	per := map[int]int{}
	for _, f := range ev {
		lo, hi, sum = min(lo, f.For), max(hi, f.For), sum+f.For
		per[f.Client]++
	}
	var counts []string
	for i := range clients {
		counts = append(counts, fmt.Sprint(per[i]))
	}
	return fmt.Sprintf("%d faults of %.1f–%.1f s, %.1f s down in all; by client %s", len(ev), lo.Seconds(), hi.Seconds(), sum.Seconds(), strings.Join(counts, ", "))
}

// outageMarkdown renders the outage report.
func outageMarkdown(r *outageReport) string {
	var b strings.Builder
	b.WriteString("# Locks under link outages, beside the peers\n\n")
	fmt.Fprintf(&b, "Run %s on %s, %d CPUs (%s); %s; Simba %s; seed %d; TTL %s; %d clients; %s per row; %s in all.  \n", r.Date, r.Machine, r.CPUs, r.CPU, r.Go, r.Simba, r.Seed, r.TTL, r.Clients, r.Duration, r.Elapsed)
	var peers []string
	for k, v := range r.Peers {
		peers = append(peers, k+" "+v)
	}
	sort.Strings(peers)
	fmt.Fprintf(&b, "Peers: %s.  \n", strings.Join(peers, ", "))
	fmt.Fprintf(&b, "Reproduce: `go -C bench run ./cmd/benchpeers -measures outage -outage-seed %d -outage-duration %s -outage-ttl %s -outage-clients %d -outage-stalls %g` (`make bench-outage` runs it with a new seed).", r.Seed, r.Duration, r.TTL, r.Clients, r.StallShare)
	if r.Selected != "" {
		fmt.Fprintf(&b, " **A partial run.** Selected: %s.", r.Selected)
	}
	b.WriteString("\n\n")
	stalls := ""
	if r.StallShare > 0 {
		stalls = fmt.Sprintf(" (a share %g of them stalls instead: the link's bytes held back both ways and delivered at the heal)", r.StallShare)
	}
	fmt.Fprintf(&b, "%d clients of one library contend for one lock, each through its own TCP fault proxy (bench/cmd/benchpeers/proxy.go: the library's internal/faultproxy is internal to its module), each looping: `Lock` (bounded by a %s context), a section of 50–300 ms, `Unlock`. Meanwhile one client's link at a time is blackholed for 0.3–3 s, every 1–3 s after the last heal%s: the connections open then are silenced for good (their bytes lost both ways, no reset: a failover or a NAT that forgot the flow), and new ones are taken and never answered until the heal. Every row runs the same seeded schedule (%s) and the same seeded section lengths, one row after the other, with only its own clients open. Simba's clients are made with `WithTTL(%s)` and nothing else that changes what they do (a listener counts their session expiries); every peer with the TTL as its lease or session time, used as its README shows, with the retry settings its row names.\n\n",
		r.Clients, r.LockTimeout, stalls, scheduleNote(r.Schedule, r.Clients), r.TTL)
	fmt.Fprintf(&b, "**Lock wait**: from the call to the grant, of the granted calls. **Heal → grant**: for the `Lock` calls during which the caller's own link healed, the longest time from that heal to the grant. **Failed**: `Lock` calls that returned an error, or (zk.Lock, which takes no context) returned after the %s timeout. **Overlaps**: a client entered the section while another was inside, by the harness's shared in-memory check; **through the fence**: of those, the ones where both clients' fenced writes (one on entry, one on exit, to an in-memory resource refusing a token below the highest it saw: Simba's `Held.Token()`, etcd's `Mutex.Header().Revision`) were all accepted; a library without a token writes unfenced, so every overlap goes through. **Sessions lost**: Simba's `EventSessionExpired`, go-zookeeper's `StateExpired`, etcd's session `Done()` (a new session is opened for the next `Lock`); \"–\" for a library without sessions. These are not the same thing: Simba's client gives a session up at its local deadline, a safety margin before the server's expiry, and renews it no more, where go-zookeeper's and etcd's report an expiry their server decided. So for Simba, **(server N)** counts the sessions given up that the server had also expired before their client got its next call through (a client renewing to the last could not have kept them either): a check straight at the server, not through the proxy, every %s while a lost session is still listed, no longer listed the session before that call returned (to within a check). **Stuck**: calls still running at the row's end, past the timeout, after the links healed (they end when the harness closes the proxies). etcd grants leases of at least its minimum TTL (2 s here), whatever is asked.\n\n", r.LockTimeout, sessCheckEvery)
	b.WriteString("| server | library | grants | failed | Lock wait p50 / p99 / max | heal → grant (max) | overlaps (through the fence) | sessions lost | unlock errors | stuck | note |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.Rows {
		if x.Error != "" {
			fmt.Fprintf(&b, "| %s | %s | – | – | – | – | – | – | – | – | not set up: %s |\n", x.Group, x.Name, strings.ReplaceAll(x.Error, "|", "/"))
			continue
		}
		lost := "–"
		if x.SessionsLost >= 0 {
			lost = fmt.Sprint(x.SessionsLost)
		}
		if x.SessionsServerExpired >= 0 {
			lost += fmt.Sprintf(" (server %d)", x.SessionsServerExpired)
		}
		note := ""
		if x.LastError != "" {
			l := x.LastError
			if len(l) > 120 {
				l = l[:120] + "…"
			}
			note = "last error: " + strings.ReplaceAll(l, "|", "/")
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s / %s / %s | %s | %d (%d) | %s | %d | %d | %s |\n",
			x.Group, x.Name, x.Grants, x.Failed, secs(x.P50), secs(x.P99), secs(x.Max), secs(x.HealMax), x.Overlaps, x.Unfenced, lost, x.UnlockErrors, x.Stuck, note)
	}
	writeSkipped(&b, r.Skipped)
	return b.String()
}

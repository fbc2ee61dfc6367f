package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"cirello.io/pglock"
	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	_ "github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/lib/pq"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	_ "modernc.org/sqlite"

	simbaetcd "github.com/simba-go/simba/backend/etcd"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/spi"
)

const (
	redisAddr = "127.0.0.1:6379"
	pgDSN     = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	myDSN     = "mysql://root@127.0.0.1:3306/test"
	myRawDSN  = "root@tcp(127.0.0.1:3306)/test?interpolateParams=true"
	zkAddr    = "127.0.0.1:2181"
)

// conf is what the parent and its holder processes share (the holders get it by environment).
type conf struct {
	ttl     time.Duration
	dir     string // temporary directory: the SQLite file
	etcdURL string // client URL of the embedded etcd; empty when etcd is left out
	run     string // this run's id, in every lock name
	// zkTick is the ZooKeeper server's tickTime, which Simba's ZooKeeper DSN passes on (its
	// sessions ask for the TTL less one tick; 0: left out).
	zkTick time.Duration
}

func (c conf) env() []string {
	return []string{"BENCH_TTL=" + c.ttl.String(), "BENCH_DIR=" + c.dir, "BENCH_ETCD=" + c.etcdURL, "BENCH_RUN=" + c.run, "BENCH_ZK_TICK=" + c.zkTick.String()}
}

func confFromEnv() (conf, error) {
	ttl, err := time.ParseDuration(os.Getenv("BENCH_TTL"))
	if err != nil {
		return conf{}, err
	}
	tick, err := time.ParseDuration(os.Getenv("BENCH_ZK_TICK"))
	if err != nil {
		return conf{}, err
	}
	return conf{ttl: ttl, dir: os.Getenv("BENCH_DIR"), etcdURL: os.Getenv("BENCH_ETCD"), run: os.Getenv("BENCH_RUN"), zkTick: tick}, nil
}

// zkDSN is Simba's ZooKeeper DSN, with the server's tickTime when known.
func (c conf) zkDSN() string {
	if c.zkTick > 0 {
		return "zk://" + zkAddr + "?tickTime=" + c.zkTick.String()
	}
	return "zk://" + zkAddr
}

func (c conf) sqliteDSN() string { return "sqlite://" + filepath.Join(c.dir, "simba.db") }

// simbaBackend is a Simba backend measured: its group title, its holder processes' role and
// how to open it.
type simbaBackend struct {
	group, role string
	open        opener
}

// simbaBackends are the Simba backends measured, in groupOrder's order.
func (c conf) simbaBackends() []simbaBackend {
	out := []simbaBackend{
		{"Redis", "simba-redis", func(context.Context) (spi.Backend, error) {
			return openSimbaRedis("redis://" + redisAddr)
		}},
		{"Redis Cluster", "simba-redis-cluster", func(context.Context) (spi.Backend, error) {
			return openSimbaRedis("redis+cluster://" + clusterAddrs)
		}},
		{"PostgreSQL", "simba-pg", func(ctx context.Context) (spi.Backend, error) {
			return simbasql.Open(ctx, pgDSN, simbasql.WithAutoMigrate())
		}},
		{"MariaDB", "simba-mariadb", func(ctx context.Context) (spi.Backend, error) {
			return simbasql.Open(ctx, myDSN, simbasql.WithAutoMigrate())
		}},
		{"SQLite", "simba-sqlite", func(ctx context.Context) (spi.Backend, error) {
			return simbasql.Open(ctx, c.sqliteDSN(), simbasql.WithAutoMigrate())
		}},
		{"ZooKeeper", "simba-zk", func(context.Context) (spi.Backend, error) { return zookeeper.New(c.zkDSN()) }},
	}
	if c.etcdURL != "" {
		dsn := "etcd://" + strings.TrimPrefix(c.etcdURL, "http://") + "/simba-bench"
		out = append(out, simbaBackend{"etcd (embedded)", "simba-etcd", func(context.Context) (spi.Backend, error) { return simbaetcd.New(dsn) }})
	}
	return out
}

// openerOf is the opener of the Simba backend whose helper processes play role (nil: none).
func (c conf) openerOf(role string) opener {
	for _, sb := range c.simbaBackends() {
		if sb.role == role {
			return sb.open
		}
	}
	return nil
}

// roles are the holder processes' parts, by name.
func (c conf) roles() map[string]holdRole {
	m := map[string]holdRole{}
	for _, sb := range c.simbaBackends() {
		o := sb.open
		m[sb.role] = func(ctx context.Context, name string) error { return simbaHold(ctx, o, c.ttl, name) }
	}
	m["redislock"] = func(ctx context.Context, name string) error {
		l, err := redislock.New(goredis.NewClient(&goredis.Options{Addr: redisAddr})).Obtain(ctx, name, c.ttl, nil)
		if err != nil {
			return err
		}
		go func() {
			for range time.Tick(c.ttl / 3) {
				_ = l.Refresh(context.Background(), c.ttl, nil)
			}
		}()
		return nil
	}
	m["redsync"] = func(ctx context.Context, name string) error {
		rs := redsync.New(redsyncgoredis.NewPool(goredis.NewClient(&goredis.Options{Addr: redisAddr})))
		mu := rs.NewMutex(name, redsync.WithExpiry(c.ttl), redsync.WithTries(1))
		if err := mu.LockContext(ctx); err != nil {
			return err
		}
		go func() {
			for range time.Tick(c.ttl / 3) {
				_, _ = mu.Extend()
			}
		}()
		return nil
	}
	m["pglock"] = func(ctx context.Context, name string) error {
		pc, err := newPglock(c.ttl)
		if err != nil {
			return err
		}
		_, err = pc.AcquireContext(ctx, name)
		return err
	}
	m["zk"] = func(ctx context.Context, name string) error {
		conn, err := zkConnect(c.ttl)
		if err != nil {
			return err
		}
		return zk.NewLock(conn, "/simba-bench/"+name, zk.WorldACL(zk.PermAll)).Lock()
	}
	m["etcd-mutex"] = func(ctx context.Context, name string) error {
		cli, _, err := etcdClient(c.etcdURL)
		if err != nil {
			return err
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(c.ttl/time.Second)))
		if err != nil {
			return err
		}
		return concurrency.NewMutex(s, "/simba-bench/"+name).Lock(ctx)
	}
	return m
}

// countHook counts the commands a go-redis client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *countHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func newPglock(ttl time.Duration) (*pglock.Client, error) {
	db, err := sql.Open("postgres", pgDSN)
	if err != nil {
		return nil, err
	}
	pc, err := pglock.New(db, pglock.WithLeaseDuration(ttl), pglock.WithHeartbeatFrequency(ttl/3), pglock.WithCustomTable("simba_bench_pglock"))
	if err != nil {
		return nil, err
	}
	_ = pc.TryCreateTable()
	return pc, nil
}

func zkConnect(ttl time.Duration) (*zk.Conn, error) {
	conn, _, err := zk.Connect([]string{zkAddr}, ttl, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	return conn, err
}

// quiet drops the Redis backend's notice (appendonly off on this test server), which every
// client would log again.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// etcdClient connects to the embedded etcd with a counter of its unary calls.
func etcdClient(url string) (*clientv3.Client, *atomic.Int64, error) {
	if url == "" {
		return nil, nil, errors.New("etcd is not running")
	}
	n := new(atomic.Int64)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{url},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		})},
	})
	return cli, n, err
}

// funcSide adapts two functions to a side.
type funcSide struct{ acq, rel func(context.Context) error }

func (s funcSide) acquire(ctx context.Context) error { return s.acq(ctx) }
func (s funcSide) release(ctx context.Context) error { return s.rel(ctx) }

// setup builds every row of every table. What cannot be set up is returned in skipped, with
// the reason, and left out.
// Only the servers sel selects are set up, and Simba's clients only for the measures it
// selects (the caller drops the other rows).
func setup(ctx context.Context, c conf, sel selection, r *resources) (cy []cycleRow, hand []handRow, fail []failRow, skipped map[string]string) {
	skipped = map[string]string{}
	name := func(s string) string { return "bench-" + c.run + "-" + s }
	try := func(group, what string, f func() error) {
		if err := f(); err != nil {
			skipped[group+" / "+what] = err.Error()
		}
	}
	// Simba on each backend.
	for _, sb := range c.simbaBackends() {
		sb := sb
		g := sb.group
		if !sel.group(g) {
			continue
		}
		if sel.measure(mCycle) {
			try(g, "Simba backend (SPI)", func() error {
				o, last := lastOpened(sb.open)
				prep, op, err := spiCycle(ctx, o, c.ttl, name("spi"), r)
				if err == nil {
					cy = append(cy, cycleRow{group: g, name: "Simba backend (SPI)", prep: prep, op: op, cmds: redisCmds(last)})
				}
				return err
			})
		}
		try(g, "Simba Lock", func() error {
			if sel.measure(mCycle) {
				o, last := lastOpened(sb.open)
				op, err := lockCycle(ctx, o, c.ttl, name("lock"), r)
				if err != nil {
					return err
				}
				cy = append(cy, cycleRow{group: g, name: "**Simba `Lock`**", op: op, cmds: redisCmds(last)})
			}
			if sel.measure(mHandover) {
				a, b, err := simbaLockPair(ctx, sb.open, c.ttl, name("hand"), r)
				if err != nil {
					return err
				}
				hand = append(hand, pairRow(g, "**Simba `Lock`**", [2]side{a, b}))
				xp, err := newXProcRow(ctx, c, sb, name("xhand"), r)
				if err != nil {
					return err
				}
				hand = append(hand, xp)
				for _, sd := range []bool{false, true} {
					ep, err := newElectionPair(ctx, sb.open, c.ttl, name(fmt.Sprintf("elect-%v", sd)), sd, r)
					if err != nil {
						return err
					}
					n := "Simba Election `Stop`"
					if sd {
						n = "Simba Election `StepDown`"
					}
					hand = append(hand, handRow{group: g, name: n, sample: ep.sample})
				}
			}
			fail = append(fail, failRow{group: g, name: "**Simba `Lock`**", holder: sb.role, wait: func(ctx context.Context, n string) (*waiter, error) {
				return simbaWaiter(ctx, sb.open, c.ttl, n)
			}})
			return nil
		})
	}
	// The peers and baselines; their rows of the measures sel leaves out are dropped by the
	// caller.
	peer := func(group string, f func() error) {
		if sel.group(group) {
			try(group, "baseline", f)
		}
	}
	peer("Redis", func() error { return setupRedis(ctx, c, r, name, &cy, &hand, &fail) })
	peer("Redis Cluster", func() error { return setupRedisCluster(ctx, r, name, &cy) })
	peer("PostgreSQL", func() error { return setupPG(ctx, c, r, name, &cy, &hand, &fail) })
	peer("MariaDB", func() error {
		db, err := sql.Open("mysql", myRawDSN)
		if err != nil {
			return err
		}
		r.add(func() { _ = db.Close() })
		op, err := sqlUpdate(ctx, db, "")
		if err == nil {
			cy = append(cy, cycleRow{group: "MariaDB", name: "baseline: one-row UPDATE", baseline: true, op: op})
		}
		return err
	})
	peer("SQLite", func() error {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(c.dir, "simba.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
		if err != nil {
			return err
		}
		r.add(func() { _ = db.Close() })
		op, err := sqlUpdate(ctx, db, "")
		if err == nil {
			cy = append(cy, cycleRow{group: "SQLite", name: "baseline: one-row UPDATE", baseline: true, op: op})
		}
		return err
	})
	peer("ZooKeeper", func() error { return setupZK(ctx, c, r, name, &cy, &hand, &fail) })
	if c.etcdURL != "" && sel.group(groupEtc) {
		try("etcd (embedded)", "all", func() error { return setupEtcd(ctx, c, r, name, &cy, &hand, &fail) })
	}
	// Each server's cycle baseline, one op at a time, beside its hand-overs: the write a
	// hand-over's release and grant each are, so its p99 is the host's and the server's floor.
	for _, b := range cy {
		if b.baseline {
			hand = append(hand, floorRow(b))
		}
	}
	return cy, hand, fail, skipped
}

// sqlUpdate makes the baseline table and returns the one-row UPDATE.
func sqlUpdate(ctx context.Context, db *sql.DB, _ string) (func(context.Context) error, error) {
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS simba_bench_baseline (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)"); err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM simba_bench_baseline"); err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO simba_bench_baseline (id, n) VALUES (1, 0)"); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := db.ExecContext(ctx, "UPDATE simba_bench_baseline SET n = n + 1 WHERE id = 1")
		return err
	}, nil
}

func setupRedis(ctx context.Context, c conf, r *resources, name func(string) string, cy *[]cycleRow, hand *[]handRow, fail *[]failRow) error {
	rc := goredis.NewClient(&goredis.Options{Addr: redisAddr})
	r.add(func() { _ = rc.Close() })
	ch := new(countHook)
	rc.AddHook(ch)
	cmds := ch.n.Load
	trivial := &script{src: "return 1"}
	if err := trivial.load(ctx, rc); err != nil {
		return err
	}
	*cy = append(*cy, cycleRow{group: "Redis", name: "baseline: EVALSHA of a trivial script", baseline: true, cmds: cmds, op: func(ctx context.Context) error {
		return trivial.run(ctx, rc, nil)
	}})
	obtain, release := &script{src: redislockObtain}, &script{src: redislockRelease}
	if err := obtain.load(ctx, rc); err != nil {
		return err
	}
	if err := release.load(ctx, rc); err != nil {
		return err
	}
	shapedKey := []string{name("redislock-shaped")}
	const token = "0123456789abcdefghijkl" // redislock's 22-character random token
	ttlMS := strconv.FormatInt(c.ttl.Milliseconds(), 10)
	*cy = append(*cy, cycleRow{group: "Redis", name: redislockShaped, cmds: cmds, op: func(ctx context.Context) error {
		if err := obtain.run(ctx, rc, shapedKey, token, len(token), ttlMS); err != nil {
			return err
		}
		return release.run(ctx, rc, shapedKey, token)
	}})
	lk := redislock.New(rc)
	*cy = append(*cy, cycleRow{group: "Redis", name: "redislock", cmds: cmds, op: func(ctx context.Context) error {
		l, err := lk.Obtain(ctx, name("redislock"), c.ttl, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}})
	rs := redsync.New(redsyncgoredis.NewPool(rc))
	mu := rs.NewMutex(name("redsync"), redsync.WithExpiry(c.ttl), redsync.WithTries(1))
	*cy = append(*cy, cycleRow{group: "Redis", name: "redsync", cmds: cmds, op: func(ctx context.Context) error {
		if err := mu.LockContext(ctx); err != nil {
			return err
		}
		_, err := mu.UnlockContext(ctx)
		return err
	}})
	// Handover pairs, each side on its own connection pool.
	var rl [2]side
	var rsy [2]side
	for i := range rl {
		cl := goredis.NewClient(&goredis.Options{Addr: redisAddr})
		r.add(func() { _ = cl.Close() })
		lk := redislock.New(cl)
		var held *redislock.Lock
		opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)}
		rl[i] = funcSide{
			acq: func(ctx context.Context) (err error) {
				held, err = lk.Obtain(ctx, name("redislock-hand"), c.ttl, opt)
				return err
			},
			rel: func(ctx context.Context) error { return held.Release(ctx) },
		}
		m := redsync.New(redsyncgoredis.NewPool(cl)).NewMutex(name("redsync-hand"), redsync.WithExpiry(c.ttl), redsync.WithTries(1000))
		rsy[i] = funcSide{
			acq: m.LockContext,
			rel: func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err },
		}
	}
	*hand = append(*hand, pairRow("Redis", "redislock (retry every 10 ms)", rl),
		pairRow("Redis", "redsync (default retry delay)", rsy))
	redisWaiter := func(obtain func(ctx context.Context, cl *goredis.Client, name string) error) func(ctx context.Context, n string) (*waiter, error) {
		return func(ctx context.Context, n string) (*waiter, error) {
			h := new(countHook)
			cl := goredis.NewClient(&goredis.Options{Addr: redisAddr})
			cl.AddHook(h)
			w := &waiter{granted: make(chan grant, 1), cleanup: func() { _ = cl.Close() }}
			w.count = func() (int64, int64, bool) { v := h.n.Load(); return v, v, true }
			go func() {
				err := obtain(ctx, cl, n)
				w.granted <- grant{time.Now(), err}
			}()
			return w, nil
		}
	}
	*fail = append(*fail,
		failRow{group: "Redis", name: "redislock (retry every 10 ms)", holder: "redislock", wait: redisWaiter(func(ctx context.Context, cl *goredis.Client, n string) error {
			_, err := redislock.New(cl).Obtain(ctx, n, c.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
			return err
		})},
		failRow{group: "Redis", name: "redsync (default retry delay)", holder: "redsync", wait: redisWaiter(func(ctx context.Context, cl *goredis.Client, n string) error {
			return redsync.New(redsyncgoredis.NewPool(cl)).NewMutex(n, redsync.WithExpiry(c.ttl), redsync.WithTries(1000)).LockContext(ctx)
		})})
	return nil
}

// redislockShaped is the name of the redislock-shaped cycle row.
const redislockShaped = "redislock-shaped: its two scripts as raw EVALSHA (SET NX PX; GET + DEL)"

// script is a Lua script run by EVALSHA, loaded again when the server lost it (another
// client of the shared server may flush the script cache).
type script struct {
	src, sha string
}

func (s *script) load(ctx context.Context, c goredis.Scripter) (err error) {
	s.sha, err = c.ScriptLoad(ctx, s.src).Result()
	return err
}

func (s *script) run(ctx context.Context, c goredis.Scripter, keys []string, args ...any) error {
	err := c.EvalSha(ctx, s.sha, keys, args...).Err()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		if err = s.load(ctx, c); err == nil {
			err = c.EvalSha(ctx, s.sha, keys, args...).Err()
		}
	}
	return err // redis.Nil from the obtain script: the key was taken
}

// setupRedisCluster adds the Redis Cluster's baseline: one EVALSHA of a trivial script on one
// key's master.
func setupRedisCluster(ctx context.Context, r *resources, name func(string) string, cy *[]cycleRow) error {
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(clusterAddrs, ",")})
	r.add(func() { _ = cc.Close() })
	ch := new(countHook)
	cc.AddHook(ch)
	trivial := &script{src: "return 1"}
	if err := trivial.load(ctx, cc); err != nil {
		return err
	}
	key := []string{name("cluster-baseline")}
	*cy = append(*cy, cycleRow{group: "Redis Cluster", name: "baseline: EVALSHA of a trivial script", baseline: true, cmds: ch.n.Load, op: func(ctx context.Context) error {
		return trivial.run(ctx, cc, key)
	}})
	return nil
}

func setupPG(ctx context.Context, c conf, r *resources, name func(string) string, cy *[]cycleRow, hand *[]handRow, fail *[]failRow) error {
	pool, err := pgxpool.New(ctx, pgDSN)
	if err != nil {
		return err
	}
	r.add(pool.Close)
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS simba_bench_baseline (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)",
		"DELETE FROM simba_bench_baseline",
		"INSERT INTO simba_bench_baseline (id, n) VALUES (1, 0)",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return err
		}
	}
	*cy = append(*cy, cycleRow{group: "PostgreSQL", name: "baseline: one-row UPDATE", baseline: true, op: func(ctx context.Context) error {
		_, err := pool.Exec(ctx, "UPDATE simba_bench_baseline SET n = n + 1 WHERE id = 1")
		return err
	}})
	pc, err := newPglock(c.ttl)
	if err != nil {
		return err
	}
	*cy = append(*cy, cycleRow{group: "PostgreSQL", name: "pglock", op: func(ctx context.Context) error {
		l, err := pc.AcquireContext(ctx, name("pglock"))
		if err != nil {
			return err
		}
		return pc.ReleaseContext(ctx, l)
	}})
	var s [2]side
	for i := range s {
		pc, err := newPglock(c.ttl)
		if err != nil {
			return err
		}
		var l *pglock.Lock
		s[i] = funcSide{
			acq: func(ctx context.Context) (err error) {
				l, err = pc.AcquireContext(ctx, name("pglock-hand"))
				return err
			},
			rel: func(ctx context.Context) error { return pc.ReleaseContext(ctx, l) },
		}
	}
	*hand = append(*hand, pairRow("PostgreSQL", "pglock", s))
	*fail = append(*fail, failRow{group: "PostgreSQL", name: "pglock", holder: "pglock", wait: func(ctx context.Context, n string) (*waiter, error) {
		pc, err := newPglock(c.ttl)
		if err != nil {
			return nil, err
		}
		w := &waiter{granted: make(chan grant, 1), cleanup: func() {}}
		go func() {
			l, err := pc.AcquireContext(ctx, n)
			w.granted <- grant{time.Now(), err}
			if err == nil {
				_ = pc.Release(l)
			}
		}()
		return w, nil
	}})
	return nil
}

func setupZK(ctx context.Context, c conf, r *resources, name func(string) string, cy *[]cycleRow, hand *[]handRow, fail *[]failRow) error {
	conn, err := zkConnect(c.ttl)
	if err != nil {
		return err
	}
	r.add(conn.Close)
	base := "/" + name("zk-baseline")
	*cy = append(*cy, cycleRow{group: "ZooKeeper", name: "baseline: create + delete", baseline: true, op: func(context.Context) error {
		if _, err := conn.Create(base, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			return err
		}
		return conn.Delete(base, -1)
	}})
	l := zk.NewLock(conn, "/simba-bench/"+name("zklock"), zk.WorldACL(zk.PermAll))
	*cy = append(*cy, cycleRow{group: "ZooKeeper", name: "go-zookeeper `zk.Lock`", op: func(context.Context) error {
		if err := l.Lock(); err != nil {
			return err
		}
		return l.Unlock()
	}})
	var s [2]side
	for i := range s {
		cn, err := zkConnect(c.ttl)
		if err != nil {
			return err
		}
		r.add(cn.Close)
		l := zk.NewLock(cn, "/simba-bench/"+name("zklock-hand"), zk.WorldACL(zk.PermAll))
		s[i] = funcSide{acq: func(context.Context) error { return l.Lock() }, rel: func(context.Context) error { return l.Unlock() }}
	}
	*hand = append(*hand, pairRow("ZooKeeper", "go-zookeeper `zk.Lock`", s))
	*fail = append(*fail, failRow{group: "ZooKeeper", name: "go-zookeeper `zk.Lock`", holder: "zk", wait: func(ctx context.Context, n string) (*waiter, error) {
		cn, err := zkConnect(c.ttl)
		if err != nil {
			return nil, err
		}
		w := &waiter{granted: make(chan grant, 1), cleanup: cn.Close}
		go func() {
			err := zk.NewLock(cn, "/simba-bench/"+n, zk.WorldACL(zk.PermAll)).Lock()
			w.granted <- grant{time.Now(), err}
		}()
		return w, nil
	}})
	return nil
}

func setupEtcd(ctx context.Context, c conf, r *resources, name func(string) string, cy *[]cycleRow, hand *[]handRow, fail *[]failRow) error {
	const g = "etcd (embedded)"
	ttlSec := int(c.ttl / time.Second)
	newSession := func() (*concurrency.Session, *atomic.Int64, error) {
		cli, n, err := etcdClient(c.etcdURL)
		if err != nil {
			return nil, nil, err
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlSec))
		if err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		r.add(func() { _ = s.Close(); _ = cli.Close() })
		return s, n, nil
	}
	s, _, err := newSession()
	if err != nil {
		return err
	}
	key := "/simba-bench/" + name("put")
	*cy = append(*cy, cycleRow{group: g, name: "baseline: one Put", baseline: true, op: func(ctx context.Context) error {
		_, err := s.Client().Put(ctx, key, "x")
		return err
	}})
	mu := concurrency.NewMutex(s, "/simba-bench/"+name("mutex"))
	*cy = append(*cy, cycleRow{group: g, name: "etcd `concurrency.Mutex`", op: func(ctx context.Context) error {
		if err := mu.Lock(ctx); err != nil {
			return err
		}
		return mu.Unlock(ctx)
	}})
	el := concurrency.NewElection(s, "/simba-bench/"+name("election"))
	*cy = append(*cy, cycleRow{group: g, name: "etcd `concurrency.Election` (Campaign + Resign)", op: func(ctx context.Context) error {
		if err := el.Campaign(ctx, "x"); err != nil {
			return err
		}
		return el.Resign(ctx)
	}})
	var ms, es [2]side
	for i := range ms {
		s, _, err := newSession()
		if err != nil {
			return err
		}
		m := concurrency.NewMutex(s, "/simba-bench/"+name("mutex-hand"))
		ms[i] = funcSide{acq: m.Lock, rel: m.Unlock}
		e := concurrency.NewElection(s, "/simba-bench/"+name("election-hand"))
		es[i] = funcSide{acq: func(ctx context.Context) error { return e.Campaign(ctx, "x") }, rel: e.Resign}
	}
	*hand = append(*hand, pairRow(g, "etcd `concurrency.Mutex`", ms),
		pairRow(g, "etcd `concurrency.Election` (Resign)", es))
	*fail = append(*fail, failRow{group: g, name: "etcd `concurrency.Mutex`", holder: "etcd-mutex", wait: func(ctx context.Context, n string) (*waiter, error) {
		cli, cnt, err := etcdClient(c.etcdURL)
		if err != nil {
			return nil, err
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlSec))
		if err != nil {
			_ = cli.Close()
			return nil, err
		}
		w := &waiter{granted: make(chan grant, 1), cleanup: func() { _ = s.Close(); _ = cli.Close() }}
		w.count = func() (int64, int64, bool) { v := cnt.Load(); return v, v, true }
		go func() {
			err := concurrency.NewMutex(s, "/simba-bench/"+n).Lock(ctx)
			w.granted <- grant{time.Now(), err}
		}()
		return w, nil
	}})
	return nil
}

// floorRow is the hand-over row that times the baseline op b alone, one op per sample, each
// after the same idle pause as a hand-over's waiter (waiterSettle): on a VM a request after an
// idle pause costs several times one sent right after another (pgbench on this project's
// 2-CPU VM: a synced one-row UPDATE 0.49 ms back to back, 1.32 ms after 20 ms idle), and a
// hand-over's acquire always follows one, so a floor timed back to back would not compare.
func floorRow(b cycleRow) handRow {
	return handRow{group: b.group, name: b.name + ", one op alone", sample: func(ctx context.Context) (time.Duration, error) {
		if b.prep != nil {
			if err := b.prep(ctx); err != nil {
				return 0, err
			}
		}
		select {
		case <-time.After(waiterSettle):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		t0 := time.Now()
		err := b.op(ctx)
		return time.Since(t0), err
	}}
}

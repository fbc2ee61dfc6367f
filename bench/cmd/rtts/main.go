// Command rtts measures how many network round trips each backend call of Simba costs, so that
// a TTL can be chosen against the round-trip time (RTT) to the backend: the client bounds every
// call by one renewal interval (TTL/3 by default), and a call of k round trips at RTT r needs
// at least k·r of it.
//
// Every connection of the backend goes through a proxy of its own (on Redis Cluster one per
// node, the nodes' addresses mapped by the client's dialer) that delays each chunk by a fixed
// one-way latency without serialising chunks (see latencyProxy). Each SPI call the client makes
// in normal operation, and a Lock+Unlock cycle of a simba.Client, is timed -reps times with no
// added latency and -reps times with -delay added each way; the column "RT" is
//
//	(median time at +delay − median time at +0) / (2·delay)
//
// the round trips on the call's critical path (a fraction where a call's rounds overlap or its
// server-side wait differs between the runs). "turns" counts the request/response exchanges the
// proxy saw during the call at +0 (the median over the reps), parallel ones each: it is at
// least RT, more where a call talks to several servers at once (Redis Cluster masters) or a
// protocol sends frames of its own (HTTP/2 window updates on etcd).
//
// The servers are the shared test servers (every default below); the command creates its
// own names (rtt-<pid>-…), closes its sessions at the end, and leaves the lease records, as
// every client does (tokens only grow). SQLite is a local file, with no network to measure.
//
// With -churn D it times no call: for each pair of -churn-delays and -churn-ttls it runs
// clients of simba.Client locking and unlocking names (-churn-shape) through the proxies for D,
// and prints the grants, the Locks that timed out (each Lock has one TTL), the acquires and
// keep-alives that failed (WithCallObserver), the sessions lost (EventSessionExpired), the
// keep-alives' median and maximum time, and the connections the proxies accepted: what happens
// when a TTL is too short for the RTT.
//
//	go -C bench run ./cmd/rtts                       # every backend, -delay 10ms, -reps 7
//	go -C bench run ./cmd/rtts -backends mysql,redis -delay 20ms
//	go -C bench run ./cmd/rtts -backends mysql -churn 8s -churn-delays 0,50ms,150ms -churn-ttls 3s,6s,18s
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

var (
	backends = flag.String("backends", "postgres,mysql,redis,cluster,zookeeper,etcd", "comma-separated backends to measure")
	delay    = flag.Duration("delay", 10*time.Millisecond, "one-way latency added (the RTT added is twice it)")
	reps     = flag.Int("reps", 7, "calls timed per measurement and latency")
	ttl      = flag.Duration("ttl", time.Minute, "session TTL: long against the run, since the sessions measured are renewed only by the keep-alives measured (ZooKeeper's client pings its own, and a server may cap it)")

	postgresDSN = flag.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL DSN")
	mysqlDSN    = flag.String("mysql", "mysql://root@127.0.0.1:3306/test", "MySQL/MariaDB DSN")
	redisAddr   = flag.String("redis", "127.0.0.1:6379", "standalone Redis address")
	clusterAddr = flag.String("cluster", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003", "Redis Cluster seed addresses")
	zkAddr      = flag.String("zookeeper", "127.0.0.1:2181", "ZooKeeper address")
	etcdAddr    = flag.String("etcd", "127.0.0.1:2379", "etcd address")
	mysqlIdle   = flag.Int("mysql-idle", 0, "MySQL/MariaDB: make the pool as open.Open does, but with SetMaxIdleConns(n) (0: Open's pool, which keeps 32 idle connections)")
)

func main() {
	flag.Parse()
	if *delay <= 0 || *reps < 1 {
		fmt.Fprintln(os.Stderr, "rtts: -delay must be > 0 and -reps ≥ 1")
		os.Exit(2)
	}
	var failed bool
	for _, name := range strings.Split(*backends, ",") {
		if *churn > 0 {
			if err := runChurn(strings.TrimSpace(name)); err != nil {
				fmt.Fprintf(os.Stderr, "rtts: %s: %v\n", name, err)
				failed = true
			}
			continue
		}
		rows, err := measureBackend(strings.TrimSpace(name))
		if err != nil {
			fmt.Fprintf(os.Stderr, "rtts: %s: %v\n", name, err)
			failed = true
		}
		printTable(name, rows)
	}
	if failed {
		os.Exit(1)
	}
}

// row is one measurement.
type row struct {
	what       string
	rt         float64 // round trips on the critical path, by the added latency
	turns      int64   // exchanges seen at +0, median
	base, slow time.Duration
}

func printTable(backend string, rows []row) {
	fmt.Printf("\n%s (+%v one way, RTT +%v; %d calls each)\n", backend, *delay, 2**delay, *reps)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "call\tRT\tturns\tat +0\tat +delay\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%.1f\t%d\t%.2fms\t%.1fms\t\n", r.what, r.rt, r.turns,
			float64(r.base)/1e6, float64(r.slow)/1e6)
	}
	w.Flush()
}

// run is the state of one backend's measurement.
type run struct {
	ctx     context.Context
	b       spi.Backend
	delay   atomic.Int64
	turns   atomic.Int64
	mu      sync.Mutex
	proxies map[string]*latencyProxy // target → proxy
	kind    string                   // the -backends name
	prefix  string
	n       int
	rows    []row
	open    []spi.SessionID
}

func (r *run) proxy(target string) (*latencyProxy, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.proxies[target]; ok {
		return p, nil
	}
	p, err := startProxy(target, &r.delay, &r.turns)
	if err != nil {
		return nil, err
	}
	r.proxies[target] = p
	return p, nil
}

// accepted returns the connections the run's proxies accepted so far.
func (r *run) accepted() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, p := range r.proxies {
		n += p.accepted.Load()
	}
	return n
}

func (r *run) name() string {
	r.n++
	return fmt.Sprintf("%s-%d", r.prefix, r.n)
}

func measureBackend(backend string) (rows []row, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := &run{ctx: ctx, kind: backend, proxies: map[string]*latencyProxy{},
		prefix: fmt.Sprintf("rtt-%d-%d", os.Getpid(), time.Now().UnixMilli()%100000)}
	defer func() {
		for _, p := range r.proxies {
			p.close()
		}
	}()
	if r.b, err = r.openBackend(backend); err != nil {
		return nil, err
	}
	defer r.b.Close()
	defer func() {
		r.delay.Store(0)
		for _, id := range r.open {
			if cerr := r.b.CloseSession(ctx, id); cerr != nil && err == nil {
				err = fmt.Errorf("closing session %s: %w", id, cerr)
			}
		}
	}()
	err = r.measureAll()
	return r.rows, err
}

func (r *run) openBackend(backend string) (spi.Backend, error) {
	via := func(addr string) (string, error) {
		p, err := r.proxy(addr)
		if err != nil {
			return "", err
		}
		return p.addr(), nil
	}
	switch backend {
	case "postgres", "mysql":
		dsn := *postgresDSN
		if backend == "mysql" {
			dsn = *mysqlDSN
		}
		host, err := dsnHost(dsn)
		if err != nil {
			return nil, err
		}
		a, err := via(host)
		if err != nil {
			return nil, err
		}
		dsn = strings.Replace(dsn, "@"+host+"/", "@"+a+"/", 1)
		if backend == "mysql" && *mysqlIdle > 0 {
			return mysqlIdlePool(dsn, *mysqlIdle)
		}
		return open.Open(r.ctx, dsn)
	case "redis", "zookeeper", "etcd":
		addr := map[string]string{"redis": *redisAddr, "zookeeper": *zkAddr, "etcd": *etcdAddr}[backend]
		a, err := via(addr)
		if err != nil {
			return nil, err
		}
		scheme := map[string]string{"redis": "redis", "zookeeper": "zk", "etcd": "etcd"}[backend]
		return open.Open(r.ctx, scheme+"://"+a)
	case "cluster":
		cfg, err := redis.ParseDSN("redis+cluster://" + *clusterAddr)
		if err != nil {
			return nil, err
		}
		// The nodes name each other by their own addresses (CLUSTER SLOTS, MOVED): the dialer
		// sends every one through its own proxy.
		var d net.Dialer
		cfg.ClusterOptions.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			a, err := via(addr)
			if err != nil {
				return nil, err
			}
			return d.DialContext(ctx, network, a)
		}
		return redis.OpenConfig(cfg)
	}
	return nil, fmt.Errorf("unknown backend %q (postgres, mysql, redis, cluster, zookeeper, etcd)", backend)
}

// mysqlIdlePool is open.Open's MySQL/MariaDB backend with a pool that keeps up to idle
// connections instead of Open's 32 (with no idle time: database/sql's default).
func mysqlIdlePool(dsn string, idle int) (spi.Backend, error) {
	cfg, err := simbasql.MySQLConfig(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := simbasql.MySQLConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(idle)
	b, err := simbasql.NewMySQL(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return poolCloser{b, db}, nil
}

// poolCloser closes the pool with the backend, which leaves a pool passed to it open.
type poolCloser struct {
	*simbasql.Backend
	db *sql.DB
}

func (p poolCloser) Close() error {
	err := p.Backend.Close()
	p.db.Close()
	return err
}

// dsnHost returns the host:port of a postgres:// or mysql:// DSN with a user.
func dsnHost(dsn string) (string, error) {
	at := strings.Index(dsn, "@")
	if at < 0 {
		return "", fmt.Errorf("DSN %q has no user@host", dsn)
	}
	rest := dsn[at+1:]
	slash := strings.Index(rest, "/")
	if slash < 0 {
		return "", fmt.Errorf("DSN %q has no /database", dsn)
	}
	return rest[:slash], nil
}

// measure times call reps times at +0 and at +delay; prep, untimed, readies each call.
func (r *run) measure(what string, prep func() (func(ctx context.Context) error, error)) error {
	var base, slow []time.Duration
	var turns []int64
	for _, d := range []time.Duration{0, *delay} {
		r.delay.Store(int64(d))
		for range *reps {
			call, err := prep()
			if err != nil {
				return fmt.Errorf("%s: preparing: %w", what, err)
			}
			t0, start := r.turns.Load(), time.Now()
			err = call(r.ctx)
			el, n := time.Since(start), r.turns.Load()-t0
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if d == 0 {
				base, turns = append(base, el), append(turns, n)
			} else {
				slow = append(slow, el)
			}
		}
	}
	r.delay.Store(0)
	mb, ms := median(base), median(slow)
	r.rows = append(r.rows, row{what: what, rt: float64(ms-mb) / float64(2**delay),
		turns: median(turns), base: mb, slow: ms})
	return nil
}

func median[T int64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func (r *run) session() (spi.SessionID, error) {
	s, err := r.b.OpenSession(r.ctx, "rtts", *ttl)
	if err != nil {
		return "", err
	}
	r.open = append(r.open, s.ID)
	return s.ID, nil
}

// hold makes session acquire n fresh names.
func (r *run) hold(session spi.SessionID, n int) ([]string, error) {
	var names []string
	for range n {
		name := r.name()
		a, err := r.b.Acquire(r.ctx, session, name)
		if err != nil {
			return nil, err
		}
		if a.Kind != spi.Granted {
			return nil, fmt.Errorf("acquire %s: %v, want granted", name, a.Kind)
		}
		names = append(names, name)
	}
	return names, nil
}

func ready(f func(ctx context.Context) error) func() (func(ctx context.Context) error, error) {
	return func() (func(ctx context.Context) error, error) { return f, nil }
}

func (r *run) measureAll() error {
	b := r.b
	holder, err := r.session() // holds one name, which others find held
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	one, err := r.hold(holder, 1)
	if err != nil {
		return err
	}
	many, err := r.session()
	if err != nil {
		return err
	}
	hundred, err := r.hold(many, 100)
	if err != nil {
		return err
	}
	other, err := r.session() // acquires and queues
	if err != nil {
		return err
	}
	idle, err := r.session()
	if err != nil {
		return err
	}
	queuer, _ := b.(spi.Queuer)

	var opened []spi.SessionID
	steps := []struct {
		what string
		prep func() (func(ctx context.Context) error, error)
	}{
		{"OpenSession", ready(func(ctx context.Context) error {
			s, err := b.OpenSession(ctx, "rtts", *ttl)
			if err == nil {
				opened = append(opened, s.ID)
			}
			return err
		})},
		{"KeepAlive, 0 leases", ready(func(ctx context.Context) error {
			return keepAlive(ctx, b, idle, nil, nil, 0)
		})},
		{"KeepAlive, 1 lease", ready(func(ctx context.Context) error {
			return keepAlive(ctx, b, holder, one, nil, 1)
		})},
		{"KeepAlive, 100 leases", ready(func(ctx context.Context) error {
			return keepAlive(ctx, b, many, hundred, nil, 100)
		})},
		{"Acquire, free", func() (func(ctx context.Context) error, error) {
			name := r.name()
			return func(ctx context.Context) error { return acquire(ctx, b.Acquire, other, name, spi.Granted) }, nil
		}},
		{"Acquire, held by another", ready(func(ctx context.Context) error {
			return acquire(ctx, b.Acquire, other, one[0], spi.HeldBy)
		})},
		{"Release", func() (func(ctx context.Context) error, error) {
			name := r.name()
			a, err := b.Acquire(r.ctx, other, name)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return b.Release(ctx, other, name, a.Token) }, nil
		}},
		{"CloseSession, 1 lease", func() (func(ctx context.Context) error, error) {
			s, err := b.OpenSession(r.ctx, "rtts", *ttl)
			if err != nil {
				return nil, err
			}
			if _, err := b.Acquire(r.ctx, s.ID, r.name()); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return b.CloseSession(ctx, s.ID) }, nil
		}},
	}
	if queuer != nil {
		waiter, err := r.session()
		if err != nil {
			return err
		}
		if _, err := queuer.AcquireQueued(r.ctx, waiter, one[0]); err != nil {
			return err
		}
		steps = append(steps, []struct {
			what string
			prep func() (func(ctx context.Context) error, error)
		}{
			{"KeepAlive, 0 leases, waiting", ready(func(ctx context.Context) error {
				return keepAlive(ctx, b, waiter, nil, nil, 0)
			})},
			{"AcquireQueued, free", func() (func(ctx context.Context) error, error) {
				name := r.name()
				return func(ctx context.Context) error {
					return acquire(ctx, queuer.AcquireQueued, other, name, spi.Granted)
				}, nil
			}},
			{"AcquireQueued, held by another", ready(func(ctx context.Context) error {
				return acquire(ctx, queuer.AcquireQueued, other, one[0], spi.HeldBy)
			})},
			{"Withdraw", func() (func(ctx context.Context) error, error) {
				if _, err := queuer.AcquireQueued(r.ctx, other, one[0]); err != nil {
					return nil, err
				}
				return func(ctx context.Context) error { return queuer.Withdraw(ctx, other, one[0]) }, nil
			}},
		}...)
	}
	group, member := r.name(), ""
	steps = append(steps, []struct {
		what string
		prep func() (func(ctx context.Context) error, error)
	}{
		{"Join", func() (func(ctx context.Context) error, error) {
			s, err := r.session()
			if err != nil {
				return nil, err
			}
			member = string(s)
			return func(ctx context.Context) error { return status(b.Join(ctx, s, group)) }, nil
		}},
		{"KeepAlive, 1 lease, 1 group", func() (func(ctx context.Context) error, error) {
			s := spi.SessionID(member)
			names, err := r.hold(s, 1)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return keepAlive(ctx, b, s, names, []string{group}, 1) }, nil
		}},
		{"Leave", func() (func(ctx context.Context) error, error) {
			s, g := spi.SessionID(member), r.name()
			if err := status(b.Join(r.ctx, s, g)); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return status(b.Leave(ctx, s, g)) }, nil
		}},
	}...)
	for _, s := range steps {
		if err := r.measure(s.what, s.prep); err != nil {
			return err
		}
	}
	r.open = append(r.open, opened...)
	if err := r.firstCall(); err != nil {
		return err
	}
	return r.lockCycle()
}

// firstCall times a new backend value's first OpenSession: its connections are made then
// (TCP, the protocol's handshake, TLS where used, per-connection settings) and, on the SQL
// backends, the schema version and the live schema are checked once. It is what a client
// pays at its start, and the connect part is what a pool pays again for each connection it
// adds (after an outage, or as calls in flight grow).
func (r *run) firstCall() error {
	type fresh struct {
		b  spi.Backend
		id spi.SessionID
	}
	var made []fresh
	defer func() {
		r.delay.Store(0)
		for _, f := range made {
			if f.id != "" {
				f.b.CloseSession(r.ctx, f.id) //nolint:errcheck // the server expires it anyway
			}
			f.b.Close()
		}
	}()
	return r.measure("OpenSession, new backend value", func() (func(ctx context.Context) error, error) {
		b, err := r.openBackend(r.kind)
		if err != nil {
			return nil, err
		}
		made = append(made, fresh{b: b})
		i := len(made) - 1
		return func(ctx context.Context) error {
			s, err := b.OpenSession(ctx, "rtts", *ttl)
			made[i].id = s.ID
			return err
		}, nil
	})
}

// lockCycle times a simba.Client's Lock and Unlock of one name, its session open.
func (r *run) lockCycle() error {
	c, err := simba.New(r.b, simba.WithTTL(*ttl))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	name := r.name()
	cycle := func(ctx context.Context) error {
		h, err := c.Lock(ctx, name)
		if err != nil {
			return err
		}
		return h.Unlock(ctx)
	}
	if err := cycle(r.ctx); err != nil { // opens the session
		return err
	}
	return r.measure("Lock+Unlock (simba.Client)", ready(cycle))
}

func keepAlive(ctx context.Context, b spi.Backend, s spi.SessionID, names, groups []string, want int) error {
	k, err := b.KeepAlive(ctx, s, names, groups)
	if err != nil {
		return err
	}
	if k.Expired {
		return errors.New("session expired")
	}
	if len(k.Held) < want {
		return fmt.Errorf("keep-alive lists %d held, want %d", len(k.Held), want)
	}
	return nil
}

func acquire(ctx context.Context, f func(context.Context, spi.SessionID, string) (spi.Acquire, error),
	s spi.SessionID, name string, want spi.AcquireKind) error {
	a, err := f(ctx, s, name)
	if err != nil {
		return err
	}
	if a.Kind != want {
		return fmt.Errorf("%s: %v, want %v", name, a.Kind, want)
	}
	return nil
}

func status(st spi.Status, err error) error {
	if err != nil {
		return err
	}
	if st != spi.OK {
		return fmt.Errorf("status %v", st)
	}
	return nil
}

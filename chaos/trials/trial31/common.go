package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// The shared servers (never stopped, flushed or reconfigured; the trial writes only names of its
// own, under the prefix t31-).
const (
	sharedMySQL   = "mysql://root@127.0.0.1:3306/test"
	sharedCluster = "redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
)

// backendFor builds the backend the way the wrapper does: MariaDB on a pool of the user's own,
// sized 8 and made on MySQLConnector as NewMySQL's doc says (so its silent-link handling and the
// keep-alive's reserved connection apply); the Cluster through open.Open.
func backendFor(ctx context.Context, kind, dsn string, logger *slog.Logger) (spi.Backend, func(), error) {
	switch kind {
	case "mysql":
		cfg, err := simbasql.MySQLConfig(dsn)
		if err != nil {
			return nil, nil, err
		}
		// The driver's own lines go where the configuration says (NewMySQL's pool is ours): the
		// sql.WithLogger doc says to set it here, at DEBUG, as Open does.
		cfg.Logger = driverLog{logger}
		conn, err := simbasql.MySQLConnector(cfg)
		if err != nil {
			return nil, nil, err
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(8) // before NewMySQL: it reads the limit once
		poolsMu.Lock()
		pools = append(pools, db)
		poolsMu.Unlock()
		b, err := simbasql.NewMySQL(db, simbasql.WithAutoMigrate(), simbasql.WithLogger(logger))
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return b, func() { b.Close(); db.Close() }, nil
	default:
		b, err := open.Open(ctx, dsn, open.WithLogger(logger))
		if err != nil {
			return nil, nil, err
		}
		return b, func() { b.Close() }, nil
	}
}

func dsnFor(kind string) string {
	if kind == "mysql" {
		return sharedMySQL
	}
	return sharedCluster
}

// calls counts a client's backend calls per operation (simba.WithCallObserver: the README's way
// to watch calls from outside), with the slowest of each.
type calls struct {
	mu    sync.Mutex
	n     map[string]int
	errs  map[string]int
	grant int // acquires that returned a token
	max   map[string]time.Duration
	kaAt  []time.Time // when each keep-alive returned, to tell early ones from the interval's
	// okSum and okN accumulate the time of successful calls per operation (never reset), so a
	// phase can tell how long a call took in it (snapshot before, diff after).
	okSum map[string]time.Duration
	okN   map[string]int
}

func newCalls() *calls {
	return &calls{n: map[string]int{}, errs: map[string]int{}, max: map[string]time.Duration{},
		okSum: map[string]time.Duration{}, okN: map[string]int{}}
}

func (c *calls) observe(ci simba.CallInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[ci.Op]++
	if ci.Op == simba.OpKeepAlive {
		c.kaAt = append(c.kaAt, time.Now())
	}
	if ci.Err != nil {
		c.errs[ci.Op]++
	} else {
		c.okSum[ci.Op] += ci.Took
		c.okN[ci.Op]++
	}
	if ci.Token != 0 {
		c.grant++
	}
	if ci.Took > c.max[ci.Op] {
		c.max[ci.Op] = ci.Took
	}
}

// take returns the counts since the last take and resets them.
func (c *calls) take() (n, errs map[string]int, grant int, max map[string]time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, errs, grant, max = c.n, c.errs, c.grant, c.max
	c.n, c.errs, c.grant, c.max = map[string]int{}, map[string]int{}, 0, map[string]time.Duration{}
	c.kaAt = nil
	return
}

// okSnapshot copies the successful calls' accumulated time and count per operation.
func (c *calls) okSnapshot() (map[string]time.Duration, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, n := map[string]time.Duration{}, map[string]int{}
	for k, v := range c.okSum {
		s[k] = v
	}
	for k, v := range c.okN {
		n[k] = v
	}
	return s, n
}

// meanSince is the mean time of the successful calls per operation since the snapshot.
func (c *calls) meanSince(s0 map[string]time.Duration, n0 map[string]int) string {
	s1, n1 := c.okSnapshot()
	var b strings.Builder
	for _, op := range []string{simba.OpAcquire, simba.OpRelease, simba.OpKeepAlive, simba.OpOpenSession} {
		if n := n1[op] - n0[op]; n > 0 {
			fmt.Fprintf(&b, "%s %v (%d) ", op, ((s1[op] - s0[op]) / time.Duration(n)).Round(time.Millisecond), n)
		}
	}
	return strings.TrimSpace(b.String())
}

// early counts keep-alives that came less than 0.8 of a renewal interval after the one before,
// and returns the shortest gap.
func (c *calls) early(renew time.Duration) (n int, shortest time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	shortest = time.Hour
	for i := 1; i < len(c.kaAt); i++ {
		d := c.kaAt[i].Sub(c.kaAt[i-1])
		if d < renew*8/10 {
			n++
		}
		if d < shortest {
			shortest = d
		}
	}
	return n, shortest
}

func fmtCounts(n map[string]int, secs float64) string {
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d(%.1f/s)", k, n[k], float64(n[k])/secs)
	}
	return strings.TrimSpace(b.String())
}

// proc is the process's footprint: goroutines and live heap after a GC.
func proc() (goroutines int, heapMB float64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), float64(ms.HeapAlloc) / (1 << 20)
}

// waitGoroutines waits up to d for the goroutine count to fall to at most want.
func waitGoroutines(want int, d time.Duration) int {
	end := time.Now().Add(d)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(end) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checker is the exclusion check: who is inside each name's section, and its term. Entering a
// name whose last holder is still inside with a term still valid (IsValid: the local deadline,
// which ends before the server's expiry) is two holders at once, the violation; one inside with a
// lapsed term is a stale holder the fence must stop.
type checker struct {
	mu         sync.Mutex
	in         map[string]inside
	high       map[string]int64 // the fenced resource: highest token written per name
	lastGrant  map[string]int64
	violations []string
	stale      int // entries beside a lapsed holder
	refused    int // fenced writes refused (token below the resource's highest)
	writes     int
	lowGrants  []string // grants entered with a token below an earlier grant's
}

type inside struct {
	who  string
	term simba.Term
}

func newChecker() *checker {
	return &checker{in: map[string]inside{}, high: map[string]int64{}, lastGrant: map[string]int64{}}
}

func (c *checker) enter(name, who string, t simba.Term) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.in[name]; ok {
		if o.term.IsValid() && t.IsValid() {
			c.violations = append(c.violations, fmt.Sprintf("%s: %s#%d entered while %s#%d valid", name, who, t.Token(), o.who, o.term.Token()))
		} else {
			c.stale++
		}
	}
	if t.Token() <= c.lastGrant[name] {
		c.lowGrants = append(c.lowGrants, fmt.Sprintf("%s: %s#%d after #%d", name, who, t.Token(), c.lastGrant[name]))
	} else {
		c.lastGrant[name] = t.Token()
	}
	c.in[name] = inside{who, t}
}

func (c *checker) leave(name, who string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.in[name]; ok && o.who == who {
		delete(c.in, name)
	}
}

// write is a fenced write: refused when the token is below the highest the resource has seen.
func (c *checker) write(name string, token int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if token < c.high[name] {
		c.refused++
		return false
	}
	c.high[name] = token
	c.writes++
	return true
}

func (c *checker) report(w io.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(w, "checker: %d fenced writes, %d refused as stale, %d entries beside a lapsed holder, %d grants with a token not above the last, %d VIOLATIONS (two valid holders)\n",
		c.writes, c.refused, c.stale, len(c.lowGrants), len(c.violations))
	for i, v := range c.violations {
		if i == 10 {
			break
		}
		fmt.Fprintln(w, "  violation:", v)
	}
	for i, v := range c.lowGrants {
		if i == 5 {
			break
		}
		fmt.Fprintln(w, "  low grant:", v)
	}
}

// errClass names an error by the sentinels a wrapper would match with errors.Is.
func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errorsIs(err, simba.ErrClosed):
		return "ErrClosed"
	case errorsIs(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errorsIs(err, context.Canceled):
		return "Canceled"
	case errorsIs(err, simba.ErrNotHeld):
		return "ErrNotHeld"
	case errorsIs(err, simba.ErrLockHeld):
		return "ErrLockHeld"
	case errorsIs(err, simba.ErrInvalidName):
		return "ErrInvalidName"
	case errorsIs(err, simba.ErrInvalidOption):
		return "ErrInvalidOption"
	case errorsIs(err, simba.ErrAccessDenied):
		return "ErrAccessDenied"
	case errorsIs(err, simba.ErrSchemaMissing):
		return "ErrSchemaMissing"
	case errorsIs(err, simba.ErrUnavailable):
		return "ErrUnavailable"
	}
	return "other"
}

type tally struct {
	mu sync.Mutex
	m  map[string]int
	ex map[string]string
}

func newTally() *tally { return &tally{m: map[string]int{}, ex: map[string]string{}} }

func (t *tally) add(k string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[k]++
	if _, ok := t.ex[k]; !ok && err != nil {
		t.ex[k] = err.Error()
	}
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, t.m[k])
	}
	return strings.TrimSpace(b.String())
}

func (t *tally) examples(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.ex {
		fmt.Fprintf(w, "    e.g. %s: %s\n", k, trunc(v, 300))
	}
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

var out io.Writer = os.Stdout

func say(format string, a ...any) {
	fmt.Fprintf(out, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, a...)...)
}

var runID = fmt.Sprintf("%x", time.Now().Unix()&0xffffff)

var atomicSeq atomic.Int64

// levels counts log records per level on the way to the log file, so a run can say how loud the
// library was.
type levels struct {
	slog.Handler
	n *sync.Map
}

func (l levels) Handle(ctx context.Context, r slog.Record) error {
	v, _ := l.n.LoadOrStore(r.Level.String(), new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	return l.Handler.Handle(ctx, r)
}
func (l levels) WithAttrs(as []slog.Attr) slog.Handler { return levels{l.Handler.WithAttrs(as), l.n} }
func (l levels) WithGroup(g string) slog.Handler       { return levels{l.Handler.WithGroup(g), l.n} }

func newLog(path string) (*slog.Logger, func() string, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	n := &sync.Map{}
	l := slog.New(levels{slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}), n})
	count := func() string {
		var b strings.Builder
		n.Range(func(k, v any) bool {
			fmt.Fprintf(&b, "%s=%d ", k, v.(*atomic.Int64).Load())
			return true
		})
		return strings.TrimSpace(b.String())
	}
	return l, count, nil
}

// driverLog is go-sql-driver/mysql's Logger on a slog logger, at DEBUG.
type driverLog struct{ l *slog.Logger }

func (d driverLog) Print(v ...any) {
	d.l.Debug(strings.TrimSpace(fmt.Sprint(v...)), "from", "go-sql-driver/mysql")
}

var (
	poolsMu sync.Mutex
	pools   []*sql.DB // the wrapper's MariaDB pools, for their database/sql statistics
)

// poolStats summarises the last MariaDB pool made: how many connections it opened and how often
// and how long a call waited for one (a keep-alive among them would lose its session).
func poolStats() string {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if len(pools) == 0 {
		return "no MariaDB pool"
	}
	st := pools[len(pools)-1].Stats()
	return fmt.Sprintf("pool: max %d, open %d, in use %d, waited %d times for %v in all",
		st.MaxOpenConnections, st.OpenConnections, st.InUse, st.WaitCount, st.WaitDuration.Round(time.Millisecond))
}

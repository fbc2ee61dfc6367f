package simba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/backend/redis"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// lateQueued stands between a client and a real backend (one that is a Hinter and a Queuer,
// as every backend Simba ships is) and forwards everything, except one AcquireQueued of name
// once armed: it waits until its caller's context ends and returns that error (the call cut
// short, as the client cuts a call whose caller gave up), but holds the request itself back
// until the test closes land, and then sends it to the server (a cancelled call that still
// executes at the server after the driver returned). It counts the Withdraws of name.
type lateQueued struct {
	spi.Backend
	name    string
	armed   atomic.Bool
	entered chan struct{}      // the armed AcquireQueued was called
	land    chan struct{}      // closed by the test: the held request reaches the server
	landed  chan queuedOutcome // its outcome at the server

	// failAfter: the armed call ignores its context; it is applied at the server once land is
	// closed, and then fails as a call whose reply was lost.
	failAfter bool

	mu        sync.Mutex
	withdraws int // Withdraws of name begun
}

type queuedOutcome struct {
	r   spi.Acquire
	err error
}

func newLateQueued(b spi.Backend, name string) *lateQueued {
	return &lateQueued{Backend: b, name: name, entered: make(chan struct{}), land: make(chan struct{}),
		landed: make(chan queuedOutcome, 1)}
}

func (w *lateQueued) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	return w.Backend.(spi.Hinter).Hints(ctx)
}

func (w *lateQueued) QueueEntriesLiveWithSession() bool { return spi.EntriesLiveWithSession(w.Backend) }
func (w *lateQueued) HintsSteady() bool                 { return spi.AreHintsSteady(w.Backend) }
func (w *lateQueued) CheckTTL(ttl time.Duration) error  { return spi.CheckTTL(w.Backend, ttl) }

// CutSafe: false, so that a call whose caller's context can only be cancelled (not time out)
// runs on the caller's goroutine and is cut by the cancellation on every backend alike.
func (w *lateQueued) CutSafe() bool { return false }

func (w *lateQueued) EndWait(s spi.SessionID, name string) {
	if we, ok := w.Backend.(spi.WaitEnder); ok {
		we.EndWait(s, name)
	}
}

func (w *lateQueued) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	q := w.Backend.(spi.Queuer)
	if name != w.name || !w.armed.CompareAndSwap(true, false) {
		return q.AcquireQueued(ctx, s, name)
	}
	close(w.entered)
	if w.failAfter {
		// Applied at the server, and then failed: its reply was lost (a timeout).
		<-w.land
		r, err := q.AcquireQueued(context.Background(), s, name)
		w.landed <- queuedOutcome{r, err}
		return spi.Acquire{}, spi.Unavailable("acquire "+name, errors.New("reply lost"))
	}
	<-ctx.Done()
	go func() {
		<-w.land
		r, err := q.AcquireQueued(context.Background(), s, name)
		w.landed <- queuedOutcome{r, err}
	}()
	return spi.Acquire{}, ctx.Err()
}

func (w *lateQueued) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	if name == w.name {
		w.mu.Lock()
		w.withdraws++
		w.mu.Unlock()
	}
	return w.Backend.(spi.Queuer).Withdraw(ctx, s, name)
}

func (w *lateQueued) withdrawsBegun() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.withdraws
}

// lateBackends are the backend families TestLateQueuedAcquire runs on: each open returns a
// new backend (its own connections) on the shared test servers.
var lateBackends = []struct {
	name string
	open func(t *testing.T) spi.Backend
}{
	{"postgres", func(t *testing.T) spi.Backend {
		return lateOpened(t)(simbasql.Open(context.Background(), testenv.Postgres(t), simbasql.WithAutoMigrate()))
	}},
	{"mariadb", func(t *testing.T) spi.Backend {
		cfg, err := mysqldriver.ParseDSN(testenv.MySQL(t))
		if err != nil {
			t.Fatal(err)
		}
		u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
		if cfg.Passwd != "" {
			u.User = url.UserPassword(cfg.User, cfg.Passwd)
		} else if cfg.User != "" {
			u.User = url.User(cfg.User)
		}
		return lateOpened(t)(simbasql.Open(context.Background(), u.String(), simbasql.WithAutoMigrate()))
	}},
	{"sqlite", func(t *testing.T) spi.Backend {
		// One file per test: both backends share it, as processes on one machine would.
		file := lateSQLiteFile(t)
		return lateOpened(t)(simbasql.Open(context.Background(), "sqlite://"+file, simbasql.WithAutoMigrate()))
	}},
	{"redis", func(t *testing.T) spi.Backend {
		return lateOpened(t)(redis.Open("redis://"+testenv.Redis(t), redis.WithLogger(slog.New(slog.DiscardHandler))))
	}},
	{"redis-cluster", func(t *testing.T) spi.Backend {
		return lateOpened(t)(redis.Open("redis+cluster://"+strings.Join(testenv.RedisCluster(t), ","),
			redis.WithLogger(slog.New(slog.DiscardHandler))))
	}},
	{"zookeeper", func(t *testing.T) spi.Backend {
		return lateOpened(t)(zookeeper.New("zk://" + strings.Join(testenv.ZooKeeper(t), ",") + "/simba-lateacq"))
	}},
	{"etcd", func(t *testing.T) spi.Backend {
		return lateOpened(t)(etcd.New("etcd://" + strings.Join(testenv.Etcd(t), ",") + "/simba-lateacq"))
	}},
}

var lateSQLiteFiles sync.Map // *testing.T → the test's SQLite file

func lateSQLiteFile(t *testing.T) string {
	f, ok := lateSQLiteFiles.Load(t)
	if !ok {
		f = filepath.Join(t.TempDir(), "late.db")
		lateSQLiteFiles.Store(t, f)
		t.Cleanup(func() { lateSQLiteFiles.Delete(t) })
	}
	return f.(string)
}

// lateOpened fails t on err and closes the backend at t's end.
func lateOpened(t *testing.T) func(spi.Backend, error) spi.Backend {
	return func(b spi.Backend, err error) spi.Backend {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
}

// TestLateQueuedAcquireAfterWithdraw: client A waits for a held lock; its Lock's context ends
// while its AcquireQueued is at the server, the call is cut short and A's withdrawal (if it
// sends one then) is over before the request lands at the server (placed by a hook, not by
// timing). The late request either makes A a waiter again ("entry": the lease is still held)
// or is granted to A ("grant": the holder released first). Once A's client has settled the
// acquire's unknown outcome (its keep-alives stop asking about the name) and is idle, nothing
// of A's may be left on the name: a waiter B that comes after the holder's release must be
// granted the lease, not told HeldBy A. Before, on Redis (standalone and Cluster), the late
// entry stayed — the lease reserved for a session that no longer waits, and B told HeldBy A
// until the entry lapsed (up to a TTL) or A's session closed.
func TestLateQueuedAcquireAfterWithdraw(t *testing.T) {
	testenv.Short(t, "opens a client on every backend family and waits for keep-alives")
	for _, k := range lateBackends {
		for _, mode := range []string{"entry", "grant"} {
			t.Run(k.name+"/"+mode, func(t *testing.T) { lateQueuedAcquire(t, k.open, mode == "grant") })
		}
	}
}

// lateWorld is the setup of the late-acquire tests: a holder and a waiter B with sessions of
// their own on raw, the holder granted name, and client A on w, its session open.
type lateWorld struct {
	raw            spi.Backend
	holder, waiter spi.Session
	g              spi.Acquire
	name           string
	w              *lateQueued
	c              *Client
}

func newLateWorld(t *testing.T, ctx context.Context, open func(*testing.T) spi.Backend, ttl time.Duration) *lateWorld {
	t.Helper()
	lw := &lateWorld{raw: open(t), name: fmt.Sprintf("lateacq-%d", time.Now().UnixNano())}
	var err error
	if lw.holder, err = lw.raw.OpenSession(ctx, "holder", ttl); err != nil {
		t.Fatal(err)
	}
	if lw.waiter, err = lw.raw.OpenSession(ctx, "waiter-b", ttl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = lw.raw.CloseSession(context.Background(), lw.holder.ID)
		_ = lw.raw.CloseSession(context.Background(), lw.waiter.ID)
	})
	lw.g, err = lw.raw.Acquire(ctx, lw.holder.ID, lw.name)
	if err != nil || lw.g.Kind != spi.Granted {
		t.Fatalf("holder's Acquire = %+v, %v; want Granted", lw.g, err)
	}
	lw.w = newLateQueued(open(t), lw.name)
	if lw.c, err = New(lw.w, WithTTL(ttl), WithOwner("late-a")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lw.c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	// A's Lock makes its first attempt itself (a live session), not the loop.
	until(t, ctx, "A's session to open", func() bool {
		live := make(chan bool, 1)
		if !lw.c.post(func() { live <- lw.c.eng.SessionState() == engine.SessionLive }) {
			return false
		}
		return <-live
	})
	return lw
}

// released has the holder release, and checks that B's AcquireQueued then gets the lease.
func (lw *lateWorld) released(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if err := lw.raw.Release(ctx, lw.holder.ID, lw.name, lw.g.Token); err != nil {
		t.Fatal(err)
	}
	lw.bGranted(t, ctx, what)
}

// bGranted checks that B's AcquireQueued gets the lease.
func (lw *lateWorld) bGranted(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	r, err := lw.raw.(spi.Queuer).AcquireQueued(ctx, lw.waiter.ID, lw.name)
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("B's AcquireQueued after the holder's release = %+v, %v; want Granted: A's late AcquireQueued "+
			"(applied after A stopped waiting) is still in the way: %s", r, err, what)
	}
}

func lateQueuedAcquire(t *testing.T, open func(*testing.T) spi.Backend, grant bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lw := newLateWorld(t, ctx, open, 6*time.Second)
	raw, holder, g, name, w, c := lw.raw, lw.holder, lw.g, lw.name, lw.w, lw.c
	w.armed.Store(true)
	lctx, giveUp := context.WithCancel(ctx)
	locked := make(chan error, 1)
	go func() {
		h, err := c.Lock(lctx, name)
		if h != nil {
			err = errors.New("Lock returned the lease")
		}
		locked <- err
	}()
	select {
	case <-w.entered:
	case <-ctx.Done():
		t.Fatal("A's AcquireQueued never came")
	}
	giveUp()
	if err := <-locked; !errors.Is(err, context.Canceled) {
		t.Fatalf("A's Lock = %v; want context.Canceled", err)
	}
	// A's client has handled the Lock's end and the cut acquire; a withdrawal it sent now is
	// over before the request lands.
	loopBarrier(t, c)
	lateIdle(t, ctx, c)
	before := w.withdrawsBegun()

	if grant {
		if err := raw.Release(ctx, holder.ID, name, g.Token); err != nil {
			t.Fatal(err)
		}
	}
	close(w.land)
	out := <-w.landed
	switch {
	case out.err != nil:
		t.Fatalf("the late AcquireQueued failed at the server: %v", out.err)
	case grant && out.r.Kind != spi.Granted:
		t.Fatalf("the late AcquireQueued = %+v; want Granted (the lease was free)", out.r)
	case !grant && (out.r.Kind != spi.HeldBy || out.r.Holder != holder.ID):
		t.Fatalf("the late AcquireQueued = %+v; want HeldBy the holder (A a waiter again)", out.r)
	}

	// A's client settles the acquire's outcome: its keep-alives ask about the name until one
	// sent a call timeout after the cut does not find it held.
	until(t, ctx, "A's client to settle the late acquire", func() bool {
		done := make(chan bool, 1)
		if !c.post(func() {
			in, ok := c.eng.Election(name)
			done <- !ok || (!in.Unknown && !in.AcquireInFlight && in.Token == 0)
		}) {
			return true
		}
		return <-done
	})
	loopBarrier(t, c)
	lateIdle(t, ctx, c)
	t.Logf("A's withdrawals of %s: %d before the late acquire landed, %d after", name, before, w.withdrawsBegun()-before)

	if grant {
		lw.bGranted(t, ctx, "A holds the lease nobody wants, after its client settled the acquire")
	} else {
		lw.released(t, ctx, "A's waiter entry holds the free lease back for a session that no longer waits, after its client settled the acquire")
	}
}

// TestLateQueuedAcquireFailsAfterStop: the other order of the same race. A's Lock times out
// while its AcquireQueued, run by a call worker (a deadline within the call timeout on a
// backend whose calls are not cut-safe), is at the server; the stop, stepped first, waits for
// that acquire's reply rather than withdraw (the acquire was A's only queued attempt); the
// request is applied (A a waiter again) and then fails (its reply lost). Before, nothing was
// withdrawn until the keep-alive that settles the outcome a call timeout later (on Redis, not
// even then: the entry lapsed up to a TTL later), and the free lease stayed reserved for A
// meanwhile. Now the failure of a queued attempt of a stopped election withdraws at once, as
// its HeldBy does. The TTL is long (30 s: the settling keep-alive comes 10 s after the
// failure), so the check comes long before that keep-alive.
func TestLateQueuedAcquireFailsAfterStop(t *testing.T) {
	testenv.Short(t, "opens a client on every backend family")
	for _, k := range lateBackends {
		t.Run(k.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const ttl = 30 * time.Second
			lw := newLateWorld(t, ctx, k.open, ttl)
			w, c := lw.w, lw.c
			w.failAfter = true
			w.armed.Store(true)
			// A deadline well within the call timeout (10 s): the acquire runs on a call worker,
			// which the Lock's end does not cut.
			lctx, giveUp := context.WithTimeout(ctx, 200*time.Millisecond)
			defer giveUp()
			if h, err := c.Lock(lctx, lw.name); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("A's Lock = %v, %v; want context.DeadlineExceeded", h, err)
			}
			select {
			case <-w.entered:
			default:
				t.Fatal("A's AcquireQueued was not sent")
			}
			loopBarrier(t, c) // the stop is stepped before the acquire's reply
			close(w.land)
			if out := <-w.landed; out.err != nil || out.r.Kind != spi.HeldBy {
				t.Fatalf("the late AcquireQueued at the server = %+v, %v; want HeldBy the holder", out.r, out.err)
			}
			until(t, ctx, "A's client to step the acquire's failure", func() bool {
				done := make(chan bool, 1)
				if !c.post(func() {
					in, ok := c.eng.Election(lw.name)
					done <- !ok || !in.AcquireInFlight
				}) {
					return true
				}
				return <-done
			})
			loopBarrier(t, c)
			lateIdle(t, ctx, c)
			t.Logf("A's withdrawals of %s: %d", lw.name, w.withdrawsBegun())
			lw.released(t, ctx, "A's waiter entry, made before its acquire failed, holds the free lease back")
		})
	}
}

// lateIdle waits until c has no backend call other than the session's in flight or queued.
func lateIdle(t *testing.T, ctx context.Context, c *Client) {
	t.Helper()
	until(t, ctx, "A's client to be idle", func() bool {
		q, r := gateQueued(c)
		return q == 0 && r == 0
	})
}

package sql

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/locktest"
	"github.com/simba-go/simba/spi"
)

// killRig is a holder's backend that holds one name (and marks it: its waker holds the name's
// named lock) and a waiter's client whose backend's pool (the waker's too: NewMySQL) counts
// every connection it dials.
type killRig struct {
	holder *Backend
	hs     spi.Session
	token  int64
	name   string
	waiter *Backend
	w      *mysqlWaker
	c      *simba.Client
	db     *sql.DB
	dials  atomic.Int64
	ctx    context.Context
}

func newKillRig(t *testing.T) *killRig {
	t.Helper()
	dsn, cfg := myDatabase(t, "simba_sqlbe_")
	r := &killRig{holder: migrated(t, dsn)}
	r.db = countingPool(t, cfg, &r.dials)
	r.waiter, r.ctx = migratedMySQL(t, r.db)
	r.w = r.waiter.waker.(*mysqlWaker)
	r.c = locktest.Clients(t, time.Minute, r.waiter)[0]
	if _, err := r.holder.Hints(r.ctx); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.hs, err = r.holder.OpenSession(r.ctx, "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	r.name = "killwait-" + unique(t)
	hw := r.holder.waker.(*mysqlWaker)
	a, err := r.holder.Acquire(r.ctx, r.hs.ID, r.name)
	if err != nil || a.Kind != spi.Granted {
		t.Fatalf("holder's acquire: %+v %v", a, err)
	}
	r.token = a.Token
	waitUntil(t, "the holder's waker marks the name", func() bool { return hw.snapshot().marks >= 1 })
	return r
}

// withdrawBlocked runs a Lock of the name until the waiter's waker blocks in GET_LOCK for it,
// then ends the Lock's context (as a Lock's timeout does: the client withdraws), and returns
// once the waker's wait has ended.
func (r *killRig) withdrawBlocked(t *testing.T) {
	t.Helper()
	blocks := r.w.snapshot().blocks
	lctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		h, err := r.c.Lock(lctx, r.name)
		if err == nil {
			_ = h.Unlock(r.ctx)
			err = errors.New("Lock got a lock held by another")
		}
		errs <- err
	}()
	waitUntil(t, "a blocking wait", func() bool { return r.w.snapshot().blocks > blocks })
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v, want context.Canceled", err)
	}
	waitUntil(t, "the wait ended", func() bool {
		r.w.mu.Lock()
		defer r.w.mu.Unlock()
		return len(r.w.waits) == 0
	})
}

// lockUser returns the id of the connection that holds the name's named lock (0: none).
func (r *killRig) lockUser(t *testing.T) int64 {
	t.Helper()
	var id sql.NullInt64
	d, _ := wire.SQLDialectByName(wire.SQLMySQL)
	if err := r.db.QueryRowContext(r.ctx, d.WakeLockConn, r.name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}

// TestMySQLWithdrawnWaitKeepsItsConnection: a client's Locks of a name another backend holds
// (and marks) end, one after the other, while the client's waker blocks in GET_LOCK for them
// (the Lock's context ends, as with a timeout: the client withdraws). The wait was cut
// mid-statement, which makes go-sql-driver close its connection, so every such Lock cost the
// waker a new connection (a TCP connection, an authentication and a thread at the server);
// now the wait is interrupted by KILL QUERY from another of the waker's connections and its
// connection goes back to the pool. The name's named lock stays the holder's marker's
// throughout, and is free once the holder let it go: no killed wait kept it.
func TestMySQLWithdrawnWaitKeepsItsConnection(t *testing.T) {
	const locks = 100
	r := newKillRig(t)
	marker := r.lockUser(t)
	if marker == 0 {
		t.Fatal("the holder's marker holds no named lock")
	}
	for range 2 { // the wait's connection, and the one that interrupts it
		r.withdrawBlocked(t)
	}
	before := r.dials.Load()
	for range locks {
		r.withdrawBlocked(t)
	}
	n := r.dials.Load() - before
	t.Logf("%d Locks withdrawn while their wait blocked: %d new connections", locks, n)
	if n > 2 {
		t.Errorf("%d withdrawn Locks dialled %d new connections, want at most 2", locks, n)
	}
	if id := r.lockUser(t); id != marker {
		t.Errorf("the named lock is held by connection %d, want the holder's marker's %d", id, marker)
	}
	if err := r.holder.Release(r.ctx, r.hs.ID, r.name, r.token); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the named lock is free", func() bool { return r.lockUser(t) == 0 })
}

// TestMySQLWithdrawRacingRelease: the holder releases its lease while the waiter's Lock ends
// (the waker's GET_LOCK may get the lock just before its interruption reaches the server),
// over many rounds. Whatever won, no connection of the waiter's keeps the name's named lock:
// it is free once the round is over, and the holder's waker marks the next tenure.
func TestMySQLWithdrawRacingRelease(t *testing.T) {
	const rounds = 30
	r := newKillRig(t)
	hw := r.holder.waker.(*mysqlWaker)
	for round := range rounds {
		if round > 0 {
			a, err := r.holder.Acquire(r.ctx, r.hs.ID, r.name)
			if err != nil || a.Kind != spi.Granted {
				t.Fatalf("round %d: holder's acquire: %+v %v", round, a, err)
			}
			r.token = a.Token
			marks := hw.snapshot().marks
			waitUntil(t, "the holder's waker marks the name", func() bool { return hw.snapshot().marks > marks })
		}
		blocks := r.w.snapshot().blocks
		lctx, cancel := context.WithCancel(r.ctx)
		errs := make(chan error, 1)
		go func() {
			h, err := r.c.Lock(lctx, r.name)
			if err == nil {
				err = h.Unlock(r.ctx)
			} else if errors.Is(err, context.Canceled) {
				err = nil
			}
			errs <- err
		}()
		waitUntil(t, "a blocking wait", func() bool { return r.w.snapshot().blocks > blocks })
		released := make(chan error, 1)
		go func() { released <- r.holder.Release(r.ctx, r.hs.ID, r.name, r.token) }()
		cancel()
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		if err := <-errs; err != nil {
			t.Fatalf("round %d: Lock: %v", round, err)
		}
		waitUntil(t, "the wait ended", func() bool {
			r.w.mu.Lock()
			defer r.w.mu.Unlock()
			return len(r.w.waits) == 0
		})
		waitUntil(t, "the named lock is free", func() bool { return r.lockUser(t) == 0 })
	}
	st := r.w.snapshot()
	t.Logf("%d rounds: %d waits interrupted, %d cut", rounds, st.interrupts, st.cuts)
}

// TestMySQLWithdrawFallsBackToCut: a server that refuses the interruption (here a statement
// it rejects, as a proxy that does not pass KILL on would) makes the waker end a withdrawn wait
// by closing its connection, as before, once told: it asks no more.
func TestMySQLWithdrawFallsBackToCut(t *testing.T) {
	r := newKillRig(t)
	r.w.killQuery = "KILL QUERY ? FOR NOTHING"
	var logs bytes.Buffer
	var logsMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &logsMu, w: &logs}, nil))
	r.w.log = func() *slog.Logger { return logger }
	r.withdrawBlocked(t)
	r.withdrawBlocked(t)
	logsMu.Lock()
	if n := strings.Count(logs.String(), "cannot interrupt its own waits"); n != 1 {
		t.Errorf("the refusal logged %d times, want once:\n%s", n, logs.String())
	}
	logsMu.Unlock()
	st := r.w.snapshot()
	r.w.mu.Lock()
	refused := r.w.cannotInterrupt
	r.w.mu.Unlock()
	if !refused || st.interrupts != 0 || st.cuts != 2 {
		t.Errorf("refused %v, %d interrupts, %d cuts; want refused, 0 interrupts, 2 cuts", refused, st.interrupts, st.cuts)
	}
	if id := r.lockUser(t); id == 0 {
		t.Error("the holder's named lock is free")
	}
}

// TestMySQLOverdueWaitKeepsItsConnection: the waiter's backend waits for a name whose named
// lock a connection of the test's keeps (a stuck connection: the holder's backend marks
// nothing, and so does the waiter's here), then its own session gets the lease. The waker's wait, blocked on that named lock,
// is told to stop, and ended after mysqlWaitGrace: it was cut, closing its connection (a new
// one per round); now it is interrupted, and its connection is reused.
func TestMySQLOverdueWaitKeepsItsConnection(t *testing.T) {
	const rounds = 3
	dsn, cfg := myDatabase(t, "simba_sqlbe_")
	holder := migrated(t, dsn) // no Hints: it marks nothing
	var dials atomic.Int64
	waiter, ctx := migratedMySQL(t, countingPool(t, cfg, &dials))
	w := waiter.waker.(*mysqlWaker)
	w.markDelay = time.Hour // its marker would end the stuck connection (unstick)
	if _, err := waiter.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	hs, err := holder.OpenSession(ctx, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := waiter.OpenSession(ctx, "waiter", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := wire.SQLDialectByName(wire.SQLMySQL)
	name := "overdue-" + unique(t)
	stuck, err := holder.d.(*stdDialect).db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	var got int64
	if err := stuck.QueryRowContext(ctx, wd.WakeLock, name, 1).Scan(&got); err != nil || got != 1 {
		t.Fatalf("the stuck connection's GET_LOCK: %d %v", got, err)
	}
	var perRound []int64
	for round := range rounds + 1 {
		before := dials.Load()
		a, err := holder.Acquire(ctx, hs.ID, name)
		if err != nil || a.Kind != spi.Granted {
			t.Fatalf("holder's acquire: %+v %v", a, err)
		}
		blocks := w.snapshot().blocks
		if r, err := waiter.Acquire(ctx, ws.ID, name); err != nil || r.Kind != spi.HeldBy {
			t.Fatalf("waiter's acquire: %+v %v", r, err)
		}
		waitUntil(t, "a blocking wait", func() bool { return w.snapshot().blocks > blocks })
		if err := holder.Release(ctx, hs.ID, name, a.Token); err != nil {
			t.Fatal(err)
		}
		r, err := waiter.Acquire(ctx, ws.ID, name)
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("waiter's second acquire: %+v %v", r, err)
		}
		waitUntil(t, "the wait ended", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.waits) == 0
		})
		if err := waiter.Release(ctx, ws.ID, name, r.Token); err != nil {
			t.Fatal(err)
		}
		if round > 0 { // the first round dials the wait's connection
			perRound = append(perRound, dials.Load()-before)
		}
	}
	t.Logf("new connections per round: %v", perRound)
	for i, n := range perRound {
		if n > 0 {
			t.Errorf("round %d dialled %d connections, want 0 (per round: %v)", i+2, n, perRound)
		}
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

package sql

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/spi"
)

// rtCounter counts the round trips of the connections it dials: a write after a read (or a
// connection's first write) starts one. With delay it sleeps that long at the start of each,
// a link whose round trip is delay longer.
type rtCounter struct {
	n     atomic.Int64
	delay time.Duration
}

func (r *rtCounter) wrap(c net.Conn) net.Conn { return &rtConn{Conn: c, r: r} }

// rtConn is one connection of an rtCounter.
type rtConn struct {
	net.Conn
	r         *rtCounter
	mu        sync.Mutex
	readSince bool // a read since the last write
	wrote     bool
}

func (c *rtConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	start := !c.wrote || c.readSince
	c.wrote, c.readSince = true, false
	c.mu.Unlock()
	if start {
		c.r.n.Add(1)
		if c.r.delay > 0 {
			time.Sleep(c.r.delay)
		}
	}
	return c.Conn.Write(b)
}

func (c *rtConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		c.readSince = true
		c.mu.Unlock()
	}
	return n, err
}

// countingPg is a migrated PostgreSQL backend whose pool (one connection) dials through rt.
func countingPg(t testing.TB, rt *rtCounter) *Backend {
	t.Helper()
	cfg, err := PostgresPoolConfig(withParam(t, pgDSN(t), "pool_max_conns", "1"))
	if err != nil {
		t.Fatal(err)
	}
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rt.wrap(c), nil
	}
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := NewPostgres(pool, WithHousekeepingInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPostgresWaitingAcquireRoundTrips: a waiting candidate's acquire at a held lease
// (AcquireQueued replying HeldBy, its entry made) costs PostgreSQL 3 round trips: the plain
// acquire tried first, then BEGIN with the two locking statements and the acquire in one
// pipeline, then the entry with COMMIT in one more (spec/sql.yaml, acquire_queued, pipeline).
// It was 7 (each of BEGIN, the four statements and COMMIT on its own, after the first try),
// which an outside trial measured at 0.37 s through a link of 25 ms each way. The counts are
// taken on a warm connection (pgx prepares a statement once per connection, one round trip
// more the first time).
func TestPostgresWaitingAcquireRoundTrips(t *testing.T) {
	rt := &rtCounter{}
	b := countingPg(t, rt)
	ctx := testCtx(t)
	holder, waiter := openSession(t, b, longTTL), openSession(t, b, longTTL)
	grant(t, b, holder, "rt")
	queued := func() {
		t.Helper()
		r, err := b.AcquireQueued(ctx, waiter, "rt")
		if err != nil || r.Kind != spi.HeldBy || r.Holder != holder {
			t.Fatalf("AcquireQueued = %+v, %v; want held by %s", r, err, holder)
		}
	}
	queued() // warms the connection's statement cache
	const calls = 5
	before := rt.n.Load()
	for range calls {
		queued()
	}
	if got := rt.n.Load() - before; got != 3*calls {
		t.Fatalf("%d waiting acquires took %d round trips (%.1f each); want 3 each", calls, got, float64(got)/calls)
	}
	// The entry was made: the waiter is owed the lease once the holder releases it, and a
	// plain acquire by a third session is refused.
	exec(t, b, "UPDATE simba_lease SET session_id = NULL WHERE name = ?", "rt")
	third := openSession(t, b, longTTL)
	if r, err := b.Acquire(ctx, third, "rt"); err != nil || r.Kind != spi.HeldBy || r.Holder != waiter {
		t.Fatalf("third Acquire = %+v, %v; want held by the waiter %s", r, err, waiter)
	}
	if r, err := b.AcquireQueued(ctx, waiter, "rt"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("waiter's AcquireQueued = %+v, %v; want granted", r, err)
	}
}

// leaseXmin is the transaction id that wrote name's lease row ("" when it has none).
func leaseXmin(t *testing.T, b *Backend, name string) string {
	t.Helper()
	var x string
	err := b.d.(*pgDialect).pool.QueryRow(testCtx(t), "SELECT xmin::text FROM simba_lease WHERE name = $1", name).Scan(&x)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return x
}

// TestPostgresPipelinedExpiredSessionRollsBack: acquire_queued's transaction on PostgreSQL
// sends BEGIN, acquire_lock_session, acquire_lock_lease and acquire in one round trip. When the
// caller's session expired after the first try (acquire_lock_session returns no row: the
// operation ends with SessionExpired), the two later statements have run: the transaction is
// rolled back, so a missing lease row is not made and a held one keeps its row version (no
// commit of acquire_lock_lease's write), and nothing is granted. The transaction costs the
// pipeline and its ROLLBACK, 2 round trips (it was 3: BEGIN, acquire_lock_session, COMMIT).
func TestPostgresPipelinedExpiredSessionRollsBack(t *testing.T) {
	rt := &rtCounter{}
	b := countingPg(t, rt)
	ctx := testCtx(t)
	// The transaction alone, without the first try (which would find the session expired
	// itself): the session expires between the two.
	p := *b.plans["acquire_queued"]
	p.first = ""
	b.plans["acquire_queued_tx"] = &p
	holder, live, late := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
	grant(t, b, holder, "held")
	if r, err := b.acquire(ctx, "acquire_queued_tx", string(live), "held"); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("live waiter: %+v, %v; want held by", r, err) // also warms the statement cache
	}
	expire(t, b, late)
	x := leaseXmin(t, b, "held")
	for _, name := range []string{"held", "fresh"} {
		before := rt.n.Load()
		r, err := b.acquire(ctx, "acquire_queued_tx", string(late), name)
		if err != nil || r.Kind != spi.SessionExpired {
			t.Fatalf("%s: expired waiter: %+v, %v; want session expired", name, r, err)
		}
		if got := rt.n.Load() - before; got != 2 {
			t.Errorf("%s: the transaction of an expired session took %d round trips; want 2 (the pipeline, ROLLBACK)", name, got)
		}
	}
	if got := leaseXmin(t, b, "held"); got != x {
		t.Errorf("the held lease's row was written (xmin %s, was %s): acquire_lock_lease committed", got, x)
	}
	if got := leaseXmin(t, b, "fresh"); got != "" {
		t.Errorf("the missing lease's row was made (xmin %s): acquire_lock_lease committed", got)
	}
	if tok, h, _ := leaseToken(t, b, "held"); h != string(holder) || tok <= 0 {
		t.Errorf("held lease: holder %q token %d; want still %s's", h, tok, holder)
	}
	var n int
	if err := b.d.(*pgDialect).pool.QueryRow(ctx, "SELECT count(*) FROM simba_waiter WHERE session_id = $1", string(late)).Scan(&n); err != nil || n != 0 {
		t.Errorf("the expired session has %d waiter entries (%v); want none", n, err)
	}
}

// BenchmarkPostgresWaitingAcquire: a waiting candidate's acquire at a held lease
// (AcquireQueued replying HeldBy) through a link of 5 ms each way (each round trip delayed
// 10 ms at the client): 3 round trips, about 30 ms (7 and 70 ms before the transaction was
// pipelined). It reports the round trips per acquire (rt/op).
func BenchmarkPostgresWaitingAcquire(b *testing.B) {
	rt := &rtCounter{}
	be := countingPg(b, rt)
	ctx := testCtx(b)
	holder, waiter := openSession(b, be, longTTL), openSession(b, be, longTTL)
	grant(b, be, holder, "bench")
	if _, err := be.AcquireQueued(ctx, waiter, "bench"); err != nil { // warms the connection
		b.Fatal(err)
	}
	rt.delay = 10 * time.Millisecond
	before := rt.n.Load()
	b.ResetTimer()
	for range b.N {
		if r, err := be.AcquireQueued(ctx, waiter, "bench"); err != nil || r.Kind != spi.HeldBy {
			b.Fatalf("AcquireQueued = %+v, %v; want held by", r, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(rt.n.Load()-before)/float64(b.N), "rt/op")
}

// TestPostgresPipelineCutLeavesNoTransaction: a pipelined acquire_queued transaction whose
// context ends while the server runs its first pipeline (BEGIN and three statements, the lease
// row locked by another transaction, so acquire_lock_lease waits) fails; the connection goes
// back to the pool outside any transaction (pgconn closes a connection whose call was cut, and
// the pool destroys it), nothing is committed, and the next call works. A guard of the
// pipelined path: the old, unpipelined transaction passed it too.
func TestPostgresPipelineCutLeavesNoTransaction(t *testing.T) {
	rt := &rtCounter{}
	b := countingPg(t, rt)
	ctx := testCtx(t)
	p := *b.plans["acquire_queued"]
	p.first = ""
	b.plans["acquire_queued_tx"] = &p
	holder, waiter := openSession(t, b, longTTL), openSession(t, b, longTTL)
	grant(t, b, holder, "cut")
	pool := b.d.(*pgDialect).pool
	blocker, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(context.Background())
	if _, err := blocker.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, "SELECT 1 FROM simba_lease WHERE name = 'cut' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.acquire(cctx, "acquire_queued_tx", string(waiter), "cut")
	cancel()
	if err == nil {
		t.Fatal("the cut transaction succeeded")
	}
	t.Logf("cut: %v", err)
	if _, err := blocker.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Conn().PgConn().TxStatus(); s != 'I' {
		t.Errorf("the pool's connection is in transaction status %q; want idle (I)", s)
	}
	c.Release()
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM simba_waiter WHERE session_id = $1", string(waiter)).Scan(&n); err != nil || n != 0 {
		t.Errorf("the cut call left %d waiter entries (%v); want none", n, err)
	}
	if r, err := b.AcquireQueued(ctx, waiter, "cut"); err != nil || r.Kind != spi.HeldBy || r.Holder != holder {
		t.Fatalf("AcquireQueued after the cut = %+v, %v; want held by %s", r, err, holder)
	}
}

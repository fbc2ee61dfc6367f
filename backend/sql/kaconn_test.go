package sql

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/spi"
)

// TestPostgresKeepAliveGetsAConnection: on a pool of 3 connections whose calls are all stuck
// behind a row lock (six acquires of one lease whose row another transaction holds), a
// keep-alive still gets a connection and is answered: the backend's other calls take at most 2
// of them (keepAliveConn). Before, the acquires took all 3 connections and the keep-alive
// waited for the pool until its context ended (a session lost behind its own client's
// backlog: a client keeps 32 calls in flight, a pgxpool has max(4, CPUs) connections).
//
// Counted, not timed: the keep-alive is sent once the pool holds every connection it will
// give the acquires (3 before, the 2 slots now), and its context (a minute) only bounds a hang.
func TestPostgresKeepAliveGetsAConnection(t *testing.T) {
	const size = 3
	dsn := pgDSN(t)
	b := migrated(t, withParam(t, dsn, "pool_max_conns", "3"))
	ctx := testCtx(t)
	pool := b.d.(*pgDialect).pool
	if got := pool.Config().MaxConns; got != size {
		t.Fatalf("pool of %d connections, want %d", got, size)
	}
	// The lease row exists (a grant, then its release), so every acquire of it updates it.
	first, err := b.OpenSession(ctx, "first", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.Acquire(ctx, first.ID, "stuck")
	if err != nil || a.Kind != spi.Granted {
		t.Fatalf("first acquire: %+v, %v", a, err)
	}
	if err := b.Release(ctx, first.ID, "stuck", a.Token); err != nil {
		t.Fatal(err)
	}
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	locker, err := admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Release()
	var lockerPID int
	if err := locker.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&lockerPID); err != nil {
		t.Fatal(err)
	}
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			_ = tx.Rollback(context.Background())
		}
	}
	defer unlock()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM simba_lease WHERE name = 'stuck' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	wg := startStuckAcquires(ctx, t, b, 6)
	defer wg.Wait()
	defer unlock() // before the acquires are waited for
	// blocked counts the connections waiting, directly or not, for the locker's row lock.
	blocked := func() int {
		rows, err := admin.Query(ctx, "SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0")
		if err != nil {
			t.Fatal(err)
		}
		by := map[int][]int{}
		for rows.Next() {
			var pid int
			var on []int
			if err := rows.Scan(&pid, &on); err != nil {
				t.Fatal(err)
			}
			by[pid] = on
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		behind := map[int]bool{lockerPID: true}
		for grew := true; grew; {
			grew = false
			for pid, on := range by {
				for _, o := range on {
					if behind[o] && !behind[pid] {
						behind[pid], grew = true, true
					}
				}
			}
		}
		return len(behind) - 1
	}
	slots := b.d.(*pgDialect).spare.slots
	saturated := func() bool {
		if pool.Stat().AcquiredConns() == size && blocked() == size {
			return true // every connection stuck behind the lock
		}
		return slots.Cap() > 0 && slots.InUse() == slots.Cap() && blocked() == slots.Cap()
	}
	for end := time.Now().Add(time.Minute); !saturated(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the acquires did not get stuck in a minute (%d blocked, %d connections acquired)", blocked(), pool.Stat().AcquiredConns())
		}
	}
	kctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ka, err := b.KeepAlive(kctx, first.ID, nil, nil)
	if err != nil {
		t.Fatalf("keep-alive with %d calls stuck on %d of the pool's %d connections: %v", 6, blocked(), size, err)
	}
	if ka.Expired {
		t.Fatal("the session expired")
	}
	t.Logf("keep-alive answered with %d acquires stuck on %d of %d connections", 6, blocked(), size)
}

// startStuckAcquires opens n sessions on b and starts, on a goroutine each, an Acquire of
// "stuck", which waits behind the row lock the caller's transaction holds on that lease; the
// caller waits for the returned group once it has let the lock go.
func startStuckAcquires(ctx context.Context, t *testing.T, b *Backend, n int) *sync.WaitGroup {
	t.Helper()
	var sids []spi.SessionID
	for range n {
		s, err := b.OpenSession(ctx, "waiter", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	var wg sync.WaitGroup
	for _, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Acquire(ctx, sid, "stuck"); err != nil {
				t.Errorf("acquire: %v", err)
			}
		}()
	}
	return &wg
}

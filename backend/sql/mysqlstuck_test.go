package sql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// TestMySQLWakerTTLFollowsSessions: the waker's TTL (how long a blocking wait lasts, and twice
// it how long a name counts as waited for) is the longest session TTL opened. The 15 s it
// starts with was kept as a floor (max of it and every TTL opened), so with 1 s sessions every
// blocking wait lasted 15 s (bench/results/outage.md, MariaDB, 2026-12-05). On the old code
// the TTL stays 15 s.
func TestMySQLWakerTTLFollowsSessions(t *testing.T) {
	w := newMySQLWaker(nil, wire.SQLDialect{})
	w.opened("a", time.Second)
	if w.ttl != time.Second {
		t.Fatalf("TTL after a 1 s session = %v; want 1s", w.ttl)
	}
	w.opened("b", 3*time.Second)
	w.opened("c", 2*time.Second)
	if w.ttl != 3*time.Second {
		t.Fatalf("TTL after sessions of 1, 3 and 2 s = %v; want the longest, 3s", w.ttl)
	}
}

// stuckLock takes name's named lock (the spec's wake_lock) on a connection of its own, as a
// waiter's connection silenced by its link after the server gave it the lock keeps it: for
// good. It returns the connection's id.
func stuckLock(t *testing.T, ctx context.Context, admin *sql.DB, w *mysqlWaker, name string) (*sql.Conn, int64) {
	t.Helper()
	c, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if got, err := w.getLock(ctx, c, name, 0); err != nil || !got {
		t.Fatalf("GET_LOCK = %v, %v", got, err)
	}
	return c, id
}

// lockKeeper is the connection that holds name's named lock, if any.
func lockKeeper(t *testing.T, ctx context.Context, admin *sql.DB, w *mysqlWaker, name string) sql.NullInt64 {
	t.Helper()
	var id sql.NullInt64
	if err := admin.QueryRowContext(ctx, w.lockConn, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestMySQLWaiterWokenPastStuckLock: a waiter blocked on a lease's named lock that a
// connection other than the holder's marker keeps (a waiter's connection that its link
// silenced after the server gave it the lock: it never lets it go) is still woken when the
// lease is released, within a session TTL: a blocking wait that times out reads the lease row.
// The old code probed and blocked again without reading, for as long as the lock was kept (and
// each wait lasted 15 s, see TestMySQLWakerTTLFollowsSessions): no hint in the test's minute.
// The holder has no Hints subscribers, so it does not mark (nor end the keeper, see
// TestMySQLHolderEndsStuckLockKeeper).
func TestMySQLWaiterWokenPastStuckLock(t *testing.T) {
	direct, cfg := myDatabase(t, "simba_sqlbe_")
	holder := migrated(t, direct, WithHousekeepingInterval(-1))
	waiter := open(t, direct, WithHousekeepingInterval(-1))
	w := waiter.waker.(*mysqlWaker)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	name := "stuck-wait-" + unique(t)
	_, keeper := stuckLock(t, ctx, admin, w, name)

	hints, err := waiter.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hs := openSession(t, holder, 10*time.Minute)
	tok := grant(t, holder, hs, name)
	ws := openSession(t, waiter, 2*time.Second) // blocking waits of 2 s, waited for 4 s
	if r, err := waiter.Acquire(ctx, ws, name); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("the waiter's Acquire = %+v, %v; want held", r, err)
	}
	for w.snapshot().blocks == 0 { // blocked on the kept lock
		time.Sleep(5 * time.Millisecond)
	}
	if err := holder.Release(ctx, hs, name, tok); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(time.Minute)
	for woken := false; !woken; {
		select {
		case h := <-hints:
			woken = h.Kind == spi.Released && h.Name == name
		case <-deadline:
			t.Fatalf("no Released hint for %s while connection %d keeps its named lock (%+v)", name, keeper, w.snapshot())
		}
	}
	if k := lockKeeper(t, ctx, admin, w, name); !k.Valid || k.Int64 != keeper {
		t.Fatalf("the named lock's keeper is %v; want %d still (the waiter was woken past it)", k, keeper)
	}
}

// TestMySQLHolderEndsStuckLockKeeper: a holder whose marker cannot take its lease's named lock
// for a whole mark timeout ends the connection that keeps it (a waiter holds it for a round
// trip; one that keeps it is stuck, e.g. a waiter's silenced by its link after the server gave
// it the lock), and then marks: its waiters block on its marker again and are woken by its
// release. The old code tried again forever (bench/results/outage.md, MariaDB, 2026-12-05:
// holders' marks timed out after 1 s for as long as the silenced waiter's link was down): the
// keeper stays and the marker never marks.
func TestMySQLHolderEndsStuckLockKeeper(t *testing.T) {
	direct, cfg := myDatabase(t, "simba_sqlbe_")
	holder := migrated(t, direct, WithHousekeepingInterval(-1))
	w := holder.waker.(*mysqlWaker)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	name := "stuck-mark-" + unique(t)
	kc, keeper := stuckLock(t, ctx, admin, w, name)

	if _, err := holder.Hints(ctx); err != nil { // the holder marks while it has subscribers
		t.Fatal(err)
	}
	hs := openSession(t, holder, 10*time.Minute)
	grant(t, holder, hs, name)
	deadline := time.After(time.Minute)
	for w.snapshot().marks == 0 {
		select {
		case <-deadline:
			t.Fatalf("the holder has not marked its lease while connection %d keeps the named lock (keeper now %v; %+v)",
				keeper, lockKeeper(t, ctx, admin, w, name), w.snapshot())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if k := lockKeeper(t, ctx, admin, w, name); !k.Valid || k.Int64 == keeper {
		t.Fatalf("the named lock's keeper is %v; want the holder's marker", k)
	}
	if s := w.snapshot(); s.unsticks != 1 {
		t.Fatalf("the waker ended %d keepers; want 1", s.unsticks)
	}
	if _, err := w.getLock(ctx, kc, name, 0); err == nil {
		t.Fatal("the ended keeper's connection still runs statements")
	}
}

// TestMySQLUnstickSparesAnotherHoldersMarker: a backend that believes it holds a lease it lost
// (its keep-alive has not told it yet) ends nothing: the lock's keeper may be the new holder's
// marker.
func TestMySQLUnstickSparesAnotherHoldersMarker(t *testing.T) {
	direct, cfg := myDatabase(t, "simba_sqlbe_")
	holder := migrated(t, direct, WithHousekeepingInterval(-1))
	stale := open(t, direct, WithHousekeepingInterval(-1))
	w := stale.waker.(*mysqlWaker)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx := testCtx(t)
	name := "stuck-spare-" + unique(t)
	_, keeper := stuckLock(t, ctx, admin, w, name)
	hs := openSession(t, holder, 10*time.Minute)
	grant(t, holder, hs, name)
	ss := openSession(t, stale, 10*time.Minute)
	c, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := w.unstick(ctx, c, name, string(ss)); err != nil {
		t.Fatal(err)
	}
	if k := lockKeeper(t, ctx, admin, w, name); !k.Valid || k.Int64 != keeper {
		t.Fatalf("the named lock's keeper is %v; want %d still (not the caller's lease)", k, keeper)
	}
	if err := w.unstick(ctx, c, name, string(hs)); err != nil { // the holder's: ended
		t.Fatal(err)
	}
	if s := w.snapshot(); s.unsticks != 1 {
		t.Fatalf("unstick ended %d keepers; want 1", s.unsticks)
	}
}

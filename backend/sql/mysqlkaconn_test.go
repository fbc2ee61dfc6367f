package sql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/spi"
)

// TestMySQLKeepAliveGetsAConnection: on a user's pool of 3 connections (SetMaxOpenConns) whose
// calls are all stuck behind a row lock (six acquires of one lease whose row another
// transaction holds), a keep-alive still gets a connection and is answered: the backend's
// other calls take at most 2 of them (keepAliveConn). Before, the acquires took all 3
// connections and the keep-alive waited for the pool until its context ended: a session lost
// behind its own client's backlog (a client keeps 32 calls in flight).
//
// Counted, not timed: the keep-alive is sent once the pool holds every connection it will
// give the acquires (3 before, the 2 slots now), and its context only bounds a hang.
func TestMySQLKeepAliveGetsAConnection(t *testing.T) {
	myKeepAliveBehindBacklog(t, 3, false)
}

// TestMySQLKeepAliveGetsAConnectionBesideWaker: the same on a pool of 4, whose waker may pin a
// quarter of it (one connection: the marker's, which holds the named lock of a lease the
// backend holds). The waker's connections take the calls' slots too, so the marker, and the
// acquires on the 2 slots it leaves, still leave one connection to the keep-alive. With slots
// for the calls alone (3 of them), the acquires and the marker took all 4 connections, and
// the keep-alive waited as on the old code.
func TestMySQLKeepAliveGetsAConnectionBesideWaker(t *testing.T) {
	myKeepAliveBehindBacklog(t, 4, true)
}

// myKeepAliveBehindBacklog runs the keep-alive tests on a pool of size connections (see
// TestMySQLKeepAliveGetsAConnection); marked: the backend has a Hints subscriber and holds a
// lease, whose named lock its marker holds on a connection of the pool before the acquires
// start.
func myKeepAliveBehindBacklog(t *testing.T, size int, marked bool) {
	const waiters = 6
	_, cfg := myDatabase(t, "simba_sqlbe_")
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	// The acquires wait for the row lock for as long as the test runs (the server's default
	// is 50 s, after which they would fail and give their connections back).
	bcfg := cfg.Clone()
	bcfg.Params = map[string]string{"innodb_lock_wait_timeout": "600"}
	bcfg.InterpolateParams = true
	conn, err := mysqldriver.NewConnector(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn) // the user's pool: not on MySQLConnector, so the waker's come from it
	db.SetMaxOpenConns(size)
	t.Cleanup(func() { db.Close() })
	b, ctx := migratedMySQL(t, db)
	w := b.waker.(*mysqlWaker)
	if marked {
		if got := w.budget(); got != 1 {
			t.Fatalf("waker budget %d on a pool of %d, want 1 (the marker)", got, size)
		}
		if _, err := b.Hints(ctx); err != nil {
			t.Fatal(err)
		}
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
	pinned := 0 // connections the waker holds for good
	if marked {
		h, err := b.Acquire(ctx, first.ID, "held")
		if err != nil || h.Kind != spi.Granted {
			t.Fatalf("acquire of the held lease: %+v, %v", h, err)
		}
		waitUntil(t, "the marker holds the held lease's named lock", func() bool { return w.snapshot().marks > 0 })
		pinned = 1
	}
	locker, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	tx, err := locker.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			_ = tx.Rollback()
		}
	}
	defer unlock()
	if _, err := tx.ExecContext(ctx, "SELECT 1 FROM simba_lease WHERE name = 'stuck' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	wg := startStuckAcquires(ctx, t, b, waiters)
	defer wg.Wait()
	defer unlock() // before the acquires are waited for
	// blocked counts the connections of the test's database waiting for a row lock: the
	// locker's is the only row lock held there. MariaDB refreshes what INNODB_TRX shows only
	// once it has gone unread for 100 ms: it is polled every 200 ms.
	blocked := func() int {
		var n int
		err := admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX t
			JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ?`, cfg.DBName).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	slots := b.d.(*stdDialect).spare.slots
	saturated := func() bool {
		if db.Stats().InUse == size && blocked() == size-pinned {
			return true // every connection the waker left stuck behind the lock
		}
		return slots.Cap() > 0 && slots.InUse() == slots.Cap() && blocked() == slots.Cap()-pinned
	}
	for end := time.Now().Add(time.Minute); !saturated(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the acquires did not get stuck in a minute (%d blocked, %d connections in use)", blocked(), db.Stats().InUse)
		}
	}
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ka, err := b.KeepAlive(kctx, first.ID, nil, nil)
	if err != nil {
		t.Fatalf("keep-alive with %d calls stuck on %d of the pool's %d connections (%d in use, the waker's %d): %v",
			waiters, blocked(), size, db.Stats().InUse, pinned, err)
	}
	if ka.Expired {
		t.Fatal("the session expired")
	}
	t.Logf("keep-alive answered with %d acquires stuck on %d of %d connections (the waker's %d)", waiters, blocked(), size, pinned)
}

// TestMySQLSlotsLetGoOnErrors: every path that takes one of the calls' slots on a user's
// bounded pool lets it go: a call that fails, and the waker's conn when the pool refuses a
// connection, when learning the connection's id fails, and when it succeeds (put); a conn
// or call that finds every slot taken gives up with its context and takes none, and a
// keep-alive's run needs none.
func TestMySQLSlotsLetGoOnErrors(t *testing.T) {
	_, cfg := myDatabase(t, "simba_sqlbe_")
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(3)
	t.Cleanup(func() { db.Close() })
	b, ctx := migratedMySQL(t, db)
	d := b.d.(*stdDialect)
	w := b.waker.(*mysqlWaker)
	slots := d.spare.slots
	if slots.Cap() != 2 || w.slots != slots {
		t.Fatalf("a pool of 3: %d slots (the waker's the same: %v), want 2 shared", slots.Cap(), w.slots == slots)
	}
	free := func(what string) {
		t.Helper()
		if n := slots.InUse(); n != 0 {
			t.Fatalf("%s: %d slots in use, want 0", what, n)
		}
	}
	// A call that fails.
	errFn := errors.New("fn failed")
	if err := d.with(ctx, true, func(sqlq.Queries) error { return errFn }); !errors.Is(err, errFn) {
		t.Fatalf("with: %v, want %v", err, errFn)
	}
	free("a transaction whose fn failed")
	// The waker's conn, and put.
	c, err := w.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slots.InUse() != 1 {
		t.Fatalf("the waker's connection holds %d slots, want 1", slots.InUse())
	}
	w.put(c)
	free("the waker's connection put back")
	connID := w.connID
	w.connID = "SELECT 1, 2, 3" // its Scan fails (neither no rows nor the server's error)
	w.ids = map[any]connRef{}   // so that the id is asked again
	if _, err := w.conn(ctx); err == nil {
		t.Fatal("conn whose id query fails: no error")
	}
	w.connID = connID
	free("a waker connection whose id could not be learnt")
	// Every slot taken: conn gives up with its context.
	for range slots.Cap() {
		if took, err := slots.Enter(ctx); !took || err != nil {
			t.Fatal(took, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := w.conn(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("conn with every slot taken: %v, want context.Canceled", err)
	}
	if err := d.with(cctx, false, func(sqlq.Queries) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call with every slot taken: %v, want context.Canceled", err)
	}
	if err := d.with(urgentCtx(cctx), false, func(sqlq.Queries) error { return nil }); err != nil {
		t.Fatalf("a keep-alive's run with every slot taken: %v, want none (it takes no slot)", err)
	}
	if slots.InUse() != slots.Cap() {
		t.Fatalf("%d slots in use, want %d", slots.InUse(), slots.Cap())
	}
	for range slots.Cap() {
		slots.Leave(true)
	}
	// The pool refuses (closed).
	db.Close()
	if _, err := w.conn(ctx); err == nil {
		t.Fatal("conn on a closed pool: no error")
	}
	free("a waker connection the pool refused")
}

// migratedMySQL returns a backend on db (NewMySQL, no housekeeping), closed when the test
// ends, with the schema migrated, and the test's context.
func migratedMySQL(t *testing.T, db *sql.DB) (*Backend, context.Context) {
	t.Helper()
	b, err := NewMySQL(db, WithHousekeepingInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := testCtx(t)
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return b, ctx
}

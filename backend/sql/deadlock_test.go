package sql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/spi"
)

// TestMySQLDeadlockVictimRunsAgain builds, on purpose, the deadlock that contention produces
// between an acquire and a holder's release: another transaction locks the lease row, the
// release (which share-locks its session row, then wants the lease row) waits for it, and the
// other transaction then locks the session row. InnoDB breaks the cycle by rolling back the
// lighter transaction, the release; the backend runs it again, so Release succeeds once the
// other transaction commits instead of failing with an outcome-unknown error.
func TestMySQLDeadlockVictimRunsAgain(t *testing.T) {
	b := migrated(t, myDSN(t))
	ctx := testCtx(t)
	d := b.d.(*stdDialect)
	s, err := b.OpenSession(ctx, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const name = "deadlock.lease"
	got, err := b.Acquire(ctx, s.ID, name)
	if err != nil || got.Kind != spi.Granted {
		t.Fatalf("acquire: %+v %v", got, err)
	}
	deadlocks := func() int64 {
		var k string
		var n int64
		if err := d.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := deadlocks()

	other, err := d.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	run := func(q string, args ...any) {
		t.Helper()
		if _, err := other.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	run("CREATE TABLE deadlock_weight (id INT PRIMARY KEY) ENGINE=InnoDB")
	run("BEGIN")
	// Undo entries make this transaction the heavier one, so InnoDB picks the release as victim.
	values := make([]string, 200)
	for i := range values {
		values[i] = fmt.Sprintf("(%d)", i)
	}
	run("INSERT INTO deadlock_weight (id) VALUES " + strings.Join(values, ","))
	run("SELECT token FROM simba_lease WHERE name = ? FOR UPDATE", name)

	released := make(chan error, 1)
	go func() { released <- b.Release(ctx, s.ID, name, got.Token) }()
	// Wait until the release waits for the lease row (it share-locked its session row first).
	// INNODB_TRX does not list autocommit statements on MariaDB; the monitor output does.
	for deadline := time.Now().Add(10 * time.Second); !releaseWaits(t, d); {
		select {
		case err := <-released:
			t.Fatalf("release returned (%v) without waiting for the locked lease row", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the release never waited for the locked lease row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Closing the cycle: InnoDB rolls the release back at once and this lock is granted.
	if _, err := other.ExecContext(ctx, "SELECT id FROM simba_session WHERE id = ? FOR UPDATE", string(s.ID)); err != nil {
		var me *mysqldriver.MySQLError
		if errors.As(err, &me) && me.Number == 1213 {
			t.Fatal("InnoDB chose the heavier transaction as the victim; the test's setup no longer holds")
		}
		t.Fatal(err)
	}
	run("COMMIT")

	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("release after being a deadlock victim: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("release did not return")
	}
	if after := deadlocks(); after <= before {
		t.Fatalf("Innodb_deadlocks %d → %d: no deadlock happened, the test proves nothing", before, after)
	}
	// The release took effect: another session takes the lease with the next token.
	s2, err := b.OpenSession(ctx, "next", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	next, err := b.Acquire(ctx, s2.ID, name)
	if err != nil || next.Kind != spi.Granted || next.Token <= got.Token {
		t.Fatalf("acquire after the release: %+v %v; want granted with a token > %d", next, err, got.Token)
	}
}

// releaseWaits reports whether the InnoDB monitor's list of transactions shows the release
// statement waiting for a lock.
func releaseWaits(t *testing.T, d *stdDialect) bool {
	t.Helper()
	return statementWaits(t, d, "ReleaseNoNotify")
}

// statementWaits reports whether the InnoDB monitor's list of transactions shows the statement
// of sqlc name query waiting for a lock.
func statementWaits(t *testing.T, d *stdDialect, query string) bool {
	t.Helper()
	var typ, name, status string
	if err := d.db.QueryRowContext(testCtx(t), "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		t.Fatal(err)
	}
	// Only the live transactions, not the LATEST DETECTED DEADLOCK section above them.
	_, trx, _ := strings.Cut(status, "\nTRANSACTIONS\n")
	for _, tx := range strings.Split(trx, "---TRANSACTION") {
		if strings.Contains(tx, query) && strings.Contains(tx, "FOR THIS LOCK TO BE GRANTED") {
			return true
		}
	}
	return false
}

// TestMySQLKeepAliveWaitersLockSessionFirst: the keep-alive's waiter statement on MySQL/MariaDB
// (keep_alive_waiters_join) locks the session row before its waiter rows, the global lock
// order (spec/sql.yaml), so that a close of the session (session row, then its waiter rows by
// the cascade) cannot deadlock with it. Another transaction locks the session's first waiter
// row; the keep-alive's statement then waits for it, and while it waits the session row is
// already locked (a FOR UPDATE NOWAIT of it is refused). A statement that locked waiter rows
// first (a correlated subquery reads the session row after the first waiter row) would be
// waiting with the session row free. Once the other transaction ends, the keep-alive moves the
// entries.
func TestMySQLKeepAliveWaitersLockSessionFirst(t *testing.T) {
	b := migrated(t, myDSN(t), WithHousekeepingInterval(-1))
	ctx := testCtx(t)
	d := b.d.(*stdDialect)
	first, second := "kaorder-a-"+unique(t), "kaorder-b-"+unique(t)
	holder, waiter := openSession(t, b, longTTL), openSession(t, b, longTTL)
	for _, n := range []string{first, second} {
		grant(t, b, holder, n)
		queueBehind(t, b, waiter, n, holder)
	}
	other, err := d.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	// The first of the session's entries in simba_waiter_session's order (session, name).
	if _, err := other.ExecContext(ctx, "SELECT name FROM simba_waiter WHERE name = ? AND session_id = ? FOR UPDATE", first, string(waiter)); err != nil {
		t.Fatal(err)
	}
	before := waiterExpiry(t, b, waiter, first)
	kept := make(chan error, 1)
	go func() {
		ka, err := b.KeepAlive(ctx, waiter, nil, nil)
		if err == nil && ka.Expired {
			err = errors.New("session expired")
		}
		kept <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); !statementWaits(t, d, "KeepAliveWaitersJoin"); {
		select {
		case err := <-kept:
			t.Fatalf("keep-alive returned (%v) without waiting for the locked waiter row", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the keep-alive's waiter statement never waited for the locked waiter row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	probe, err := d.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	_, err = probe.ExecContext(ctx, "SELECT id FROM simba_session WHERE id = ? FOR UPDATE NOWAIT", string(waiter))
	var me *mysqldriver.MySQLError
	if !errors.As(err, &me) || (me.Number != 1205 && me.Number != 3572) {
		t.Errorf("FOR UPDATE NOWAIT of the session row while the keep-alive waits for a waiter row: %v; want refused (1205 on MariaDB, 3572 on MySQL 8): the statement locks the session row first", err)
	}
	if _, err := other.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-kept:
		if err != nil {
			t.Fatalf("keep-alive after the waiter row was let go: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("keep-alive did not return")
	}
	if after := waiterExpiry(t, b, waiter, first); after <= before {
		t.Fatalf("entry's expiry %d -> %d after the keep-alive; want moved to the renewed session's", before, after)
	}
}

// TestPostgresDeadlockVictimRunsAgain builds the PostgreSQL form of the cycle: an acquire of a
// lease whose holder expired locks the lease row, then wants the holder's session row, which
// another transaction (standing in for the holder's close) has locked and which then wants
// the lease row. The acquire, waiting longer, detects the deadlock and is rolled back; the
// backend runs it again and it takes the lease once the other transaction commits.
func TestPostgresDeadlockVictimRunsAgain(t *testing.T) {
	b := migrated(t, pgDSN(t))
	ctx := testCtx(t)
	pool := b.d.(*pgDialect).pool
	holder, err := b.OpenSession(ctx, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const name = "deadlock.lease"
	got, err := b.Acquire(ctx, holder.ID, name)
	if err != nil || got.Kind != spi.Granted {
		t.Fatalf("acquire: %+v %v", got, err)
	}
	expire(t, b, holder.ID)
	taker, err := b.OpenSession(ctx, "taker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	deadlocks := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := deadlocks()

	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(context.Background())
	if _, err := other.Exec(ctx, "SELECT id FROM simba_session WHERE id = $1 FOR UPDATE", string(holder.ID)); err != nil {
		t.Fatal(err)
	}
	acquired := make(chan spi.Acquire, 1)
	failed := make(chan error, 1)
	go func() {
		r, err := b.Acquire(ctx, taker.ID, name)
		if err != nil {
			failed <- err
			return
		}
		acquired <- r
	}()
	// Wait until the acquire waits for the holder's session row (holding the lease row).
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%name: Acquire :one%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the acquire never waited for the holder's session row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Closing the cycle. The acquire has waited longer: its deadlock check (deadlock_timeout,
	// 1 s, after it began to wait) runs first and rolls it back, which grants this lock. Half
	// a second between the two waits keeps that order on a loaded machine: with the poll's
	// 10 ms alone the other transaction's check came first once (2 CPUs, load 9).
	time.Sleep(500 * time.Millisecond)
	if _, err := other.Exec(ctx, "SELECT token FROM simba_lease WHERE name = $1 FOR UPDATE", name); err != nil {
		t.Fatalf("the other transaction was chosen as the victim (the test's setup no longer holds): %v", err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-failed:
		t.Fatalf("acquire after being a deadlock victim: %v", err)
	case r := <-acquired:
		if r.Kind != spi.Granted || r.Token <= got.Token {
			t.Fatalf("acquire after the deadlock: %+v; want granted with a token > %d", r, got.Token)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("acquire did not return")
	}
	if after := deadlocks(); after <= before {
		t.Fatalf("pg_stat_database.deadlocks %d → %d: no deadlock happened, the test proves nothing", before, after)
	}
}

package sql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/internal/spi"
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
	if err != nil || next.Kind != spi.Granted || next.Token != got.Token+1 {
		t.Fatalf("acquire after the release: %+v %v; want granted with token %d", next, err, got.Token+1)
	}
}

// releaseWaits reports whether the InnoDB monitor's list of transactions shows the release
// statement waiting for a lock.
func releaseWaits(t *testing.T, d *stdDialect) bool {
	t.Helper()
	var typ, name, status string
	if err := d.db.QueryRowContext(testCtx(t), "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		t.Fatal(err)
	}
	// Only the live transactions, not the LATEST DETECTED DEADLOCK section above them.
	_, trx, _ := strings.Cut(status, "\nTRANSACTIONS\n")
	for _, tx := range strings.Split(trx, "---TRANSACTION") {
		if strings.Contains(tx, "ReleaseNoNotify") && strings.Contains(tx, "FOR THIS LOCK TO BE GRANTED") {
			return true
		}
	}
	return false
}

package sql

import (
	"context"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// TestMySQLStoppedInsideATransactionDoesNotHoldUpKeepAlives: a process stopped inside an
// acquire transaction (SIGSTOP, a GC pause, a VM frozen) keeps its connection open and its
// transaction's row locks; acquire_read_lease locks the holder's session row in share mode,
// so the holder's keep-alive (an UPDATE of that row) waited behind it for the server's
// wait_timeout (8 h; trial27: the untouched processes lost their sessions 4 times each). The
// backend's connections now carry idle_transaction_timeout (a third of the shortest TTL, at
// least 1 s): the server ends the stopped one's connection, its locks go with it, and the
// holder's keep-alive succeeds within a few attempts of a call timeout each.
func TestMySQLStoppedInsideATransactionDoesNotHoldUpKeepAlives(t *testing.T) {
	const ttl = 9 * time.Second // idle bound 3 s; renewal interval, the call timeout, 3 s
	dsn := myDSN(t)
	holderB := migrated(t, dsn)
	stoppedB := open(t, dsn)
	ctx := testCtx(t)
	holder, err := holderB.OpenSession(ctx, "holder", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stoppedB.OpenSession(ctx, "stopped", ttl); err != nil {
		t.Fatal(err)
	}

	// The stopped process: one of its backend's connections, inside a transaction that holds
	// the share lock acquire_read_lease takes on the holder's session row, and then nothing.
	wd, _ := wire.SQLDialectByName(wire.SQLMySQL)
	c, err := stoppedB.d.(*stdDialect).conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Raw(func(any) error { return driver.ErrBadConn }); c.Close() }()
	if _, err := c.ExecContext(ctx, wd.Begin); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := c.QueryRowContext(ctx, "SELECT id FROM simba_session WHERE id = ? LOCK IN SHARE MODE", string(holder.ID)).Scan(&id); err != nil {
		t.Fatal(err)
	}

	// The holder keeps its session alive as the client does: one call per renewal interval,
	// each bounded by it. Before the fix every one waited in LOCK WAIT until its deadline, and
	// the session expired after three.
	const attempts = 5
	var failed []error
	renewed := false
	for i := 0; i < attempts && !renewed; i++ {
		cctx, cancel := context.WithTimeout(ctx, ttl/3)
		ka, err := holderB.KeepAlive(cctx, holder.ID, nil, nil)
		cancel()
		switch {
		case err != nil:
			failed = append(failed, err)
		case ka.Expired:
			t.Fatalf("attempt %d: the holder's session expired (failed before: %v)", i+1, failed)
		default:
			renewed = true
		}
	}
	if !renewed {
		t.Fatalf("the holder's keep-alive failed %d times in a row behind the stopped transaction: %v", attempts, failed)
	}
	t.Logf("keep-alive renewed after %d failed attempts: %v", len(failed), failed)

	// The server ended the stopped process's connection: its transaction is gone.
	_, err = c.ExecContext(ctx, wire.SQLCommit)
	if err == nil {
		t.Fatalf("the stopped connection's COMMIT succeeded: the server kept its idle transaction")
	}
	// As the stopped process sees it when it runs again: a lost connection, which it retries.
	if got := stoppedB.d.(*stdDialect).classify("acquire", err); spi.Classify(got) != spi.Retryable {
		t.Errorf("the stopped connection's error %v classifies as %v, want retryable", err, spi.Classify(got))
	}
}

// TestMySQLIdleTxTimeoutUnknownIsLeft: MySQL 8 has no idle_transaction_timeout and refuses it
// as an unknown system variable (1193); the backend then leaves it (the server ends such a
// connection at wait_timeout) instead of failing every transaction. Stood in for here by a
// variable no server has.
func TestMySQLIdleTxTimeoutUnknownIsLeft(t *testing.T) {
	b := migrated(t, myDSN(t))
	d := b.d.(*stdDialect)
	d.idleTx = "SET SESSION simba_no_such_variable = ?"
	ctx := testCtx(t)
	s, err := b.OpenSession(ctx, "o", 3*time.Second)
	if err != nil {
		t.Fatalf("OpenSession with an idle-transaction bound the server does not know: %v", err)
	}
	if _, err := b.Acquire(ctx, s.ID, "idletx-unknown"); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if !d.idleTxOff.Load() {
		t.Errorf("the refused statement is still tried on every new connection")
	}
}

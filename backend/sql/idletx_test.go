package sql

import (
	"context"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/generated/sqlq"
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

	// Before the fix every keep-alive waited in LOCK WAIT until its deadline, and the session
	// expired after three.
	failed, renewed, expired := keepAliveBehindStalledTx(ctx, holderB, holder.ID, ttl)
	if expired > 0 {
		t.Fatalf("attempt %d: the holder's session expired (failed before: %v)", expired, failed)
	}
	if !renewed {
		t.Fatalf("the holder's keep-alive failed %d times in a row behind the stopped transaction: %v", idleTxAttempts, failed)
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

// TestPostgresStoppedInsideATransactionDoesNotHoldUpKeepAlives: PostgreSQL's acquire_queued
// transaction locks session rows FOR SHARE (the caller's; in a takeover, the holder's), and a
// client stopped inside it (SIGSTOP, a VM frozen) or whose link lost the replies leaves it
// idle in transaction with those locks until the server finds the client gone (TCP keepalive,
// 2 h by default): the keep-alives of those sessions (an UPDATE of their rows) waited behind
// it until the sessions expired. The backend now sends a transaction-local
// idle_in_transaction_session_timeout (a third of the shortest TTL, at least 1 s) with each
// transaction's BEGIN: the server ends the stopped transaction's connection (FATAL 25P03), its
// locks go with it, and the holder's keep-alive succeeds within a few attempts. The stopped
// client, when it runs again, gets a retryable error, and its pool keeps no broken connection.
func TestPostgresStoppedInsideATransactionDoesNotHoldUpKeepAlives(t *testing.T) {
	const ttl = 9 * time.Second // idle bound 3 s; renewal interval, the call timeout, 3 s
	dsn := pgDSN(t)
	holderB := migrated(t, dsn)
	stoppedB := open(t, dsn)
	ctx := testCtx(t)
	holder, err := holderB.OpenSession(ctx, "holder", ttl)
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := stoppedB.OpenSession(ctx, "stopped", ttl)
	if err != nil {
		t.Fatal(err)
	}

	// The stopped process: a transaction of its backend that holds a share lock on the holder's
	// session row (acquire_lock_session's, run here on the holder's id: the lock a takeover
	// takes), and then nothing until the holder's keep-alives are done.
	sd := stoppedB.d.(*pgDialect)
	locked, resume := make(chan error, 1), make(chan struct{})
	var resumedErr error
	done := make(chan error, 1)
	go func() {
		done <- sd.withPipeline(ctx, func(q sqlq.Queries, tx *pipeTx) error {
			_, err := q.AcquireLockSession(ctx, sqlq.AcquireLockSessionParams{SessionID: string(holder.ID)})
			locked <- err
			if err != nil {
				return err
			}
			<-resume
			// Running again: the transaction's next statement.
			_, resumedErr = q.AcquireLockSession(ctx, sqlq.AcquireLockSessionParams{SessionID: string(stopped.ID)})
			return resumedErr
		})
	}()
	if err := <-locked; err != nil {
		t.Fatal(err)
	}

	// Before the fix every keep-alive waited for the share lock until its deadline, and the
	// session expired after three.
	failed, renewed, expired := keepAliveBehindStalledTx(ctx, holderB, holder.ID, ttl)
	close(resume)
	err = <-done
	if expired > 0 {
		t.Fatalf("attempt %d: the holder's session expired (failed before: %v)", expired, failed)
	}
	if !renewed {
		t.Fatalf("the holder's keep-alive failed %d times in a row behind the stopped transaction: %v", idleTxAttempts, failed)
	}
	t.Logf("keep-alive renewed after %d failed attempts: %v", len(failed), failed)

	// The server ended the stopped transaction's connection: its next statement failed, and
	// the stopped process retries it.
	if resumedErr == nil || err == nil {
		t.Fatalf("the stopped transaction's next statement succeeded (%v, %v): the server kept its idle transaction", resumedErr, err)
	}
	t.Logf("the stopped transaction, running again: %v", err)
	if got := sd.classify("acquire", err); spi.Classify(got) != spi.Retryable {
		t.Errorf("the stopped connection's error %v classifies as %v, want retryable", err, spi.Classify(got))
	}
	// The pool kept no connection the server ended (nor one inside a transaction): every call
	// of the stopped backend works at once.
	for i := 0; i < 4; i++ {
		if _, err := stoppedB.KeepAlive(ctx, stopped.ID, nil, nil); err != nil {
			t.Fatalf("keep-alive %d of the stopped backend after it ran again: %v", i+1, err)
		}
	}
	for _, c := range sd.pool.AcquireAllIdle(ctx) {
		closed, status := c.Conn().IsClosed(), c.Conn().PgConn().TxStatus()
		c.Release()
		if closed || status != 'I' {
			t.Errorf("the pool holds a connection closed=%v in transaction status %q", closed, status)
		}
	}
}

// TestPostgresIdleTxBoundIsTransactionLocal: the idle bound goes with the BEGIN of each of the
// backend's transactions, on both ways a pipelined transaction begins (its first batch, or a
// statement sent on its own), and lasts only until the transaction ends: the connection, which
// may belong to the application's pool (NewPostgres), keeps its own setting.
func TestPostgresIdleTxBoundIsTransactionLocal(t *testing.T) {
	b := migrated(t, pgDSN(t))
	ctx := testCtx(t)
	if _, err := b.OpenSession(ctx, "o", 6*time.Second); err != nil {
		t.Fatal(err)
	}
	d := b.d.(*pgDialect)
	const show = "SELECT current_setting('idle_in_transaction_session_timeout')"
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	check := func(way string, begin func(pc pgPipeConn) (string, error)) {
		t.Helper()
		got, err := begin(pgPipeConn{conn: conn, d: d, tx: &pipeTx{}})
		if err != nil {
			t.Fatalf("%s: %v", way, err)
		}
		if got != "2s" {
			t.Errorf("%s: idle_in_transaction_session_timeout inside the transaction = %q, want 2s (a third of the TTL)", way, got)
		}
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, show).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != "0" {
			t.Errorf("%s: the connection's own setting after the transaction = %q, want 0 (the server's)", way, got)
		}
	}
	check("first batch", func(pc pgPipeConn) (got string, err error) {
		var batch pgx.Batch
		batch.Queue(show).QueryRow(func(r pgx.Row) error { return r.Scan(&got) })
		return got, pc.SendBatch(ctx, &batch).Close()
	})
	check("statement on its own", func(pc pgPipeConn) (got string, err error) {
		return got, pc.QueryRow(ctx, show).Scan(&got)
	})
}

// idleTxAttempts is how many keep-alives keepAliveBehindStalledTx makes at most.
const idleTxAttempts = 5

// keepAliveBehindStalledTx keeps session id alive as the client does while another
// connection's transaction, stalled, holds a lock on its row: one call per renewal interval
// (ttl/3), each bounded by it, until one renews, at most idleTxAttempts times. It returns the
// calls that failed, whether one renewed, and the attempt (from 1) whose reply said the
// session expired (0: none; it stops there).
func keepAliveBehindStalledTx(ctx context.Context, b *Backend, id spi.SessionID, ttl time.Duration) (failed []error, renewed bool, expired int) {
	for i := 0; i < idleTxAttempts && !renewed; i++ {
		cctx, cancel := context.WithTimeout(ctx, ttl/3)
		ka, err := b.KeepAlive(cctx, id, nil, nil)
		cancel()
		switch {
		case err != nil:
			failed = append(failed, err)
		case ka.Expired:
			return failed, false, i + 1
		default:
			renewed = true
		}
	}
	return failed, renewed, 0
}

package sql

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/generated/sqlc/postgres"
	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/spi"
)

// TestPostgresReleaseAsFirstWaiterWithdrawsWakesNext: the holder releases while the lease's
// first waiter A withdraws, at the same instant; C waits behind A. Under READ COMMITTED A's
// withdraw_notify decides from its statement's snapshot whether the lease was owed to its
// entry: taken before the release committed, it saw the lease held and stayed silent. The
// release notified; C, woken, attempted before A's commit, was told HeldBy A with A's entry's
// time left (its session's: up to a TTL) and slept that long with the lease free. The
// operations are interleaved by hand: A's withdraw operation (its steps, as the backend's plan
// has them) in a transaction left open, the release, C's attempt, A's commit; after C's
// attempt, some notification of the name must come (failed before). Now the withdraw locks the
// lease row first (acquire_lock_lease, in one pipelined transaction with withdraw_notify), so
// a release waits for the withdraw's commit, or the withdraw's snapshot is taken after the
// release's commit and finds the lease free.
func TestPostgresReleaseAsFirstWaiterWithdrawsWakesNext(t *testing.T) {
	dsn := pgDSN(t)
	other := migrated(t, dsn) // the holder's and A's backend
	c := migrated(t, dsn)     // C's backend, which hears the notifications
	heard := hearing(c)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := c.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	waitListening(t, c)

	name, sentinel := "relwd-"+unique(t), "relwdsent-"+unique(t)
	holder, a := openSession(t, other, longTTL), openSession(t, other, longTTL)
	third := openSession(t, c, longTTL)
	tok := grant(t, other, holder, name)
	sentTok := grant(t, other, holder, sentinel)
	queueBehind(t, other, a, name, holder)
	for _, n := range []string{name, sentinel} {
		queueBehind(t, c, third, n, holder)
		waitListening(t, c)
	}

	connect := func() *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(testCtx(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	txA, err := connect().Begin(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = txA.Rollback(context.Background()) })
	p := other.plans["withdraw"]
	st := &opState{}
	st.Args.SessionID, st.Args.Name = string(a), name
	if err := p.runSteps(testCtx(t), sqlq.Postgres(txA), st); err != nil {
		t.Fatal(err)
	}

	// The release, on a connection of its own, whose wait for a lock the test can see.
	connR := connect()
	var pid int32
	if err := connR.QueryRow(testCtx(t), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		released <- postgres.New(connR).Release(testCtx(t), postgres.ReleaseParams{Name: name, SessionID: string(holder), Token: tok})
	}()
	waited := false
	for !waited {
		select {
		case err := <-released: // committed at once, A's transaction still open
			if err != nil {
				t.Fatal(err)
			}
			released <- nil
			awaitNotification(t, heard, name) // the release's
			// C attempts on the release's notification, before A's commit: told HeldBy A,
			// whose entry it sees.
			r, err := c.AcquireQueued(testCtx(t), third, name)
			if err != nil || r.Kind != spi.HeldBy || r.Holder != a {
				t.Fatalf("C's AcquireQueued before A's commit = %+v, %v; want HeldBy A", r, err)
			}
			t.Logf("C, woken by the release before A's commit: HeldBy A, %v left (C's next attempt without a hint)", r.Remaining)
			waited = true
			continue
		default:
		}
		var wait *string
		if err := other.d.(*pgDialect).pool.QueryRow(testCtx(t), "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid).Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if wait != nil && *wait == "Lock" { // the release waits for A's transaction
			break
		}
		time.Sleep(5 * time.Millisecond) // polled: the release either commits or waits
	}
	if err := txA.Commit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	// The server delivers notifications in commit order: one of name must come before the
	// sentinel's release's.
	if err := other.Release(testCtx(t), holder, sentinel, sentTok); err != nil {
		t.Fatal(err)
	}
	if !notifiedBefore(t, heard, name, sentinel) {
		t.Fatalf("the holder released as the first waiter A withdrew; C, woken by the release, was told HeldBy A "+
			"before A's commit, and A's commit notified nothing: C tries again only at A's entry's expiry (about a TTL) with %q free", name)
	}
	if r, err := c.AcquireQueued(testCtx(t), third, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("C's AcquireQueued after the release and the withdraw = %+v, %v; want Granted", r, err)
	}
	if !p.tx || !p.pipeline {
		t.Fatalf("withdraw on PostgreSQL: transaction %v, pipelined %v; want both (the lease row is locked until the commit)", p.tx, p.pipeline)
	}
}

package sql

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/generated/sqlc/postgres"
	"github.com/simba-go/simba/spi"
)

// TestPostgresSimultaneousWithdrawsWakeThird: A, B and C wait in that order for a free lease
// (reserved for A), and A withdraws while B withdraws or closes its session, at the same
// instant. Under READ COMMITTED each withdraw_notify (and close_session) decides from its
// statement's snapshot whether the lease was owed to its entry, so B's, made while A's delete
// was not yet committed, saw A's entry ahead and stayed silent, while A's notified (A was
// first). C, woken by A's notification, attempted before B's commit and was told HeldBy B with
// B's entry's time left (about a TTL); B's commit then sent nothing, and C slept that TTL with
// the lease free. The two transactions are interleaved by hand: A's withdraw, B's statement,
// A's commit, C's attempt, B's commit; after C's attempt, some notification of the name must
// come (both subtests failed before). Now withdraw_notify locks the entries ahead of its own
// (FOR SHARE) before counting them: B's statement waits for A's uncommitted delete, then skips
// the deleted entry, finds itself first and notifies at its commit; close_session reads them
// FOR SHARE SKIP LOCKED: an entry whose delete is in flight does not count.
func TestPostgresSimultaneousWithdrawsWakeThird(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func(ctx context.Context, q *postgres.Queries, name string, b spi.SessionID) error
	}{
		{"withdraw", func(ctx context.Context, q *postgres.Queries, name string, b spi.SessionID) error {
			return q.WithdrawNotify(ctx, postgres.WithdrawNotifyParams{Name: name, SessionID: string(b)})
		}},
		{"close", func(ctx context.Context, q *postgres.Queries, _ string, b spi.SessionID) error {
			return q.CloseSession(ctx, string(b))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { simultaneousWithdraws(t, tc.b) })
	}
}

// simultaneousWithdraws is TestPostgresSimultaneousWithdrawsWakeThird with bOp as B's
// statement.
func simultaneousWithdraws(t *testing.T, bOp func(ctx context.Context, q *postgres.Queries, name string, b spi.SessionID) error) {
	dsn := pgDSN(t)
	other := migrated(t, dsn) // the holder's, A's and B's backend
	c := migrated(t, dsn)     // C's backend, which hears the notifications
	heard := hearing(c)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := c.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	waitListening(t, c)

	name, sentinel := "race-"+unique(t), "racesent-"+unique(t)
	holder := openSession(t, other, longTTL)
	a, b := openSession(t, other, longTTL), openSession(t, other, longTTL)
	third := openSession(t, c, longTTL)
	tok := grant(t, other, holder, name)
	sentTok := grant(t, other, holder, sentinel)
	queueBehind(t, other, a, name, holder)
	queueBehind(t, other, b, name, holder)
	for _, n := range []string{name, sentinel} {
		queueBehind(t, c, third, n, holder)
		waitListening(t, c)
	}
	if err := other.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	awaitNotification(t, heard, name)
	queueBehind(t, c, third, name, a) // free, reserved for A

	begin := func() pgx.Tx {
		t.Helper()
		conn, err := pgx.Connect(testCtx(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		tx, err := conn.Begin(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return tx
	}
	txA, txB := begin(), begin()
	if err := postgres.New(txA).WithdrawNotify(testCtx(t), postgres.WithdrawNotifyParams{Name: name, SessionID: string(a)}); err != nil {
		t.Fatal(err)
	}
	// B's statement may wait for A's transaction (a withdraw does once it locks the entries
	// ahead).
	bDone := make(chan error, 1)
	go func() {
		bDone <- bOp(testCtx(t), postgres.New(txB), name, b)
	}()
	select {
	case err := <-bDone: // the old statement: B decided at once, seeing A's entry
		bDone <- err
	case <-time.After(200 * time.Millisecond): // waiting for A's lock (either way, A commits next)
	}
	if err := txA.Commit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	awaitNotification(t, heard, name) // A's
	// C attempts on A's notification, before B's commit: told HeldBy B, whose entry it sees.
	queueBehind(t, c, third, name, b)
	if err := txB.Commit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The server delivers notifications in commit order: one of name must come before the
	// sentinel's release's.
	if err := other.Release(testCtx(t), holder, sentinel, sentTok); err != nil {
		t.Fatal(err)
	}
	if !notifiedBefore(t, heard, name, sentinel) {
		t.Fatalf("A withdrew as B left; C, woken by A's notification, was told HeldBy B before B's commit, "+
			"and B's commit notified nothing: C tries again only at B's entry's expiry (about a TTL) with %q free", name)
	}
	if r, err := c.AcquireQueued(testCtx(t), third, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("C's AcquireQueued after both withdraws = %+v, %v; want Granted", r, err)
	}
}

// notifiedBefore reports whether a notification carrying name comes on heard before the first
// one carrying sentinel (which it waits for, skipping others).
func notifiedBefore(t *testing.T, heard <-chan notification, name, sentinel string) bool {
	t.Helper()
	saw := false
	timeout := time.After(30 * time.Second)
	for {
		select {
		case h := <-heard:
			if h.payload == sentinel {
				return saw
			}
			saw = saw || h.payload == name
		case <-timeout:
			t.Fatalf("no notification of %q within 30 s", sentinel)
		}
	}
}

// awaitNotification waits for a notification carrying name on heard, skipping others.
func awaitNotification(t *testing.T, heard <-chan notification, name string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case h := <-heard:
			if h.payload == name {
				return
			}
		case <-timeout:
			t.Fatalf("no notification of %q within 30 s", name)
		}
	}
}

package sql

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/spi"
)

// heldByOf checks that s's Acquire of name is HeldBy want (a free lease reserved for the first
// waiter want).
func heldByOf(t *testing.T, b *Backend, s spi.SessionID, name string, want spi.SessionID) {
	t.Helper()
	r, err := b.Acquire(testCtx(t), s, name)
	if err != nil || r.Kind != spi.HeldBy || r.Holder != want {
		t.Fatalf("Acquire(%s, %q) = %+v, %v; want HeldBy %s", s, name, r, err, want)
	}
}

// TestPostgresQueueEntriesLiveWithSession: on PostgreSQL a waiter entry lives as long as its
// session (spi.SessionQueue, reported true there only): a waiter whose only AcquireQueued was
// well over its TTL ago, its session kept alive by KeepAlive alone, still has the free lease
// reserved for it. Its entry's expiry was its session's as of that AcquireQueued, so before
// the keep-alive moved it (keep_alive_waiters) a late comer was granted the lease. MySQL and
// SQLite do not report SessionQueue: their waiters re-attempt.
func TestPostgresQueueEntriesLiveWithSession(t *testing.T) {
	for _, d := range dialects {
		b := migrated(t, d.dsn(t), WithHousekeepingInterval(-1))
		if got, want := b.QueueEntriesLiveWithSession(), d.name == "postgres"; got != want {
			t.Fatalf("%s: QueueEntriesLiveWithSession() = %v, want %v", d.name, got, want)
		}
	}
	const ttl = time.Second
	b := migrated(t, pgDSN(t), WithHousekeepingInterval(-1))
	name := "sessq-" + unique(t)
	holder, late := openSession(t, b, longTTL), openSession(t, b, longTTL)
	waiter := openSession(t, b, ttl)
	tok := grant(t, b, holder, name)
	queueBehind(t, b, waiter, name, holder)
	// Two TTLs and a half of keep-alives (every quarter TTL), no attempt.
	for range 10 {
		time.Sleep(ttl / 4)
		ka, err := b.KeepAlive(testCtx(t), waiter, nil, nil)
		if err != nil || ka.Expired {
			t.Fatalf("KeepAlive(waiter) = %+v, %v", ka, err)
		}
	}
	if err := b.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	heldByOf(t, b, late, name, waiter)
	queueBehind(t, b, late, name, waiter)
	if r, err := b.AcquireQueued(testCtx(t), waiter, name); err != nil || r.Kind != spi.Granted || r.Token <= tok {
		t.Fatalf("the waiter's AcquireQueued = %+v, %v; want granted above %d", r, err, tok)
	}
}

// TestPostgresKeepAliveRevivesNoLapsedEntry: the keep-alive moves only live entries; one that
// lapsed (expiry passed: written so here, as an earlier 5.x client's entry lapses when it
// stops re-attempting) lost its place and stays lapsed, so it reserves nothing.
func TestPostgresKeepAliveRevivesNoLapsedEntry(t *testing.T) {
	b := migrated(t, pgDSN(t), WithHousekeepingInterval(-1))
	name := "sessq-lapsed-" + unique(t)
	holder, late, waiter := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
	tok := grant(t, b, holder, name)
	queueBehind(t, b, waiter, name, holder)
	now, err := b.DatabaseNow(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	exec(t, b, "UPDATE simba_waiter SET expiry_ms = ? WHERE session_id = ?", now-1, string(waiter))
	if ka, err := b.KeepAlive(testCtx(t), waiter, nil, nil); err != nil || ka.Expired {
		t.Fatalf("KeepAlive(waiter) = %+v, %v", ka, err)
	}
	if err := b.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(testCtx(t), late, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire after the release, the only entry lapsed = %+v, %v; want granted", r, err)
	}
}

// failWithdraw fails WithdrawNotify while fail is set, as a withdrawal whose connection broke.
type failWithdraw struct {
	sqlq.Queries
	fail atomic.Bool
}

var errWithdrawCut = errors.New("test: withdraw cut")

func (f *failWithdraw) WithdrawNotify(ctx context.Context, p sqlq.WithdrawNotifyParams) error {
	if f.fail.Load() {
		return errWithdrawCut
	}
	return f.Queries.WithdrawNotify(ctx, p)
}

// TestPostgresFailedWithdrawRunsAgainWithKeepAlive: the client withdraws once and does not
// retry; on PostgreSQL the entry it leaves behind lives as long as its session, so it would
// hold a free lease back while the session lives. The backend runs the withdrawal again with
// the session's next keep-alive, and not when the session waits for the name again first.
func TestPostgresFailedWithdrawRunsAgainWithKeepAlive(t *testing.T) {
	b := migrated(t, pgDSN(t), WithHousekeepingInterval(-1))
	f := &failWithdraw{}
	b.wrap = func(inner sqlq.Queries) sqlq.Queries {
		f.Queries = inner
		return f
	}
	ctx := testCtx(t)
	name, again := "sessq-wd-"+unique(t), "sessq-wd-again-"+unique(t)
	holder, late, waiter := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
	tok := grant(t, b, holder, name)
	tokAgain := grant(t, b, holder, again)
	queueBehind(t, b, waiter, name, holder)
	queueBehind(t, b, waiter, again, holder)

	f.fail.Store(true)
	for _, n := range []string{name, again} {
		if err := b.Withdraw(ctx, waiter, n); !errors.Is(err, errWithdrawCut) {
			t.Fatalf("Withdraw(%q) = %v; want the cut", n, err)
		}
	}
	f.fail.Store(false)
	// The session waits for again once more before its keep-alive: that entry is its place.
	queueBehind(t, b, waiter, again, holder)
	for _, n := range []string{name, again} {
		if err := b.Release(ctx, holder, n, map[string]int64{name: tok, again: tokAgain}[n]); err != nil {
			t.Fatal(err)
		}
	}
	heldByOf(t, b, late, name, waiter) // the entry the failed withdrawal left
	if ka, err := b.KeepAlive(ctx, waiter, nil, nil); err != nil || ka.Expired {
		t.Fatalf("KeepAlive(waiter) = %+v, %v", ka, err)
	}
	if r, err := b.Acquire(ctx, late, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire(%q) after the waiter's keep-alive = %+v, %v; want granted (the withdrawal ran again)", name, r, err)
	}
	heldByOf(t, b, late, again, waiter) // waiting again: not withdrawn
	if got := b.withdrawn.of(string(waiter)); len(got) != 0 {
		t.Fatalf("pending withdrawals after the keep-alive: %q, want none", got)
	}
}

// TestPostgresPendingWithdrawalsGoWithSession: a session's failed withdrawals are forgotten
// when it is closed or found expired (its entries went with it), so nothing is kept or retried
// for a session that is gone.
func TestPostgresPendingWithdrawalsGoWithSession(t *testing.T) {
	b := migrated(t, pgDSN(t), WithHousekeepingInterval(-1))
	f := &failWithdraw{}
	b.wrap = func(inner sqlq.Queries) sqlq.Queries {
		f.Queries = inner
		return f
	}
	ctx := testCtx(t)
	name := "sessq-gone-" + unique(t)
	holder, closed, expired := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
	grant(t, b, holder, name)
	f.fail.Store(true)
	for _, s := range []spi.SessionID{closed, expired} {
		queueBehind(t, b, s, name, holder)
		if err := b.Withdraw(ctx, s, name); err == nil {
			t.Fatal("Withdraw succeeded; want the cut")
		}
		if got := b.withdrawn.of(string(s)); len(got) != 1 {
			t.Fatalf("pending withdrawals of %s: %q, want %q", s, got, name)
		}
	}
	f.fail.Store(false)
	if err := b.CloseSession(ctx, closed); err != nil {
		t.Fatal(err)
	}
	expire(t, b, expired)
	if ka, err := b.KeepAlive(ctx, expired, nil, nil); err != nil || !ka.Expired {
		t.Fatalf("KeepAlive(expired) = %+v, %v; want expired", ka, err)
	}
	for _, s := range []spi.SessionID{closed, expired} {
		if got := b.withdrawn.of(string(s)); len(got) != 0 {
			t.Fatalf("pending withdrawals of gone session %s: %q, want none", s, got)
		}
	}
}

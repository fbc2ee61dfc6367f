package sql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// TestQueueEntriesLiveWithSession: on every dialect a waiter entry lives as long as its
// session (spi.SessionQueue): a waiter whose only AcquireQueued was well over its TTL ago, its
// session kept alive by KeepAlive alone, still has the free lease reserved for it. Its entry's
// expiry was its session's as of that AcquireQueued, so before the keep-alive moved it
// (keep_alive_waiters, _join on MySQL/MariaDB, _correlated on SQLite) a late comer was granted
// the lease.
func TestQueueEntriesLiveWithSession(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			const ttl = time.Second
			b := migrated(t, d.dsn(t), WithHousekeepingInterval(-1))
			if !b.QueueEntriesLiveWithSession() {
				t.Errorf("QueueEntriesLiveWithSession() = false, want true")
			}
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
		})
	}
}

// TestKeepAliveRevivesNoLapsedEntry: the keep-alive moves only live entries; one that lapsed
// (expiry passed: written so here, as an earlier 5.x client's entry lapses when it stops
// re-attempting) lost its place and stays lapsed, so it reserves nothing.
func TestKeepAliveRevivesNoLapsedEntry(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t), WithHousekeepingInterval(-1))
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
			if got := waiterExpiry(t, b, waiter, name); got != now-1 {
				t.Errorf("lapsed entry's expiry after the keep-alive = %d, want %d (as it was)", got, now-1)
			}
			if err := b.Release(testCtx(t), holder, name, tok); err != nil {
				t.Fatal(err)
			}
			if r, err := b.Acquire(testCtx(t), late, name); err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire after the release, the only entry lapsed = %+v, %v; want granted", r, err)
			}
		})
	}
}

// waiterExpiry reads the expiry_ms of s's entry for name (test-only SQL).
func waiterExpiry(t *testing.T, b *Backend, s spi.SessionID, name string) int64 {
	t.Helper()
	return queryInt64(t, b, "SELECT expiry_ms FROM simba_waiter WHERE session_id = ? AND name = ?", string(s), name)
}

// queryInt64 runs test-only SQL returning one integer through the backend's pool
// (placeholders written "?", as exec's).
func queryInt64(t *testing.T, b *Backend, query string, args ...any) int64 {
	t.Helper()
	var v int64
	var err error
	switch d := b.d.(type) {
	case *pgDialect:
		q := query
		for i := 1; strings.Contains(q, "?"); i++ {
			q = strings.Replace(q, "?", fmt.Sprintf("$%d", i), 1)
		}
		err = d.pool.QueryRow(testCtx(t), q, args...).Scan(&v)
	case *stdDialect:
		err = d.db.QueryRowContext(testCtx(t), query, args...).Scan(&v)
	default:
		t.Fatalf("unknown dialect %T", b.d)
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// TestKeepAliveWaiterRulesMySQLSQLite: MySQL's and SQLite's statements keep
// keep_alive_waiters' rules (spec/sql.yaml): a live entry takes its session's renewed expiry
// exactly (not beyond it: it would stop counting); an entry forged ahead of its session's
// expiry is left as it is; another session's entries (an earlier 5.x client's) are not
// touched; and a keep-alive that did not renew its session (a ttl_ms no client writes)
// changes nothing, though the backend queued the session.
func TestKeepAliveWaiterRulesMySQLSQLite(t *testing.T) {
	for _, d := range dialects[1:] {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t), WithHousekeepingInterval(-1))
			ctx := testCtx(t)
			live, forged, other := "sessq-live-"+unique(t), "sessq-forged-"+unique(t), "sessq-other-"+unique(t)
			holder, waiter, old := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
			for _, n := range []string{live, forged, other} {
				grant(t, b, holder, n)
			}
			queueBehind(t, b, waiter, live, holder)
			queueBehind(t, b, waiter, forged, holder)
			queueBehind(t, b, old, other, holder) // old's keep-alives are an earlier client's: none here
			exec(t, b, "UPDATE simba_waiter SET expiry_ms = expiry_ms + 3600000 WHERE session_id = ? AND name = ?", string(waiter), forged)
			forgedAt, otherAt := waiterExpiry(t, b, waiter, forged), waiterExpiry(t, b, old, other)
			time.Sleep(20 * time.Millisecond) // the renewed expiry is then later than the entries'
			if ka, err := b.KeepAlive(ctx, waiter, nil, nil); err != nil || ka.Expired {
				t.Fatalf("KeepAlive(waiter) = %+v, %v", ka, err)
			}
			sessionExpiry := queryInt64(t, b, "SELECT expiry_ms FROM simba_session WHERE id = ?", string(waiter))
			if got := waiterExpiry(t, b, waiter, live); got != sessionExpiry {
				t.Errorf("live entry's expiry = %d, want the session's renewed %d", got, sessionExpiry)
			}
			if got := waiterExpiry(t, b, waiter, forged); got != forgedAt {
				t.Errorf("forged entry's expiry = %d, want %d (left as it is)", got, forgedAt)
			}
			if got := waiterExpiry(t, b, old, other); got != otherAt {
				t.Errorf("another session's entry's expiry = %d, want %d (not touched)", got, otherAt)
			}
			// Not renewed: ttl_ms written over; the keep-alive reports the session expired and
			// moves no entry of it, though its expiry is still ahead.
			liveAt := waiterExpiry(t, b, waiter, live)
			exec(t, b, "UPDATE simba_session SET ttl_ms = 0, expiry_ms = expiry_ms + 60000 WHERE id = ?", string(waiter))
			if ka, err := b.KeepAlive(ctx, waiter, nil, nil); err != nil || !ka.Expired {
				t.Fatalf("KeepAlive(waiter, ttl_ms 0) = %+v, %v; want expired", ka, err)
			}
			if got := waiterExpiry(t, b, waiter, live); got != liveAt {
				t.Errorf("entry of a session not renewed: expiry %d, want %d (unchanged)", got, liveAt)
			}
		})
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

// Batch fails a batch with WithdrawNotify as WithdrawNotify does: PostgreSQL's withdraw is a
// pipelined transaction (acquire_lock_lease, withdraw_notify).
func (f *failWithdraw) Batch(ctx context.Context, stmts []sqlq.Statement, st *sqlq.State) error {
	if f.fail.Load() && slices.Contains(stmts, sqlq.StmtWithdrawNotify) {
		return errWithdrawCut
	}
	return f.Queries.Batch(ctx, stmts, st)
}

// WaiterRemove fails as WithdrawNotify does: it is MySQL's and SQLite's withdraw.
func (f *failWithdraw) WaiterRemove(ctx context.Context, p sqlq.WaiterRemoveParams) error {
	if f.fail.Load() {
		return errWithdrawCut
	}
	return f.Queries.WaiterRemove(ctx, p)
}

// failingWithdrawBackend returns a migrated backend on dsn whose withdrawals f cuts while
// f.fail is set.
func failingWithdrawBackend(t *testing.T, dsn string) (*Backend, *failWithdraw) {
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	f := &failWithdraw{}
	b.wrap = func(inner sqlq.Queries) sqlq.Queries {
		f.Queries = inner
		return f
	}
	return b, f
}

// TestFailedWithdrawRunsAgainWithKeepAlive: the client withdraws once and does not retry; the
// entry it leaves behind lives as long as its session (on every dialect), so it would hold a
// free lease back while the session lives. The backend runs the withdrawal again with
// the session's next keep-alive, and not when the session waits for the name again first.
func TestFailedWithdrawRunsAgainWithKeepAlive(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b, f := failingWithdrawBackend(t, d.dsn(t))
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
		})
	}
}

// TestPendingWithdrawalsGoWithSession: a session's failed withdrawals are forgotten
// when it is closed or found expired (its entries went with it), so nothing is kept or retried
// for a session that is gone.
func TestPendingWithdrawalsGoWithSession(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b, f := failingWithdrawBackend(t, d.dsn(t))
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
		})
	}
}

// TestKeepAliveMovesEntriesOnlyWhileQueued: on MySQL/MariaDB and SQLite, where each keep-alive
// statement costs (a round trip, a turn at the file's write lock), the keep-alive runs its
// waiter statement only for a session the backend queued and has not since seen granted,
// withdrawn, closed or expired: a session that waits for nothing pays nothing for the queue.
// PostgreSQL runs it in every keep-alive's batch (no round trip of its own). Counted by the
// statements sent, not timed.
func TestKeepAliveMovesEntriesOnlyWhileQueued(t *testing.T) {
	waiterStmt := map[string]string{"postgres": "KeepAliveWaiters", "mysql": "KeepAliveWaitersJoin", "sqlite": "KeepAliveWaitersCorrelated"}
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			c := &counter{record: true}
			b := countedBackend(t, d.name, d.dsn(t), c)
			ctx := testCtx(t)
			n1, n2 := "sessq-cost1-"+unique(t), "sessq-cost2-"+unique(t)
			holder, s, gone := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
			tok1 := grant(t, b, holder, n1)
			grant(t, b, holder, n2)
			check := func(when string, queued bool) {
				t.Helper()
				_, _, log := statementsOf(t, c, func() error {
					ka, err := b.KeepAlive(ctx, s, nil, nil)
					if err == nil && ka.Expired {
						err = errors.New("session expired")
					}
					return err
				})
				want := queued || d.name == "postgres"
				if got := slices.Contains(log, waiterStmt[d.name]); got != want {
					t.Errorf("%s: keep-alive %q runs %s: %v, want %v", when, log, waiterStmt[d.name], got, want)
				}
			}
			check("never queued", false)
			queueBehind(t, b, s, n1, holder)
			check("queued", true)
			if err := b.Withdraw(ctx, s, n1); err != nil {
				t.Fatal(err)
			}
			check("withdrawn", false)
			queueBehind(t, b, s, n1, holder)
			check("queued again", true)
			if err := b.Release(ctx, holder, n1, tok1); err != nil {
				t.Fatal(err)
			}
			if r, err := b.AcquireQueued(ctx, s, n1); err != nil || r.Kind != spi.Granted {
				t.Fatalf("AcquireQueued(%q) after the release = %+v, %v; want granted", n1, r, err)
			}
			check("granted", false)
			queueBehind(t, b, s, n2, holder)
			check("queued for another", true)
			if err := b.CloseSession(ctx, s); err != nil {
				t.Fatal(err)
			}
			queueBehind(t, b, gone, n2, holder)
			expire(t, b, gone)
			if ka, err := b.KeepAlive(ctx, gone, nil, nil); err != nil || !ka.Expired {
				t.Fatalf("KeepAlive(expired) = %+v, %v; want expired", ka, err)
			}
			for _, id := range []spi.SessionID{s, gone} {
				if b.queued.has(string(id)) {
					t.Errorf("session %s still noted queued after its close or expiry", id)
				}
			}
		})
	}
}

// TestQueuedSessionsKeepEveryDoubt: a grant's or a withdrawal's reply drops a name only if no
// AcquireQueued of it was noted since the call began (that one may have made the entry again),
// and a failed or unanswered AcquireQueued stays noted.
func TestQueuedSessionsKeepEveryDoubt(t *testing.T) {
	var q queuedSessions
	at := q.at("s", "n") // a withdrawal begins
	q.note("s", "n")     // an AcquireQueued is sent meanwhile
	q.drop("s", "n", at) // the withdrawal's reply
	if !q.has("s") {
		t.Fatal("an AcquireQueued noted during a withdrawal was dropped by its reply")
	}
	seq := q.note("s", "n")
	later := q.note("s", "n")
	q.drop("s", "n", seq) // the first's grant, answered after the second was sent
	if !q.has("s") {
		t.Fatal("a grant dropped an AcquireQueued noted after it")
	}
	q.drop("s", "n", later)
	if q.has("s") {
		t.Fatal("the latest AcquireQueued's grant did not drop the name")
	}
	q.note("s", "a")
	q.note("s", "b")
	q.note("other", "a")
	q.forget("s")
	if q.has("s") || !q.has("other") {
		t.Fatalf("forget(s): has(s) %v, has(other) %v; want false, true", q.has("s"), q.has("other"))
	}
}

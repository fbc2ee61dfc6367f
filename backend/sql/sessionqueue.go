package sql

import (
	"context"
	"sync"

	"github.com/simba-go/simba/spi"
)

var _ spi.SessionQueue = (*Backend)(nil)

// QueueEntriesLiveWithSession implements spi.SessionQueue: true on every dialect. The
// keep-alive moves the expiry of the session's live waiter entries to the session's renewed
// expiry (spec/sql.yaml: keep_alive_waiters in PostgreSQL's batch, after the renewal;
// keep_alive_waiters_join on MySQL/MariaDB and keep_alive_waiters_correlated on SQLite, after
// the renewal and only for a session the backend queued), so an entry lives exactly as long
// as its session and goes with a grant, a withdrawal or the session. A withdrawal that fails
// runs again with the session's next keep-alive (unless the session waits for the name again
// first).
func (b *Backend) QueueEntriesLiveWithSession() bool { return true }

// queuedSessions tells which sessions may have live waiter entries: those the backend sent an
// AcquireQueued for and has not since seen granted that name, withdrawn from it, closed or
// expired. On MySQL/MariaDB and SQLite every keep-alive statement costs (a round trip on
// MySQL, a turn at the file's write lock on SQLite), so the keep-alive moves the entries only
// of such a session, and a session that waits for nothing pays nothing for the queue. A
// session wrongly kept costs a needless statement; one wrongly dropped would lose its place
// (its entry lapses while it lives), so every doubt keeps it: an AcquireQueued is noted before
// it is sent and kept when it fails, and a grant or a withdrawal drops a name only if no
// AcquireQueued of it was noted since that call began (seq).
type queuedSessions struct {
	mu  sync.Mutex
	m   map[string]map[string]uint64 // session → name → seq of its latest note
	seq uint64
}

// note records that sid may have an entry for name (an AcquireQueued about to be sent) and
// returns the note's seq.
func (q *queuedSessions) note(sid, name string) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	if q.m == nil {
		q.m = map[string]map[string]uint64{}
	}
	names := q.m[sid]
	if names == nil {
		names = map[string]uint64{}
		q.m[sid] = names
	}
	names[name] = q.seq
	return q.seq
}

// at returns the seq of sid's latest note of name (0: none), taken before a call that may
// end the entry, for drop.
func (q *queuedSessions) at(sid, name string) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.m[sid][name]
}

// drop forgets sid's entry for name (granted or withdrawn) unless an AcquireQueued of it was
// noted after seq: that one may have made the entry again.
func (q *queuedSessions) drop(sid, name string, seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	names := q.m[sid]
	if names == nil || names[name] != seq {
		return
	}
	delete(names, name)
	if len(names) == 0 {
		delete(q.m, sid)
	}
}

// forget drops every note of sid: its session ended (closed or expired), and its entries with
// it; nothing of it can be queued again.
func (q *queuedSessions) forget(sid string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.m, sid)
}

// has reports whether sid may have live waiter entries.
func (q *queuedSessions) has(sid string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.m[sid]) > 0
}

// withdrawals holds the withdrawals that failed (entries live with their session:
// QueueEntriesLiveWithSession): the client withdraws once and does not retry, and such
// an entry, kept alive by every keep-alive, would hold a free lease back for as long as its
// session lives. The session's next keep-alive runs them again.
type withdrawals struct {
	mu      sync.Mutex
	pending map[withdrawal]struct{}
}

// withdrawal is one session's withdrawal from one name's queue.
type withdrawal struct{ sid, name string }

// set records (pending) or forgets the withdrawal of sid from name.
func (w *withdrawals) set(sid, name string, pending bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !pending {
		delete(w.pending, withdrawal{sid, name})
		return
	}
	if w.pending == nil {
		w.pending = map[withdrawal]struct{}{}
	}
	w.pending[withdrawal{sid, name}] = struct{}{}
}

// of returns the names of sid's pending withdrawals.
func (w *withdrawals) of(sid string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for p := range w.pending {
		if p.sid == sid {
			names = append(names, p.name)
		}
	}
	return names
}

// forget drops every pending withdrawal of sid: its session ended (closed or expired), and its
// entries with it.
func (w *withdrawals) forget(sid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.pending {
		if p.sid == sid {
			delete(w.pending, p)
		}
	}
}

// retryWithdrawals runs again, after a keep-alive that renewed sid, the withdrawals of sid
// that failed (best effort: one that fails again stays pending for the next keep-alive). It
// runs after the keep-alive's own statements, so it never delays the renewal, only the reply,
// and only after a failed withdrawal.
func (b *Backend) retryWithdrawals(ctx context.Context, sid string) {
	for _, name := range b.withdrawn.of(sid) {
		_ = b.Withdraw(ctx, spi.SessionID(sid), name) // a failure is recorded again
	}
}

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
//
// It also orders a session's withdrawals of a name with its AcquireQueued of that name: an
// AcquireQueued waits for the withdrawals of its session and name in flight (running) before
// it is sent (await). A retried withdrawal, read as pending, then sent, would otherwise delete
// the entry of an AcquireQueued made in between (the waiter came back for the name), and so
// would a client's withdrawal still running when the AcquireQueued is sent (a call the client
// abandoned): the waiter, told HeldBy, would wait on without a place, and a late comer be
// granted the lease it was owed. The retry claims its withdrawals (claim) under the lock that
// await takes, so an AcquireQueued either cleared the withdrawal first or waits for it.
type withdrawals struct {
	mu      sync.Mutex
	pending map[withdrawal]struct{}
	running map[withdrawal]*inflight

	// Test hooks (nil outside tests): beforeRetry runs before a keep-alive's retried
	// withdrawal of name is sent; waiting runs when an AcquireQueued starts waiting for a
	// withdrawal of its session and name in flight.
	beforeRetry func(name string)
	waiting     func()
}

// withdrawal is one session's withdrawal from one name's queue.
type withdrawal struct{ sid, name string }

// inflight counts the withdrawals of one session and name being sent; done is closed when the
// last one has ended.
type inflight struct {
	n    int
	done chan struct{}
}

// begin notes a withdrawal of sid from name about to be sent; end must follow.
func (w *withdrawals) begin(sid, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.beginLocked(withdrawal{sid, name})
}

func (w *withdrawals) beginLocked(p withdrawal) {
	if w.running == nil {
		w.running = map[withdrawal]*inflight{}
	}
	r := w.running[p]
	if r == nil {
		r = &inflight{done: make(chan struct{})}
		w.running[p] = r
	}
	r.n++
}

// end notes the end of a withdrawal begun, pending again when it failed (set).
func (w *withdrawals) end(sid, name string, failed bool) {
	p := withdrawal{sid, name}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setLocked(p, failed)
	if r := w.running[p]; r != nil {
		if r.n--; r.n == 0 {
			close(r.done)
			delete(w.running, p)
		}
	}
}

// claim returns the names of sid's pending withdrawals, each begun (end must follow) and no
// longer pending, for a keep-alive to run again.
func (w *withdrawals) claim(sid string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pendingLocked(sid, true)
}

// await is called by an AcquireQueued of sid for name before it is sent: it waits for the
// withdrawals of sid from name in flight (or for ctx), then forgets a pending one (the session
// waits again: the entry, if the failed withdrawal left one, is its place).
func (w *withdrawals) await(ctx context.Context, sid, name string) error {
	p := withdrawal{sid, name}
	for {
		w.mu.Lock()
		r := w.running[p]
		if r == nil {
			delete(w.pending, p)
			w.mu.Unlock()
			return nil
		}
		w.mu.Unlock()
		if h := w.waiting; h != nil {
			h()
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setLocked records (pending) or forgets the withdrawal p.
func (w *withdrawals) setLocked(p withdrawal, pending bool) {
	if !pending {
		delete(w.pending, p)
		return
	}
	if w.pending == nil {
		w.pending = map[withdrawal]struct{}{}
	}
	w.pending[p] = struct{}{}
}

// of returns the names of sid's pending withdrawals.
func (w *withdrawals) of(sid string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pendingLocked(sid, false)
}

// pendingLocked returns the names of sid's pending withdrawals; with claim, each is begun and
// no longer pending (see claim).
func (w *withdrawals) pendingLocked(sid string, claim bool) []string {
	var names []string
	for p := range w.pending {
		if p.sid == sid {
			names = append(names, p.name)
			if claim {
				delete(w.pending, p)
				w.beginLocked(p)
			}
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
// and only after a failed withdrawal. Each is claimed before it is sent (see withdrawals).
func (b *Backend) retryWithdrawals(ctx context.Context, sid string) {
	for _, name := range b.withdrawn.claim(sid) {
		if h := b.withdrawn.beforeRetry; h != nil {
			h(name)
		}
		_ = b.withdrawBegun(ctx, spi.SessionID(sid), name) // a failure is recorded again
	}
}

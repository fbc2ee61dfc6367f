package sql

import (
	"context"
	"sync"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

var _ spi.SessionQueue = (*Backend)(nil)

// QueueEntriesLiveWithSession implements spi.SessionQueue: true on PostgreSQL, whose
// keep-alive moves the expiry of the session's live waiter entries to the session's renewed
// expiry in the same batch (spec/sql.yaml, keep_alive_waiters), so an entry lives exactly as
// long as its session and goes with a grant, a withdrawal or the session. A withdrawal that
// fails runs again with the session's next keep-alive (unless the session waits for the name
// again first). False on MySQL/MariaDB and SQLite, whose entries lapse with the session's
// expiry as of the latest AcquireQueued: their waiters re-attempt before it.
func (b *Backend) QueueEntriesLiveWithSession() bool { return b.name == wire.SQLPostgres }

// withdrawals holds the withdrawals that failed on a backend whose entries live with their
// session (QueueEntriesLiveWithSession): the client withdraws once and does not retry, and such
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

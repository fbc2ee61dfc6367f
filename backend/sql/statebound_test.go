package sql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/waittest"
	"github.com/simba-go/simba/spi"
)

// waitedNames counts the names the backend keeps as waited for by one of its sessions: the
// PostgreSQL hint listener's waits still running (entries only lingering before their UNLISTEN
// are not counted: the linger is a bounded time after the last wait), the SQLite and
// MySQL/MariaDB wakers' entries, and the MySQL/MariaDB waker's running blocking waits.
func (b *Backend) waitedNames() (names, blocking int) {
	switch n := b.notes.(type) {
	case *pgHub:
		n.imu.Lock()
		defer n.imu.Unlock()
		return n.waits.live(time.Now()), 0
	case *sqliteWaker:
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.waiting), 0
	case *mysqlWaker:
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.waiting), len(n.waits)
	}
	return 0, 0
}

// waits reports whether a session of the backend waits for name.
func (b *Backend) waits(name string) bool {
	switch n := b.notes.(type) {
	case *pgHub:
		n.imu.Lock()
		defer n.imu.Unlock()
		return n.waits.waited(name, time.Now())
	case *sqliteWaker:
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.waiting.waited(name, time.Now())
	case *mysqlWaker:
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.waiting.waited(name, time.Now())
	}
	return false
}

// waitTracker is a backend (b's methods promoted: Hints, Queuer, WaitEnder) whose queued
// acquires and Withdraws reach owed, which follows the client's waits as the client sees them
// (waittest.Owed).
type waitTracker struct {
	*Backend
	owed waittest.Owed
}

func (w *waitTracker) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	w.owed.Start()
	r, err := w.Backend.AcquireQueued(ctx, s, name)
	w.owed.Queued(name, r, err)
	return r, err
}

func (w *waitTracker) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	w.owed.Start()
	err := w.Backend.Withdraw(ctx, s, name)
	w.owed.Withdrew(name)
	return err
}

// TestManyNamesLeaveNoWaitsBehind drives a client through many distinct names in the patterns
// services have — TryLock of a held name given up, Lock whose context is cancelled while it
// waits, Lock and Unlock, an election's campaign then Stop, and a Lock that waits out the
// expiry of another holder's session — and counts, after each, the names its backend keeps as
// waited for (each a LISTEN on PostgreSQL, a name the SQLite waker polls for, a blocking
// named-lock wait on MySQL/MariaDB). Every count is zero: nothing waits any more. A TryLock's
// wait used to stay for two of the session's TTLs (spi.WaitEnder ends it).
func TestManyNamesLeaveNoWaitsBehind(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			dsn := d.dsn(t)
			hb := migrated(t, dsn)
			wb := &waitTracker{Backend: open(t, dsn)}
			waittest.ManyNamesLeaveNoWaitsBehind(t, waittest.Setup{
				Holder: hb, Waiter: wb, Owed: &wb.owed, Waits: wb.waits, Waited: wb.waitedNames,
				CrashTTL: 2 * time.Second, Prefix: "sb-" + unique(t) + "-",
			})
		})
	}
}

package zookeeper

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/waittest"
	"github.com/simba-go/simba/spi"
)

// waitedNames counts the names the backend keeps as waited for by one of its sessions (each
// a watch of the watcher connection on the name's lease node).
func (b *Backend) waitedNames() int {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	return len(b.waits)
}

// waitsFor reports whether a session of the backend waits for name.
func (b *Backend) waitsFor(name string) bool {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	return b.waits[name] != nil
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
// services have (TryLock of a held name given up, Lock cancelled while it waits, Lock and
// Unlock, an election's campaign then Stop, Locks that wait out another holder's expiry) and
// counts, after each, the names the backend keeps as waited for: none. A TryLock's wait used
// to stay for three of the session's timeouts (spi.WaitEnder ends it).
func TestManyNamesLeaveNoWaitsBehind(t *testing.T) {
	dsn := serverDSN(t, "")
	rec := newRecorder()
	wb := &waitTracker{Backend: openBackend(t, dsn)}
	waittest.ManyNamesLeaveNoWaitsBehind(t, waittest.Setup{
		Holder: openBackend(t, dsn), Waiter: wb, Owed: &wb.owed, Waits: wb.waitsFor,
		Waited: func() (int, int) { return wb.waitedNames(), 0 },
		// The crashing session is opened on a backend of its own and ended at the server.
		Crashing: recorded{Backend: openBackend(t, dsn), r: rec}, CrashTTL: 10 * time.Second,
		Expire: func(t *testing.T, id spi.SessionID) { rec.expire(t, id) },
		Prefix: fmt.Sprintf("sb-%d-", time.Now().UnixNano()),
	})
}

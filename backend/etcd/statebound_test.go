package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/waittest"
	"github.com/simba-go/simba/spi"
)

// waitedNames counts the names the backend watches for a session's wait (each a watch of
// the name's lease and waiter keys).
func (b *Backend) waitedNames() int {
	b.hints.mu.Lock()
	defer b.hints.mu.Unlock()
	return len(b.hints.names)
}

// waits reports whether a session of the backend waits for name.
func (b *Backend) waits(name string) bool {
	b.hints.mu.Lock()
	defer b.hints.mu.Unlock()
	return b.hints.names[name] != nil
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
// counts, after each, the names the backend watches for a wait: none. A TryLock's watch used
// to stay for three of the session's TTLs (spi.WaitEnder ends it).
func TestManyNamesLeaveNoWaitsBehind(t *testing.T) {
	dsn := serverDSN(t)
	wb := &waitTracker{Backend: openBackend(t, dsn)}
	waittest.ManyNamesLeaveNoWaitsBehind(t, waittest.Setup{
		Holder: openBackend(t, dsn), Waiter: wb, Owed: &wb.owed, Waits: wb.waits,
		Waited:   func() (int, int) { return wb.waitedNames(), 0 },
		CrashTTL: 3 * time.Second, Prefix: fmt.Sprintf("sb-%d-", time.Now().UnixNano()),
	})
}

package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/waittest"
	"github.com/simba-go/simba/spi"
)

// waitedNames counts the lease channels the backend keeps for a session's wait (a wait not
// over: a channel only lingering before its UNSUBSCRIBE is not counted, the linger being a
// bounded time, hintLinger, after the last wait).
func (b *Backend) waitedNames() int {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	now, n := time.Now(), 0
	for _, w := range b.hub.leases {
		for _, x := range w.who {
			if now.Before(x.until) {
				n++
				break
			}
		}
	}
	return n
}

// waits reports whether a session of the backend waits for name.
func (b *Backend) waits(name string) bool {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	w := b.hub.leases[name]
	if w == nil {
		return false
	}
	for _, x := range w.who {
		if time.Now().Before(x.until) {
			return true
		}
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
// services have (TryLock of a held name given up, Lock cancelled while it waits, Lock and
// Unlock, an election's campaign then Stop, Locks that wait out another holder's expiry) and
// counts, after each, the lease channels the backend keeps for a wait (each a pub/sub
// subscription): none. A TryLock's wait used to stay for up to the holder's time left plus a
// TTL (spi.WaitEnder ends it).
func TestManyNamesLeaveNoWaitsBehind(t *testing.T) {
	for _, mode := range []struct {
		name string
		b    func(t *testing.T) *Backend
	}{
		{"standalone", func(t *testing.T) *Backend { return newBackend(t, standaloneClient(t)) }},
		{"cluster", func(t *testing.T) *Backend { return newBackend(t, clusterClient(t), WithRouteBySlot(true)) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			prefix := fmt.Sprintf("sb-%d-", time.Now().UnixNano())
			dropKeys(t, prefix)
			wb := &waitTracker{Backend: mode.b(t)}
			waittest.ManyNamesLeaveNoWaitsBehind(t, waittest.Setup{
				Holder: mode.b(t), Waiter: wb, Owed: &wb.owed, Waits: wb.waits,
				Waited:   func() (int, int) { return wb.waitedNames(), 0 },
				CrashTTL: 2 * time.Second, Prefix: prefix,
			})
		})
	}
}

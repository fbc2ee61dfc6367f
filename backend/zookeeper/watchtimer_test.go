package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestPendingWatchesShareOneTimer: the exists watches of held leases are set watchDelay after
// their grant by one timer per session, which goes down the leases in the order granted,
// skips those released meanwhile and arms itself again for the next: a lease granted after
// one released before its watch was due still gets its watch, as do the leases granted after
// it. heldAmong waits for each pending watch (it does not start them, as KeepAlive does), so
// a timer that stopped short would leave it waiting until the test's context ends.
func TestPendingWatchesShareOneTimer(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := b.OpenSession(ctx, "watch-timer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer b.CloseSession(context.Background(), sess.ID)
	acquire := func(name string) int64 {
		t.Helper()
		r, err := b.Acquire(ctx, sess.ID, name)
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("acquire %s: %+v %v", name, r, err)
		}
		return r.Token
	}
	first := acquire("first")
	names := []string{"second", "third", "fourth"}
	for _, n := range names {
		acquire(n)
	}
	if err := b.Release(ctx, sess.ID, "first", first); err != nil {
		t.Fatal(err)
	}
	s, _ := b.lookup(sess.ID)
	if s == nil {
		t.Fatal("the session is gone")
	}
	held, err := s.heldAmong(ctx, names)
	if err != nil {
		t.Fatalf("heldAmong: %v", err)
	}
	if len(held) != len(names) {
		t.Fatalf("held %v, want %v", held, names)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if h := s.held[n]; h == nil || !h.done || !h.watchOK {
			t.Errorf("lease %s: %+v, want its watch set", n, h)
		}
	}
	if s.unstarted != 0 || len(s.pendingWatches) != 0 || s.watchArmed {
		t.Errorf("after the watches: %d unstarted, %d pending, armed %v; want none", s.unstarted, len(s.pendingWatches), s.watchArmed)
	}
}

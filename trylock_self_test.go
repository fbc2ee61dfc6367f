package simba_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/simba-go/simba"
)

// TestTryLockHeldByThisClient: a TryLock of a name that another goroutine of the same client
// holds fails with an error that matches ErrLockHeld and is a *LockHeldError with Self set,
// whose message says the lock is held by this client instead of naming this client's owner as
// if some other process held it. The old error read "simba: lock res held by one (<session>)",
// the same as another client's hold, and had no Self: this test failed on that code.
func TestTryLockHeldByThisClient(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c, _ := w.client("one")
	var h *simba.Held
	w.async(func() (err error) { h, err = c.Lock(ctx, "res"); return err })
	_, err := c.TryLock(ctx, "res")
	if !errors.Is(err, simba.ErrLockHeld) {
		t.Fatalf("TryLock of a name this client holds: %v, want ErrLockHeld", err)
	}
	var held *simba.LockHeldError
	if !errors.As(err, &held) || !held.Self || held.Owner != "one" || held.Name != "res" {
		t.Fatalf("TryLock error %#v, want a *LockHeldError with Self, owner one", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "lock res held by this client") || strings.Contains(msg, "held by one") {
		t.Errorf("TryLock error %q, want it to say the lock is held by this client", msg)
	}

	// Another client's TryLock names the holder, without Self.
	c2, _ := w.client("two")
	_, err = c2.TryLock(ctx, "res")
	if !errors.As(err, &held) || held.Self || held.Owner != "one" || !strings.Contains(err.Error(), "held by one") {
		t.Errorf("another client's TryLock error %v, want held by one, not Self", err)
	}
	w.async(func() error { return h.Unlock(ctx) })
}

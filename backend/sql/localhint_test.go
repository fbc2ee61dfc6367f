package sql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// pendingHint reports whether hints holds a Released hint for name right now, taking what it
// holds. Release delivers its local hint before it returns, so no wait is needed to see it.
func pendingHint(hints <-chan spi.Hint, name string) bool {
	found := false
	for {
		select {
		case h := <-hints:
			found = found || (h.Kind == spi.Released && h.Name == name)
		default:
			return found
		}
	}
}

// TestPostgresLocalReleaseHintOnlyWhenWaited: a release by a PostgreSQL backend hints its own
// Hints subscribers at once only when a session of the backend waits for the name. A lock
// and unlock that nobody here waits for sends no hint, which woke the client's hint reader on
// every Unlock of an uncontended Lock cycle (found with a trace of BenchmarkLockCycle/postgres:
// one goroutine wake-up per cycle, on another thread, beside the server's next statement). A
// waiter of the same backend still gets the hint before Release returns.
//
// Fails on the old code (releasedLocally delivered every release): the unwaited name's hint
// is pending right after its Release.
func TestPostgresLocalReleaseHintOnlyWhenWaited(t *testing.T) {
	b := migrated(t, pgDSN(t))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, b) // the listener runs: waits are noted from now on
	holder := openSession(t, b, longTTL)
	waiter := openSession(t, b, 10*time.Minute)

	unwaited := "unwaited-" + unique(t)
	tok := grant(t, b, holder, unwaited)
	if err := b.Release(testCtx(t), holder, unwaited, tok); err != nil {
		t.Fatal(err)
	}
	if pendingHint(hints, unwaited) {
		t.Fatalf("a Released hint for %q, which no session of the backend waits for", unwaited)
	}

	waited := "waited-" + unique(t)
	tok = grant(t, b, holder, waited)
	if r, err := b.AcquireQueued(testCtx(t), waiter, waited); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("AcquireQueued = %+v, %v; want HeldBy", r, err)
	}
	waitListening(t, b)        // the LISTEN on waited's channel is in
	pendingHint(hints, waited) // its catch-up hint
	if err := b.Release(testCtx(t), holder, waited, tok); err != nil {
		t.Fatal(err)
	}
	if !pendingHint(hints, waited) {
		t.Fatalf("no Released hint for %q right after its Release, though a session of the backend waits for it", waited)
	}
}

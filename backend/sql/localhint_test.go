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

// TestWakerLocalReleaseHintOnlyWhenWaited: on SQLite and MySQL/MariaDB, as on PostgreSQL, a
// release by the backend hints its own Hints subscribers at once only when a session of the
// backend waits for the name. An uncontended lock and unlock sends no hint (every Unlock woke
// the client's hint reader on another thread, which found no waiter and dropped it). The waits
// are kept per session: with two sessions of the backend waiting for one name, the grant to
// the first keeps the second's wait, so the first's release still hints it (a per-name
// filter, the wakers' old bookkeeping, forgot the name at the first grant); a Withdraw ends it.
//
// Fails on the old code (the wakers hinted every release): the unwaited name's hint is
// pending right after its Release, on both dialects. The second half fails with a per-name
// filter (checked by making a grant end the name's every wait: "hint for a name a session
// still waits for" fails).
func TestWakerLocalReleaseHintOnlyWhenWaited(t *testing.T) {
	for _, d := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", liteDSN}, {"mysql", myDSN}} {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t))
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			hints, err := b.Hints(ctx)
			if err != nil {
				t.Fatal(err)
			}
			holder := openSession(t, b, longTTL)
			first := openSession(t, b, longTTL)
			second := openSession(t, b, longTTL)

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
			for _, s := range []spi.SessionID{first, second} {
				if r, err := b.AcquireQueued(testCtx(t), s, waited); err != nil || r.Kind != spi.HeldBy {
					t.Fatalf("AcquireQueued = %+v, %v; want HeldBy", r, err)
				}
			}
			if err := b.Release(testCtx(t), holder, waited, tok); err != nil {
				t.Fatal(err)
			}
			if !pendingHint(hints, waited) {
				t.Fatalf("no Released hint for %q right after its Release, though two sessions of the backend wait for it", waited)
			}
			r, err := b.AcquireQueued(testCtx(t), first, waited) // first in the queue
			if err != nil || r.Kind != spi.Granted {
				t.Fatalf("AcquireQueued(first) = %+v, %v; want Granted", r, err)
			}
			// The waker's own hints (a read that found the lease free) may come any time;
			// what is pending must not count for the release below.
			if b.notes.localHubFor(waited) == nil {
				t.Fatalf("no local hint for %q after the first waiter's grant: the second still waits for it", waited)
			}
			pendingHint(hints, waited)
			if err := b.Release(testCtx(t), first, waited, r.Token); err != nil {
				t.Fatal(err)
			}
			if !pendingHint(hints, waited) {
				t.Fatalf("no Released hint for %q right after the first waiter's release: the second still waits for it", waited)
			}
			if err := b.Withdraw(testCtx(t), second, waited); err != nil {
				t.Fatal(err)
			}
			if b.notes.localHubFor(waited) != nil {
				t.Fatalf("a local hint for %q after the last waiter withdrew", waited)
			}
		})
	}
}

// TestSQLiteWakerHintsNameWaitedAfterItsRelease: a wait noted only after the release it waits
// for (the release committed between the acquire's read and the note of its HeldBy, when the
// release's own hint found nobody waiting) still gets a Released hint: the waker reads a newly
// waited name's lease at its next read, even when the change counter has not moved since its
// last one (it is already polling for another name). Without that the waiter heard nothing
// until some other commit, or its retry a TTL later.
//
// Fails without the read of newly waited names (checked by reading only on a counter change,
// as before): no hint comes and the test runs into its context's end.
func TestSQLiteWakerHintsNameWaitedAfterItsRelease(t *testing.T) {
	b := migrated(t, liteDSN(t))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sw := b.waker.(*sqliteWaker)
	holder := openSession(t, b, longTTL)
	waiter := openSession(t, b, longTTL)

	other := "other-" + unique(t) // keeps the waker polling
	grant(t, b, holder, other)
	if r, err := b.AcquireQueued(testCtx(t), waiter, other); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("AcquireQueued = %+v, %v; want HeldBy", r, err)
	}
	name := "late-" + unique(t)
	tok := grant(t, b, holder, name)
	if err := b.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	if pendingHint(hints, name) {
		t.Fatalf("a Released hint for %q, which no session of the backend waits for yet", name)
	}
	// Two more reads of the counter: one of them began after the release's commit, so the
	// counter the waker compares against includes it.
	for r0 := sw.reads.Load(); sw.reads.Load() < r0+2; {
		select {
		case <-ctx.Done():
			t.Fatal("the waker does not read")
		case <-time.After(time.Millisecond):
		}
	}
	b.noteAcquired(string(waiter), name, spi.Acquire{Kind: spi.HeldBy, Holder: holder})
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("no Released hint for %q, free when its wait was noted", name)
		case h := <-hints:
			if h.Kind == spi.Released && h.Name == name {
				return
			}
		}
	}
}

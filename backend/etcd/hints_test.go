package etcd

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// awaitReleased reads hints until a Released hint for name, failing on one for any name in
// never before it, or when ctx ends first.
func awaitReleased(ctx context.Context, t *testing.T, hints <-chan spi.Hint, who, name string, never ...string) {
	t.Helper()
	for {
		select {
		case h, ok := <-hints:
			if !ok {
				t.Fatalf("%s: hint channel closed", who)
			}
			switch {
			case h.Kind != spi.Released:
			case h.Name == name:
				return
			case slices.Contains(never, h.Name):
				t.Fatalf("%s: Released hint for %q, a name none of its sessions waits for (waiting for %q)", who, h.Name, name)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no Released hint for %q", who, name)
		}
	}
}

// TestHintsOnlyForWaitedNames: a backend subscribed to hints hears of the releases of the
// names its sessions wait for, and of no other: one whose session waited for a name, was
// hinted and granted it, then waits for nothing, hears nothing of another backend's lock and
// unlock cycles; one whose session waits (TTL one minute, no further acquire: the hint must
// come before its one-TTL retry would) hears only of its name's release. Before the hint for
// the name each waits for last (n, sentinel) neither may get one for a cycled name: on the old
// code, which watched every lease key and waiter key, both did.
func TestHintsOnlyForWaitedNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := serverDSN(t)
	other, idle, waiting := openBackend(t, dsn), openBackend(t, dsn), openBackend(t, dsn)
	idleHints, err := idle.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitHints, err := waiting.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open := func(b *Backend, owner string) spi.SessionID {
		s, err := b.OpenSession(ctx, owner, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	o, i, w := open(other, "other"), open(idle, "idle"), open(waiting, "waiting")
	acquire := func(b *Backend, id spi.SessionID, name string, queued bool, want spi.AcquireKind) int64 {
		t.Helper()
		acq := b.Acquire
		if queued {
			acq = b.AcquireQueued
		}
		r, err := acq(ctx, id, name)
		if err != nil || r.Kind != want {
			t.Fatalf("acquire of %s = %+v, %v; want %s", name, r, err, want)
		}
		return r.Token
	}
	release := func(b *Backend, id spi.SessionID, name string, tok int64) {
		t.Helper()
		if err := b.Release(ctx, id, name, tok); err != nil {
			t.Fatal(err)
		}
	}

	// The idle backend's session waits for x, is hinted, is granted x and releases it.
	tok := acquire(other, o, "x", false, spi.Granted)
	acquire(idle, i, "x", true, spi.HeldBy)
	release(other, o, "x", tok)
	awaitReleased(ctx, t, idleHints, "idle", "x")
	release(idle, i, "x", acquire(idle, i, "x", true, spi.Granted))

	// The waiting backend's session waits for n.
	ntok := acquire(other, o, "n", false, spi.Granted)
	acquire(waiting, w, "n", true, spi.HeldBy)

	// Lock and unlock cycles on names no session of theirs waits for.
	busy := []string{"busy-1", "busy-2"}
	for range 5 {
		for _, name := range busy {
			release(other, o, name, acquire(other, o, name, true, spi.Granted))
		}
	}

	release(other, o, "n", ntok)
	awaitReleased(ctx, t, waitHints, "waiting", "n", busy...)
	stok := acquire(other, o, "sentinel", false, spi.Granted)
	acquire(idle, i, "sentinel", false, spi.HeldBy)
	release(other, o, "sentinel", stok)
	awaitReleased(ctx, t, idleHints, "idle", "sentinel", busy...)
}

// watched reports whether the backend watches name for its waiting sessions.
func watched(b *Backend, name string) bool {
	b.hints.mu.Lock()
	defer b.hints.mu.Unlock()
	return b.hints.names[name] != nil
}

// TestWaitsEnd: a wait, begun by a HeldBy reply while the backend has a subscriber, ends with
// a grant, a Withdraw, the session's close, three TTLs without an acquire of the name, or the
// last subscriber's leaving; and the name's watch with the last wait. Without subscribers no
// wait is noted.
func TestWaitsEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := serverDSN(t)
	b, other := openBackend(t, dsn), openBackend(t, dsn)
	open := func(be *Backend, ttl time.Duration) spi.SessionID {
		s, err := be.OpenSession(ctx, "waits", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	o := open(other, time.Minute)
	tok := func(name string) int64 {
		r, err := other.Acquire(ctx, o, name)
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("holder's Acquire of %s = %+v, %v", name, r, err)
		}
		return r.Token
	}
	wait := func(id spi.SessionID, name string) {
		t.Helper()
		if r, err := b.AcquireQueued(ctx, id, name); err != nil || r.Kind != spi.HeldBy {
			t.Fatalf("AcquireQueued of %s = %+v, %v; want held-by", name, r, err)
		}
	}
	want := func(name string, on bool, why string) {
		t.Helper()
		if got := watched(b, name); got != on {
			t.Fatalf("%s: watched(%s) = %v, want %v", why, name, got, on)
		}
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		tok(n)
	}
	w := open(b, time.Minute)
	wait(w, "a")
	want("a", false, "a wait without a subscriber")

	sctx, unsubscribe := context.WithCancel(ctx)
	hints, err := b.Hints(sctx)
	if err != nil {
		t.Fatal(err)
	}
	wait(w, "a")
	want("a", true, "a wait")
	if err := b.Withdraw(ctx, w, "a"); err != nil {
		t.Fatal(err)
	}
	want("a", false, "after Withdraw")

	wait(w, "b")
	w2 := open(b, time.Minute)
	wait(w2, "b")
	if err := b.CloseSession(ctx, w); err != nil {
		t.Fatal(err)
	}
	want("b", true, "one of two waiters closed")
	if err := b.CloseSession(ctx, w2); err != nil {
		t.Fatal(err)
	}
	want("b", false, "both waiters closed")

	g := open(b, time.Minute)
	wait(g, "c")
	if err := other.Release(ctx, o, "c", tok("c")); err != nil { // a re-acquire returns its token
		t.Fatal(err)
	}
	if r, err := b.AcquireQueued(ctx, g, "c"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("AcquireQueued after the release = %+v, %v", r, err)
	}
	want("c", false, "after the grant")

	// A session that stops acquiring stops waiting three TTLs (and a second) later.
	short := open(b, time.Second)
	wait(short, "d")
	want("d", true, "a wait")
	for watched(b, "d") {
		select {
		case <-ctx.Done():
			t.Fatal("the wait for d did not end without acquires")
		case <-time.After(100 * time.Millisecond):
		}
	}

	wait(g, "e")
	want("e", true, "a wait")
	unsubscribe()
	for range hints {
	}
	want("e", false, "after the last subscriber left")
}

// TestReleaseBeforeWatchIsHinted: a release that lands after the reply that found the name held
// and before the name's watches start (here: run just before they are made) is hinted, by
// the read of the key that was in the way; and so is the departure of the oldest waiter a
// free lease was reserved for.
func TestReleaseBeforeWatchIsHinted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := serverDSN(t)
	b, other := openBackend(t, dsn), openBackend(t, dsn)
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open := func(be *Backend) spi.SessionID {
		s, err := be.OpenSession(ctx, "gap", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	o, first, w := open(other), open(other), open(b)
	// gaps: what runs in the gap before the first watches of a name, once; keyed by name, as a
	// watch goroutine of an earlier test's backend may still call the hook.
	var gapMu sync.Mutex
	gaps := map[string]func(){}
	setGap := func(name string, f func()) {
		gapMu.Lock()
		gaps[name] = f
		gapMu.Unlock()
	}
	hook := func(name string) {
		gapMu.Lock()
		f := gaps[name]
		delete(gaps, name)
		gapMu.Unlock()
		if f != nil {
			f()
		}
	}
	beforeWatch.Store(&hook)
	t.Cleanup(func() { beforeWatch.Store(nil) })

	// Held: the holder releases in the gap.
	r, err := other.Acquire(ctx, o, "held")
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	setGap("held", func() {
		if err := other.Release(ctx, o, "held", r.Token); err != nil {
			t.Error(err)
		}
	})
	if a, err := b.AcquireQueued(ctx, w, "held"); err != nil || a.Kind != spi.HeldBy {
		t.Fatalf("AcquireQueued = %+v, %v", a, err)
	}
	awaitReleased(ctx, t, hints, "waiter", "held")

	// Reserved: the lease is free but reserved for the oldest waiter, who withdraws in the gap.
	r, err = other.Acquire(ctx, o, "reserved")
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	if a, err := other.AcquireQueued(ctx, first, "reserved"); err != nil || a.Kind != spi.HeldBy {
		t.Fatalf("the oldest waiter's AcquireQueued = %+v, %v", a, err)
	}
	if err := other.Release(ctx, o, "reserved", r.Token); err != nil {
		t.Fatal(err)
	}
	setGap("reserved", func() {
		if err := other.Withdraw(ctx, first, "reserved"); err != nil {
			t.Error(err)
		}
	})
	if a, err := b.Acquire(ctx, w, "reserved"); err != nil || a.Kind != spi.HeldBy || a.Holder != first {
		t.Fatalf("Acquire = %+v, %v; want held by the oldest waiter %s", a, err, first)
	}
	awaitReleased(ctx, t, hints, "waiter", "reserved")
}

// TestWaitOutlastsFallbackRetry: a session's wait for a name, from an acquire that found it
// held, lasts longer than the client's fallback retry, two of the client's TTLs after that
// reply (spi.SteadyHints), so no release in between goes unhinted. A TTL of 1.9 s is a lease
// of one second: the old wait, two of them and a second, ended 3 s after the reply, before
// the retry at 3.8 s.
func TestWaitOutlastsFallbackRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := serverDSN(t)
	b, other := openBackend(t, dsn), openBackend(t, dsn)
	if !spi.AreHintsSteady(b) {
		t.Fatal("the backend does not report steady hints")
	}
	hctx, unsubscribe := context.WithCancel(ctx)
	defer unsubscribe()
	if _, err := b.Hints(hctx); err != nil {
		t.Fatal(err)
	}
	const ttl = 1900 * time.Millisecond
	h, err := other.OpenSession(ctx, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.OpenSession(ctx, "waiter", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.Acquire(ctx, h.ID, "n"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("holder's Acquire = %+v, %v", r, err)
	}
	if r, err := b.AcquireQueued(ctx, w.ID, "n"); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("AcquireQueued = %+v, %v; want held-by", r, err)
	}
	replied := time.Now()
	b.hints.mu.Lock()
	var until time.Time
	nw := b.hints.names["n"]
	if nw != nil {
		until = nw.who[w.ID]
	}
	b.hints.mu.Unlock()
	if until.IsZero() {
		t.Fatal("no wait recorded for the waiting session")
	}
	if d := until.Sub(replied); d <= 2*ttl {
		t.Errorf("the wait ends %v after the reply; want more than two TTLs (%v), the fallback retry's time", d, 2*ttl)
	}
}

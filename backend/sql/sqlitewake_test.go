package sql

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/locktest"
	"github.com/simba-go/simba/spi"
)

// TestSQLiteWaiterWakesOnRelease: on one SQLite file, a client waiting for a lock that another
// client (another connection, as another process would be) releases gets it within the
// waker's polling, not when the holder's 10 s lease would have run out.
func TestSQLiteWaiterWakesOnRelease(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	clients := locktest.Clients(t, 10*time.Second, open(t, dsn), open(t, dsn))
	ctx := testCtx(t)
	held, err := clients[0].Lock(ctx, "handover")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *simba.Held, 1)
	errs := make(chan error, 1)
	go func() {
		h, err := clients[1].Lock(ctx, "handover")
		if err != nil {
			errs <- err
			return
		}
		got <- h
	}()
	// Let the waiter's acquire find the lease held (its next retry is ~10 s away).
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-got:
		took := time.Since(released)
		t.Logf("the waiter got the lock %v after the release (TTL 10s)", took)
		if h.Token() <= held.Token() {
			t.Fatalf("token %d after %d", h.Token(), held.Token())
		}
		if took > 3*time.Second {
			t.Fatalf("the waiter took %v: it was not woken", took)
		}
		_ = h.Unlock(context.Background())
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(8 * time.Second):
		t.Fatal("the waiter was not woken by the release (it would retry only when the 10 s lease ran out)")
	}
	for _, c := range clients {
		_ = c.Close(context.Background())
	}
}

// TestSQLiteWakerReadsPerCommit: after a commit by another connection (here a keep-alive) the
// waiting backend's waker reads the change counter at each write to the file and then only
// until a read sees the commit (one or two reads, plus at most one safety-net read), not the
// six reads of the whole 2, 4 … 64 ms series every time. A release after those commits still
// reaches the waiter as a hint.
func TestSQLiteWakerReadsPerCommit(t *testing.T) {
	dsn := liteDSN(t)
	holder := migrated(t, dsn)
	waiter := open(t, dsn)
	ctx := testCtx(t)
	const name = "reads-per-commit"
	hs, err := holder.OpenSession(ctx, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, err := holder.Acquire(ctx, hs.ID, name)
	if err != nil || a.Kind != spi.Granted {
		t.Fatalf("holder's acquire: %+v %v", a, err)
	}
	hints, err := waiter.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := waiter.OpenSession(ctx, "waiter", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := waiter.Acquire(ctx, ws.ID, name); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("waiter's acquire: %+v %v", r, err)
	}
	w := waiter.waker.(*sqliteWaker)
	// The waker's own writes are over (the waiter's session and acquire): let their reads end.
	time.Sleep(300 * time.Millisecond)
	// 300 ms after each commit: the series after the write (126 ms at most) is over, and at
	// most one safety-net read (every 250 ms) came on top.
	const commits = 5
	perCommit := make([]int, commits)
	for i := range perCommit {
		r0 := w.followUps.Load()
		if _, err := holder.KeepAlive(ctx, hs.ID, nil, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		perCommit[i] = int(w.followUps.Load() - r0)
	}
	t.Logf("change-counter reads after the writes, per commit: %v", perCommit)
	// A write that the watch reports only after its commit is published starts the whole
	// series again (its first read sees the change, which proves nothing): some commits may
	// cost six, but not every one.
	if least := slices.Min(perCommit); least > 3 {
		t.Errorf("the waker read the change counter at least %d times after every commit's writes (%v): the reads did not stop once the commit was seen", least, perCommit)
	}
	if err := holder.Release(ctx, hs.ID, name, a.Token); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case h := <-hints:
			if h.Kind == spi.Released && h.Name == name {
				return
			}
		case <-ctx.Done():
			t.Fatal("no Released hint after the holder's release")
		}
	}
}

package sql

import (
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestWakerUncontendedCyclePokesNothing counts the MySQL/MariaDB waker's pokes of its run
// goroutine over uncontended acquire and release cycles of a backend with a Hints subscriber
// (its waker running), as a client's Lock and Unlock make them: none, since nobody waits and no
// tenure lasts the mark delay (an hour here, so that a slow machine cannot make one last it).
// Each grant and each release used to poke run, which found nothing to do: two goroutine
// hand-offs per cycle (go test -trace of BenchmarkLockCycle/mariadb).
func TestWakerUncontendedCyclePokesNothing(t *testing.T) {
	ctx := testCtx(t)
	b := migrated(t, myDSN(t))
	w := b.waker.(*mysqlWaker)
	w.mu.Lock()
	w.markDelay = time.Hour
	w.mu.Unlock()
	if _, err := b.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := b.OpenSession(ctx, "pokes", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	name := unique(t)
	cycle := func() {
		a, err := b.Acquire(ctx, s.ID, name)
		if err != nil || a.Kind != spi.Granted {
			t.Fatalf("Acquire: %+v, %v", a, err)
		}
		if err := b.Release(ctx, s.ID, name, a.Token); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	const cycles = 20
	before := w.pokes.Load()
	for range cycles {
		cycle()
	}
	if got := w.pokes.Load() - before; got != 0 {
		t.Errorf("%d uncontended acquire and release cycles poked the waker %d times, want 0", cycles, got)
	}
	// A tenure held for the mark delay still has run mark it (and its release pokes run to let
	// the named lock go).
	w.mu.Lock()
	w.markDelay = 0
	w.mu.Unlock()
	a, err := b.Acquire(ctx, s.ID, name)
	if err != nil || a.Kind != spi.Granted {
		t.Fatalf("Acquire: %+v, %v", a, err)
	}
	for w.snapshot().marks == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("a lease held past the mark delay was not marked: %+v", w.snapshot())
		case <-time.After(time.Millisecond):
		}
	}
	before = w.pokes.Load()
	if err := b.Release(ctx, s.ID, name, a.Token); err != nil {
		t.Fatal(err)
	}
	if got := w.pokes.Load() - before; got != 1 {
		t.Errorf("the release of a marked lease poked the waker %d times, want 1", got)
	}
}

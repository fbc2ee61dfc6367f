package sql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/locktest"
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

package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/simba-go/simba"
	sqlbackend "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/spi"
)

// heldRelease is a backend whose Release waits until unblock is closed, and that reports the
// Release and CloseSession calls it gets.
type heldRelease struct {
	spi.Backend
	released, closed chan struct{} // one send each, the first time
	unblock          chan struct{}
}

func (b *heldRelease) Release(ctx context.Context, s spi.SessionID, name string, token int64) error {
	select {
	case b.released <- struct{}{}:
	default:
	}
	<-b.unblock
	return b.Backend.Release(ctx, s, name, token)
}

func (b *heldRelease) CloseSession(ctx context.Context, s spi.SessionID) error {
	select {
	case b.closed <- struct{}{}:
	default:
	}
	return b.Backend.CloseSession(ctx, s)
}

// TestLockStoppedLeavesTheReleaseToClose: `simba lock` stopped by a signal leaves the lock's
// release to the client's Close, which sends it together with the session's close, instead
// of releasing first and closing the session after: at a backend gone silent each of those
// waits one call timeout, so simba exited two renewal intervals after SIGTERM (2.0 s at
// -ttl 3s) where `run` took one. The old code (WithLock) waited in lockAndRun for a release
// that here never ends until the test unblocks it; the new one returns without it, and
// Close sends the session's close while the release still waits.
func TestLockStoppedLeavesTheReleaseToClose(t *testing.T) {
	b, err := sqlbackend.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "db.sqlite"), sqlbackend.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := &heldRelease{Backend: b, released: make(chan struct{}, 1), closed: make(chan struct{}, 1), unblock: make(chan struct{})}
	c, err := simba.New(w, simba.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background()) // the signal
	errc := make(chan error, 1)
	go func() {
		errc <- lockAndRun(ctx, ctx, c, "lockclose", c.Lock, func(run context.Context, _ simba.Term) error {
			stop()
			<-run.Done()
			return nil
		})
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("lockAndRun: %v", err)
		}
	case <-w.released:
		t.Error("lockAndRun released the lock itself, waiting for that before the session's close")
		close(w.unblock)
		<-errc
		c.Close(context.Background())
		return
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close(context.Background()) }()
	<-w.closed // while the release waits: sent together
	<-w.released
	close(w.unblock)
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}

package simba_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// releaseLost is a backend whose release of "gone" blocks until the client has taken its
// session for lost (lost is closed by the test's listener, on the loop, after the step that
// lost the session), then fails: its reply is stepped after the loss.
type releaseLost struct {
	*simbatest.Backend
	mu      sync.Mutex
	sid     spi.SessionID
	blocked chan struct{}
	lost    chan struct{}
}

func (b *releaseLost) Release(ctx context.Context, id spi.SessionID, name string, token int64) error {
	if name != "gone" {
		return b.Backend.Release(ctx, id, name, token)
	}
	b.mu.Lock()
	b.sid = id
	b.mu.Unlock()
	close(b.blocked)
	// Past the call's ctx (one renewal interval, when the keep-alive that finds the session
	// expired goes out): the reply waits for the loss, as a release stuck at a server would.
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-b.lost:
	case <-t.C:
	}
	return spi.Unavailable("release", errors.New("connection reset"))
}

// TestUnlockWhoseReleaseFailsAfterSessionLost: an Unlock whose release fails after the client's
// session was lost returns the *RevokedError of the loss (RevokedSessionExpired, matching
// ErrNotHeld): the lease went with the session, the lock was lost before the Unlock released
// it, as an Unlock taken after the loss says. It returned nil, as if its release had freed the
// lease.
func TestUnlockWhoseReleaseFailsAfterSessionLost(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	b := &releaseLost{Backend: srv.Backend(), blocked: make(chan struct{}), lost: make(chan struct{})}
	var once sync.Once
	c, err := simba.New(b, simba.WithTTL(3*time.Second), simba.WithListener(func(ev simba.Event) {
		if ev.Kind == simba.EventSessionExpired {
			once.Do(func() { close(b.lost) })
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer c.Close(ctx)
	h, err := c.Lock(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- h.Unlock(ctx) }()
	<-b.blocked // the release is in flight
	b.mu.Lock()
	sid := b.sid
	b.mu.Unlock()
	if !srv.ExpireSession(sid) {
		t.Fatalf("session %s was not live", sid)
	}
	// The next keep-alive (within a renewal interval) is answered Expired: the session is lost.
	err = <-unlocked
	var re *simba.RevokedError
	if !errors.As(err, &re) || re.Reason != simba.RevokedSessionExpired || re.Name != "gone" || !errors.Is(err, simba.ErrNotHeld) ||
		errors.Is(err, simba.ErrUnavailable) || !simba.IsPermanent(err) {
		t.Errorf("Unlock whose release failed after the session was lost = %v; want the *RevokedError of reason %v, matching ErrNotHeld", err, simba.RevokedSessionExpired)
	}
}

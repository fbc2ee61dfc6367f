package simba_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// world is one simbatest server on a virtual clock shared by the server and its clients.
type world struct {
	t     *testing.T
	srv   *simbatest.Server
	clock *simbatest.VirtualClock
}

func newWorld(t *testing.T) *world {
	clock := simbatest.NewVirtualClock()
	return &world{t: t, srv: simbatest.NewServer(simbatest.WithClock(clock)), clock: clock}
}

const testTTL = 3 * time.Second

// client starts a client on its own connection to the server; the test closes it.
func (w *world) client(owner string, opts ...simba.Option) (*simba.Client, *simbatest.Backend) {
	w.t.Helper()
	b := w.srv.Backend()
	return w.clientOn(b, owner, opts...), b
}

// clientOn starts a client on backend b (a connection to the server, or a wrapper of one);
// the test closes it.
func (w *world) clientOn(b spi.Backend, owner string, opts ...simba.Option) *simba.Client {
	w.t.Helper()
	opts = append([]simba.Option{simba.WithClock(w.clock), simba.WithTTL(testTTL), simba.WithOwner(owner), simba.WithSeed(1)}, opts...)
	c, err := simba.New(b, opts...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		if err := clocktest.Close(w.clock, 10*time.Second, c.Close); err != nil {
			w.t.Errorf("close %s: %v", owner, err)
		}
	})
	return c
}

// until advances virtual time in small steps, letting goroutines run between steps, until cond
// holds or limit of virtual time has passed.
func (w *world) until(limit time.Duration, what string, cond func() bool) {
	w.t.Helper()
	end := w.clock.Now() + limit
	for !cond() {
		if w.clock.Now() >= end {
			w.t.Fatalf("after %v of virtual time: %s did not happen", limit, what)
		}
		w.clock.Advance(10 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
	}
}

func leaderOf(es ...*simba.Election) int {
	n, who := 0, -1
	for i, e := range es {
		if e.IsLeader() {
			n++
			who = i
		}
	}
	if n > 1 {
		return -2
	}
	return who
}

func TestFailoverWhenLeaderSessionExpires(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	var es []*simba.Election
	var bs []*simbatest.Backend
	for _, owner := range []string{"a", "b", "c"} {
		c, b := w.client(owner)
		e, err := c.NewElection("jobs")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		es, bs = append(es, e), append(bs, b)
	}
	w.until(5*time.Second, "a leader", func() bool { return leaderOf(es...) >= 0 })
	first := leaderOf(es...)
	t1, _ := es[first].Term()
	// Cut the leader off: its keep-alives hang, its session expires at the server after the
	// TTL, and by then its local deadline has passed. Another must win with a greater token,
	// and there are never two leaders at once.
	bs[first].CutOff(simbatest.Hang)
	w.until(10*time.Second, "a new leader", func() bool {
		if leaderOf(es...) == -2 {
			t.Fatal("two leaders")
		}
		l := leaderOf(es...)
		if l < 0 {
			return false
		}
		t2, _ := es[l].Term()
		return t2.Token() > t1.Token()
	})
	if t1.IsValid() {
		t.Fatal("the expired session's term is still valid")
	}
}

func TestLockTryLockWithLock(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c1, _ := w.client("one")
	c2, _ := w.client("two")
	var l1 *simba.Held
	w.async(func() (err error) { l1, err = c1.Lock(ctx, "res"); return err })
	term := l1.Term
	if term.Token() < 1 || !term.IsValid() || term.Name() != "res" {
		t.Fatalf("lock term %v", term)
	}
	_, err := c2.TryLock(ctx, "res")
	if !errors.Is(err, simba.ErrLockHeld) {
		t.Fatalf("TryLock while held: %v, want ErrLockHeld", err)
	}
	var held *simba.LockHeldError
	if !errors.As(err, &held) || held.Owner != "one" {
		t.Fatalf("TryLock error %v does not name the holder", err)
	}
	w.async(func() error { return l1.Unlock(ctx) })
	if term.IsValid() {
		t.Fatal("term valid after Unlock")
	}
	var ran atomic.Bool
	w.async(func() error {
		return c2.WithLock(ctx, "res", func(ctx context.Context, t2 simba.Term) error {
			if t2.Token() <= term.Token() {
				return errors.New("token did not increase")
			}
			ran.Store(true)
			return nil
		})
	})
	if !ran.Load() {
		t.Fatal("WithLock did not run its function")
	}
	if err := l1.Unlock(ctx); !errors.Is(err, simba.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
}

// async runs f while moving virtual time, and fails the test on its error.
func (w *world) async(f func() error) {
	w.t.Helper()
	var wg sync.WaitGroup
	var err error
	done := make(chan struct{})
	wg.Add(1)
	go func() { defer wg.Done(); err = f(); close(done) }()
	w.until(30*time.Second, "the call to return", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	wg.Wait()
	if err != nil {
		w.t.Fatal(err)
	}
}

package simba_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestCloseReportsTheFailedSessionClose: a Close whose session's close call fails returns a
// *SessionCloseError naming the session, wrapping the failure: the refusal as itself when the
// backend refused for good (permanent), an error matching ErrUnavailable when the outcome is
// unknown; a second Close returns the same. Close returned nil in both cases, so a user who
// checked it was told that the session was closed while it lives on at the backend until its
// TTL.
func TestCloseReportsTheFailedSessionClose(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		want      error
		permanent bool
	}{
		{"refused", spi.AsPermanent(fmt.Errorf("%w: session key holds a string", spi.ErrCorruptRecord)), spi.ErrCorruptRecord, true},
		{"outcome unknown", errors.New("connection reset by peer"), simba.ErrUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			b := w.srv.Backend()
			c, err := simba.New(b, simba.WithClock(w.clock), simba.WithTTL(testTTL), simba.WithOwner("a"), simba.WithSeed(1))
			if err != nil {
				t.Fatal(err)
			}
			w.until(5*time.Second, "the session to open", func() bool { return c.Session() != "" })
			sid := c.Session()
			b.FailOp("CloseSession", tc.err)
			err = clocktest.Close(w.clock, 10*time.Second, c.Close)
			var ce *simba.SessionCloseError
			if !errors.As(err, &ce) {
				t.Fatalf("Close = %v, want a *SessionCloseError", err)
			}
			if ce.Session != sid {
				t.Errorf("SessionCloseError.Session = %q, want %q", ce.Session, sid)
			}
			if !errors.Is(err, tc.want) || simba.IsPermanent(err) != tc.permanent {
				t.Errorf("Close = %v (permanent %v), want one matching %v (permanent %v)", err, simba.IsPermanent(err), tc.want, tc.permanent)
			}
			if tc.permanent && errors.Is(err, simba.ErrUnavailable) {
				t.Errorf("Close = %v: a refusal must not say ErrUnavailable", err)
			}
			t.Logf("Close: %v", err)
			again := clocktest.Close(w.clock, 10*time.Second, c.Close)
			if !errors.As(again, &ce) || !errors.Is(again, tc.want) {
				t.Errorf("second Close = %v, want the same error", again)
			}
			if n := w.srv.Calls("CloseSession"); n != 0 {
				t.Errorf("%d session closes reached the server, want 0", n)
			}
		})
	}
}

// TestCloseWithoutFailureIsNil: a Close whose session's close succeeds, and one of a client
// that never opened a session, return nil (the typed error is for a failed close only).
func TestCloseWithoutFailureIsNil(t *testing.T) {
	w := newWorld(t)
	b := w.srv.Backend()
	c, err := simba.New(b, simba.WithClock(w.clock), simba.WithTTL(testTTL), simba.WithOwner("a"), simba.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "the session to open", func() bool { return c.Session() != "" })
	if err := clocktest.Close(w.clock, 10*time.Second, c.Close); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	if n := w.srv.Calls("CloseSession"); n != 1 {
		t.Errorf("%d session closes, want 1", n)
	}
	refusing := w.srv.Backend()
	refusing.FailOp("OpenSession", spi.AsPermanent(fmt.Errorf("%w: ttl refused", spi.ErrInvalidOption)))
	c2, err := simba.New(refusing, simba.WithClock(w.clock), simba.WithTTL(testTTL), simba.WithOwner("b"), simba.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "the open to fail", func() bool { return c2.Err() != nil })
	if err := clocktest.Close(w.clock, 10*time.Second, c2.Close); err != nil {
		t.Errorf("Close of a client without a session = %v, want nil", err)
	}
}

// TestLeaveAfterARefusedJoinDoesNotWait: a group whose Join the backend refused for good (a
// Redis group key of another type) is left at once, without a Leave call: the refusal did not
// land, so no late Join can re-add the member. It was taken as a Join of unknown outcome, and
// Leave waited one call timeout (the renewal interval) of virtual time, then sent a Leave.
func TestLeaveAfterARefusedJoinDoesNotWait(t *testing.T) {
	w := newWorld(t)
	pw := newPermWatch()
	b := w.srv.Backend()
	c := w.clientOn(b, "a", pw.options()...)
	w.until(5*time.Second, "the session to open", func() bool { return c.Session() != "" })
	b.FailOp("Join", spi.AsPermanent(fmt.Errorf("%w: key simba:group:{g} holds a string", spi.ErrCorruptRecord)))
	g, err := c.JoinGroup(context.Background(), "g", 2)
	if err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "the join to be refused", func() bool { return pw.failures(simba.OpJoin) >= 1 })
	if err := g.Err(); !errors.Is(err, spi.ErrCorruptRecord) {
		t.Errorf("group Err = %v, want the refusal", err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Leave(context.Background()) }()
	// Half a call timeout of virtual time, in small steps: the Leave needs none of it.
	var leaveErr error
	returned := false
	for end := w.clock.Now() + time.Second/2; !returned && w.clock.Now() < end; {
		select {
		case leaveErr = <-done:
			returned = true
		case <-time.After(2 * time.Millisecond):
			w.clock.Advance(10 * time.Millisecond)
		}
	}
	if !returned {
		w.run(5 * time.Second)
		leaveErr = <-done
		t.Errorf("Leave did not return within half a call timeout of virtual time after a refused Join")
	}
	if leaveErr != nil {
		t.Errorf("Leave = %v, want nil (nothing was joined)", leaveErr)
	}
	if n := w.srv.Calls("Leave"); n != 0 {
		t.Errorf("%d Leave calls, want 0 (the refused Join did not land)", n)
	}
}

// TestPermanentOpenRefusalAgrees: while the session's open is refused for good (a missing
// schema), every entry point tells the user the same thing. Lock and TryLock return the
// refusal as itself — errors.Is with the backend's sentinel, not ErrUnavailable, which says
// "retry later" — and so does a TryLock that comes while the open waits for its retry (it
// returned ErrUnavailable wrapping the refusal); Election.Start and JoinGroup succeed (the
// handles work in the background) and their Err reports the refusal.
func TestPermanentOpenRefusalAgrees(t *testing.T) {
	w := newWorld(t)
	b := w.srv.Backend()
	refused := fmt.Errorf("%w: relation simba_session does not exist (apply 0001_init.sql)", spi.ErrSchemaMissing)
	b.FailOp("OpenSession", refused)
	c := w.clientOn(b, "a")
	w.until(5*time.Second, "the open to be refused", func() bool { return c.Err() != nil })
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, simba.ErrSchemaMissing) || errors.Is(err, simba.ErrUnavailable) || !simba.IsPermanent(err) {
			t.Errorf("%s = %v, want the refusal as itself (ErrSchemaMissing, permanent, not ErrUnavailable)", what, err)
		}
	}
	// No open in flight now: the next waits BackoffMax/2 at least, and the clock stands still.
	_, err := c.TryLock(ctx, "t")
	check("TryLock while the open waits for its retry", err)
	var lockErr error
	w.async(func() error {
		_, lockErr = c.Lock(ctx, "l")
		return nil
	})
	check("Lock", lockErr)
	var tryErr error
	w.async(func() error {
		_, tryErr = c.TryLock(ctx, "t2")
		return nil
	})
	check("TryLock", tryErr)
	e, err := c.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Errorf("Election.Start = %v, want nil (it runs in the background)", err)
	}
	check("Election.Err", e.Err())
	g, err := c.JoinGroup(ctx, "g", 1)
	if err != nil {
		t.Errorf("JoinGroup = %v, want nil (it joins in the background)", err)
	} else {
		check("PartitionGroup.Err", g.Err())
	}
	check("Client.Err", c.Err())
}

// TestHealedKeepAliveRenewsInTime: a keep-alive refused for good (a key of the wrong type)
// and repaired shortly before the session's local deadline renews the session in time: the
// retries come no later than halfway to the deadline, so one falls after the repair. Before,
// each retry waited BackoffMax/2 to BackoffMax (0.5–1 s at the test's TTL), whatever the time
// left, and the session was lost at its deadline in most rounds although the backend had
// answered again for 150 ms. Six rounds: the old code kept the session through all of them
// with a probability of about 0.2^6.
func TestHealedKeepAliveRenewsInTime(t *testing.T) {
	w := newWorld(t)
	b := w.srv.Backend()
	var lost atomic.Int32
	c := w.clientOn(b, "a", simba.WithListener(func(ev simba.Event) {
		if ev.Kind == simba.EventSessionExpired {
			lost.Add(1)
		}
	}))
	var h *simba.Held
	w.async(func() (err error) {
		h, err = c.Lock(context.Background(), "l")
		return err
	})
	sid := c.Session()
	// step advances the virtual clock by 5 ms and gives the client's goroutines time to act.
	step := func() {
		w.clock.Advance(5 * time.Millisecond)
		time.Sleep(500 * time.Microsecond)
	}
	const rounds = 6
	for i := 0; i < rounds; i++ {
		// Start each round right after a renewal.
		for h.Term.Remaining() < testTTL*8/10 {
			step()
		}
		b.FailOp("KeepAlive", spi.AsPermanent(fmt.Errorf("%w: key simba:session:{s} holds a string", spi.ErrCorruptRecord)))
		for h.Term.Remaining() > 150*time.Millisecond {
			step()
		}
		b.FailOp("KeepAlive", nil) // repaired
		for end := w.clock.Now() + time.Second; w.clock.Now() < end; {
			step()
		}
		if !h.Term.IsValid() || lost.Load() != 0 || c.Session() != sid {
			t.Fatalf("round %d: the session was lost (%d losses, session %q, was %q) although the keep-alive was repaired 150 ms before its deadline",
				i, lost.Load(), c.Session(), sid)
		}
	}
	w.async(func() error { return h.Unlock(context.Background()) })
}

// kaNames records the names each keep-alive of a simbatest backend asked about.
type kaNames struct {
	*simbatest.Backend
	mu    sync.Mutex
	asked map[string]int
}

func (k *kaNames) KeepAlive(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	k.mu.Lock()
	for _, n := range names {
		k.asked[n]++
	}
	k.mu.Unlock()
	return k.Backend.KeepAlive(ctx, sid, names, groups)
}

func (k *kaNames) times(name string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.asked[name]
}

// TestRefusedLockLeavesNothingUnknown: a Lock whose acquire the backend refused for good (a
// permanent error: access denied, a missing schema) returns the refusal, and that is a certain
// answer: nothing was acquired nor queued. The keep-alives that follow do not ask about the
// name, and no Withdraw is sent for a waiter entry that was never made. The refusal was taken
// as an acquire of unknown outcome: the keep-alives asked about the name for a call timeout
// (and one came early to settle it), and the ended Lock withdrew from the waiter queue.
func TestRefusedLockLeavesNothingUnknown(t *testing.T) {
	w := newWorld(t)
	b := &kaNames{Backend: w.srv.Backend(), asked: map[string]int{}}
	c := w.clientOn(b, "a")
	w.until(5*time.Second, "the session to open", func() bool { return c.Session() != "" })
	refused := spi.AsPermanent(fmt.Errorf("%w: relation simba_lease does not exist", spi.ErrSchemaMissing))
	b.FailOp("Acquire", refused)
	var lockErr error
	w.async(func() error {
		_, lockErr = c.Lock(context.Background(), "l")
		return nil
	})
	if !errors.Is(lockErr, spi.ErrSchemaMissing) {
		t.Fatalf("Lock = %v, want the refusal", lockErr)
	}
	w.run(3 * time.Second) // three renewal intervals: keep-alives come and go
	if n := b.times("l"); n != 0 {
		t.Errorf("%d keep-alives asked about l after its acquire was refused, want 0", n)
	}
	if n := b.Calls("Withdraw"); n != 0 {
		t.Errorf("%d Withdraw calls after a refused Lock, want 0 (it never queued)", n)
	}
}

package simbatest

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/spi"
)

// Backend is one client's connection to a Server: a goroutine-safe spi.Backend, spi.Hinter and
// spi.Inspector, spi.LeaseInspector and spi.Queuer (and spi.SessionQueue, true when the server's model was made
// WithSessionWaiters, and spi.SteadyHints, true when it was made WithUnknownRemaining). Its
// embedded Faults apply only to its own calls.
//
// A call runs as: refused or hung while cut off; failed by FailOp or FailNext; delayed by DelayRequests;
// applied to the model at the server clock's current time; reply dropped by DropNextReplies;
// delayed by DelayReplies. The server's faults are checked before the backend's. A call whose
// context is done before it takes effect has no effect.
type Backend struct {
	// Faults apply to this client's calls only.
	*Faults

	srv *Server

	// guarded by srv.mu
	closed bool
	calls  map[string]int
	// withdrawals are the failed withdrawals (session, name) the session's next keep-alive
	// runs again (WithSessionWaiters only, as ZooKeeper and etcd do: there an entry would
	// otherwise outlive the wait as long as its session lives).
	withdrawals map[withdrawal]struct{}
}

// withdrawal is a Withdraw that failed.
type withdrawal struct {
	session spi.SessionID
	name    string
}

var (
	_ spi.Backend        = (*Backend)(nil)
	_ spi.Hinter         = (*Backend)(nil)
	_ spi.Inspector      = (*Backend)(nil)
	_ spi.LeaseInspector = (*Backend)(nil)
	_ spi.Queuer         = (*Backend)(nil)

	_ spi.SessionQueue = (*Backend)(nil)
	_ spi.SteadyHints  = (*Backend)(nil)
	_ spi.TTLChecker   = (*Backend)(nil)
)

// Server returns the server this backend is connected to.
func (b *Backend) Server() *Server { return b.srv }

// Calls returns how many calls of the SPI method op this client made that reached the server.
func (b *Backend) Calls(op string) int {
	b.srv.mu.Lock()
	defer b.srv.mu.Unlock()
	return b.calls[op]
}

// call carries out one SPI call with the faults of the server and of this client, applying f to
// the model at the backend's current time.
func (b *Backend) call(ctx context.Context, op string, f func(m *Model, now time.Duration) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simbatest: %s: %w", op, err)
	}
	srv := b.srv
	srv.mu.Lock()
	closed := b.closed
	srv.mu.Unlock()
	if closed {
		return fmt.Errorf("simbatest: %s: %w", op, spi.ErrBackendClosed)
	}
	var delay time.Duration
	for _, faults := range []*Faults{srv.Faults, b.Faults} {
		a := faults.admit(op)
		switch a.cut {
		case Refuse:
			return spi.Unavailable(op, ErrCutOff)
		case Hang:
			if err := spi.Await(ctx, a.restored); err != nil {
				return fmt.Errorf("simbatest: %s: %w", op, err)
			}
			return spi.Unavailable(op, ErrCutOff)
		}
		if a.fail {
			if a.failErr != nil {
				return a.failErr
			}
			return spi.Unavailable(op, ErrInjected)
		}
		delay += a.delay
	}
	if err := sleep(ctx, srv.clock, delay); err != nil {
		return fmt.Errorf("simbatest: %s: %w", op, err)
	}
	var err error
	srv.update(func(m *Model, now time.Duration) {
		if closed = b.closed; closed {
			return
		}
		srv.calls[op]++
		b.calls[op]++
		err = f(m, now)
	})
	if closed {
		return fmt.Errorf("simbatest: %s: %w", op, spi.ErrBackendClosed)
	}
	if err != nil {
		return err
	}
	delay = 0
	drop := false
	for _, faults := range []*Faults{srv.Faults, b.Faults} {
		d, rd := faults.afterEffect()
		drop = drop || d
		delay += rd
	}
	if err := sleep(ctx, srv.clock, delay); err != nil {
		return fmt.Errorf("simbatest: %s: %w", op, err)
	}
	if drop {
		return spi.Unavailable(op, ErrReplyLost)
	}
	return nil
}

// sleep waits d on clock, or until ctx is done. A client's call waits idle (spi.Await): the
// clock does not wait for it.
func sleep(ctx context.Context, clock spi.Clock, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	done := make(chan struct{})
	t := clock.AfterFunc(d, func() { close(done) })
	if err := spi.Await(ctx, done); err != nil {
		t.Stop()
		return err
	}
	return nil
}

// CheckTTL implements spi.TTLChecker with the model's rule: a ttl that is not positive is
// refused, with an error matching spi.ErrInvalidOption, as OpenSession refuses it.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: session TTL %v is not positive", spi.ErrInvalidOption, ttl)
	}
	return nil
}

// OpenSession implements spi.Backend.
func (b *Backend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	var s spi.Session
	err := b.call(ctx, "OpenSession", func(m *Model, now time.Duration) (err error) {
		s, err = m.OpenSession(now, owner, ttl)
		return err
	})
	if err != nil {
		return spi.Session{}, err
	}
	return s, nil
}

// KeepAlive implements spi.Backend.
func (b *Backend) KeepAlive(ctx context.Context, session spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	var r spi.KeepAlive
	err := b.call(ctx, "KeepAlive", func(m *Model, now time.Duration) (err error) {
		r, err = m.KeepAlive(now, session, names, groups)
		if err == nil && !r.Expired {
			for w := range b.withdrawals {
				if w.session == session {
					delete(b.withdrawals, w)
					_ = m.Withdraw(now, w.session, w.name) // a valid name: it was asked before
				}
			}
		}
		return err
	})
	if err != nil {
		return spi.KeepAlive{}, err
	}
	return r, nil
}

// CloseSession implements spi.Backend.
func (b *Backend) CloseSession(ctx context.Context, session spi.SessionID) error {
	return b.call(ctx, "CloseSession", func(m *Model, now time.Duration) error {
		return m.CloseSession(now, session)
	})
}

// Acquire implements spi.Backend.
func (b *Backend) Acquire(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	var r spi.Acquire
	err := b.call(ctx, "Acquire", func(m *Model, now time.Duration) (err error) {
		r, err = m.Acquire(now, session, name)
		return err
	})
	if err != nil {
		return spi.Acquire{}, err
	}
	return r, nil
}

// CutSafe implements spi.CutSafe: every call is one step of the model, applied whole or not
// at all, so a caller's context may cut an acquire short at any point.
func (b *Backend) CutSafe() bool { return true }

// QueueEntriesLiveWithSession implements spi.SessionQueue: true when the server's model was
// made WithSessionWaiters. A Withdraw that fails then runs again with the session's next
// keep-alive that reaches the server (unless the session queues for the name again first).
func (b *Backend) QueueEntriesLiveWithSession() bool { return b.srv.model.SessionWaiters() }

// HintsSteady implements spi.SteadyHints: true when the server's model was made
// WithUnknownRemaining, as on ZooKeeper and etcd, whose HeldBy leaves the time left unknown.
// The hints this backend drops (while its client is cut off, or for a subscriber too far
// behind) stand for those a real backend loses anyway, which the client's fallback retry, two
// TTLs after the reply, covers.
func (b *Backend) HintsSteady() bool { return b.srv.model.UnknownRemaining() }

// setWithdrawal records (pending) or forgets a failed withdrawal of session from name's queue.
func (b *Backend) setWithdrawal(session spi.SessionID, name string, pending bool) {
	if !b.srv.model.SessionWaiters() {
		return
	}
	b.srv.mu.Lock()
	defer b.srv.mu.Unlock()
	w := withdrawal{session, name}
	if !pending {
		delete(b.withdrawals, w)
		return
	}
	if b.withdrawals == nil {
		b.withdrawals = make(map[withdrawal]struct{})
	}
	b.withdrawals[w] = struct{}{}
}

// AcquireQueued implements spi.Queuer (Calls counts it as an "Acquire").
func (b *Backend) AcquireQueued(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	b.setWithdrawal(session, name, false) // waiting again: its entry, if any, is its place
	var r spi.Acquire
	err := b.call(ctx, "Acquire", func(m *Model, now time.Duration) (err error) {
		r, err = m.AcquireQueued(now, session, name)
		return err
	})
	if err != nil {
		return spi.Acquire{}, err
	}
	return r, nil
}

// Withdraw implements spi.Queuer. With WithSessionWaiters, a withdrawal that fails (on a
// valid name) is run again by the session's next keep-alive.
func (b *Backend) Withdraw(ctx context.Context, session spi.SessionID, name string) error {
	if err := spi.ValidateName(name); err != nil {
		return err
	}
	err := b.call(ctx, "Withdraw", func(m *Model, now time.Duration) error {
		return m.Withdraw(now, session, name)
	})
	b.setWithdrawal(session, name, err != nil)
	return err
}

// Release implements spi.Backend.
func (b *Backend) Release(ctx context.Context, session spi.SessionID, name string, token int64) error {
	return b.call(ctx, "Release", func(m *Model, now time.Duration) error {
		return m.Release(now, session, name, token)
	})
}

// Join implements spi.Backend.
func (b *Backend) Join(ctx context.Context, session spi.SessionID, group string) (spi.Status, error) {
	var st spi.Status
	err := b.call(ctx, "Join", func(m *Model, now time.Duration) (err error) {
		st, err = m.Join(now, session, group)
		return err
	})
	if err != nil {
		return 0, err
	}
	return st, nil
}

// Leave implements spi.Backend.
func (b *Backend) Leave(ctx context.Context, session spi.SessionID, group string) (spi.Status, error) {
	var st spi.Status
	err := b.call(ctx, "Leave", func(m *Model, now time.Duration) (err error) {
		st, err = m.Leave(now, session, group)
		return err
	})
	if err != nil {
		return 0, err
	}
	return st, nil
}

// Members implements spi.Backend.
func (b *Backend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	var ms []spi.SessionID
	err := b.call(ctx, "Members", func(m *Model, now time.Duration) (err error) {
		ms, err = m.Members(now, group)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// Inspect implements spi.Inspector.
func (b *Backend) Inspect(ctx context.Context) (spi.Snapshot, error) {
	var snap spi.Snapshot
	err := b.call(ctx, "Inspect", func(m *Model, now time.Duration) error {
		snap = m.Inspect(now)
		return nil
	})
	if err != nil {
		return spi.Snapshot{}, err
	}
	return snap, nil
}

// InspectLease implements spi.LeaseInspector: the lease's row as Inspect lists it
// (Model.Lease), read alone.
func (b *Backend) InspectLease(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	if err := spi.ValidateName(name); err != nil {
		return spi.LeaseInfo{}, false, err
	}
	var (
		info spi.LeaseInfo
		ok   bool
	)
	err := b.call(ctx, "InspectLease", func(m *Model, now time.Duration) error {
		info, ok = m.Lease(now, name)
		return nil
	})
	if err != nil {
		return spi.LeaseInfo{}, false, err
	}
	return info, ok, nil
}

// Hints implements spi.Hinter: the returned channel receives the released names and group
// changes of every client's calls (and of expiries the server observes) until ctx is done or the
// backend is closed, then is closed. Hints are dropped while the client is cut off and when the
// subscriber falls 1024 hints behind. If ctx carries an spi.Activity (a simba.Client's does), a
// unit of it is begun for each hint sent, for the client to end once it has handled the hint.
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simbatest: Hints: %w", err)
	}
	if b.srv.Faults.isCut() || b.Faults.isCut() {
		return nil, spi.Unavailable("Hints", ErrCutOff)
	}
	srv := b.srv
	sub := &subscriber{b: b, ch: make(chan spi.Hint, hintBuffer), stop: make(chan struct{}), act: spi.ActivityFromContext(ctx)}
	srv.mu.Lock()
	if b.closed {
		srv.mu.Unlock()
		return nil, fmt.Errorf("simbatest: Hints: %w", spi.ErrBackendClosed)
	}
	srv.subs[sub] = struct{}{}
	srv.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-sub.stop:
		}
		srv.mu.Lock()
		defer srv.mu.Unlock()
		if _, ok := srv.subs[sub]; ok {
			delete(srv.subs, sub)
			close(sub.ch)
		}
	}()
	return sub.ch, nil
}

// Close disconnects this client: later calls fail with spi.ErrBackendClosed and its hint channels are
// closed. Like a real backend's Close, it leaves the client's sessions to expire at the server.
func (b *Backend) Close() error {
	srv := b.srv
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for sub := range srv.subs {
		if sub.b == b {
			delete(srv.subs, sub)
			close(sub.ch)
			close(sub.stop)
		}
	}
	return nil
}

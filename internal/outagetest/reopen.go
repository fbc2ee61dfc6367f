package outagetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// Reopen checks that a client whose session an outage took reopens it, and that an election
// started during the outage and a Lock waiting through it are granted, within a bound far
// below the backoff the client used to wait out after the outage. backend's connections to its
// server all go through p; direct is a backend of the same server (and prefix) that does not,
// for the Lock's holder, which releases it during the outage.
//
// The client runs on a virtual clock that moves only as the test moves it, so the bound is on
// the client's time, not the machine's speed, and its TTL is 60 s: a call timeout and a
// backoff bound of 20 s, which the outage's failed opens let the backoff grow to. With
// blackhole the link is blackholed (faultproxy.Fault.Blackhole: the client's opens hang on
// connections that are never answered) and heals just after an open was sent, which hangs for
// good; else it refuses connections (reset) and heals just after an open failed. Before, the
// client reopened at its next open after a backoff of up to 20 s (after the hung open's
// timeout as well); now its probe finds the backend answering again within a second (probes
// come at most a quarter of the renewal interval apart, and at most 1 s: see probeEvery in
// the root package; a probe hung on the link adds up to 500 ms), the hung open is cut short,
// and the open is sent within 50 ms: the bound is 2 s when blackholed, 1.5 s when refused.
//
// It returns how much client time passed from the heal to the later of the two grants.
func Reopen(t testing.TB, backend, direct spi.Backend, p *faultproxy.Proxy, prefix string, blackhole bool) time.Duration {
	t.Helper()
	const ttl = 60 * time.Second
	fault, bound := faultproxy.Fault{Cut: true, Reset: true}, 1500*time.Millisecond
	if blackhole {
		fault, bound = faultproxy.Fault{Blackhole: true}, 2*time.Second
	}
	v := newVirtualClient(t, backend, ttl, "reopen")
	defer v.close()
	clock, ab, c, lost, healedAt, waitFor := v.clock, v.ab, v.c, &v.lost, &v.healedAt, v.waitFor
	waitFor("a session", func() bool { return c.Session() != "" }, time.Millisecond)

	// The Lock waits through the outage: another session holds it until the outage began.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lockName := prefix + "-lock"
	hs, err := direct.OpenSession(ctx, "holder", ttl)
	if err != nil {
		t.Fatal(err)
	}
	got, err := direct.Acquire(ctx, hs.ID, lockName)
	if err != nil || got.Kind != spi.Granted {
		t.Fatalf("the holder's acquire: %+v, %v", got, err)
	}
	var granted atomic.Int64 // client time of the grant, +1
	var lockErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h, err := c.Lock(ctx, lockName)
		if err != nil {
			lockErr = err
			return
		}
		granted.Store(int64(clock.Now()) + 1)
		h.Unlock(context.Background()) //nolint:errcheck
	}()
	waitFor("the Lock's first attempt", func() bool { return ab.acquires.Load() >= 1 }, time.Millisecond)

	p.Set(fault)
	if err := direct.CloseSession(ctx, hs.ID); err != nil { // the lock is free from now on
		t.Fatal(err)
	}
	waitFor("the session lost to the outage", lost.Load, 500*time.Millisecond)
	// An election started during the outage (one held before would find its lease still held
	// by the lost session, at the server, until the server expires it).
	var elected atomic.Int64 // client time of the election, +1
	e, err := c.NewElection(prefix+"-leader", simba.OnElected(func(context.Context, simba.Term) {
		elected.CompareAndSwap(0, int64(clock.Now())+1)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Ten failed opens: the backoff has grown to its bound (20 s).
	n := ab.opens.Load()
	waitFor("ten opens failed", func() bool { return ab.openFails.Load() >= n+10 }, time.Second)
	if blackhole { // heal just after an open was sent: it hangs for good
		n := ab.opens.Load()
		waitFor("an open sent", func() bool { return ab.opens.Load() > n }, 5*time.Millisecond)
	} else { // heal just after an open failed: the next waits out its backoff
		n := ab.openFails.Load()
		waitFor("an open failed", func() bool { return ab.openFails.Load() > n }, 5*time.Millisecond)
	}
	p.Heal()
	healed := clock.Now()
	healedAt.Store(int64(healed) + 1)
	waitFor("the Lock granted and the election elected after the heal", func() bool {
		return granted.Load() != 0 && elected.Load() != 0 || lockErr != nil || clock.Now() >= healed+3*bound
	}, 2*time.Millisecond)
	if lockErr != nil {
		t.Fatalf("the waiting Lock: %v", lockErr)
	}
	lockAt, electedAt := time.Duration(granted.Load()-1)-healed, time.Duration(elected.Load()-1)-healed
	if granted.Load() == 0 || elected.Load() == 0 || lockAt >= bound || electedAt >= bound {
		when := func(at time.Duration, done bool) string {
			if !done {
				return "not yet"
			}
			return at.String() + " after it"
		}
		t.Fatalf("%d probes; %v of the client's time after the heal, the waiting Lock granted %s, the election elected %s; want both within %v (before, the client waited for its backoff, up to 20 s)",
			ab.probes.Load(), clock.Now()-healed, when(lockAt, granted.Load() != 0), when(electedAt, elected.Load() != 0), bound)
	}
	t.Logf("%d probes; the waiting Lock granted %v and the election elected %v after the heal (client time)", ab.probes.Load(), lockAt, electedAt)
	cancel()
	wg.Wait()
	return max(lockAt, electedAt)
}

// awaitBackend makes a real backend's calls wait through spi.Await, so that a virtual clock
// does not wait for a call that hangs on a blackholed link (it hangs until its timeout on that
// clock, which only moves when the test moves it). It counts the opens (and those that
// failed), the acquires and the probes (Members: a group's members reads count too).
type awaitBackend struct {
	spi.Backend
	clock            *simbatest.VirtualClock
	opens, openFails atomic.Int64
	acquires, probes atomic.Int64
	// joins and joinFails count the Joins (and those that failed), renewed the keep-alives
	// that succeeded (GroupReopen).
	joins, joinFails, renewed atomic.Int64
}

func await[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan struct{})
	var r result
	go func() {
		r.v, r.err = f()
		close(done)
	}()
	if err := spi.Await(ctx, done); err != nil {
		var zero T
		return zero, fmt.Errorf("%w (%v)", spi.ErrUnavailable, err) // %v: spi.Classify takes a cancellation as permanent
	}
	return r.v, r.err
}

func (b *awaitBackend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	b.opens.Add(1)
	s, err := await(ctx, func() (spi.Session, error) { return b.Backend.OpenSession(ctx, owner, ttl) })
	if err != nil {
		b.openFails.Add(1)
	}
	return s, err
}

func (b *awaitBackend) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	ka, err := await(ctx, func() (spi.KeepAlive, error) { return b.Backend.KeepAlive(ctx, id, names, groups) })
	if err == nil {
		b.renewed.Add(1)
	}
	return ka, err
}

func (b *awaitBackend) Join(ctx context.Context, id spi.SessionID, group string) (spi.Status, error) {
	b.joins.Add(1)
	st, err := await(ctx, func() (spi.Status, error) { return b.Backend.Join(ctx, id, group) })
	if err != nil {
		b.joinFails.Add(1)
	}
	return st, err
}

func (b *awaitBackend) Leave(ctx context.Context, id spi.SessionID, group string) (spi.Status, error) {
	return await(ctx, func() (spi.Status, error) { return b.Backend.Leave(ctx, id, group) })
}

func (b *awaitBackend) CloseSession(ctx context.Context, id spi.SessionID) error {
	_, err := await(ctx, func() (struct{}, error) { return struct{}{}, b.Backend.CloseSession(ctx, id) })
	return err
}

func (b *awaitBackend) Acquire(ctx context.Context, id spi.SessionID, name string) (spi.Acquire, error) {
	b.acquires.Add(1)
	return await(ctx, func() (spi.Acquire, error) { return b.Backend.Acquire(ctx, id, name) })
}

func (b *awaitBackend) Release(ctx context.Context, id spi.SessionID, name string, token int64) error {
	_, err := await(ctx, func() (struct{}, error) { return struct{}{}, b.Backend.Release(ctx, id, name, token) })
	return err
}

func (b *awaitBackend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	b.probes.Add(1)
	return await(ctx, func() ([]spi.SessionID, error) { return b.Backend.Members(ctx, group) })
}

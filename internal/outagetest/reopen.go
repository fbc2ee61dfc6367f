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

// Reopen checks that a client whose session an outage took reopens it, and that its election
// and a Lock waiting through the outage are granted, before the open that was in flight when
// the outage ended would have run out its timeout. backend's connections to its server all go
// through p; direct is a backend of the same server (and prefix) that does not, for the
// Lock's holder, which releases it during the outage. The client runs on a virtual clock (TTL 3 s: a call timeout and a backoff bound of
// 1 s) that moves only as the test moves it, in small steps, so the condition is about the
// client's time, not the machine's speed:
//
//   - the link is blackholed (faultproxy.Fault.Blackhole) until the session is lost and the
//     client's opens hang on connections that are never answered;
//   - the link heals just after an open was sent: that open hangs for good, and before, the
//     client reopened only once it timed out (one renewal interval, here 1 s) and a backoff
//     of up to a renewal interval had passed;
//   - the session must be reopened, the election elected and the Lock granted within that
//     open's timeout: the client's probe finds the backend answering again, the stuck open is
//     cut short and retried at once.
//
// It returns how much client time passed from the heal to the Lock's grant.
func Reopen(t testing.TB, backend, direct spi.Backend, p *faultproxy.Proxy, prefix string) time.Duration {
	t.Helper()
	const ttl, renew = 3 * time.Second, time.Second
	clock := simbatest.NewVirtualClock()
	ab := &awaitBackend{Backend: backend, clock: clock}
	var lost atomic.Bool
	c, err := simba.New(ab, simba.WithClock(clock), simba.WithTTL(ttl), simba.WithOwner("reopen"),
		simba.WithListener(func(e simba.Event) {
			if e.Kind == simba.EventSessionExpired {
				lost.Store(true)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closeClient := func() {
		if closed {
			return
		}
		closed = true
		done := make(chan error, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		go func() { done <- c.Close(ctx) }()
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("close: %v", err)
				}
				return
			case <-time.After(5 * time.Millisecond):
				clock.Advance(10 * time.Millisecond)
			}
		}
	}
	defer closeClient()

	var elected, reelected atomic.Int64 // terms; client time of the second, +1
	e, err := c.NewElection(prefix+"-leader", simba.OnElected(func(context.Context, simba.Term) {
		if elected.Add(1) == 2 {
			reelected.Store(int64(clock.Now()) + 1)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// step moves the client's time by d and gives the client's calls over the real network a
	// moment to complete (the clock waits for what the client does, not for the network).
	step := func(d time.Duration) {
		clock.Advance(d)
		time.Sleep(10 * time.Millisecond)
	}
	// After the heal the client's time moves 2 ms per step: the client's calls over the real
	// network (a redial, gRPC's reconnect backoff on etcd) take little of it.
	waitFor := func(what string, cond func() bool, d time.Duration) {
		t.Helper()
		guard := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(guard) {
				t.Fatalf("%s: not within a minute", what)
			}
			step(d)
		}
	}
	waitFor("elected before the outage", func() bool { return elected.Load() == 1 }, time.Millisecond)

	// The Lock waits through the outage: another session holds it until the outage began.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	waitFor("the Lock's first attempt", func() bool { return ab.acquires.Load() >= 2 }, time.Millisecond)

	p.Set(faultproxy.Fault{Blackhole: true})
	if err := direct.CloseSession(ctx, hs.ID); err != nil { // the lock is free from now on
		t.Fatal(err)
	}
	waitFor("the session lost to the outage", lost.Load, 50*time.Millisecond)
	// Heal just after an open was sent: it hangs for good on a connection the outage took.
	n := ab.opens.Load()
	waitFor("an open sent during the outage", func() bool { return ab.opens.Load() > n }, 5*time.Millisecond)
	sent := time.Duration(ab.openSent.Load())
	p.Heal()
	healed := clock.Now()
	waitFor("the Lock granted and the election elected after the heal", func() bool {
		return granted.Load() != 0 && reelected.Load() != 0 || lockErr != nil || clock.Now() >= sent+renew+time.Second
	}, 2*time.Millisecond)
	wg.Wait()
	if lockErr != nil {
		t.Fatalf("the waiting Lock: %v", lockErr)
	}
	at := time.Duration(granted.Load() - 1)
	if at >= sent+renew {
		t.Fatalf("the waiting Lock was granted %v of client time after the heal, %v after the open that hung was sent; want before that open's timeout (%v): the client waited for it, then for a backoff", at-healed, at-sent, renew)
	}
	if re := time.Duration(reelected.Load() - 1); re < 0 || re >= sent+renew {
		t.Fatalf("the election was not elected again by %v after the heal; want it before the open that hung would have timed out (%v after it was sent)", clock.Now()-healed, renew)
	} else {
		t.Logf("healed %v after the stuck open was sent; the Lock granted %v and the election elected %v after the heal (client time); %d probes", healed-sent, at-healed, re-healed, ab.probes.Load())
	}
	return at - healed
}

// awaitBackend makes a real backend's calls wait through spi.Await, so that a virtual clock
// does not wait for a call that hangs on a blackholed link (it hangs until its timeout on that
// clock, which only moves when the test moves it). It counts the opens and acquires, and keeps
// when the latest open was sent.
type awaitBackend struct {
	spi.Backend
	clock            *simbatest.VirtualClock
	opens, acquires  atomic.Int64
	openSent, probes atomic.Int64
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
	b.openSent.Store(int64(b.clock.Now()))
	b.opens.Add(1)
	return await(ctx, func() (spi.Session, error) { return b.Backend.OpenSession(ctx, owner, ttl) })
}

func (b *awaitBackend) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	return await(ctx, func() (spi.KeepAlive, error) { return b.Backend.KeepAlive(ctx, id, names, groups) })
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

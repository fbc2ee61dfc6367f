package simba_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// pooledBackend is a simbatest backend behind a connection pool of one connection, each call
// taking about service on it (a backend that runs one call at a time, as SQLite): calls beyond
// the pool wait for it in arrival order, a keep-alive too. It records the order in which
// acquires reached the backend, and how many calls other than the session's own each
// keep-alive found ahead of it.
type pooledBackend struct {
	*simbatest.Backend
	conn    chan struct{}
	service time.Duration
	// atPool counts the calls other than the session's own waiting for the connection or on it.
	atPool atomic.Int64

	mu       sync.Mutex
	acquires []string
	ahead    []int64 // per keep-alive, atPool as it reached the pool
}

func newPooledBackend(srv *simbatest.Server, service time.Duration) *pooledBackend {
	return &pooledBackend{Backend: srv.Backend(), conn: make(chan struct{}, 1), service: service}
}

// use runs f on the connection once the connection is free, or fails with ctx's error.
func (b *pooledBackend) use(ctx context.Context, f func()) error {
	b.atPool.Add(1)
	defer b.atPool.Add(-1)
	return b.useAs(ctx, f)
}

// useSession is use for the session's own calls (open, keep-alive, close), which the client
// does not count among its calls in flight.
func (b *pooledBackend) useSession(ctx context.Context, f func()) error { return b.useAs(ctx, f) }

func (b *pooledBackend) useAs(ctx context.Context, f func()) error {
	select {
	case b.conn <- struct{}{}:
	case <-ctx.Done():
		return spi.Unavailable("pool", ctx.Err())
	}
	defer func() { <-b.conn }()
	time.Sleep(b.service)
	f()
	return nil
}

func (b *pooledBackend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (s spi.Session, err error) {
	if perr := b.useSession(ctx, func() { s, err = b.Backend.OpenSession(ctx, owner, ttl) }); perr != nil {
		return s, perr
	}
	return s, err
}

func (b *pooledBackend) KeepAlive(ctx context.Context, sid spi.SessionID, names, groups []string) (k spi.KeepAlive, err error) {
	b.mu.Lock()
	b.ahead = append(b.ahead, b.atPool.Load())
	b.mu.Unlock()
	if perr := b.useSession(ctx, func() { k, err = b.Backend.KeepAlive(ctx, sid, names, groups) }); perr != nil {
		return k, perr
	}
	return k, err
}

func (b *pooledBackend) CloseSession(ctx context.Context, sid spi.SessionID) (err error) {
	if perr := b.useSession(ctx, func() { err = b.Backend.CloseSession(ctx, sid) }); perr != nil {
		return perr
	}
	return err
}

func (b *pooledBackend) acquired(name string) {
	b.mu.Lock()
	b.acquires = append(b.acquires, name)
	b.mu.Unlock()
}

func (b *pooledBackend) Acquire(ctx context.Context, sid spi.SessionID, name string) (a spi.Acquire, err error) {
	if perr := b.use(ctx, func() { b.acquired(name); a, err = b.Backend.Acquire(ctx, sid, name) }); perr != nil {
		return a, perr
	}
	return a, err
}

func (b *pooledBackend) AcquireQueued(ctx context.Context, sid spi.SessionID, name string) (a spi.Acquire, err error) {
	if perr := b.use(ctx, func() { b.acquired(name); a, err = b.Backend.AcquireQueued(ctx, sid, name) }); perr != nil {
		return a, perr
	}
	return a, err
}

func (b *pooledBackend) Release(ctx context.Context, sid spi.SessionID, name string, token int64) (err error) {
	if perr := b.use(ctx, func() { err = b.Backend.Release(ctx, sid, name, token) }); perr != nil {
		return perr
	}
	return err
}

func (b *pooledBackend) Withdraw(ctx context.Context, sid spi.SessionID, name string) (err error) {
	if perr := b.use(ctx, func() { err = b.Backend.Withdraw(ctx, sid, name) }); perr != nil {
		return perr
	}
	return err
}

func (b *pooledBackend) Join(ctx context.Context, sid spi.SessionID, group string) (st spi.Status, err error) {
	if perr := b.use(ctx, func() { st, err = b.Backend.Join(ctx, sid, group) }); perr != nil {
		return st, perr
	}
	return st, err
}

func (b *pooledBackend) Leave(ctx context.Context, sid spi.SessionID, group string) (st spi.Status, err error) {
	if perr := b.use(ctx, func() { st, err = b.Backend.Leave(ctx, sid, group) }); perr != nil {
		return st, perr
	}
	return st, err
}

func (b *pooledBackend) Members(ctx context.Context, group string) (m []spi.SessionID, err error) {
	if perr := b.use(ctx, func() { m, err = b.Backend.Members(ctx, group) }); perr != nil {
		return m, perr
	}
	return m, err
}

// waitFor polls cond every 10 ms for up to limit (a generous bound, not a measure).
func waitFor(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestBigGroupKeepsItsSession: a member joining a group of 4,096 partitions on a backend that
// runs one call at a time (1 ms each, in arrival order, keep-alives included) keeps its
// session and ends up holding every partition: none of its keep-alives finds more than the
// client's calls in flight (simba.MaxCallsInFlight, 32) ahead of it at the backend. Its
// acquires used to start all at once: its keep-alives waited behind about 4 s of them, past
// their timeout (a renewal interval, 500 ms at a TTL of 1.5 s), the session expired within its
// TTL, every partition was lost, and so on.
//
// What a keep-alive waits behind is counted in calls, not timed: a call of this backend (a
// 1 ms sleep and the wake-up after it) takes ten times as long on a loaded CPU (13–16 ms
// pinned to one CPU beside three CPU hogs, where 32 calls took keep-alives past a 500 ms
// timeout and the session expired in 3 runs of 10). The TTL, 9 s, gives each keep-alive 3 s
// (94 ms a call), and the join, 4,096 calls of at least 1 ms one after another, still spans
// keep-alives (the first is sent 3 s after the session opened).
func TestBigGroupKeepsItsSession(t *testing.T) {
	defer goleak.VerifyNone(t)
	const P = 4096
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	be := newPooledBackend(srv, time.Millisecond)
	var expired atomic.Int64
	var group atomic.Pointer[simba.PartitionGroup] // g, for the call observer
	var duringJoin atomic.Int64                    // keep-alives that ended (so were sent) during the join
	c, err := simba.New(be, simba.WithOwner("big"), simba.WithTTL(9*time.Second),
		simba.WithListener(func(ev simba.Event) {
			if ev.Kind == simba.EventSessionExpired {
				expired.Add(1)
			}
		}),
		simba.WithCallObserver(func(ci simba.CallInfo) {
			if g := group.Load(); ci.Op == "keep-alive" && g != nil && len(g.Held()) < P {
				duringJoin.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background()) // on a failure too, before goleak looks
	g, err := c.JoinGroup(context.Background(), "big", P)
	if err != nil {
		t.Fatal(err)
	}
	group.Store(g)
	// Polled every 100 ms: Held copies 4,096 terms, which under -race on a loaded CPU takes
	// milliseconds that the backend's calls would wait for.
	for end := time.Now().Add(2 * time.Minute); expired.Load() == 0 && len(g.Held()) < P && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
	}
	if n := expired.Load(); n > 0 {
		t.Fatalf("the session expired %d times; held %d of %d partitions", n, len(g.Held()), P)
	}
	if n := len(g.Held()); n != P {
		t.Fatalf("held %d of %d partitions after 2 minutes", n, P)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	be.mu.Lock()
	ahead := slices.Clone(be.ahead)
	be.mu.Unlock()
	t.Logf("calls ahead of each keep-alive at the backend: %v", ahead)
	if n := duringJoin.Load(); n == 0 {
		t.Fatalf("no keep-alive was sent while the join was under way (%d keep-alives): nothing measured", len(ahead))
	}
	if most := slices.Max(ahead); most > simba.MaxCallsInFlight {
		t.Fatalf("a keep-alive found %d calls ahead of it at the backend (%v), more than the %d a client has in flight", most, ahead, simba.MaxCallsInFlight)
	}
}

// TestLockGoesAheadOfPartitionCalls: a Lock taken while thousands of a group's partition
// acquires wait for a call slot reaches the backend ahead of them, and a Close with thousands
// of calls still queued ends them all (goleak).
//
// Counted, not timed: the test holds the backend's one connection while the Lock is asked
// for, so no call starts or ends between counting the acquires started and the Lock's acquire
// queueing; only the calls then in flight (at most simba.MaxCallsInFlight) may start before it.
// (It read the count and then called Lock, and under -race in CI 70 partition acquires started
// in between.)
func TestLockGoesAheadOfPartitionCalls(t *testing.T) {
	defer goleak.VerifyNone(t)
	const P = 4096
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	be := newPooledBackend(srv, time.Millisecond)
	c, err := simba.New(be, simba.WithOwner("big"), simba.WithTTL(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	if _, err := c.JoinGroup(ctx, "big", P); err != nil {
		t.Fatal(err)
	}
	started := func() int {
		be.mu.Lock()
		defer be.mu.Unlock()
		return len(be.acquires)
	}
	// Most of the join's acquires queued (the loop queues them one effect at a time).
	if !waitFor(time.Minute, func() bool { _, bulk := simba.QueuedCalls(c); return bulk >= P/2 }) {
		t.Fatal("the join's partition acquires did not queue in a minute")
	}
	be.conn <- struct{}{} // the connection is the test's: no call starts until it gives it back
	released := false
	release := func() {
		if !released {
			released = true
			<-be.conn
		}
	}
	defer release()
	before := started()
	type locked struct {
		h   *simba.Held
		err error
	}
	done := make(chan locked, 1)
	go func() {
		h, err := c.Lock(ctx, "side")
		done <- locked{h, err}
	}()
	var waited bool
	var place, queued int
	if !waitFor(time.Minute, func() bool {
		var ok bool
		waited, place, queued, ok = simba.QueuedCall(c, "side")
		return ok
	}) {
		t.Fatal("the Lock's acquire did not queue in a minute")
	}
	if !waited {
		t.Fatalf("the Lock's acquire queued among group partitions' calls, at place %d of %d", place, queued)
	}
	if place > 0 {
		t.Fatalf("the Lock's acquire queued at place %d of %d calls a caller waits for", place, queued)
	}
	if _, bulk := simba.QueuedCalls(c); bulk == 0 {
		t.Fatal("no partition call was queued behind the Lock's acquire: nothing to go ahead of")
	}
	release()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	be.mu.Lock()
	at := slices.Index(be.acquires, "side")
	be.mu.Unlock()
	if at < 0 {
		t.Fatalf("the lock's acquire is not among the backend's acquires (at %d)", at)
	}
	// Ahead of every partition call queued when it was asked for: only the calls
	// then in flight start before it.
	if at > before+simba.MaxCallsInFlight {
		t.Fatalf("the lock's acquire was acquire #%d, %d partition acquires having started before it queued", at, before)
	}
	if err := r.h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

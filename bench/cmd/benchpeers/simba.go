package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// opener opens a new Simba backend value (one per client: a ZooKeeper session is a connection).
type opener func(ctx context.Context) (spi.Backend, error)

// newClient opens a backend with o, wraps it with a call counter and starts a client on it.
func newClient(ctx context.Context, o opener, ttl time.Duration, n *calls, opts ...simba.Option) (*simba.Client, func(), error) {
	b, err := o(ctx)
	if err != nil {
		return nil, nil, err
	}
	if n == nil {
		n = new(calls)
	}
	c, err := simba.New(countBackend(b, n), append([]simba.Option{simba.WithTTL(ttl)}, opts...)...)
	if err != nil {
		_ = b.Close()
		return nil, nil, err
	}
	return c, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx)
		_ = b.Close()
	}, nil
}

// spiCycle is Acquire + Release straight on the backend, on one session kept alive between
// slices (untimed).
func spiCycle(ctx context.Context, o opener, ttl time.Duration, name string, r *resources) (prep, op func(context.Context) error, err error) {
	b, err := o(ctx)
	if err != nil {
		return nil, nil, err
	}
	r.add(func() { _ = b.Close() })
	var sid spi.SessionID
	open := func(ctx context.Context) error {
		s, err := b.OpenSession(ctx, "bench-spi", ttl)
		sid = s.ID
		return err
	}
	if err := open(ctx); err != nil {
		return nil, nil, err
	}
	r.add(func() { _ = b.CloseSession(context.Background(), sid) })
	prep = func(ctx context.Context) error {
		ka, err := b.KeepAlive(ctx, sid, nil, nil)
		if err != nil {
			return err
		}
		if ka.Expired {
			return open(ctx)
		}
		return nil
	}
	op = func(ctx context.Context) error {
		a, err := b.Acquire(ctx, sid, name)
		if err != nil {
			return err
		}
		if a.Kind != spi.Granted {
			return fmt.Errorf("acquire: %v", a.Kind)
		}
		return b.Release(ctx, sid, name, a.Token)
	}
	return prep, op, nil
}

// lockCycle is the public Lock + Unlock on one client.
func lockCycle(ctx context.Context, o opener, ttl time.Duration, name string, r *resources) (op func(context.Context) error, err error) {
	c, done, err := newClient(ctx, o, ttl, nil)
	if err != nil {
		return nil, err
	}
	r.add(done)
	return func(ctx context.Context) error {
		h, err := c.Lock(ctx, name)
		if err != nil {
			return err
		}
		return h.Unlock(ctx)
	}, nil
}

// simbaLockSide is one client of a Lock handover pair.
type simbaLockSide struct {
	c    *simba.Client
	name string
	h    *simba.Held
}

func (s *simbaLockSide) acquire(ctx context.Context) error {
	h, err := s.c.Lock(ctx, s.name)
	s.h = h
	return err
}

func (s *simbaLockSide) release(ctx context.Context) error { return s.h.Unlock(ctx) }

// simbaLockPair makes two clients (two sessions) contending for name.
func simbaLockPair(ctx context.Context, o opener, ttl time.Duration, name string, r *resources) (a, b side, err error) {
	var s [2]side
	for i := range s {
		c, done, err := newClient(ctx, o, ttl, nil)
		if err != nil {
			return nil, nil, err
		}
		r.add(done)
		s[i] = &simbaLockSide{c: c, name: name}
	}
	return s[0], s[1], nil
}

// electionPair is two clients running an election on one name; sample hands leadership from
// the leader to the candidate by Stop or StepDown and times it to the candidate's OnElected.
type electionPair struct {
	e       [2]*simba.Election
	elected [2]chan time.Time
	leader  int
	started bool
	stepDn  bool
}

func newElectionPair(ctx context.Context, o opener, ttl time.Duration, name string, stepDown bool, r *resources) (*electionPair, error) {
	p := &electionPair{stepDn: stepDown}
	for i := range p.e {
		c, done, err := newClient(ctx, o, ttl, nil)
		if err != nil {
			return nil, err
		}
		r.add(done)
		ch := make(chan time.Time, 4)
		p.elected[i] = ch
		e, err := c.NewElection(name, simba.OnElected(func(context.Context, simba.Term) {
			select {
			case ch <- time.Now():
			default:
			}
		}))
		if err != nil {
			return nil, err
		}
		p.e[i] = e
	}
	return p, nil
}

func drain(ch chan time.Time) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func (p *electionPair) sample(ctx context.Context) (time.Duration, error) {
	if !p.started {
		if err := p.e[0].Start(ctx); err != nil {
			return 0, err
		}
		select {
		case <-p.elected[0]:
		case <-ctx.Done():
			return 0, fmt.Errorf("first election: %w", ctx.Err())
		}
		if err := p.e[1].Start(ctx); err != nil {
			return 0, err
		}
		p.started = true
	}
	l, w := p.leader, 1-p.leader
	drain(p.elected[w])
	time.Sleep(waiterSettle) // the candidate has tried once and waits
	t0 := time.Now()
	var err error
	if p.stepDn {
		err = p.e[l].StepDown(ctx)
	} else {
		err = p.e[l].Stop(ctx)
	}
	if err != nil {
		return 0, err
	}
	var t1 time.Time
	select {
	case t1 = <-p.elected[w]:
	case <-ctx.Done():
		return 0, fmt.Errorf("handover: %w", ctx.Err())
	}
	// The old leader becomes a plain candidate again (a Stop then Start also ends a cooldown).
	if p.stepDn {
		if err := p.e[l].Stop(ctx); err != nil {
			return 0, err
		}
	}
	drain(p.elected[l])
	if err := p.e[l].Start(ctx); err != nil {
		return 0, err
	}
	p.leader = w
	return t1.Sub(t0), nil
}

// simbaHold takes name in a holder process and keeps it (the client renews) until killed.
func simbaHold(ctx context.Context, o opener, ttl time.Duration, name string) error {
	c, _, err := newClient(ctx, o, ttl, nil)
	if err != nil {
		return err
	}
	_, err = c.Lock(ctx, name)
	return err
}

// simbaWaiter starts a client waiting for name; its backend calls are counted.
func simbaWaiter(ctx context.Context, o opener, ttl time.Duration, name string) (*waiter, error) {
	n := new(calls)
	c, done, err := newClient(ctx, o, ttl, n)
	if err != nil {
		return nil, err
	}
	w := &waiter{granted: make(chan grant, 1), cleanup: done}
	w.count = func() (int64, int64, bool) {
		a, _, all := n.snapshot()
		return a, all, true
	}
	go func() {
		h, err := c.Lock(ctx, name)
		w.granted <- grant{time.Now(), err}
		if err == nil {
			_ = h.Unlock(context.Background())
		}
	}()
	return w, nil
}

// keepAliveCalls holds n leases on one client and counts its backend calls over a few
// renewal intervals into res (on Redis, also the round trips to each server).
func keepAliveCalls(ctx context.Context, o opener, ttl time.Duration, prefix string, n int, res *kaRes) error {
	cnt := new(calls)
	o, last := lastOpened(o)
	c, done, err := newClient(ctx, o, ttl, cnt)
	if err != nil {
		return err
	}
	defer done()
	rc := redisCountOf(last())
	held := 0
	const workers = 32
	next := make(chan int)
	errs := make(chan error, workers)
	var heldN = make(chan int, workers)
	for w := 0; w < workers; w++ {
		go func() {
			k := 0
			var first error
			for i := range next {
				if _, err := c.Lock(ctx, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
					if first == nil {
						first = err
					}
					continue
				}
				k++
			}
			heldN <- k
			errs <- first
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	var firstErr error
	for w := 0; w < workers; w++ {
		held += <-heldN
		if e := <-errs; e != nil && firstErr == nil {
			firstErr = e
		}
	}
	res.Held = held
	if held < n {
		return errors.Join(fmt.Errorf("held %d of %d leases", held, n), firstErr, ctx.Err())
	}
	// Count from just after a keep-alive returned over 3.5 renewal intervals: 3 renewals are
	// due. (Not from its start: a client's first keep-alive on a Cluster also loads the
	// scripts on every node, once.)
	interval := ttl / 3 // the default renewal interval
	const intervals = 3
	ka := cnt.keepAliveDone.Load()
	for k := 0; cnt.keepAliveDone.Load() == ka && k < 2000; k++ {
		time.Sleep(time.Millisecond)
	}
	_, ka0, all0 := cnt.snapshot()
	var r0 redisSnap
	if rc != nil {
		r0 = rc.snapshot()
	}
	time.Sleep(intervals*interval + interval/2)
	_, ka1, all1 := cnt.snapshot()
	res.KeepAlivePerRenew, res.CallsPerRenew = float64(ka1-ka0)/intervals, float64(all1-all0)/intervals
	if rc != nil {
		addrs, singles, pipes := perServer(r0, rc.snapshot())
		res.Servers, res.PerServerPipes = len(addrs), pipes
		var s int64
		for i := range addrs {
			s += singles[i]
			res.MaxPipesPerServer = max(res.MaxPipesPerServer, float64(pipes[i])/intervals)
		}
		res.SinglesPerRenew = float64(s) / intervals
	}
	return nil
}

package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/spi"
)

// calls counts the calls a client makes to its backend.
// keepAliveDone counts the KeepAlive calls that have returned.
type calls struct {
	acquire, keepAlive, all atomic.Int64
	keepAliveDone           atomic.Int64
}

// snapshot returns the three counters.
func (c *calls) snapshot() (acquire, keepAlive, all int64) {
	return c.acquire.Load(), c.keepAlive.Load(), c.all.Load()
}

// counting is a spi.Backend decorator that counts every call before passing it on.
type counting struct {
	spi.Backend
	n *calls
}

// CutSafe forwards spi.CutSafe: without it the client would run every call that a deadline
// may fall in on a call worker, as it does for a backend that is not cut-safe.
func (c *counting) CutSafe() bool { return spi.IsCutSafe(c.Backend) }

// QueueEntriesLiveWithSession forwards spi.SessionQueue: without it the client would
// re-attempt a queued wait before its session's deadline as of its previous attempt, as it
// does on a backend whose waiter entries lapse with that expiry, and the harness would count
// calls that no user's client makes.
func (c *counting) QueueEntriesLiveWithSession() bool {
	return spi.EntriesLiveWithSession(c.Backend)
}

// HintsSteady forwards spi.SteadyHints: without it the client would fall back to a retry one
// TTL after a HeldBy whose holder's time left is unknown (ZooKeeper, etcd), where it waits two
// on those backends, and the harness would count calls that no user's client makes.
func (c *counting) HintsSteady() bool { return spi.AreHintsSteady(c.Backend) }

// CheckTTL forwards spi.TTLChecker (a local call, not counted): without it simba.New would
// not refuse a TTL the backend can never serve.
func (c *counting) CheckTTL(ttl time.Duration) error { return spi.CheckTTL(c.Backend, ttl) }

// EndWait forwards spi.WaitEnder (a local call, not counted): without it a TryLock that found
// a lease held would leave the backend's hint state for the wait until it lapsed, as no user's
// client does.
func (c *counting) EndWait(s spi.SessionID, name string) {
	if we, ok := c.Backend.(spi.WaitEnder); ok {
		we.EndWait(s, name)
	}
}

// The decorators below keep the other capabilities the client looks for (spi.Hinter, spi.Queuer):
// without them the client would fall back to polling, or wait without queueing, and the
// harness would measure a client that no user runs.
type countingHinter struct {
	*counting
	h spi.Hinter
}

func (c countingHinter) Hints(ctx context.Context) (<-chan spi.Hint, error) { return c.h.Hints(ctx) }

// queued counts the spi.Queuer calls of a counting backend.
type queued struct {
	n *calls
	q spi.Queuer
}

func (c queued) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	c.n.all.Add(1)
	c.n.acquire.Add(1)
	return c.q.AcquireQueued(ctx, s, name)
}

func (c queued) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	c.n.all.Add(1)
	return c.q.Withdraw(ctx, s, name)
}

type countingQueuer struct {
	*counting
	queued
}

type countingHinterQueuer struct {
	countingHinter
	queued
}

// countBackend wraps b so that its calls are counted in n, keeping the Hinter and Queuer
// capabilities.
func countBackend(b spi.Backend, n *calls) spi.Backend {
	c := &counting{Backend: b, n: n}
	h, hints := b.(spi.Hinter)
	q, queues := b.(spi.Queuer)
	switch {
	case hints && queues:
		return countingHinterQueuer{countingHinter{c, h}, queued{n, q}}
	case hints:
		return countingHinter{c, h}
	case queues:
		return countingQueuer{c, queued{n, q}}
	}
	return c
}

func (c *counting) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	c.n.all.Add(1)
	return c.Backend.OpenSession(ctx, owner, ttl)
}

func (c *counting) KeepAlive(ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	c.n.all.Add(1)
	c.n.keepAlive.Add(1)
	defer c.n.keepAliveDone.Add(1)
	return c.Backend.KeepAlive(ctx, s, names, groups)
}

func (c *counting) CloseSession(ctx context.Context, s spi.SessionID) error {
	c.n.all.Add(1)
	return c.Backend.CloseSession(ctx, s)
}

func (c *counting) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	c.n.all.Add(1)
	c.n.acquire.Add(1)
	return c.Backend.Acquire(ctx, s, name)
}

func (c *counting) Release(ctx context.Context, s spi.SessionID, name string, token int64) error {
	c.n.all.Add(1)
	return c.Backend.Release(ctx, s, name, token)
}

func (c *counting) Join(ctx context.Context, s spi.SessionID, group string) (spi.Status, error) {
	c.n.all.Add(1)
	return c.Backend.Join(ctx, s, group)
}

func (c *counting) Leave(ctx context.Context, s spi.SessionID, group string) (spi.Status, error) {
	c.n.all.Add(1)
	return c.Backend.Leave(ctx, s, group)
}

func (c *counting) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	c.n.all.Add(1)
	return c.Backend.Members(ctx, group)
}

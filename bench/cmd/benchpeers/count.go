package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/spi"
)

// calls counts the calls a client makes to its backend.
type calls struct {
	acquire, keepAlive, all atomic.Int64
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

// countingHinter is counting for a backend that also pushes hints (the client must still see
// the Hinter capability, or it would fall back to polling).
type countingHinter struct {
	*counting
	h spi.Hinter
}

func (c countingHinter) Hints(ctx context.Context) (<-chan spi.Hint, error) { return c.h.Hints(ctx) }

// countingQueuer is counting for a backend with waiter queues (spi.Queuer): without it the
// client would not queue, and the measures would miss the queued acquire.
type countingQueuer struct {
	*counting
	q spi.Queuer
}

func (c countingQueuer) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	c.n.all.Add(1)
	c.n.acquire.Add(1)
	return c.q.AcquireQueued(ctx, s, name)
}

func (c countingQueuer) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	c.n.all.Add(1)
	return c.q.Withdraw(ctx, s, name)
}

// countingHinterQueuer is counting for a backend with both capabilities.
type countingHinterQueuer struct {
	countingQueuer
	h spi.Hinter
}

func (c countingHinterQueuer) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	return c.h.Hints(ctx)
}

// countBackend wraps b so that its calls are counted in n, keeping the Hinter and Queuer
// capabilities.
func countBackend(b spi.Backend, n *calls) spi.Backend {
	c := &counting{Backend: b, n: n}
	h, hints := b.(spi.Hinter)
	q, queues := b.(spi.Queuer)
	switch {
	case hints && queues:
		return countingHinterQueuer{countingQueuer{c, q}, h}
	case queues:
		return countingQueuer{c, q}
	case hints:
		return countingHinter{c, h}
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

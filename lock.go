package simba

import (
	"context"
	"errors"
	"fmt"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
)

// Lock is a distributed mutex on one lease name: an election that ends with its term. Lock
// waits for the lease, TryLock makes one attempt, Unlock releases it. The Term a Lock returns
// carries the fencing token; check Term.IsValid (or Term.Context) before acting under it, since
// a lock can be lost (session expiry) while held.
type Lock struct {
	leaseCore
}

// NewLock creates a lock for name on this client. It validates name before any I/O. One
// client has at most one election or lock per name.
func (c *Client) NewLock(name string) (*Lock, error) {
	if err := wire.ValidateName(name); err != nil {
		return nil, err
	}
	l := &Lock{leaseCore{c: c, name: name, disp: newSerialDispatcher(c.cfg.callbacks)}}
	if err := c.register(name, l); err != nil {
		return nil, err
	}
	return l, nil
}

// Name is the lease name.
func (l *Lock) Name() string { return l.name }

// Lock waits until this client holds the lock or ctx ends. On ctx's end the attempt is
// withdrawn (and a grant that raced with it released) and ctx's error returned.
func (l *Lock) Lock(ctx context.Context) (Term, error) {
	return l.acquire(ctx, engine.FlavorLock)
}

// TryLock makes one attempt: it returns the term, or an error matching ErrLockHeld (a
// *LockHeldError naming the holder) when another session holds the lock.
func (l *Lock) TryLock(ctx context.Context) (Term, error) {
	return l.acquire(ctx, engine.FlavorTryLock)
}

func (l *Lock) acquire(ctx context.Context, flavor engine.Flavor) (Term, error) {
	if err := ctx.Err(); err != nil {
		return Term{}, err
	}
	f, err := l.c.request(ctx, engine.Event{Kind: engine.EvStart, Name: l.name, Flavor: flavor})
	if err != nil {
		if f != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Withdraw the attempt; the engine releases a grant that raced with it.
			l.c.post(func() { l.c.step(engine.Event{Kind: engine.EvStop, Name: l.name}) })
		}
		if errors.Is(err, engine.ErrStopped) {
			err = fmt.Errorf("simba: lock %s: %w", l.name, ErrNotHeld)
		}
		return Term{}, err
	}
	if f.term.s == nil {
		return Term{}, fmt.Errorf("simba: lock %s granted without a term: %w", l.name, ErrNotHeld)
	}
	return f.term, nil
}

// Unlock releases the lock. It returns an error matching ErrNotHeld if this client did not
// hold it (or had lost it: then the error is a *RevokedError).
func (l *Lock) Unlock(ctx context.Context) error {
	l.mu.Lock()
	t := l.term
	l.mu.Unlock()
	held := t.IsValid()
	if _, err := l.c.request(ctx, engine.Event{Kind: engine.EvStop, Name: l.name}); err != nil {
		return err
	}
	if held {
		return nil
	}
	if t.s != nil {
		if cause := context.Cause(t.Context()); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
	}
	return fmt.Errorf("simba: unlock %s: %w", l.name, ErrNotHeld)
}

// WithLock takes the lock, runs fn with a context cancelled when ctx ends or the lock is lost,
// and unlocks. It returns fn's error, or the error of taking or losing the lock.
func (l *Lock) WithLock(ctx context.Context, fn func(ctx context.Context, t Term) error) error {
	if fn == nil {
		return invalid("WithLock function is nil")
	}
	t, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(t.Context(), func() { cancel(context.Cause(t.Context())) })
	ferr := fn(runCtx, t)
	stop()
	cancel(nil)
	uerr := l.Unlock(context.WithoutCancel(ctx))
	if ferr != nil {
		return ferr
	}
	if uerr != nil {
		return uerr
	}
	return nil
}

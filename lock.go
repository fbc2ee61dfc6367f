package simba

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
)

// Locks are calls, not objects: Client.Lock, Client.TryLock and Client.WithLock take a name and
// return a *Held. A lock is a cheap value: the client keeps state for a name only while some
// goroutine holds or waits for it, and forgets the name when the last one lets go, so locking
// one entity after another (invoice-42, invoice-43, …) from one client leaves nothing behind.
// Nor does a wait at the backend once it ends: a Lock whose ctx ends withdraws, and a TryLock
// that finds the name held tells a backend that keeps per-name hint state for the wait
// (spi.WaitEnder: the SQL, Redis, ZooKeeper and etcd backends) to drop it, without a call to
// the server.
//
// Goroutines of one client that ask for the same name are served one after the other, in the
// order they asked (FIFO within the client), through one backend lease: only the goroutine at
// the head of a name's queue contends at the backend. Each goroutine that gets the lock gets
// its own term, with its own fencing token, strictly above the previous holder's; the lease is
// released before the next goroutine's acquire is sent.

// lockQueue is a name's local queue: the goroutine whose turn it is (acquiring or holding the
// lock) and those waiting behind it. It is the lease handle of the name while it exists.
type lockQueue struct {
	leaseCore
	waiters []chan struct{} // guarded by Client.mu
}

// Held is a lock this client holds: the Term (its name, fencing token, validity and a context
// cancelled when the lock is lost) and Unlock. Check IsValid (or watch Context) before acting
// under the lock, and pass Token to the resource you protect: a lock can be lost while held,
// when the session expires. Unlock it exactly once, also after it was lost: until then the
// name's local queue is not handed on.
type Held struct {
	Term
	c        *Client
	q        *lockQueue
	unlocked atomic.Bool
	passed   atomic.Bool // Unlock handed the name's turn on (passTurn)
}

// passTurn hands the name's turn on for Unlock, once.
func (h *Held) passTurn() {
	if h.passed.CompareAndSwap(false, true) {
		h.c.passTurn(h.q)
	}
}

// Lock waits until this client holds the lock name, or ctx ends. Goroutines of this client
// asking for the same name are served one after the other, in order. When ctx ends, Lock
// returns at once, even while the network is stalled and a backend call hangs: ctx's error,
// joined with the last backend error if a call failed meanwhile. Its acquire, if it still
// waits for one of the client's 32 call slots (see TryLock), is dropped unsent: it never takes
// the lease for nobody, and no withdrawal follows it (it queued nothing at the backend). An
// acquire already sent is withdrawn in the background: a grant that raced with it is released
// once its reply is in, or, if ctx's end cut the acquire short, once a keep-alive finds the
// lease held — the client sends one 20 ms after a call of unknown outcome; the next goroutine
// of this client waiting for name gets its turn once the withdrawal (leaving the backend's
// waiter queue, spi.Queuer), which follows the acquire's reply, is over: at most two call
// timeouts later on a stalled network, at once after an acquire dropped unsent. An acquire whose
// outcome is unknown (cut short, timed out) may still register the session as a waiter after
// that withdrawal: the keep-alive that settles its outcome a call timeout later withdraws
// again, so such an entry never holds the lease back for others longer than that. (A deadline
// cuts a call only on a backend whose calls are cut-safe, spi.CutSafe; elsewhere a call that
// the deadline may fall in runs to its end on a call worker, without the caller.) When ctx
// ends just as the grant comes in, Lock may return either, as a select on both would: the
// lease (held, though ctx has ended; Unlock it) or ctx's error (and the lease is released
// for it). It never returns an error while leaving the lease held for its caller. A permanent backend error (a missing schema, a server of
// the wrong kind, refused credentials: IsPermanent, errors.Is finds the backend's sentinel)
// ends the wait with that error, as itself: the acquire's, and the session open's. Lock waits
// out an outage, but not a refusal: when the client's last session open was refused for good
// (Client.Err is not nil, and no open has succeeded since) and the next is not in flight yet
// (the client retries it every BackoffMax/2 to BackoffMax), Lock returns that refusal at once,
// as TryLock does, rather than wait for the next open only to be refused again; it waits for
// an open in flight, and returns its refusal if that one is refused too, as does a Lock
// already waiting for the session when the refusal comes. So with a keep-alive refused for
// good while the session lives on towards its deadline (revoked credentials, a dropped
// schema): until a keep-alive succeeds again, a Lock or TryLock made while the next one waits
// for its retry returns that refusal at once (errors.Is finds ErrAccessDenied, say), without
// sending an acquire the backend would refuse the same way. Once the cause is fixed, the
// client's background retry opens (or renews) the session and a Lock works again. The name is
// validated before any I/O: 1–128
// bytes of [A-Za-z0-9._:-], not "." or ".." (ErrInvalidName, permanent: slashes, spaces,
// non-ASCII letters and NULs are refused).
//
// Lock is not reentrant, as sync.Mutex is not: a goroutine that holds name and locks it again
// on the same client (a WithLock inside a WithLock of the same name, say) waits behind itself
// until ctx ends, and then returns ctx's error; the lock it holds stays held.
func (c *Client) Lock(ctx context.Context, name string) (*Held, error) {
	return c.lock(ctx, name, engine.FlavorLock)
}

// TryLock makes one attempt to take the lock name. It returns an error matching ErrLockHeld
// (a *LockHeldError naming the holder) when another session holds it, or at once, without a
// backend call, when another goroutine of this client holds or is taking it: that error's Self
// is set and its message says "held by this client", since the holder it would otherwise name
// is this very client.
//
// TryLock never waits out an outage. Its attempt is one acquire, bounded by the call timeout
// (one renewal interval, TTL/3) from when the call starts, and by ctx. A client runs at most
// 32 backend calls at once and queues the rest, so an acquire can wait for a slot first: with
// more calls in flight than that on a slow backend, a TryLock takes longer than one call
// timeout (100 concurrent TryLocks at TTL 3 s on a backend whose acquire took 800 ms: 3.3 s
// for the last). Give ctx a deadline to bound it. If the attempt fails, or its outcome is
// unknown (a timeout), TryLock returns an error matching ErrUnavailable (a grant that landed
// after all is released by the next keep-alive). With no live session — the backend
// unreachable, or the session just lost — it waits only for a session open already in flight
// (one call timeout at most, as right after New), and otherwise fails at once: with an error
// matching ErrUnavailable that wraps the last open's error. Both are retryable: try again
// later (or use Lock, which waits). A permanent error (IsPermanent) comes back as itself
// instead, never as ErrUnavailable: the acquire's, and the open's when the session's open was
// refused for good (a missing schema, a TTL the server refuses; errors.Is finds the backend's
// sentinel), whether TryLock waited for that open or came while the next one waits for its
// retry, or when the session's keep-alive was refused for good and the next waits for its
// retry (see Lock); Lock returns the same error in these cases. When ctx ends
// first, TryLock returns ctx's error at once, as Lock does: an acquire still waiting for a
// call slot is dropped unsent, and a grant of one already sent is released once its reply is
// in (or, if ctx's end cut the call short, once a keep-alive finds the lease held).
func (c *Client) TryLock(ctx context.Context, name string) (*Held, error) {
	return c.lock(ctx, name, engine.FlavorTryLock)
}

// WithLock takes the lock name (as Lock), runs fn with a context cancelled when ctx ends or
// the lock is lost, and unlocks. It returns fn's error, or else the error of taking or losing
// the lock.
func (c *Client) WithLock(ctx context.Context, name string, fn func(ctx context.Context, t Term) error) error {
	if fn == nil {
		return invalid("WithLock function is nil")
	}
	if ctx == nil {
		return nilContext("WithLock")
	}
	h, err := c.Lock(ctx, name)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(h.Context(), func() { cancel(context.Cause(h.Context())) })
	ferr := func() error {
		defer func() {
			if r := recover(); r != nil {
				stop()
				cancel(nil)
				_ = h.Unlock(context.WithoutCancel(ctx))
				panic(r)
			}
		}()
		return fn(runCtx, h.Term)
	}()
	stop()
	cancel(nil)
	uerr := h.Unlock(context.WithoutCancel(ctx))
	if ferr != nil {
		return ferr
	}
	return uerr
}

func (c *Client) lock(ctx context.Context, name string, flavor engine.Flavor) (*Held, error) {
	if err := wire.ValidateName(name); err != nil {
		return nil, err
	}
	if ctx == nil {
		method := "Lock"
		if flavor == engine.FlavorTryLock {
			method = "TryLock"
		}
		return nil, nilContext(method)
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	q, err := c.takeTurn(ctx, name, flavor == engine.FlavorTryLock)
	if err != nil {
		return nil, err
	}
	f, err := c.request(ctx, engine.Event{Kind: engine.EvStart, Name: name, Flavor: flavor})
	if err != nil {
		if f != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			c.withdraw(name, q)
			return nil, err
		}
		c.passTurn(q)
		if errors.Is(err, engine.ErrStopped) {
			err = fmt.Errorf("simba: lock %s: %w", name, ErrNotHeld)
		}
		return nil, err
	}
	if f.term.s == nil {
		c.passTurn(q)
		return nil, fmt.Errorf("simba: lock %s granted without a term: %w", name, ErrNotHeld)
	}
	return &Held{Term: f.term, c: c, q: q}, nil
}

// withdraw ends the attempt of a Lock or TryLock whose caller gave up (its ctx ended) and
// hands name's turn on once the engine has finished with it, without making the caller wait:
// the engine drops the attempt's acquire if it still waits for a call slot (engine.EfCancel:
// sent later, it would take the lease for nobody), and the stop completes once that acquire is
// back (at once when dropped) and the candidate has left the backend's waiter queue
// (spi.Queuer), calls that last up to one call timeout each when the network is stalled, and
// the engine releases
// a grant that raced with the caller's giving up (or, if the acquire's outcome is unknown,
// the keep-alives settle it). The next goroutine of this client waiting for name starts only
// then, so its queued acquire cannot be overtaken by this withdrawal at the backend.
func (c *Client) withdraw(name string, q *lockQueue) {
	f, err := c.request(cancelled, engine.Event{Kind: engine.EvStop, Name: name})
	if f == nil || err == nil || f.completed() {
		c.passTurn(q) // done (or the client closed: its close ends the attempt)
		return
	}
	go func() {
		select {
		case <-f.wait():
		case <-c.loopDone: // the loop ended every future it took; this one it may never take
		}
		c.passTurn(q)
	}()
}

// cancelled is a context that has ended: a request made with it posts its event and returns
// without waiting for the outcome.
var cancelled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// takeTurn waits until it is the caller's turn at name (creating the queue if the name has
// none) or ctx ends. With try it never waits: a busy name fails with a *LockHeldError.
func (c *Client) takeTurn(ctx context.Context, name string, try bool) (*lockQueue, error) {
	c.mu.Lock()
	if !try && c.awaitStopLocked(ctx, name) {
		for c.awaitStopLocked(ctx, name) {
		}
		if err := ctxErr(ctx); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if err := c.partitionOfJoinedLocked(name); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	switch h := c.handles[name].(type) {
	case nil:
		q := &lockQueue{leaseCore: leaseCore{c: c, name: name}}
		c.handles[name] = q
		c.mu.Unlock()
		return q, nil
	case *lockQueue:
		if try {
			sid := c.session
			c.mu.Unlock()
			return nil, &LockHeldError{Name: name, Holder: sid, Owner: c.cfg.owner, Self: true}
		}
		turn := make(chan struct{}, 1)
		h.waiters = append(h.waiters, turn)
		c.mu.Unlock()
		var err error
		select {
		case <-turn:
			return h, nil
		case <-ctx.Done():
			err = ctxErr(ctx)
		case <-c.closeTaken: // the holder may never unlock: waiters end with the client
			err = ErrClosed
		}
		c.mu.Lock()
		for i, w := range h.waiters {
			if w == turn {
				h.waiters = append(h.waiters[:i], h.waiters[i+1:]...)
				c.mu.Unlock()
				return nil, err
			}
		}
		c.mu.Unlock()
		// The turn was handed to us as we gave up: hand it on.
		c.passTurn(h)
		return nil, err
	default:
		c.mu.Unlock()
		return nil, invalid("%q has an election on this client", name)
	}
}

// passTurn hands name's turn to the first waiter, or forgets the name if none waits.
func (c *Client) passTurn(q *lockQueue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(q.waiters) > 0 {
		next := q.waiters[0]
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		next <- struct{}{}
		return
	}
	if c.handles[q.name] == q {
		delete(c.handles, q.name)
	}
}

// Unlock releases the lock and hands it to the next goroutine of this client waiting for it.
// It returns once the lease is released, or ctx ends (the release goes on). It returns an error
// matching ErrNotHeld if the lock had been lost meanwhile (then the error is the *RevokedError
// that says why) or was already unlocked. If the release call fails (a connection the server
// dropped, a timeout), its outcome is unknown: Unlock returns that error (matching
// ErrUnavailable), the term has ended all the same, and the client's next keep-alives release
// the lease if it is still held; do not call Unlock again (it reports ErrNotHeld). A release
// that fails after the client's session was lost (expired, or past its local deadline) is no
// unknown outcome: the lease went with the session (at a backend that has not noticed the loss
// yet, it lapses at the session's TTL), so the lock was lost before Unlock could release it,
// and Unlock returns the *RevokedError of the loss (RevokedSessionExpired or RevokedDeadline,
// matching ErrNotHeld), as it does when the session is lost before the Unlock.
// After the client was closed, Unlock reports ErrNotHeld with the *RevokedError of reason
// RevokedClosed (Close released the lease), which also matches ErrClosed; so does an Unlock
// whose release was in flight when Close cut it short (the session's close releases the
// lease: the next process gets it at once, without waiting for the TTL), whichever of the
// release's failure and the session's close the client hears of first: it returns once that
// close is done (or ctx ends). An Unlock whose release landed before the close returns nil.
func (h *Held) Unlock(ctx context.Context) error {
	if h == nil || h.c == nil {
		return fmt.Errorf("simba: unlock of no lock: %w", ErrNotHeld)
	}
	if ctx == nil { // before the swap: the one Unlock is still to come
		return nilContext("Unlock")
	}
	if !h.unlocked.CompareAndSwap(false, true) {
		return fmt.Errorf("simba: unlock %s: already unlocked: %w", h.Name(), ErrNotHeld)
	}
	held := h.IsValid()
	// Hand the turn on right after the step that takes the stop, whatever err says (or now, if
	// the client is closed and the next start fails): not before, since a queue with no one
	// waiting is forgotten then, and a stop taken after this returned (its ctx ended while its
	// event waited for a busy loop) would find no lock to revoke: the term would stay valid,
	// its context live.
	_, err := h.c.requestThen(ctx, engine.Event{Kind: engine.EvStop, Name: h.Name()}, h.passTurn)
	if errors.Is(err, ErrClosed) {
		h.passTurn()
		// Close revoked the term (RevokedClosed) and released the lease: the lock was lost
		// meanwhile, as for any other revocation, and the RevokedError says so (it matches
		// ErrClosed too). A close that has not revoked it yet leaves ErrClosed alone.
		var re *RevokedError
		if cause := context.Cause(h.Context()); errors.As(cause, &re) {
			if re.Reason == RevokedStopped {
				// This Unlock's own stop ended the term, and Close cut its release short:
				// the session's close releases the lease, as for a term Close revoked. Its
				// own revocation ("revoked: stopped", not ErrClosed) read as a lost lock.
				return fmt.Errorf("simba: unlock %s: its release was cut short by Close, whose session close releases the lease: %w",
					h.Name(), &RevokedError{Name: re.Name, Token: re.Token, Reason: RevokedClosed})
			}
			return fmt.Errorf("simba: unlock %s: %w", h.Name(), cause)
		}
	}
	var lost *engine.ReleaseLostError
	if errors.As(err, &lost) {
		// The session was lost before the release could free the lease: the lease went with
		// it, and the lock was lost before this Unlock released it, as an Unlock taken after
		// the loss says (the term's RevokedError).
		return fmt.Errorf("simba: unlock %s: its release failed (%v) after the session was lost, and the lease with it: %w",
			h.Name(), lost.Err, &RevokedError{Name: lost.Name, Token: lost.Token, Reason: RevokeReason(lost.Reason)})
	}
	if err != nil {
		return err
	}
	if held {
		return nil
	}
	if cause := context.Cause(h.Context()); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return fmt.Errorf("simba: unlock %s: %w", h.Name(), ErrNotHeld)
}

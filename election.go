package simba

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
)

// eventBuffer is the capacity of each Events channel. The loop never blocks on a subscriber:
// when a channel is full, the event is dropped for that subscriber (and counted).
const eventBuffer = 256

// leaseCore is what an Election, a Lock and a partition share: the current term, callbacks
// through a serial dispatcher, leader work, the known holder and event subscribers.
type leaseCore struct {
	c    *Client
	name string
	disp *serialDispatcher

	onElected func(ctx context.Context, t Term)
	onRevoked func(ctx context.Context, t Term, reason RevokeReason)
	work      func(ctx context.Context, t Term) error
	// workSettles: the work reports its own activity to a settling clock (Schedule).
	workSettles bool

	mu          sync.Mutex
	term        Term
	holder      SessionID
	holderOwner string
	holderSelf  bool
	subs        []*subscription
	dropped     atomic.Uint64
	lastErrs    errNote
}

func (l *leaseCore) errs() *errNote { return &l.lastErrs }

func (l *leaseCore) elected(t Term) {
	l.mu.Lock()
	l.term = t
	l.holder, l.holderOwner, l.holderSelf = l.c.eng.SessionID(), t.Owner(), true
	l.mu.Unlock()
	if l.onElected != nil {
		l.c.dispatch(l.disp, func() { l.onElected(l.c.inside, t) })
	}
	if l.work != nil {
		l.c.startWork(l.name, t, l.work, l.workSettles)
	}
}

func (l *leaseCore) revoked(t Term, reason RevokeReason) {
	l.mu.Lock()
	if l.holderSelf {
		l.holder, l.holderOwner, l.holderSelf = "", "", false
	}
	l.mu.Unlock()
	if l.onRevoked != nil {
		l.c.dispatch(l.disp, func() { l.onRevoked(l.c.inside, t, reason) })
	}
}

func (l *leaseCore) termFor(token int64) (Term, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term.s != nil && l.term.Token() == token {
		return l.term, true
	}
	return Term{}, false
}

func (l *leaseCore) setHolder(id SessionID, owner string) {
	l.mu.Lock()
	l.holder, l.holderOwner, l.holderSelf = id, owner, false
	l.mu.Unlock()
}

// forgetHolder drops the holder l learned: l follows the lease no more.
func (l *leaseCore) forgetHolder() {
	l.mu.Lock()
	l.holder, l.holderOwner, l.holderSelf = "", "", false
	l.mu.Unlock()
}

func (l *leaseCore) publish(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sub := range l.subs {
		select {
		case sub.ch <- ev:
		default:
			l.dropped.Add(1)
		}
	}
}

// subscription is one Events channel of a handle or group. It is closed when its ctx ends,
// when the iteration of All stops, or when the client finishes closing, whichever is first.
type subscription struct {
	ch    chan Event
	owner *leaseCore
}

// subscribe returns a new subscription to l's events, registered with the client so that the
// client's close ends it. If the client has finished closing, the channel is closed at once.
func (l *leaseCore) subscribe() *subscription {
	sub := &subscription{ch: make(chan Event, eventBuffer), owner: l}
	c := l.c
	c.mu.Lock()
	if c.subsClosed {
		c.mu.Unlock()
		close(sub.ch)
		return sub
	}
	c.subs[sub] = struct{}{}
	c.mu.Unlock()
	l.mu.Lock()
	l.subs = append(l.subs, sub)
	l.mu.Unlock()
	return sub
}

// unsubscribe ends sub: it is forgotten by its handle and the client and its channel closed.
// Only the first call counts.
func (sub *subscription) unsubscribe() {
	l := sub.owner
	c := l.c
	c.mu.Lock()
	_, live := c.subs[sub]
	delete(c.subs, sub)
	c.mu.Unlock()
	if !live {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.subs {
		if s == sub {
			l.subs = append(l.subs[:i], l.subs[i+1:]...)
			break
		}
	}
	close(sub.ch)
}

// events subscribes for as long as ctx lasts (see Election.Events).
func (l *leaseCore) events(ctx context.Context) <-chan Event {
	if ctx == nil { // as documented: a nil ctx never ends, so the channel lasts until Close
		ctx = context.Background()
	}
	sub := l.subscribe()
	context.AfterFunc(ctx, sub.unsubscribe)
	return sub.ch
}

// current returns the term if it is still valid.
func (l *leaseCore) current() (Term, bool) {
	l.mu.Lock()
	t := l.term
	l.mu.Unlock()
	if t.IsValid() {
		return t, true
	}
	return Term{}, false
}

// workItem is the leader work of one term: fn for term t of lease name.
type workItem struct {
	name    string
	t       Term
	fn      func(ctx context.Context, t Term) error
	settles bool
}

// workChains makes the leader work of a name run one at a time in a client: a name is in m
// while a work of it runs, with the works of its later terms that wait for that work to
// return, in the order of their terms. The entry goes once no work of the name runs, so the
// map keeps no state for names whose work is done.
type workChains struct {
	mu sync.Mutex
	m  map[string][]*workItem
}

// startWork runs leader work for term t on the work executor, once the previous work of name
// in this client (an earlier term's, still returning after its term ended) has returned: the
// work of a name never runs twice at once. When the work returns, the loop is told
// (WorkExited), which ends a handover. Work that settles holds a unit of the client's
// activity throughout (it waits idle through c.settle.await); a work waiting for its turn
// holds none and is counted in c.work, so that Close waits for it.
func (c *Client) startWork(name string, t Term, fn func(ctx context.Context, t Term) error, settles bool) {
	c.work.Add(1)
	w := &workItem{name: name, t: t, fn: fn, settles: settles}
	c.chains.mu.Lock()
	if c.chains.m == nil {
		c.chains.m = make(map[string][]*workItem)
	}
	if q, busy := c.chains.m[name]; busy {
		c.chains.m[name] = append(q, w)
		c.chains.mu.Unlock()
		return
	}
	c.chains.m[name] = nil
	c.chains.mu.Unlock()
	if settles {
		c.settle.begin()
	}
	c.cfg.work(func() { c.runWork(w) })
}

// runWork runs w and then, on the same goroutine, each later work of its name that queued
// meanwhile: the next work starts from the previous one's exit, without a handoff to the
// executor that a bounded pool could make wait on a goroutine of its own.
func (c *Client) runWork(w *workItem) {
	for w != nil {
		w = c.runOne(w)
	}
}

// runOne runs the work w and returns the work of its name to run next, if any (its unit of
// activity begun, when it settles). The work's exit is told also when fn panics. The panic is
// not recovered: it goes on up the goroutine (crashing the program, as in any goroutine,
// unless the work executor recovers it), rather than leaving this client leading with no work
// and no trace; the name's next work then starts on the executor from a goroutine of its own,
// so that the panicking goroutine does not wait for the executor.
func (c *Client) runOne(w *workItem) (next *workItem) {
	defer c.work.Done()
	if w.settles {
		defer c.settle.end()
		defer c.settle.own()()
	}
	name, token := w.name, w.t.Token()
	leave := c.insideG.enterWork(name)
	returned := false
	defer func() {
		leave()
		c.post(func() { c.workExited(name, token) })
		next = c.nextWork(name)
		if !returned && next != nil {
			n := next
			next = nil
			go c.cfg.work(func() { c.runWork(n) })
		}
	}()
	ctx := context.WithValue(w.t.Context(), insideKey{}, c)
	err := w.fn(ctx, w.t)
	returned = true
	if err != nil && ctx.Err() == nil {
		c.cfg.logger.Warn("simba leader work returned an error", "name", name, "token", token, slog.Any("err", err))
	}
	return nil
}

// nextWork takes the next work of name that waited for the work that just returned, or
// lets the name go when none waits. A work whose term ended while it waited (or whose client
// has stopped) is not run: its exit is told at once, as if fn had returned.
func (c *Client) nextWork(name string) *workItem {
	for {
		c.chains.mu.Lock()
		q := c.chains.m[name]
		if len(q) == 0 {
			delete(c.chains.m, name)
			c.chains.mu.Unlock()
			return nil
		}
		w := q[0]
		q[0] = nil
		c.chains.m[name] = q[1:]
		c.chains.mu.Unlock()
		if !w.t.ended() && !c.loopExited() {
			if w.settles {
				c.settle.begin()
			}
			return w
		}
		token := w.t.Token()
		c.post(func() { c.workExited(name, token) })
		c.work.Done()
	}
}

// Leader describes the current holder of a lease as this client last learned it.
type Leader struct {
	// Session is the holding session; Owner its owner string (WithOwner of the client that
	// opened it), which names the process to a reader.
	Session SessionID
	Owner   string
	// Self reports that this client holds the lease.
	Self bool
}

// Election is a long-lived candidacy for one lease name: Start makes this client a candidate;
// when it wins it holds a Term until it loses it (session expiry, deadline, takeover), steps
// down, or stops — and then, unless stopped, it is a candidate again.
type Election struct {
	leaseCore
	// starts counts the Starts of this election posted and not yet taken by the loop (guarded
	// by Client.mu): a Stop taken meanwhile does not let the name go, since the Start, taken
	// next, runs the election again.
	starts int
	// stopping is a Stop of the election under way while it has its name (Client.awaitStopLocked).
	stopping ending
}

// ElectionOption configures an Election (OnElected, OnRevoked, RunWhileLeader, Schedule). The
// zero ElectionOption is invalid.
type ElectionOption struct{ apply func(*leaseCore) error }

// OnElected sets a callback run when this client becomes leader. Callbacks of one election run
// one at a time, in order, never on the loop goroutine; ctx marks the callback for Close. By
// default (no WithCallbackExecutor) a callback that a backend call's reply brings (OnElected
// on a grant, OnRevoked on a lease found lost) runs on the client's goroutine that received
// that reply, once it has stepped it and has no other call to run, as a Lock's grant wakes the
// Lock's caller: a hand-over to an election costs no goroutine of its own. The others (and
// those whose election's callbacks are already running) run on a goroutine started for them.
//
// A callback's ctx (here and in OnRevoked, OnAssigned and OnUnassigned) is never cancelled
// and has no deadline: not when the term ends, nor when the client closes. It only tells a
// Close called from inside the callback not to wait for the callback itself. Return promptly:
// the election's later callbacks wait for this one, and a Close from elsewhere waits for it
// too. To follow the term, watch t.Context() (or use RunWhileLeader, whose ctx ends with
// the term).
//
// Callbacks and leader work (RunWhileLeader, Schedule, RunPartition) run on goroutines of
// their own, in no order between them: a term's work may start before its OnElected (or
// OnAssigned) runs, and OnRevoked (or OnUnassigned) may run while the term's work is still
// returning. The handover waits for the work, not for callbacks. The leader work of one name
// is ordered, though: it runs one term at a time in a client (see RunWhileLeader).
func OnElected(fn func(ctx context.Context, t Term)) ElectionOption {
	return ElectionOption{func(l *leaseCore) error {
		if fn == nil {
			return invalid("OnElected function is nil")
		}
		l.onElected = fn
		return nil
	}}
}

// OnRevoked sets a callback run when a term of this election ends, with the reason. Its ctx is
// never cancelled, as OnElected's.
func OnRevoked(fn func(ctx context.Context, t Term, reason RevokeReason)) ElectionOption {
	return ElectionOption{func(l *leaseCore) error {
		if fn == nil {
			return invalid("OnRevoked function is nil")
		}
		l.onRevoked = fn
		return nil
	}}
}

// RunWhileLeader sets the leader work: fn runs on its own goroutine for each term, with a ctx
// cancelled when the term is revoked. Handover: when the election is stopped or steps down,
// the lease is kept until fn returns or the term's local deadline as it stood at the stop
// passes (at most one TTL after the last renewal; later keep-alives do not extend it),
// whichever is first, so no new leader starts while fn may still act under a term it believes
// valid. Work that ignores its ctx past that deadline runs on with an invalid term
// (Term.IsValid false) while the next leader may already lead: pass the fencing token on.
//
// The work of one name runs one term at a time in a client, like Kafka's revoke-before-assign:
// when the client wins the name again while the work of its last term still runs (its ctx
// cancelled, but it has not returned yet), fn for the new term is called only once that work
// has returned, so state fn keeps in the process sees one worker at a time. A term that ends
// before then gets no call of fn at all (its handover, if any, waits for the earlier work).
// The next work may run on the goroutine the earlier work ran on.
//
// Work that returns while its term lasts, with nil or an error, leaves this client leading
// without work until the term ends (a returned error is logged at WARN on WithLogger's
// logger, nothing more): to let another candidate lead when the work fails, call StepDown or
// Stop from inside fn, which return at once there (the lease is released when fn returns). A
// panic in fn is not recovered: like a panic in any goroutine it crashes the program (the
// session then expires and another candidate leads after the TTL), unless fn, or a
// WithWorkExecutor, recovers it.
func RunWhileLeader(fn func(ctx context.Context, t Term) error) ElectionOption {
	return ElectionOption{func(l *leaseCore) error {
		if fn == nil {
			return invalid("RunWhileLeader function is nil")
		}
		if l.work != nil {
			return invalid("election %q already has leader work", l.name)
		}
		l.work = fn
		return nil
	}}
}

// Schedule sets leader work that calls fn at once and then every interval while this client
// leads (on the client's clock), with handover, panics, StepDown or Stop from inside fn and
// one term at a time as in RunWhileLeader: a term's first call waits until the last term's
// call has returned.
func Schedule(every time.Duration, fn func(ctx context.Context, t Term)) ElectionOption {
	return ElectionOption{func(l *leaseCore) error {
		if fn == nil {
			return invalid("Schedule function is nil")
		}
		if every <= 0 {
			return invalid("Schedule interval %v must be positive", every)
		}
		if l.work != nil {
			return invalid("election %q already has leader work", l.name)
		}
		c := l.c
		l.workSettles = true
		l.work = func(ctx context.Context, t Term) error {
			for {
				fn(ctx, t)
				tick := make(chan struct{})
				// Ordered by its name among the client's timers due at one instant.
				timer := c.settle.afterFunc(c.cfg.clock, every, keyTick|strHash(l.name)&keyMask, func() { close(tick) })
				if c.settle.await(ctx, tick) != nil {
					timer.Stop()
					return nil
				}
			}
		}
		return nil
	}}
}

// NewElection creates an election for name on this client. It validates name and options
// before any I/O. A name has at most one election on a client, and no lock while it has one,
// and a partition of a group the client has joined ("<group>.<p>") has none (ErrInvalidOption);
// Stop lets the name go (a new election of the same name may follow, or this one restarted).
// Right after a Stop that returned before the client took it (its ctx had ended), NewElection
// of the name, and Lock, wait until the client has taken that Stop, then go on.
func (c *Client) NewElection(name string, opts ...ElectionOption) (*Election, error) {
	if err := wire.ValidateName(name); err != nil {
		return nil, err
	}
	e := &Election{leaseCore: leaseCore{c: c, name: name, disp: newSerialDispatcher(c.cfg.callbacks, &c.callbacks, &c.insideG)}}
	for _, o := range opts {
		if o.apply == nil {
			return nil, invalid("zero election option")
		}
		if err := o.apply(&e.leaseCore); err != nil {
			return nil, err
		}
	}
	if err := c.register(name, e); err != nil {
		return nil, err
	}
	return e, nil
}

// Name is the lease name.
func (e *Election) Name() string { return e.name }

// Start makes this client a candidate. It returns once the engine has taken the request; the
// election then runs in the background (watch OnElected, Events or Term). A stopped election
// can be started again, unless another election or a lock of this client has taken the name
// meanwhile; starting a running election fails with ErrInvalidOption. If ctx ends first Start
// returns ctx's error and the election is not started: a ctx that had ended before the call is
// refused at once, and if the engine takes the start after ctx ended, it stops the election
// again at once.
func (e *Election) Start(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Start")
	}
	// A ctx that has already ended is refused before the request, as Lock refuses it: stepped
	// inline, the engine would take the start at once and Start return nil, leaving a caller
	// that passed its shutdown ctx with a running election.
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := e.registerStart(); err != nil {
		return err
	}
	// An error from Start never leaves the election running: a start the caller gave up on
	// before the engine took it is stopped again right after the step that takes it.
	ev := engine.Event{Kind: engine.EvStart, Name: e.name, Flavor: engine.FlavorElection, HasWork: e.work != nil}
	_, err := e.c.requestUndoable(ctx, ev, func() {
		e.c.mu.Lock()
		e.starts--
		e.c.mu.Unlock()
	}, func(started bool) {
		if started {
			e.c.step(engine.Event{Kind: engine.EvStop, Name: e.name})
			e.letGo()
		}
	})
	return err
}

// registerStart gives e's name to e for a Start (register) and counts the Start as posted.
func (e *Election) registerStart() error {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if err := e.c.registerLocked(e.name, e); err != nil {
		return err
	}
	e.starts++
	return nil
}

// letGo lets e's name go once a Stop of e has been taken, unless a Start of e is still to be
// taken, and forgets the holder e learned.
func (e *Election) letGo() {
	e.c.mu.Lock()
	if e.c.handles[e.name] == leaseHandle(e) && e.starts == 0 {
		delete(e.c.handles, e.name)
	}
	e.stopping.done()
	e.c.mu.Unlock()
	e.forgetHolder()
}

// Stop ends the candidacy. A leader's term is revoked (RevokedStopped) and its lease released once
// its work exits (handover), or, for work that ignores its ctx, once the term's local deadline as
// it stood at the stop passes (see RunWhileLeader: the work then runs on with an invalid term);
// Stop returns when that is done or ctx ends (the release then goes on). A candidate's acquire
// still waiting for one of the client's 32 call slots is dropped unsent (so a StepDown's), so
// that it never takes the lease for the stopped election; one already sent goes on, and a
// grant it brings is released, and a candidate that may wait in the backend's queue withdraws
// from it once that acquire is back: Stop returns after that. Once Stop has been taken
// the client keeps nothing of the election: the name is free for a new election or lock, and
// callbacks already due still run (Close waits for them). Called from inside this election's
// own leader work (RunWhileLeader, Schedule), which the handover waits for, Stop returns once
// the engine has taken it (the term revoked, the work's ctx cancelled): the lease is released
// when that work returns.
//
// A Stop of a stopped election (a second Stop, a deferred one) does nothing more: it returns
// once the first Stop's handover is done, or at once. Once another election or a lock of this
// client has the name, or a group this client has joined has it as a partition, it returns nil
// at once and never reaches that election, lock or partition, even when it races with the
// NewElection, Lock or JoinGroup that took the name: where the client steps requests, one at
// a time and in order, it checks that the name is still this election's, or nobody's, before
// it steps a Stop or a StepDown. After the client's Close, Stop returns ErrClosed, as every
// operation does (see Client.Close); so does a Stop whose release was in flight when Close cut
// it short, once the session's close, which releases the lease, is done. A Stop whose release
// fails after the client's session was lost returns nil, as one whose session is lost during
// its handover or before it: the lease went with the session (at a backend that has not noticed
// the loss yet, it lapses at the session's TTL), and the client holds nothing of the name.
func (e *Election) Stop(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Stop")
	}
	// The name is let go once the engine has taken the Stop (whatever err says), and not before:
	// a Stop whose ctx ends while it waits for the loop is taken later, and its revocation must
	// still find this election to cancel the work's ctx and invalidate the term.
	ev := engine.Event{Kind: engine.EvStop, Name: e.name}
	e.c.mu.Lock()
	if e.c.handles[e.name] == leaseHandle(e) {
		e.stopping.begin()
	}
	e.c.mu.Unlock()
	var err error
	if e.c.inWorkOf(e.name) {
		err = e.c.requestTaken(ctx, ev, e.ownsName, e.letGo)
	} else {
		_, err = e.c.requestIf(ctx, ev, e.ownsName, e.letGo)
	}
	if errors.Is(err, ErrClosed) {
		e.c.mu.Lock()
		if e.c.handles[e.name] == leaseHandle(e) {
			delete(e.c.handles, e.name)
		}
		e.stopping.done()
		e.c.mu.Unlock()
		e.forgetHolder()
	}
	return err
}

// ownsName is the guard of e's Stop and StepDown, on the loop goroutine (requestIf): it reports
// whether the name is e's, or nobody's on this client. The engine knows elections by name, so
// a request of e's once another election or a lock has the name would reach that one (and on
// a partition of a joined group, fail). NewElection, Start and Lock give the name to their
// handle before they post anything, and the step of a Stop or an Unlock lets it go: when the
// loop takes e's request, another handle of the name means that e is stopped (the name is
// given to one handle at a time) and that what the engine runs of the name, or is about to,
// is that handle's. With no handle at all, the engine runs nothing of the name but the
// handover of a stopped election (a Stop waits for it too).
func (e *Election) ownsName() bool {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if h := e.c.handles[e.name]; h != nil {
		return h == leaseHandle(e)
	}
	return e.c.partitionOfJoinedLocked(e.name) == nil
}

// StepDown gives up leadership for the cooldown (default one TTL), then the election is a
// candidate again. It returns when the lease is released (after the handover, if work runs);
// called from inside this election's own leader work, once the term is revoked, as Stop does
// there (the lease is released when that work returns).
//
// A started election that does not lead steps down too: it leaves the race for the cooldown,
// so it does not take over when the leader goes meanwhile, and StepDown returns nil once it
// has left the backend's waiter queue (at once where it was not queued); one already cooling
// down keeps its cooldown as it is.
// On an election that was never started, or is stopped, StepDown does nothing and returns
// nil (it does not start it), also when another election or a lock of this client has taken
// the name since, even when racing with its Start or Lock (as Stop). After the client's
// Close, StepDown returns ErrClosed, as every operation does (see Client.Close); so does a
// StepDown whose release was in flight when Close cut it short, once the session's close,
// which releases the lease, is done (as Stop).
func (e *Election) StepDown(ctx context.Context) error {
	if ctx == nil {
		return nilContext("StepDown")
	}
	ev := engine.Event{Kind: engine.EvStepDown, Name: e.name}
	if e.c.inWorkOf(e.name) {
		return e.c.requestTaken(ctx, ev, e.ownsName, nil)
	}
	_, err := e.c.requestIf(ctx, ev, e.ownsName, nil)
	return err
}

// Err returns the permanent backend error that keeps this election from leading, or nil: a
// missing or old schema (matching ErrSchemaMissing), a DSN that names the wrong kind of server,
// bad credentials or permissions. It is set when a call for this election or for the client's
// session fails permanently (an EventBackendError with Class Permanent reports it too) and
// cleared when such a call succeeds. The election keeps retrying, every BackoffMax/2 to
// BackoffMax (the renewal interval), since an operator may fix the cause; the log has an ERROR
// line for the error once, then one a minute while it repeats.
func (e *Election) Err() error {
	if err := e.lastErrs.permanent(); err != nil {
		return err
	}
	return e.c.sessErr.permanent()
}

// Term returns the current term if this client leads and the term is valid.
func (e *Election) Term() (Term, bool) { return e.current() }

// IsLeader reports whether this client holds a valid term.
func (e *Election) IsLeader() bool {
	_, ok := e.current()
	return ok
}

// Leader returns the holder of the lease as this client last learned it (from its own terms
// and from the holder an acquire reported). It reports false when nothing is known, and once
// the election is stopped or its client closing: a stopped election follows the lease no more,
// so the holder it last learned may since have released it. Owner may be empty for a while:
// the SQL and Redis backends name a waiter that a free lease is reserved for by its session
// alone, and the owner follows with the candidate's next attempt. An election never started
// learns nothing, so it reports false even while another client leads: to observe a lease
// without campaigning, read it with the backend's InspectLease (spi.LeaseInspector).
func (e *Election) Leader() (Leader, bool) {
	if t, ok := e.current(); ok {
		return Leader{Session: e.c.Session(), Owner: t.Owner(), Self: true}, true
	}
	if e.c.isClosed() {
		return Leader{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.holder == "" || e.holderSelf {
		return Leader{}, false
	}
	return Leader{Session: e.holder, Owner: e.holderOwner}, true
}

// Events returns a channel of this election's events (elected, revoked, backend errors: its
// own calls' and, with Name empty, its session's, which every election's and group's
// subscribers receive too; see EventBackendError) from now until ctx ends: then, or when the client finishes closing, the channel is closed and
// forgotten. It is buffered; if the reader falls behind, events are dropped rather than
// blocking the client, and counted (DroppedEvents). A nil ctx never ends.
func (e *Election) Events(ctx context.Context) <-chan Event { return e.events(ctx) }

// DroppedEvents is the number of this election's events dropped so far because a subscriber
// (Events, All) was full.
func (e *Election) DroppedEvents() uint64 { return e.dropped.Load() }

// All iterates over this election's events until ctx ends, the loop body breaks, or the client
// closes. It subscribes when called, so it sees every event after All returns; the sequence
// can be iterated once. The subscription ends with ctx whether or not the sequence is ever
// iterated (a sequence never iterated on a ctx that never ends keeps it until the client
// closes). A nil ctx never ends.
func (e *Election) All(ctx context.Context) iter.Seq[Event] { return all(ctx, &e.leaseCore) }

func all(ctx context.Context, l *leaseCore) iter.Seq[Event] {
	if ctx == nil { // as documented: a nil ctx never ends
		ctx = context.Background()
	}
	sub := l.subscribe()
	// Not only the iteration ends it: a sequence made and dropped would otherwise keep its
	// subscription, and take a copy of every event, until the client closes.
	stop := context.AfterFunc(ctx, sub.unsubscribe)
	return func(yield func(Event) bool) {
		defer stop()
		defer sub.unsubscribe()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-sub.ch:
				if !ok || !yield(ev) {
					return
				}
			}
		}
	}
}

package simba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/internal/joinerr"
)

// Client is one participant: one backend session, kept alive by one keep-alive per renewal
// interval however many leases it holds, and any number of elections, locks and partition
// groups on it.
//
// A Client runs the pure engine on one loop goroutine, which steps every event in the order it was
// posted; when the loop is idle, the goroutine that posts an event (a Lock, an Unlock, a backend
// reply) steps it in the loop's place, one stepper at a time, sparing the wake-ups of the loop and
// of the waiting caller. Backend calls run on call workers with a timeout of one renewal interval —
// an acquire or release that a Lock or Unlock stepping inline asked for runs on that caller's
// goroutine, which would only wait meanwhile, unless the caller's deadline may fall during a call
// the backend cannot have cut safely (mayRunHere; a call on the caller's goroutine is cut short if
// the caller's context ends: runCall). At most maxCallsInFlight (32) calls other than the
// session's own (open, keep-alive, close) run at once; the rest wait in the order they were
// asked for, a lock's, election's or group's own calls ahead of partitions' (callgate.go), so
// that joining a group of thousands of partitions does not starve the keep-alive. Callbacks go
// through a serial dispatcher per election; leader work runs on one goroutine per term, the
// terms of a name one after another (startWork). On a clock that is an spi.Settler
// (simbatest.VirtualClock) the client reports which of that work is under way, so that the
// clock, when a test moves it, waits until the client has processed everything due
// (settle.go); its calls then time out on that clock. All methods are safe for concurrent use.
type Client struct {
	cfg     config
	backend spi.Backend
	// queuer is backend's waiter queue (nil when it has none): waiting acquires go through it.
	queuer spi.Queuer
	// waitEnder is backend's spi.WaitEnder (nil when it has none): told when a TryLock that
	// found its lease held gives up, so that the backend drops the hint state of that wait.
	waitEnder spi.WaitEnder
	// cutSafe: the backend's calls may be cut short by a caller's context (spi.CutSafe).
	cutSafe bool
	eng     *engine.Engine // loop goroutine only
	// seed keys the jitter of each step (see draw): WithSeed's, or random.
	seed uint64

	in       chan func()
	pending  atomic.Int64 // functions sent to in and not yet run
	loopDone chan struct{}
	baseCtx  context.Context // cancelled when the loop exits: aborts calls in flight
	cancel   context.CancelFunc
	inside   context.Context // marks callbacks and work (Close from inside must not wait)

	calls       sync.WaitGroup // call workers and the hint reader
	callQ       chan call      // calls handed to idle workers (unbuffered)
	idleWorkers atomic.Int32
	gate        callGate       // bounds the calls in flight (callgate.go)
	timeouts    sharedTimeout  // the calls' timeout contexts (callContext)
	cuts        callerCuts     // the context of calls for a caller whose context can end (runCall)
	work        sync.WaitGroup // leader work, also work waiting for its name's previous work
	chains      workChains     // the leader work of each name, run one at a time (startWork)
	callbacks   sync.WaitGroup // serial dispatchers with callbacks to run

	// stepper is held by the goroutine that steps the engine: the loop goroutine, or a goroutine
	// that found the loop idle and steps its own event inline (runInline). The fields below and
	// the engine are touched only by its holder ("the loop goroutine" in comments means that).
	stepper sync.Mutex
	claim   *callClaim // the call a request stepping inline runs on its own goroutine
	claimed callClaim  // where claim points while a request steps inline
	// drainHere, while a call worker steps its call's reply inline, collects the callback
	// dispatchers the step found idle and gave callbacks to (OnElected on a grant): the worker
	// drains them itself once its call is done and it has no other (runDrains), rather than
	// start a goroutine for each (dispatch).
	drainHere *[]*serialDispatcher

	// Loop-goroutine state.
	timers    map[engine.Timer]armedTimer
	timerGen  uint64 // numbers the arms, so that a stale firing leaves a newer timer's entry
	futures   map[engine.FutureID]*future
	nextFut   engine.FutureID
	deadlines map[SessionID]*atomic.Int64
	closeFut  engine.FutureID
	stopping  bool
	self      []func()   // posted by the loop goroutine to itself, run before c.in
	probe     prober     // probes the backend while the session's calls fail (probe.go)
	pause     pauseWatch // notices the client did not run for a while (pause.go)
	// sclock is the default clock, which counts a suspend of the machine (suspend.go); nil
	// with WithClock.
	sclock *suspendClock

	// mu guards the fields below. A name is in handles while an Election of this client has
	// it (from NewElection, or Start, to the step of its Stop) or while some goroutine holds or
	// waits for the lock of that name (a *lockQueue); a group is in groups from JoinGroup to the
	// step of its Leave. Both are set before the request that needs them is posted, so the
	// loop reads in them which handle a name is as of each step (Election.ownsName,
	// PartitionGroup.current). Nothing else keeps per-name state (but chains, while a name's
	// leader work runs), so the maps return to their size once names are let go.
	mu         sync.Mutex
	handles    map[string]leaseHandle
	groups     map[string]*PartitionGroup
	subs       map[*subscription]struct{} // every live Events / All subscription
	subsClosed bool                       // the client finished closing: no new subscription
	session    SessionID
	sessDL     *atomic.Int64 // the live session's local deadline (deadlines), nil while none
	closed     bool
	// openCut cancels the open-session call in flight (nil when none is); cutOpens is set
	// once the engine has stepped the close, which then cuts that call and every later one
	// (watchOpen).
	openCut  *context.CancelFunc
	cutOpens bool
	// sessCalls are the session calls (open, keep-alive) and group Joins in flight, which a
	// probe that the backend answered cuts short if they were sent before it (probe.go).
	sessCalls []*stuckCall
	// closing are the last sessions whose close the client sent (closeCut), a ring: the
	// client closes a session once, at its Close or after losing it, so a few suffice.
	closing     [4]spi.SessionID
	closingNext int
	// lost are the last sessions the client lost (PubSessionLost), a ring, and lostNext its
	// next slot. Owned by whoever steps the engine: no lock.
	lost     [4]spi.SessionID
	lostNext int

	errSeq  atomic.Uint64 // numbers the backend errors reported, for request's ctx errors
	sessErr errNote       // errors of session calls (open, keep-alive, close)
	// failLog and outage damp the log lines of failures that repeat (failLevel, faillog.go).
	// Owned by whoever steps the engine (the loop, or a caller stepping inline): no lock.
	failLog map[failKey]*failSeen
	outage  outageLog

	closeStarted atomic.Bool
	closeTaken   chan struct{} // closed once the loop has stepped the close
	closeDone    *future
	finished     chan struct{} // closed once every goroutine of the client has exited

	loopG   atomic.Uint64 // goroutine id of the loop (Listeners run there)
	inlineG atomic.Uint64 // goroutine id of a caller stepping inline, if listeners need it
	insideG goroutines    // goroutines running a callback or leader work of this client

	settle settle // activity reported to a settling clock (settle.go)

	// testHookRequest, when set (only by tests, through export_test.go), runs at the start of
	// every request, on the requesting goroutine, before its event is posted: a test makes
	// other requests there to have the loop take them before this one.
	testHookRequest atomic.Pointer[func(engine.Event)]
	// testHookHop, when set (only by tests, through export_test.go), sees the hops of a
	// hand-over on the waiter's side as they happen: a Released hint read (hopHint), an
	// acquire sent and its reply back (hopSent, hopBack), the reply's step begun (hopReply),
	// a grant stepped (hopElected).
	testHookHop atomic.Pointer[func(hop hop, name string)]
	// testHookReply, when set (only by tests, through export_test.go), runs right after the
	// step of each backend call's reply, where the engine is stepped (the stepper held): a
	// reply posted after the hook returns is stepped after this one.
	testHookReply atomic.Pointer[func(op engine.Op, name string)]
}

// hop is a point on the way from a Released hint to the waiter's grant (testHookHop).
type hop uint8

const (
	hopHint hop = iota
	hopSent
	hopBack
	hopReply
	hopElected
)

// traceHop reports hop h about name to the test hook, if one is set.
func (c *Client) traceHop(h hop, name string) {
	if f := c.testHookHop.Load(); f != nil {
		(*f)(h, name)
	}
}

// leaseHandle is what the loop tells about the terms of one name: an *Election, a *lockQueue, or a
// partition of a *PartitionGroup.
type leaseHandle interface {
	elected(t Term)
	revoked(t Term, reason RevokeReason)
	publish(ev Event)
	// term returns the current term of the handle if its token is token.
	termFor(token int64) (Term, bool)
}

type insideKey struct{}

// New starts a client on backend. It validates every option before any I/O, and the TTL
// against what the backend can serve where the backend knows it without I/O (spi.TTLChecker:
// a ZooKeeper DSN's tickTime must be less than half the TTL, etcd's TTL at least a second):
// such a TTL fails New with an error matching ErrInvalidOption that names the constraint,
// rather than every session open for as long as the client runs. It opens the first
// session in the background; elections wait for the session by themselves. With a backend that
// delivers hints (spi.Hinter) New subscribes to them first, on the caller's goroutine, and that
// may do I/O: the Redis backend subscribes to a probe channel and waits for the server's
// confirmation, at most the go-redis client's read timeout and never more than 5 s. A server
// that has not answered by then (one that accepts connections but never answers: a stopped
// process, a network gone dark) is treated like one that refuses connections, as briefly down:
// New returns, and the backend subscribes in the background once the server answers. New fails
// when the backend refuses the subscription: on Redis, an ACL user without permission for
// Simba's channels or a DSN the server cannot serve (a database out of range, a database at a
// Cluster node, redis+cluster:// at a standalone server), each a permanent error. A backend
// that is merely unreachable does not fail New (nor, on Redis, TLS that cannot work): the
// first session's calls then fail, and are retried or reported as for any call.
func New(backend spi.Backend, opts ...Option) (*Client, error) {
	if backend == nil {
		return nil, invalid("backend is nil")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o.apply == nil {
			return nil, invalid("zero option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.finish(); err != nil {
		return nil, err
	}
	// A TTL the backend can never serve would fail every session open, retried for as long as
	// the client runs: refuse it here (spi.TTLChecker).
	if err := spi.CheckTTL(backend, cfg.ttl); err != nil {
		if !errors.Is(err, ErrInvalidOption) {
			err = fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		return nil, err
	}
	// So is a renewal interval (each call's timeout) the backend's configuration cannot fit in
	// (spi.RenewalChecker: a Redis WAIT timeout not below it).
	if err := spi.CheckRenewal(backend, cfg.ttl, cfg.renewEvery); err != nil {
		if !errors.Is(err, ErrInvalidOption) {
			err = fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		return nil, err
	}
	if cfg.loggerSet {
		// A backend opened without a logger of its own logs its warnings where the client
		// logs (spi.LoggerAdopter), not to slog.Default().
		spi.AdoptLogger(backend, cfg.logger)
	}
	eopt := cfg.engineOptions()
	queuer, queues := backend.(spi.Queuer)
	waitEnder, _ := backend.(spi.WaitEnder)
	eopt.Queue = queues
	// Waiter entries that live with the session need no re-attempt to keep their place.
	eopt.QueueLivesWithSession = queues && spi.EntriesLiveWithSession(backend)
	// Hints that survive the backend's reconnects need a later fallback retry when a holder's
	// time left is unknown (spi.SteadyHints).
	eopt.SteadyHints = spi.AreHintsSteady(backend)
	cutSafe := spi.IsCutSafe(backend)
	eng, err := engine.New(eopt)
	if err != nil {
		return nil, err
	}
	seed := cfg.seed
	if !cfg.seeded {
		seed = rand.Uint64()
	}
	c := &Client{
		cfg:        cfg,
		backend:    backend,
		queuer:     queuer,
		waitEnder:  waitEnder,
		cutSafe:    cutSafe,
		eng:        eng,
		seed:       seed,
		in:         make(chan func(), 1024),
		callQ:      make(chan call),
		loopDone:   make(chan struct{}),
		timers:     make(map[engine.Timer]armedTimer),
		futures:    make(map[engine.FutureID]*future),
		deadlines:  make(map[SessionID]*atomic.Int64),
		handles:    make(map[string]leaseHandle),
		groups:     make(map[string]*PartitionGroup),
		subs:       make(map[*subscription]struct{}),
		closeTaken: make(chan struct{}),
		closeDone:  newFuture(),
		finished:   make(chan struct{}),
	}
	c.pause.init(cfg.renewEvery)
	if sc, ok := cfg.clock.(*suspendClock); ok {
		c.sclock = sc
		sc.onSuspend = c.resumed
	}
	c.baseCtx, c.cancel = context.WithCancel(context.Background())
	c.inside = context.WithValue(context.Background(), insideKey{}, c)
	c.settle.init(cfg.clock, cfg.owner)
	c.cfg.callbacks = c.settle.executor(c.cfg.callbacks)
	if h, ok := backend.(spi.Hinter); ok {
		hints, err := h.Hints(c.settle.hintsContext(c.baseCtx))
		if err != nil {
			c.cancel()
			c.settle.close()
			return nil, fmt.Errorf("simba: subscribing to hints: %w", err)
		}
		c.calls.Add(1)
		go c.readHints(hints)
	}
	go c.loop()
	c.post(func() { c.step(engine.Event{Kind: engine.EvBoot}) })
	return c, nil
}

// Owner is the owner string this client's sessions carry.
func (c *Client) Owner() string { return c.cfg.owner }

// Session is the id of the current backend session ("" while none is live).
func (c *Client) Session() SessionID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// SessionRemaining is how long the current backend session stays live by the client's clock
// without a further successful keep-alive: the time to its local deadline, which every term
// it backs shares (Term.Remaining), 0 while no session is live. While keep-alives succeed it
// stays between about two thirds of the TTL and the TTL (less drift and margin); while they
// fail it runs down, and the session is lost when it reaches 0. A status page (simbahttp) shows
// it so that an operator sees how long a failing backend leaves the client.
func (c *Client) SessionRemaining() time.Duration {
	c.mu.Lock()
	dl := c.sessDL
	c.mu.Unlock()
	if dl == nil {
		return 0
	}
	return max(time.Duration(dl.Load())-c.cfg.clock.Now(), 0)
}

// Err returns the permanent backend error that keeps the client's session from working, or
// nil: its open or keep-alive failed permanently — a TTL the server refuses (ZooKeeper's
// maxSessionTimeout below it; etcd grants its minimum lease TTL instead, with a warning), a
// missing schema, refused credentials — and no such call has succeeded since. New cannot see
// such a refusal (it makes no call); the client keeps trying to open its session, every
// BackoffMax/2 to BackoffMax (the renewal interval), and recovers by itself once the cause is
// fixed. The error is also an
// EventBackendError to the listeners; a Lock or TryLock waiting for the session returns it,
// and while the client waits to retry the open (no open in flight) a new Lock or TryLock
// returns the open's refusal at once rather than wait for the retry (and, in a live session
// whose keep-alive was refused, that refusal, without an acquire); Election.Start and
// JoinGroup return nil (their elections and groups run in the background, waiting for the
// session), and each Election's and PartitionGroup's Err reports it; the log has an ERROR line for it once, then
// one a minute while it repeats.
func (c *Client) Err() error { return c.sessErr.permanent() }

// Close stops every election, lock and group of the client (their terms end with
// RevokedClosed; handovers wait for their work as usual), closes the backend session and
// waits until every goroutine of the client has exited or ctx ends. Goroutines waiting in
// Lock behind another goroutine of this client return ErrClosed. Close does not close the
// backend. Every call after the first waits the same way; none starts a second close.
//
// After Close every operation of the client and of its elections, locks and groups returns an
// error matching ErrClosed, those that end something included, whatever their handle's state:
// Stop, StepDown and Leave (even of an election stopped or a group left before, or one whose
// name a later election or membership of this client took, which return nil otherwise), and
// Unlock (a *RevokedError of reason RevokedClosed, the lease lost to the close, which matches
// ErrClosed too). Close has ended them; the error tells a deferred Stop or Leave that runs
// after it that it did nothing, where nil would say that it released the lease, a release a
// Close cut short by its ctx may still be making. A Stop, Leave or Unlock whose release was in
// flight when Close came and failed (the close cut it short, as ZooKeeper's does) returns such
// an error too, once the session's close, which releases the lease, is done; one whose release
// landed first returns nil. So does a Leave whose membership was still to be deleted when Close
// came (its leave call in flight, whatever its outcome), once the session's close, which
// deletes the membership, is done: a Leave returns nil only if all of its work was done before
// Close began. Match it with errors.Is to ignore it, as
// os.ErrClosed on a closed file.
//
// If the session's close call fails, Close returns a *SessionCloseError naming the session
// and wrapping the failure: a permanent error, as itself, when the backend refused the close
// for good (a missing schema, a closed backend: the session was not closed), or an error
// matching ErrUnavailable when its outcome is unknown (a timeout, a lost connection, the call
// timeout at a blackholed server). The close is not retried; the rest of the close is done all
// the same (every term revoked, every goroutine exited), and the session, with the leases and
// memberships it held, lapses at the backend when its TTL runs out. A session that was not
// live (lost, or never opened) needs no close: Close returns nil. Close is idempotent: every
// later Close returns the same error (Close from inside a callback, leader work or a Listener,
// which does not wait for the close, returns nil, as it does not know the outcome yet).
//
// A Lock, TryLock or election still waiting for its acquire when Close comes ends (ErrClosed,
// or Stop's nil): an acquire still waiting for one of the client's 32 call slots is dropped
// unsent, so none goes out during the close to take a lease for nobody until the session's
// close lands; one already sent is answered, and a grant it brings released.
//
// Close does not wait for a session being opened: it cuts the open in flight short, which at a
// server that refuses connections or never answers would otherwise end only at its timeout (one
// renewal interval). Such a session holds nothing yet; if the server did create it, it expires
// after its TTL, as one whose open timed out.
//
// How long Close takes when the backend is gone: the releases, leaves and the session's close
// are sent together, each bounded by the call timeout (one renewal interval: TTL/3, 5 s at the
// default TTL), and a call already in flight ends within its own; so at a server that refuses
// connections or never answers (a blackhole), Close returns within about one renewal interval,
// plus the time a handover's work takes to return once its ctx is cancelled. Measured at TTL 3 s
// with a lock, a leading election and a group of two partitions held: 1.0 s on a blackholed
// link on every backend, and on a locked SQLite file; 1 to 124 ms at a server that refuses
// connections (etcd's client: 1.0 s). With a ctx that ends sooner, Close returns then with an
// error wrapping ctx.Err(), and the rest of the close goes on in the background; the server
// then frees what the client held when the session's TTL runs out. Close does not close the
// backend: a backend's own Close may wait for its driver (see each backend's Close).
//
// Close never waits for the goroutine that called it. Called from inside an OnElected,
// OnRevoked, OnAssigned or OnUnassigned callback, or from leader work (RunWhileLeader,
// Schedule, RunPartition), with any ctx, Close starts the close and returns once the client
// is closed — every term is revoked and every later operation fails with ErrClosed — or ctx
// ends; the rest of the close (handovers, which wait for that very work, the session's close,
// the callbacks and work still running) goes on in the background, and a Close from any other
// goroutine waits for all of it. "Inside" means the goroutine the client runs the callback or
// work on, not goroutines it starts. Called from a Listener (on the loop goroutine), Close
// starts the close and returns at once.
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Close")
	}
	me := goid()
	// 0: goid could not tell; never assume the loop.
	onLoop := me != 0 && (me == c.loopG.Load() || me == c.inlineG.Load())
	if c.closeStarted.CompareAndSwap(false, true) {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		start := func() {
			f := c.newFuture()
			c.closeFut = f.id
			c.step(engine.Event{Kind: engine.EvClose, Future: f.id})
			c.cutOpen()
			close(c.closeTaken)
		}
		if onLoop {
			c.postSelf(start)
		} else if !c.post(start) {
			close(c.closeTaken)
			c.closeDone.complete(Term{}, nil)
		}
	}
	if onLoop {
		return nil // everything Close could wait for needs this goroutine
	}
	if ctx.Value(insideKey{}) == c || c.isInside(me) {
		select {
		case <-c.closeTaken:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("simba: close: %w", ctx.Err())
		}
	}
	select {
	case <-c.finished:
		return c.closeDone.err
	case <-ctx.Done():
		return fmt.Errorf("simba: close: %w", ctx.Err())
	}
}

// isClosed reports whether Close has been called.
func (c *Client) isClosed() bool { return c.closeStarted.Load() }

func (c *Client) isInside(id uint64) bool { return c.insideG.has(id) }

// workName returns the name of the lease whose leader work (RunWhileLeader, Schedule,
// RunPartition) the calling goroutine runs, or "". It takes the goroutine's id (goid: a stack
// trace's header, microseconds) only while some leader work runs in this client.
func (c *Client) workName() string {
	if c.insideG.works.Load() == 0 {
		return "" // no work runs: nor does the caller (its own enterWork would count)
	}
	if id := goid(); id != 0 {
		return c.insideG.workOf(id)
	}
	return ""
}

// inWorkOf reports whether the calling goroutine runs the leader work of lease name. It takes
// the goroutine's id only while some work of name runs in this client: a Stop or StepDown of
// an election without work, the common case, costs no stack trace.
func (c *Client) inWorkOf(name string) bool {
	return c.insideG.runsWork(name) && c.workName() == name
}

// requestTaken is request for a Stop, StepDown or Leave called from inside the leader work
// the request would wait for: it returns once the engine has taken ev (the terms it ends are
// revoked, their work's ctx cancelled), or ctx ends, instead of once the future completes,
// which needs that very work to return first (a handover), or else the term's local deadline.
// guard is requestIf's: a request it drops returns nil at once.
func (c *Client) requestTaken(ctx context.Context, ev engine.Event, guard func() bool, after func()) error {
	taken := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f, err := c.requestIf(wctx, ev, guard, func() {
		if after != nil {
			after()
		}
		close(taken)
		cancel()
	})
	select {
	case <-taken:
		if f != nil && f.completed() {
			return f.err
		}
		return nil
	default:
		return err
	}
}

// goroutines is a set of goroutines (by goid), each counted as often as it entered.
type goroutines struct {
	mu    sync.Mutex
	ids   map[uint64]int
	work  map[uint64]string // of the goroutines that entered as leader work: its lease's name
	names map[string]int    // how many goroutines run the leader work of each name
	works atomic.Int32      // how many goroutines run leader work (of any name)
}

// enter adds the calling goroutine until the returned function is called.
func (g *goroutines) enter() func() { return g.enterID(goid(), "") }

// enterWork is enter for the leader work of lease name (when not ""), which workOf tells
// until the returned function is called.
func (g *goroutines) enterWork(name string) func() { return g.enterID(goid(), name) }

// enterID is enterWork for the calling goroutine whose id (goid) the caller knows already.
func (g *goroutines) enterID(id uint64, name string) func() {
	g.mu.Lock()
	if g.ids == nil {
		g.ids = make(map[uint64]int)
	}
	g.ids[id]++
	if name != "" {
		if g.work == nil {
			g.work = make(map[uint64]string)
			g.names = make(map[string]int)
		}
		g.work[id] = name
		g.names[name]++
		g.works.Add(1)
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		if g.ids[id]--; g.ids[id] <= 0 {
			delete(g.ids, id)
		}
		if name != "" {
			delete(g.work, id)
			if g.names[name]--; g.names[name] <= 0 {
				delete(g.names, name)
			}
			g.works.Add(-1)
		}
		g.mu.Unlock()
	}
}

// workOf returns the name of the lease whose leader work goroutine id runs, or "".
func (g *goroutines) workOf(id uint64) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.work[id]
}

// runsWork reports whether some goroutine runs the leader work of lease name.
func (g *goroutines) runsWork(name string) bool {
	if g.works.Load() == 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.names[name] > 0
}

// has reports whether goroutine id is in the set.
func (g *goroutines) has(id uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ids[id] > 0
}

// goid returns the id of the calling goroutine, read from the header of its stack trace
// ("goroutine 42 [running]:"). Go has no other way to tell one goroutine from another, and
// Close must know whether its caller is a callback or work that the close would wait for. It
// costs a traceback of the whole stack under the runtime's print lock, 3 µs and more on the
// 2-CPU VM of 2026-12-06 (56 % of a Stop's CPU before Stop and StepDown took it only while
// leader work of their name runs): keep it off the paths of a hand-over. goidCalls counts
// its calls, for the tests.
func goid() uint64 {
	goidCalls.Add(1)
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return 0
	}
	var id uint64
	for _, ch := range b[len(prefix):] {
		if ch < '0' || ch > '9' {
			break
		}
		id = id*10 + uint64(ch-'0')
	}
	return id
}

// goidCalls counts the calls of goid (GoroutineIDsTaken in export_test.go).
var goidCalls atomic.Uint64

// postSelf queues f for the loop goroutine from the loop goroutine itself: it never blocks
// (the loop would be waiting for itself on a full channel).
func (c *Client) postSelf(f func()) { c.self = append(c.self, c.settle.tracked(f)) }

// post hands f to the loop goroutine; it reports false once the loop has exited. When the
// loop is idle (nothing queued, nobody stepping) f runs at once on the calling goroutine
// instead (runInline): the engine is still stepped by one goroutine at a time and in the order
// events were posted, but an uncontended event costs no wake-up of the loop goroutine and of
// the goroutine waiting for the outcome — on a fast backend those hand-offs cost more than the
// backend's round trip. The caller must hold no lock that a step takes (c.mu, a handle's).
func (c *Client) post(f func()) bool {
	if c.runInline(f) {
		return true
	}
	return c.enqueue(f)
}

// loopExited reports that the loop goroutine has exited: the client runs nothing more.
func (c *Client) loopExited() bool {
	select {
	case <-c.loopDone:
		return true
	default:
		return false
	}
}

// enqueue hands f to the loop goroutine's channel, never running it inline: for callers that
// must not step the engine themselves (timer callbacks, which a test clock may run while it
// holds its own lock). It reports false once the loop has exited.
func (c *Client) enqueue(f func()) bool {
	f = c.settle.tracked(f)
	select {
	case <-c.loopDone:
		return false
	default:
	}
	c.pending.Add(1)
	select {
	case c.in <- f:
		return true
	case <-c.loopDone:
		c.pending.Add(-1)
		return false
	}
}

// runInline runs f as the loop would, on the calling goroutine, if the loop is idle: nothing
// queued for it (pending is zero once the stepper is held: every function posted before has
// run), the stepper free, the client not stopping. It reports whether f ran. On a settling
// clock (settle.go) everything goes through the loop, whose work the clock tracks.
func (c *Client) runInline(f func()) bool {
	if c.settle.act != nil || !c.stepper.TryLock() {
		return false
	}
	// Listeners run on the stepping goroutine: Close from one must know it is "on the loop".
	listeners := len(c.cfg.listeners) > 0
	if listeners {
		c.inlineG.Store(goid())
	}
	// Step inline only when nothing posted before is still to run: pending counts what was
	// sent to the loop (or is being sent) and has not run, including a function the loop
	// goroutine has taken off the channel and waits to step. Otherwise f queues behind them, so
	// every poster's events keep their order. (Taking queued functions off the channel here
	// could run one before the function the loop goroutine holds.)
	ran := false
	if c.pending.Load() == 0 && !c.stopping {
		f()
		c.runSelf()
		ran = true
	}
	stopping := c.stopping
	if listeners {
		c.inlineG.Store(0)
	}
	c.stepper.Unlock()
	if stopping {
		// Wake the loop goroutine so that it sees the client stopping and exits.
		c.enqueue(func() {})
	}
	return ran
}

// runSelf runs what the stepping goroutine posted to itself, until the client stops.
func (c *Client) runSelf() {
	for len(c.self) > 0 && !c.stopping {
		f := c.self[0]
		c.self[0] = nil
		c.self = c.self[1:]
		f()
	}
}

// loop is the client's goroutine that owns the engine whenever no caller steps it inline: it
// only receives and steps. It keeps the stepper once the client stops.
func (c *Client) loop() {
	c.loopG.Store(goid())
	for {
		f := <-c.in
		c.stepper.Lock()
		if !c.stopping { // what was queued behind the close is dropped, as before
			f()
			c.runSelf()
		}
		c.pending.Add(-1)
		if c.stopping {
			break
		}
		c.stepper.Unlock()
	}
	c.self = nil
	c.settle.close()
	close(c.loopDone)
	for _, t := range c.timers {
		t.timer.Stop()
	}
	c.stopProbe()
	c.cancel()
	c.cuts.retire()
	for id, f := range c.futures {
		f.complete(Term{}, ErrClosed)
		delete(c.futures, id)
	}
	go func() {
		c.calls.Wait()
		c.work.Wait()
		c.callbacks.Wait()
		c.mu.Lock()
		subs := make([]*subscription, 0, len(c.subs))
		for sub := range c.subs {
			subs = append(subs, sub)
		}
		c.subsClosed = true
		c.mu.Unlock()
		for _, sub := range subs {
			sub.unsubscribe()
		}
		close(c.finished)
	}()
}

func (c *Client) newFuture() *future {
	f := newFuture()
	c.addFuture(f)
	return f
}

// addFuture numbers f and registers it for completion by the engine (loop goroutine).
func (c *Client) addFuture(f *future) {
	c.nextFut++
	f.id = c.nextFut
	c.futures[f.id] = f
}

// request posts an engine event that completes a future and waits for it (or ctx). The future is
// made here, so that the caller waits on it at once: the loop takes the event in order and wakes
// the caller only when the future completes. It returns the future once the event is posted — the
// engine takes every posted event in order, even if ctx ends first — and ErrClosed (with no future)
// if the loop has exited. When the loop is idle the caller steps the event itself (post) and,
// unless ctx's deadline may fall during the call on a backend whose calls are not cut-safe
// (mayRunHere), also runs the acquire or release that the step asks for about the event's name
// (callClaim): then an uncontended Lock or Unlock is one backend call on the caller's goroutine
// with no hand-off at all. If ctx ends during that call, the call is cut short so that the caller
// returns at once with ctx's error (runCall says what becomes of the call).
func (c *Client) request(ctx context.Context, ev engine.Event) (*future, error) {
	return c.requestThen(ctx, ev, nil)
}

// requestUndoable is request for an event the caller may give up on before the engine has
// done what it asks (JoinGroup, Start): whichever comes first of the completion of the event's
// future and the caller's giving up decides. took (if not nil) runs right after the step that
// takes the event. If the caller gave up first (abandoned), the caller gets ctx's error and
// undo runs on the loop goroutine, told whether the engine accepted the event (took it, even
// if it still waits: a Join waiting for a Leave of its group), with nothing stepped in
// between: right after that step if the caller gave up before it, else as soon as the loop
// takes it (the engine then still had the event waiting, and undo withdraws it, or undoes it
// if it completed meanwhile). If the engine had accepted the event and completed its future
// before ctx ended, the caller gets nil.
func (c *Client) requestUndoable(ctx context.Context, ev engine.Event, took func(), undo func(accepted bool)) (abandoned bool, err error) {
	const (
		pending int32 = iota
		taken
		gaveUp
	)
	var state atomic.Int32
	var f *future
	// accepted is undo's argument, read on the loop goroutine: a future not completed yet is
	// an event the engine keeps waiting.
	accepted := func() bool { return !f.completed() || f.err == nil }
	f, err = c.requestThen(ctx, ev, func() {
		if took != nil {
			took()
		}
		if state.CompareAndSwap(pending, taken) {
			return
		}
		undo(accepted())
	})
	switch {
	case err == nil:
		return false, nil
	case f == nil:
		return false, err
	case state.CompareAndSwap(pending, gaveUp):
		return true, err
	case f.completed() && f.err == nil:
		return false, nil // accepted before ctx ended
	case f.completed():
		return false, err
	}
	// Taken, and still waiting in the engine: withdraw it where whatever has become of it is
	// known. A loop that has exited completed it (ErrClosed).
	if !c.post(func() { undo(accepted()) }) {
		return false, err
	}
	return true, err
}

// requestThen is request with after, when not nil, run right after the step that takes the
// event, where the engine is stepped: for what must follow the engine's taking the event and
// precede whatever it steps next (Stop and Leave let their name go there, after the step's
// revocations have found it). The caller may have returned by then, its ctx ended.
func (c *Client) requestThen(ctx context.Context, ev engine.Event, after func()) (*future, error) {
	return c.requestIf(ctx, ev, nil, after)
}

// requestIf is requestThen for a request that may be stale by the time the loop takes it (an
// old handle's Stop, StepDown or Leave, while the engine knows the event's name only): guard,
// when not nil, runs on the loop goroutine right before the step, and if it reports false the
// event is not stepped, after does not run, and the request completes with nil. The check must
// be made there: one the caller made before posting could pass, and then a newer handle's
// request of the same name be posted, and taken, ahead of this one.
func (c *Client) requestIf(ctx context.Context, ev engine.Event, guard func() bool, after func()) (*future, error) {
	if h := c.testHookRequest.Load(); h != nil {
		(*h)(ev)
	}
	since := c.errSeq.Load()
	f := newFuture()
	// Neither ev nor own leaves this goroutine's stack when the event is stepped inline (the
	// claim is made in c.claimed and copied out before the stepper is let go); only an event
	// handed to the loop is copied to the heap, with its closure (queued, below).
	var own callClaim
	inline := func() {
		// The call the step asks for about this name may as well run here, on the goroutine
		// that waits for it anyway.
		c.claimed = callClaim{name: ev.Name, claimable: c.mayRunHere(ctx)}
		c.claim = &c.claimed
		c.stepRequest(f, ev, guard, after)
		c.claim = nil
		own, c.claimed = c.claimed, callClaim{}
		if own.taken && f.completed() {
			// Nothing to wait for (an election's Start): the call goes to a worker after all.
			own.taken = false
			c.calls.Done()
			c.dispatchCall(own.call)
		}
	}
	if !c.runInline(inline) {
		queued := ev
		if !c.post(func() { c.stepRequest(f, queued, guard, after) }) {
			return nil, ErrClosed
		}
	} else {
		switch {
		case !own.taken:
		case ctx.Err() != nil:
			// Ended already (an Unlock deferred past its deadline): the call goes on without
			// the caller, on a worker, as the caller returns.
			c.dispatchCall(own.call)
			c.calls.Done()
		default:
			cut, handed := c.runCall(own.call, ctx, nil)
			if !handed {
				c.passOn()
			}
			c.calls.Done()
			if cut {
				// The engine may have completed f with the cut call's error (a TryLock's):
				// ctx's end is what the caller hears of, as from a call worker's.
				return f, c.withLastError(ctxErr(ctx), since, ev.Name)
			}
		}
	}
	if c.settle.act != nil {
		return c.awaitSettling(ctx, f, since, ev.Name)
	}
	select {
	case <-f.wait():
		return f, f.err
	case <-ctx.Done():
		return f, c.withLastError(ctxErr(ctx), since, ev.Name)
	case <-c.loopDone:
		// The loop completes every future it took with ErrClosed as it exits.
		select {
		case <-f.wait():
			return f, f.err
		default:
			return nil, ErrClosed
		}
	}
}

// stepRequest steps ev, a request's event that completes f, then runs after (if not nil), on
// the loop goroutine; unless guard (if not nil) reports false first: then f completes with nil
// and nothing is stepped (requestIf).
func (c *Client) stepRequest(f *future, ev engine.Event, guard func() bool, after func()) {
	if guard != nil && !guard() {
		c.cfg.logger.Debug("simba request of a handle whose name is another's: not stepped", "name", ev.Name, "event", ev.Kind.String())
		f.complete(Term{}, nil)
		return
	}
	c.addFuture(f)
	ev.Future = f.id
	c.step(ev)
	if after != nil {
		after()
	}
}

// awaitSettling is request's wait on a settling clock (settle.go): a callback or Schedule
// function waits idle, so that the clock does not wait for it while it waits for the loop.
func (c *Client) awaitSettling(ctx context.Context, f *future, since uint64, name string) (*future, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.baseCtx, cancel) // cancelled as the loop exits
	defer stop()
	if err := c.settle.await(wctx, f.wait()); err != nil {
		if ctx.Err() != nil {
			return f, c.withLastError(ctxErr(ctx), since, name)
		}
		select {
		case <-f.wait():
			return f, f.err
		default:
			return nil, ErrClosed
		}
	}
	return f, f.err
}

// withLastError joins err (ctx's) with the latest backend error reported since seq for name
// or for the session, so that errors.Is finds both ctx's error and the backend's; the text is
// both on one line, "ctx's; the backend's".
func (c *Client) withLastError(err error, seq uint64, name string) error {
	n, last := c.sessErr.since(seq)
	if t := c.errTarget(name); t != nil {
		if m, e := t.errs().since(seq); m > n {
			last = e
		}
	}
	if last == nil {
		return err
	}
	return joinerr.Join(err, last)
}

// step runs one engine step and carries out its effects, on the loop goroutine.
func (c *Client) step(ev engine.Event) {
	now := c.cfg.clock.Now()
	ev.Jitter = c.eventJitter(&ev, now)
	c.checkPause(now)
	effects := c.eng.Step(ev, now)
	if c.cfg.logger.Enabled(context.Background(), slog.LevelDebug) {
		c.logStep(ev, len(effects))
	}
	for i := range effects {
		c.apply(&effects[i], now)
	}
	c.pause.inStep = 0
	if ev.Kind == engine.EvStop {
		c.dropNameTimers(ev.Name)
	}
}

// nameTimerKinds are the kinds of the timers an election (or lock) arms for its name.
var nameTimerKinds = [...]engine.TimerKind{engine.TimerRetry, engine.TimerCooldown, engine.TimerGrant, engine.TimerHandover}

// dropNameTimers stops the timers armed for name once the engine has forgotten the name (a
// stop ended its election): their firings would change nothing (the engine ignores a timer
// of a name it does not know), and a client whose Locks give up waiting for many names (each
// with a retry armed for when the holder's lease would run out) would otherwise keep one
// timer per name for up to a TTL. A name the engine still knows (a hand-over under way, an
// acquire in flight or of unknown outcome) keeps its timers.
func (c *Client) dropNameTimers(name string) {
	if _, known := c.eng.Election(name); known || name == "" {
		return
	}
	for _, kind := range nameTimerKinds {
		c.disarm(engine.Timer{Kind: kind, Name: name})
	}
}

// logStep logs a step at debug level: first, as the lines of failed calls do, op (a reply's)
// and name (the lease or group the event, or the reply's call, is about) as attributes of
// their own, so that a log can be filtered by either; then the event as transcripts print it
// and the number of effects.
func (c *Client) logStep(ev engine.Event, effects int) {
	attrs := make([]slog.Attr, 0, 4)
	if ev.Kind == engine.EvReply {
		attrs = append(attrs, slog.String("op", publicOp(ev.Op)))
	}
	name := ev.Name
	if ev.Kind == engine.EvHint {
		name = ev.Hint.Name
	}
	if name != "" {
		attrs = append(attrs, slog.String("name", name))
	}
	attrs = append(attrs, slog.String("event", ev.String()), slog.Int("effects", effects))
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "simba step", attrs...)
}

func (c *Client) apply(ef *engine.Effect, now time.Duration) {
	switch ef.Kind {
	case engine.EfCall:
		c.startCall(*ef)
	case engine.EfArm:
		c.arm(ef.Timer, ef.At, now)
	case engine.EfDeadline:
		if ef.Name == "" {
			c.deadline(ef.Session).Store(int64(ef.At))
		} else {
			c.confirmed(ef)
		}
	case engine.EfElected:
		c.elected(ef)
	case engine.EfRevoked:
		c.revoked(ef)
	case engine.EfComplete:
		c.completeFuture(ef)
	case engine.EfPublish:
		c.published(ef, now)
	case engine.EfCancel:
		c.cancelCall(*ef)
	case engine.EfMembers:
		c.mu.Lock()
		g := c.groups[ef.Group]
		c.mu.Unlock()
		if g != nil {
			g.view(ef.Members, ef.Assigned)
			c.emit(Event{Kind: EventMembers, At: now, Session: c.eng.SessionID(), Name: ef.Group,
				Members: g.Members(), Partitions: g.Assigned()}, g)
		}
	}
}

// deadline is the published local deadline of session sid, shared by its terms.
func (c *Client) deadline(sid SessionID) *atomic.Int64 {
	d := c.deadlines[sid]
	if d == nil {
		d = new(atomic.Int64)
		c.deadlines[sid] = d
		// Keep only the current session's: older sessions' terms are all revoked.
		for id := range c.deadlines {
			if id != sid {
				delete(c.deadlines, id)
			}
		}
	}
	return d
}

// armedTimer is an entry of Client.timers: the clock's timer and the arm it came from.
type armedTimer struct {
	timer spi.Timer
	gen   uint64 // Client.timerGen as of the arm
}

// arm sets the timer key to fire at at, replacing (stopping) the key's earlier one. A timer
// that fired enqueues its step; that step drops the key's entry only if it is still the
// entry of this timer: the key may have been armed again between the firing and the step
// (the newer timer is still to fire and must stay stoppable and counted). The stale step is
// still taken: the engine checks every firing against its own state (engine doc, EfArm).
func (c *Client) arm(key engine.Timer, at, now time.Duration) {
	if old, ok := c.timers[key]; ok {
		old.timer.Stop()
	}
	var d time.Duration // 0: fire at once
	if at > now {
		if d = at - now; d < 0 { // wrapped: the engine saturates at MaxInt64
			d = math.MaxInt64
		}
	}
	c.timerGen++
	gen := c.timerGen
	c.pause.armed(key, max(at, now))
	var t spi.Timer
	if c.settle.timers == nil || d > 0 {
		t = c.settle.afterFunc(c.cfg.clock, d, keyEngine|gen&keyMask, func() { c.enqueue(func() { c.timerFired(key, gen) }) })
	} else {
		// Due now, on a settling clock: stepped right after this step, in the order of the
		// effects that armed it, not from a goroutine of the clock's (selfTimer).
		st := &selfTimer{}
		c.postSelf(func() {
			if !st.stopped {
				st.fired = true
				c.timerFired(key, gen)
			}
		})
		t = st
	}
	c.timers[key] = armedTimer{timer: t, gen: gen}
}

// timerFired steps the firing of the timer key armed as arm number gen (loop goroutine).
func (c *Client) timerFired(key engine.Timer, gen uint64) {
	fired := false
	if cur, ok := c.timers[key]; ok && cur.gen == gen {
		delete(c.timers, key)
		fired = true
	}
	c.step(engine.Event{Kind: engine.EvTimer, Timer: key})
	// A session timer stays due until its firing is stepped (checkPause sees it overdue in
	// that step), unless the step armed it again.
	if fired && pauseSlot(key) >= 0 {
		if _, again := c.timers[key]; !again {
			c.pause.armed(key, 0)
		}
	}
}

// dropGrantTimer stops the name's TimerGrant once the term it was armed for is confirmed or
// revoked: its firing would change nothing (the engine ignores it), and a client that locks
// many names would otherwise keep one timer per name for up to a TTL.
func (c *Client) dropGrantTimer(name string) {
	c.disarm(engine.Timer{Kind: engine.TimerGrant, Name: name})
}

// disarm stops and forgets the timer key, if armed (loop goroutine).
func (c *Client) disarm(key engine.Timer) {
	if t, ok := c.timers[key]; ok {
		t.timer.Stop()
		delete(c.timers, key)
		c.pause.armed(key, 0)
	}
}

// startCall runs one backend call with a timeout of one renewal interval on a call worker and
// feeds the reply back to the loop. Workers are goroutines kept for the next call (a call must
// not wait for another, so an idle worker takes it, or a new one starts): reusing them spares
// each call a goroutine's start and the growth of its stack, which on a fast backend cost more
// than the call.
func (c *Client) startCall(ef engine.Effect) {
	ef.Names = append([]string(nil), ef.Names...)
	ef.Groups = append([]string(nil), ef.Groups...)
	c.settle.begin() // ended by runCall once the reply is posted
	gated := gatedOp(ef.Op)
	if gated && !c.admit(ef) {
		return // queued: the call that passes its slot on starts it (nextCall)
	}
	cl := call{ef: ef, gated: gated}
	if c.settle.turns != nil {
		cl.turn = c.settle.turns.take()
	}
	if own := c.claim; own != nil && own.claimable && !own.taken && ef.Name == own.name && (ef.Op == engine.OpAcquire || ef.Op == engine.OpRelease) {
		own.call, own.taken = cl, true
		c.calls.Add(1) // before the loop can exit and wait for the calls: it needs the stepper
		return
	}
	c.dispatchCall(cl)
}

// dispatchCall hands cl to an idle call worker, or starts one (the loop goroutine, or a
// goroutine holding a count of c.calls).
func (c *Client) dispatchCall(cl call) {
	select {
	case c.callQ <- cl:
	default:
		c.calls.Add(1)
		go c.callWorker(cl)
	}
}

// dispatch gives f, a callback, to d (loop goroutine). A dispatcher that was idle is drained by
// the call worker stepping its call's reply, if one is (drainHere) and the callbacks run on
// the client's default executor: once its call is done, the worker runs the callback itself
// instead of starting a goroutine for it, the same hand-off that a Lock's wait makes (its
// caller's goroutine woken), rather than one more (OnElected on a grant: the grant's reply
// wakes the worker, which then runs OnElected). Otherwise d is started on its executor. Either
// way the callbacks of one dispatcher run one at a time and in order, never on the loop.
func (c *Client) dispatch(d *serialDispatcher, f func()) {
	if !d.enqueue(f) {
		return // running: it takes f in turn
	}
	if c.drainHere != nil && c.cfg.callbacksDefault {
		*c.drainHere = append(*c.drainHere, d)
		return
	}
	d.start()
}

// runDrains drains ds, the dispatchers a call worker's steps left to it (dispatch), on the
// worker's goroutine, whose id is id.
func (c *Client) runDrains(ds []*serialDispatcher, id uint64) {
	for i, d := range ds {
		ds[i] = nil
		d.drainOn(id)
	}
}

// startDrains starts ds, dispatchers left to a call worker that has more calls to run, each on
// its executor.
func (c *Client) startDrains(ds []*serialDispatcher) {
	for i, d := range ds {
		ds[i] = nil
		d.start()
	}
}

// mayRunHere reports whether a request with ctx may run its own backend call (callClaim): its
// context cannot end; or the backend's calls are cut-safe (spi.CutSafe); or the context has no
// deadline before the call's own timeout (one renewal interval), so that only a cancellation,
// which is rare, can cut the call. A deadline that may fall during the call sends the call to a
// call worker, which runs it to its end while the caller returns at its deadline: cutting a
// SQL backend's acquire mid-transaction leaves its row locks held until the server notices,
// every other session's acquire of the name waiting for them, and cutting any statement
// tears down a pooled connection. Eighteen goroutines locking with deadlines of a few
// milliseconds took 8–9× longer per lock on PostgreSQL while their calls were cut
// (BenchmarkLockContention).
func (c *Client) mayRunHere(ctx context.Context) bool {
	if ctx.Done() == nil || c.cutSafe {
		return true
	}
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > c.cfg.renewEvery
}

// callClaim is a request's claim, while it steps its event inline, on the call the step asks
// for about its name (an acquire or a release): the requesting goroutine runs that call itself
// instead of handing it to a worker, since it would only wait for the outcome meanwhile.
type callClaim struct {
	name string
	// claimable: the call may be claimed (Client.mayRunHere).
	claimable bool
	taken     bool
	call      call
}

// maxIdleWorkers bounds the call workers kept idle; idleWorkerFor is how long one waits for a
// call before it exits.
const (
	maxIdleWorkers = 8
	idleWorkerFor  = 10 * time.Second
)

// callWorker runs cl, then further calls: the queued calls its slot passes on to (nextCall),
// and calls handed to it, until it has been idle for a while, too many workers are idle, or
// the client's loop has exited.
func (c *Client) callWorker(cl call) {
	defer c.calls.Done()
	var idle *time.Timer
	var drains []*serialDispatcher // the callbacks its calls' replies gave (drainHere)
	var id uint64                  // this goroutine's (goid), once it ran callbacks
	for {
		if _, handed := c.runCall(cl, nil, &drains); !handed && cl.gated {
			if next, ok := c.nextCall(); ok {
				// More calls to run: the callbacks go to goroutines of their own.
				c.startDrains(drains)
				drains = drains[:0]
				cl = next
				continue
			}
		}
		if len(drains) > 0 {
			if id == 0 {
				id = goid()
			}
			c.runDrains(drains, id)
			drains = drains[:0]
		}
		if c.idleWorkers.Add(1) > maxIdleWorkers {
			c.idleWorkers.Add(-1)
			return
		}
		if idle == nil {
			idle = time.NewTimer(idleWorkerFor)
		} else {
			idle.Reset(idleWorkerFor)
		}
		select {
		case cl = <-c.callQ:
			c.idleWorkers.Add(-1)
			idle.Stop()
		case <-idle.C:
			c.idleWorkers.Add(-1)
			return
		case <-c.baseCtx.Done():
			c.idleWorkers.Add(-1)
			idle.Stop()
			return
		}
	}
}

// runCall makes the backend call ef asks for and posts the reply to the loop. A call worker
// passes a nil caller. A request that runs its own call on its goroutine (callClaim) passes its
// context as caller: when caller ends during the call, the call is cut short (its context is
// cancelled, without a goroutine of its own: context.AfterFunc; and it has caller's deadline
// if that comes first, for a backend that heeds deadlines but not cancellations, as go-redis
// does) so that the request returns at once, and runCall reports true. A caller's end is not the backend's failure, so it is
// reported to no listener, and call observers see it with CallInfo.Abandoned. Then:
//   - a cut release goes on, on a call worker: the engine hears only of that call. Release is
//     idempotent by token (a release that landed after all makes the second one change
//     nothing; a later term has a greater token), so running it twice is safe, and the lease
//     is freed at once, as when a worker ran the release and the caller stopped waiting;
//   - a cut acquire is not repeated (a late landing of the cut request after a second
//     attempt's grant was released could take the lease again with nobody asking about it):
//     the engine gets an error saying the caller's context ended, retryable, so that its
//     outcome is unknown like a timed-out call's — keep-alives ask about the name, the first
//     20 ms later, and release a grant that landed (rule 3) — and a Lock retries it unless
//     its stop comes first (it does: the caller withdraws), a TryLock ends with it.
//
// On a backend whose calls are not cut-safe (spi.CutSafe), a request whose deadline may fall
// during its call leaves the call to a call worker instead (mayRunHere), so only a
// cancellation cuts such a call.
//
// handed reports that the call went on on a call worker (a cut release), with its slot of the
// callGate: the caller must not pass that slot on. The call's timeout, and the time its reply
// says it was sent, start here, however long it waited for a slot (callGate). A queued acquire
// of a lost session (cl.skip) is not sent: its reply is an error that the engine ignores.
func (c *Client) runCall(cl call, caller context.Context, drains *[]*serialDispatcher) (cut, handed bool) {
	defer c.settle.end()
	if t := c.settle.turns; t != nil {
		if cl.turn == 0 { // a call that waited for a slot (callGate)
			cl.turn = t.take()
		}
		t.wait(cl.turn)
		defer t.end(cl.turn)
	}
	ef := cl.ef
	if ef.Op == engine.OpCloseSession {
		c.noteClosing(ef.Session)
	}
	if cl.skip {
		ev := engine.ReplyTo(ef)
		ev.SentAt, ev.Err = c.cfg.clock.Now(), errNotSent
		c.post(func() { c.step(ev) })
		return false, false
	}
	// Only a call that something may cut short needs a context of its own: an open (Close),
	// a session call or a Join (a probe), one a caller may abandon (its context can end).
	// A call for a caller whose context can end, and that nothing else cuts, shares its
	// context with the other calls for that caller's context (callerCut), on a real clock.
	sessOp := ef.Op == engine.OpOpenSession || ef.Op == engine.OpKeepAlive || ef.Op == engine.OpJoin
	callerEnds := caller != nil && caller.Done() != nil
	var ctx context.Context
	cancel := func() {}
	var shared bool
	if callerEnds && !sessOp && c.settle.act == nil {
		cc := c.cuts.get(caller, c.timeouts.get(c.baseCtx, c.cfg.renewEvery))
		defer cc.release()
		ctx, shared = cc.ctx, true
	} else {
		ctx, cancel = c.callContext(sessOp || callerEnds, keyCall|uint64(ef.Req)&keyMask, cl.turn)
		defer cancel()
	}
	ev := engine.ReplyTo(ef)
	ev.SentAt = c.cfg.clock.Now()
	var openCut *context.CancelFunc
	if ef.Op == engine.OpOpenSession {
		openCut = c.watchOpen(cancel)
	}
	var sessCall *stuckCall
	if ef.Op == engine.OpOpenSession || ef.Op == engine.OpKeepAlive || ef.Op == engine.OpJoin {
		// A group's Join is cut short as well: hung on a silenced connection, it kept the
		// group (and its partitions) away until its timeout after the backend came back.
		sessCall = c.watchSessionCall(ev.SentAt, cancel)
	}
	if ef.Op == engine.OpAcquire {
		c.traceHop(hopSent, ef.Name)
	}
	if caller == nil || caller.Done() == nil {
		c.call(ctx, ef, &ev)
	} else {
		// The call ends with the caller: at its cancellation, and at its deadline if that
		// comes first, which the call's context carries too, for a backend that heeds a
		// deadline but not a cancellation (Redis: go-redis reads with ctx's deadline and never
		// watches ctx otherwise, so a cancellation alone ended the call at its own timeout).
		// (A shared context carries the caller's deadline and cancellation already.)
		callerDL, hasDL := caller.Deadline()
		if dl, ok := ctx.Deadline(); !shared && hasDL && (!ok || callerDL.Before(dl)) {
			var cancelDL context.CancelFunc
			ctx, cancelDL = context.WithDeadline(ctx, callerDL)
			defer cancelDL()
		} else if !shared && !hasDL {
			// Only the caller's cancellation can end it: a backend that watches only deadlines
			// must see that (spi.CallerCancels), or the caller waits out the call's timeout
			// (Redis: a Lock with a cancel-only ctx, cancelled while the network was
			// blackholed, returned only after one renewal interval).
			ctx = spi.WithCallerCancels(ctx)
		}
		if shared {
			c.call(ctx, ef, &ev)
		} else {
			stop := context.AfterFunc(caller, cancel)
			c.call(ctx, ef, &ev)
			stop()
		}
		// Cut: the call failed after its context was cancelled (or reached the caller's
		// deadline) and the caller's has ended (a call that failed by itself before that, or
		// that succeeded, counts as it is; one that the client's close cut is the close's).
		// (The deadline is read from the clock: the contexts' timers may not have fired yet.)
		if ev.Err != nil {
			pastDL := hasDL && !time.Now().Before(callerDL)
			cut = (ctx.Err() != nil || pastDL) && (caller.Err() != nil || pastDL) && c.baseCtx.Err() == nil
		}
		if cut {
			<-caller.Done() // past its deadline: at once, so that the caller sees it ended
		}
	}
	if ef.Op == engine.OpAcquire {
		c.traceHop(hopBack, ef.Name)
	}
	if sessCall != nil {
		ev.Err = c.unwatchSessionCall(sessCall, ef.Op, ev.Err)
	}
	if ev.Err != nil && ef.Op != engine.OpCloseSession && c.isClosing(ef.Session) {
		ev.Err = &closeCutError{err: ev.Err}
	}
	closing := isCloseCut(ev.Err)
	if openCut != nil && c.unwatchOpen(openCut) && ev.Err != nil && ctx.Err() != nil {
		// Close cut the open: not the backend's failure, and nothing to retry.
		ev.Err = fmt.Errorf("%w: open-session cut short by Close (%v)", ErrClosed, ev.Err)
		closing = true
	} else if cut {
		ev.Err = &abandonedError{op: publicOp(ef.Op), name: ef.Name, cause: context.Cause(caller)}
	} else if ev.Err != nil && ctx.Err() != nil && !errors.Is(ev.Err, ErrUnavailable) {
		// A timed-out call's outcome is unknown: retryable.
		ev.Err = spi.Unavailable(publicOp(ef.Op), ev.Err)
	}
	for _, f := range c.cfg.observers {
		f(CallInfo{Op: publicOp(ef.Op), Name: ef.Name, Took: c.cfg.clock.Now() - ev.SentAt,
			Token: ev.Acquire.Token, Err: ev.Err, Class: spi.Classify(ev.Err), Abandoned: cut, Closing: closing})
	}
	if cut && ef.Op == engine.OpRelease {
		c.settle.begin() // ended by the worker's runCall
		c.dispatchCall(cl)
		return true, true
	}
	c.postReply(ef.Name, ef.Session, ev, drains)
	for _, req := range cl.also {
		// An identical release queued after this one: this outcome is its outcome.
		dup := ev
		dup.Req = req
		c.post(func() { c.step(dup) })
		c.settle.end()
	}
	return cut, false
}

// callContext is the context of one backend call, with a timeout of one renewal interval
// (settle.callContext), which own (the call may be cut short: its cancel must end it alone)
// derives from a shared one on a real clock. A call's own timeout context cost a timer armed
// and stopped, a context registered with and removed from baseCtx, and four allocations per
// call: a fifth of the shell's CPU in a Lock and Unlock cycle (BenchmarkLockCycle/memory).
// On a settling clock key orders the timeout (ordertimer.go) and turn is the call's turn
// (callturn.go).
func (c *Client) callContext(own bool, key, turn uint64) (context.Context, context.CancelFunc) {
	if c.settle.act != nil {
		return c.settle.callContext(c.baseCtx, c.cfg.renewEvery, key, turn)
	}
	ctx := c.timeouts.get(c.baseCtx, c.cfg.renewEvery)
	if !own {
		return ctx, func() {}
	}
	return context.WithCancel(ctx)
}

// sharedTimeout is a timeout context that the backend calls starting within a short while of
// each other share (Client.callContext): its deadline is at most d after each of their starts,
// and at least d less a 64th of d (a call times out up to 1.6 % early, never late; at most 65
// of them are live at once, each a timer, however many calls run).
type sharedTimeout struct {
	cur atomic.Pointer[timeoutCtx]
}

// timeoutCtx is a context ended at until, or with its parent.
type timeoutCtx struct {
	ctx   context.Context
	until time.Time
	// cancel is never called: the context ends at until (its timer then removes it from its
	// parent) or with its parent, and the calls in flight with it must not be cut before.
	cancel context.CancelFunc
}

// get returns a context that ends with parent or at most d from now, and at least d less
// d/64 from now.
func (s *sharedTimeout) get(parent context.Context, d time.Duration) context.Context {
	now := time.Now()
	if t := s.cur.Load(); t != nil {
		if left := t.until.Sub(now); left <= d && left >= d-d/64 && t.ctx.Err() == nil {
			return t.ctx
		}
	}
	t := &timeoutCtx{until: now.Add(d)}
	t.ctx, t.cancel = context.WithDeadline(parent, t.until)
	s.cur.Store(t)
	return t.ctx
}

// postReply posts the step of ev, the reply to a backend call about name, after callDone. An
// event stepped inline stays on the stack; only one handed to the loop is copied to the heap.
// A call worker passes drains (else nil): the callbacks the step starts, if stepped inline,
// are left to it there (drainHere).
func (c *Client) postReply(name string, sid spi.SessionID, ev engine.Event, drains *[]*serialDispatcher) {
	if c.runInline(func() {
		c.drainHere = drains
		c.stepReply(name, sid, ev)
		c.drainHere = nil
	}) {
		return
	}
	queued := ev
	c.enqueue(func() { c.stepReply(name, sid, queued) })
}

// stepReply reports the outcome of a backend call about name on session sid (callDone) and
// steps its reply ev (loop goroutine).
func (c *Client) stepReply(name string, sid spi.SessionID, ev engine.Event) {
	if ev.Op == engine.OpAcquire {
		c.traceHop(hopReply, name)
	}
	c.callDone(ev.Op, name, sid, ev.Err)
	c.step(ev)
	if h := c.testHookReply.Load(); h != nil {
		(*h)(ev.Op, name)
	}
}

// watchOpen makes cancel, the context's cancel of an open-session call about to be made, the
// one Close cuts (cutOpen; at once if it has), and returns the handle unwatchOpen takes.
//
// Close cuts an open in flight rather than wait for it: the engine would wait for its reply
// to close the session it might open, and an open at a server that refuses connections or
// never answers ends only at its timeout, one renewal interval (5 s at the default TTL) — a
// process stopped by a signal while it waits for a lock would exit that much later. A session
// whose open is cut holds nothing (no call uses a session before its open's reply), like one
// whose open timed out: if the server did create it, it expires after its TTL.
func (c *Client) watchOpen(cancel context.CancelFunc) *context.CancelFunc {
	p := &cancel
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cutOpens {
		cancel()
	} else {
		c.openCut = p
	}
	return p
}

// cutOpen cancels the open-session call in flight, and makes watchOpen cancel any later one.
// It runs on the loop goroutine once the engine has stepped the close, so that the engine
// sees a cut open's reply as the closing client's (it then ends the close at once) and never
// as a backend failure.
func (c *Client) cutOpen() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cutOpens = true
	if c.openCut != nil {
		(*c.openCut)()
	}
}

// unwatchOpen ends what watchOpen(p) began, once the call returned, and reports whether Close
// may have cut it.
func (c *Client) unwatchOpen(p *context.CancelFunc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.openCut == p {
		c.openCut = nil
	}
	return c.cutOpens
}

// call makes the backend call ef asks for with ctx, setting ev's result and error.
func (c *Client) call(ctx context.Context, ef engine.Effect, ev *engine.Event) {
	b := c.backend
	switch ef.Op {
	case engine.OpOpenSession:
		ev.Session, ev.Err = b.OpenSession(ctx, ef.Owner, ef.TTL)
	case engine.OpKeepAlive:
		ev.KeepAlive, ev.Err = b.KeepAlive(ctx, ef.Session, ef.Names, ef.Groups)
	case engine.OpCloseSession:
		ev.Err = b.CloseSession(ctx, ef.Session)
	case engine.OpAcquire:
		if ef.Queue && c.queuer != nil {
			ev.Acquire, ev.Err = c.queuer.AcquireQueued(ctx, ef.Session, ef.Name)
		} else {
			ev.Acquire, ev.Err = b.Acquire(ctx, ef.Session, ef.Name)
		}
		if ef.Once && ev.Acquire.Kind == spi.HeldBy && ev.Err == nil && c.waitEnder != nil {
			// A TryLock does not wait: what the backend noted to hint this session of the
			// name's release would otherwise stay until the wait lapsed (spi.WaitEnder).
			c.waitEnder.EndWait(ef.Session, ef.Name)
		}
	case engine.OpRelease:
		ev.Err = b.Release(ctx, ef.Session, ef.Name, ef.Token)
	case engine.OpJoin:
		ev.Status, ev.Err = b.Join(ctx, ef.Session, ef.Name)
	case engine.OpLeave:
		ev.Status, ev.Err = b.Leave(ctx, ef.Session, ef.Name)
	case engine.OpMembers:
		ev.Members, ev.Err = b.Members(ctx, ef.Name)
	case engine.OpWithdraw:
		if c.queuer != nil {
			ev.Err = c.queuer.Withdraw(ctx, ef.Session, ef.Name)
		}
	}
}

// abandonedError is the error of a call that a request running it on its own goroutine cut
// short because the request's context ended (runCall). It is retryable (its outcome is
// unknown, as a timed-out call's) and therefore does not wrap the context's cause, which
// spi.Classify would make permanent when it is context.Canceled; errors.Is finds
// ErrUnavailable.
type abandonedError struct {
	op, name string
	cause    error
}

func (e *abandonedError) Error() string {
	return fmt.Sprintf("simba: %s %s abandoned: the caller's context ended (%v)", e.op, e.name, e.cause)
}

func (e *abandonedError) Unwrap() error { return ErrUnavailable }

// closeCutError is the failure of a backend call on a session whose close the client had sent
// by the time the call failed (ZooKeeper fails every request in flight on a session being
// closed, the session being its connection; other backends may fail a call racing the close).
// The close subsumes the call — the session's leases, memberships and queue entries end with
// it — and its own failure is reported, so the call's is neither logged at WARN nor sent to
// the listeners (an outside trial saw 1–8 WARN lines at a clean Close of a ZooKeeper client).
// The engine sees the error it wraps, unchanged.
type closeCutError struct{ err error }

func (e *closeCutError) Error() string { return e.err.Error() }
func (e *closeCutError) Unwrap() error { return e.err }

// isCloseCut reports whether err is (or wraps) a *closeCutError.
func isCloseCut(err error) bool {
	if err == nil {
		return false // before the target's declaration: errors.As's target escapes (an allocation per call)
	}
	var cut *closeCutError
	return errors.As(err, &cut)
}

// noteClosing records that the client sent the close of session id (closeCutError).
func (c *Client) noteClosing(id spi.SessionID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing[c.closingNext] = id
	c.closingNext = (c.closingNext + 1) % len(c.closing)
}

// isClosing reports whether the client sent the close of session id, one of its last few.
func (c *Client) isClosing(id spi.SessionID) bool {
	if id == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.closing {
		if x == id {
			return true
		}
	}
	return false
}

// sessionGone reports whether session sid is lost: the client lost it (one of its last few),
// or its local deadline has passed. Owned by whoever steps the engine, as deadlines is.
func (c *Client) sessionGone(sid spi.SessionID) bool {
	if sid == "" {
		return false
	}
	if slices.Contains(c.lost[:], sid) {
		return true
	}
	d := c.deadlines[sid]
	return d != nil && c.cfg.clock.Now() >= time.Duration(d.Load())
}

// isAbandoned reports whether err is (or wraps) an *abandonedError. Only an error needs the
// check: errors.As's target escapes, so asking it of every successful call allocated (it
// did, twice a Lock and Unlock cycle, until nil returned before the target was declared).
func isAbandoned(err error) bool {
	if err == nil {
		return false
	}
	var abandoned *abandonedError
	return errors.As(err, &abandoned)
}

// callDone reports a backend call's outcome on the loop goroutine before the engine sees it:
// a retryable failure is reported here (a permanent one when the engine publishes it), and a
// success clears the permanent error it proves gone. sid is the session the call was made on
// ("" for an open).
func (c *Client) callDone(op engine.Op, name string, sid spi.SessionID, err error) {
	if err != nil && isCloseCut(err) {
		// Not the backend's failure: the session's close subsumes the call, and the close's
		// own outcome is reported.
		c.cfg.logger.Debug("simba call ended by its session's close", "op", publicOp(op), "name", name, "err", err)
		return
	}
	if err != nil && spi.Classify(err) != spi.Permanent && c.sessionGone(sid) {
		// A call on a session the client has lost, or whose local deadline has passed (it is
		// lost as soon as the engine sees the time): its failure is no news, "simba session
		// lost" says it all. Above all after the process was paused (SIGSTOP, a VM or GC
		// stall) past the session's deadline: the keep-alive in flight times out as the
		// process resumes, and the lost session's close fails on a server that has expired
		// it (ZooKeeper: the connection ends under it) — each was a WARN "backend
		// unavailable" and an INFO "reachable again" milliseconds later, an outage that
		// never was.
		c.cfg.logger.Debug("simba call on a lost session failed", "op", publicOp(op), "name", name, "session", sid, "err", err)
		return
	}
	if !isAbandoned(err) {
		// Contention (the backend answered) is no sign of an outage: it arms no probe.
		failed := err != nil && spi.Classify(err) != spi.Permanent && !errors.Is(err, ErrClosed) &&
			!errors.Is(err, spi.ErrContended)
		c.probeCallDone(op, failed, failed && errors.Is(err, errCutStuck))
	}
	switch {
	case err != nil && isAbandoned(err):
		// The caller's context ended, not the backend's doing: nothing to report or clear.
	case err != nil && spi.Classify(err) != spi.Permanent:
		c.backendError(op, name, err, c.cfg.clock.Now())
	case err != nil:
	default:
		if len(c.failLog) > 0 {
			c.callSucceeded(op, name, c.cfg.clock.Now()) // the cause is gone: a recurrence logs again
		}
		switch op {
		case engine.OpOpenSession, engine.OpKeepAlive:
			c.sessErr.clear()
		case engine.OpAcquire, engine.OpJoin:
			if t := c.errTarget(name); t != nil {
				t.errs().clear()
			}
		}
	}
}

// errHolder is a handle or group that keeps its backend errors.
type errHolder interface {
	publisher
	errs() *errNote
}

// errTarget is the handle or group that the errors of calls about name concern (nil if none).
func (c *Client) errTarget(name string) errHolder {
	if name == "" {
		return nil
	}
	if h, ok := c.handleFor(name).(errHolder); ok {
		return h
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[name]; g != nil {
		return g
	}
	return nil
}

// backendError reports a failed backend call (op 0: a request the engine refused): it is
// logged (WARN, or ERROR if permanent; damped while failures repeat: failLevel), kept for Err
// and for request's ctx errors, and emitted as an EventBackendError to the listeners and to the
// handle concerned (for a session call, to every handle and group).
func (c *Client) backendError(op engine.Op, name string, err error, now time.Duration) {
	class := spi.Classify(err)
	level, msg, extra := c.failLevel(op, name, class, err, now)
	opName := ""
	if op != 0 {
		opName = publicOp(op)
		if name != "" {
			err = fmt.Errorf("simba: %s %s: %w", opName, name, err)
		} else {
			err = fmt.Errorf("simba: %s: %w", opName, err)
		}
	}
	// Damped while it repeats (failLevel): a background retry of a call comes about once per
	// BackoffMax, for every name.
	c.cfg.logger.Log(context.Background(), level, msg, append([]any{"op", opName, "name", name, "class", class.String(), "err", err}, extra...)...)
	seq := c.errSeq.Add(1)
	ev := Event{Kind: EventBackendError, At: now, Session: c.eng.SessionID(), Name: name, Op: opName,
		Class: class, Err: err}
	for _, l := range c.cfg.listeners {
		l(ev)
	}
	if t := c.errTarget(name); t != nil {
		t.errs().note(seq, err)
		t.publish(ev)
		return
	}
	if name != "" {
		return
	}
	c.sessErr.note(seq, err)
	c.mu.Lock()
	ps := make([]publisher, 0, len(c.handles)+len(c.groups))
	for _, h := range c.handles {
		ps = append(ps, h)
	}
	for _, g := range c.groups {
		ps = append(ps, g)
	}
	c.mu.Unlock()
	for _, p := range ps {
		p.publish(ev)
	}
}

// errNote keeps the latest backend error reported for a handle, a group or the session, and
// the latest permanent one until a successful call clears it.
type errNote struct {
	mu   sync.Mutex
	seq  uint64
	last error
	perm error
}

func (n *errNote) note(seq uint64, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seq, n.last = seq, err
	if spi.Classify(err) == spi.Permanent {
		n.perm = err
	}
}

func (n *errNote) clear() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.perm = nil
}

// since returns the latest error and its number if it was reported after seq.
func (n *errNote) since(seq uint64) (uint64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seq > seq {
		return n.seq, n.last
	}
	return 0, nil
}

func (n *errNote) permanent() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.perm
}

func (c *Client) readHints(hints <-chan spi.Hint) {
	defer c.calls.Done()
	for h := range hints {
		if h.Kind == spi.Released {
			c.traceHop(hopHint, h.Name)
		}
		if h.Kind == spi.Released && c.handleFor(h.Name) == nil {
			// No election, lock or joined partition of that name: the engine waits for no such
			// lease (an acquire sent after this check sees the release the hint reports), so
			// the hint would only wake the loop for nothing. Backends may hint releases nobody
			// here waits for (PostgreSQL: every release; Redis: a name waited for a moment ago).
			c.settle.hintDone()
			continue
		}
		posted := c.post(func() { c.step(engine.Event{Kind: engine.EvHint, Hint: h}) })
		c.settle.hintDone()
		if !posted {
			// Drain until the backend closes the channel (its context is cancelled).
			for range hints {
				c.settle.hintDone()
			}
			return
		}
	}
}

// handleFor finds the handle of a lease: an election or lock of that name, or else the
// partition of a joined group that the name denotes.
func (c *Client) handleFor(name string) leaseHandle {
	if h := c.handle(name); h != nil {
		return h
	}
	group, p, ok := wire.ParsePartition(name)
	if !ok {
		return nil
	}
	c.mu.Lock()
	g := c.groups[group]
	c.mu.Unlock()
	if g == nil || p >= g.partitions {
		return nil
	}
	return g.partition(p)
}

func (c *Client) handle(name string) leaseHandle {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handles[name]
}

// termLogLevel is the level of the log line of a term granted (reason 0) or revoked (reason)
// to handle h: INFO, but DEBUG for a lock's own cycle, its grant and its Unlock
// (RevokedStopped). A job runner that takes a lock per job would otherwise log two INFO
// lines per job (hundreds a second: 21,000 in 40 s of one process of 16 workers); a lock
// lost otherwise (deadline, takeover, session expiry, Close) stays at INFO, as do every term
// of an election and of a partition.
func termLogLevel(h leaseHandle, reason RevokeReason) slog.Level {
	if _, ok := h.(*lockQueue); ok && (reason == 0 || reason == RevokedStopped) {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// termLogged reports whether the logger takes records of level: the grants and revocations,
// one of each per Lock cycle, build their attributes only then (boxing them for slog
// allocates, even for the default logger, which discards everything).
func (c *Client) termLogged(level slog.Level) bool {
	return c.cfg.logger.Enabled(context.Background(), level)
}

func (c *Client) elected(ef *engine.Effect) {
	c.traceHop(hopElected, ef.Name)
	h := c.handleFor(ef.Name)
	t := newTerm(ef.Name, ef.Token, ef.Owner, c.cfg.clock, c.deadline(ef.Session), ef.Until)
	if level := termLogLevel(h, 0); c.termLogged(level) {
		c.cfg.logger.Log(context.Background(), level, "simba elected", "name", ef.Name, "token", ef.Token, "session", ef.Session)
	}
	c.emit(Event{Kind: EventElected, At: c.eng.Now(), Session: ef.Session, Name: ef.Name, Token: ef.Token, Term: t}, h)
	if h != nil {
		h.elected(t)
		return
	}
	// Nobody wants it any more (its handle is gone): end its work at once.
	name, token := ef.Name, ef.Token
	c.postSelf(func() { c.workExited(name, token) })
}

// workExited steps the exit of the work of term name/token (loop goroutine). When that ends a
// hand-over (Stop or StepDown while the work ran), the hand-over's timer, armed for the
// deadline as of the stop, is stopped: its firing would change nothing (the engine ignores
// it), and a member handing over many partitions would otherwise keep one timer per
// partition for up to a TTL, all firing at the same instant. (A hand-over that ends otherwise
// — the lease or the session lost — leaves its timer to fire; those are rare.)
func (c *Client) workExited(name string, token int64) {
	c.step(engine.Event{Kind: engine.EvWorkExited, Name: name, Token: token})
	if e, ok := c.eng.Election(name); ok && e.State == engine.Handover {
		return // a hand-over still under way (of a later term, when the exit was stale)
	}
	c.disarm(engine.Timer{Kind: engine.TimerHandover, Name: name})
}

// confirmed lifts the own bound of the term ef names (engine rule 6: a keep-alive confirmed
// its grant).
func (c *Client) confirmed(ef *engine.Effect) {
	if h := c.handleFor(ef.Name); h != nil {
		if t, ok := h.termFor(ef.Token); ok {
			t.confirm()
		}
	}
	c.dropGrantTimer(ef.Name)
}

func (c *Client) revoked(ef *engine.Effect) {
	c.dropGrantTimer(ef.Name)
	h := c.handleFor(ef.Name)
	reason := RevokeReason(ef.Reason)
	if level := termLogLevel(h, reason); c.termLogged(level) {
		if p := c.pause.inStep; p > 0 {
			c.cfg.logger.Log(context.Background(), level, "simba revoked", "name", ef.Name, "token", ef.Token, "reason", reason.String(), "session", ef.Session, "paused_for", p.Round(time.Millisecond))
		} else {
			c.cfg.logger.Log(context.Background(), level, "simba revoked", "name", ef.Name, "token", ef.Token, "reason", reason.String(), "session", ef.Session)
		}
	}
	if h != nil {
		if t, ok := h.termFor(ef.Token); ok {
			// Invalidate first (rule 2: revoke before anything else this step asks).
			t.revoke(reason)
			h.revoked(t, reason)
		}
	}
	c.emit(Event{Kind: EventRevoked, At: c.eng.Now(), Session: ef.Session, Name: ef.Name, Token: ef.Token, Reason: reason, Paused: c.pause.inStep}, h)
}

func (c *Client) completeFuture(ef *engine.Effect) {
	f := c.futures[ef.Future]
	if f == nil {
		return
	}
	delete(c.futures, ef.Future)
	if ef.Future == c.closeFut && c.closeFut != 0 {
		c.stopping = true
		var err error
		if ef.Err != nil { // the session's close call failed (see SessionCloseError)
			err = &SessionCloseError{Session: ef.Session, Err: ef.Err}
		}
		c.closeDone.complete(Term{}, err)
		f.complete(Term{}, err)
		c.emit(Event{Kind: EventClosed, At: c.eng.Now()}, nil)
		return
	}
	var t Term
	if ef.Err == nil && ef.Token != 0 {
		if h := c.handle(ef.Name); h != nil {
			t, _ = h.termFor(ef.Token)
		}
	}
	err := ef.Err
	if errors.Is(err, ErrLockHeld) {
		err = &LockHeldError{Name: ef.Name, Holder: ef.Holder, Owner: ef.HolderOwner}
	}
	f.complete(t, err)
}

func (c *Client) published(ef *engine.Effect, now time.Duration) {
	switch ef.Publish {
	case engine.PubSessionOpened:
		dl := c.deadline(ef.Session)
		dl.Store(int64(ef.At))
		c.mu.Lock()
		c.session, c.sessDL = ef.Session, dl
		c.mu.Unlock()
		c.cfg.logger.Info("simba session opened", "session", ef.Session, "owner", c.cfg.owner)
		c.emit(Event{Kind: EventSessionOpened, At: now, Session: ef.Session}, nil)
	case engine.PubSessionLost:
		c.gate.sessionGone(ef.Session)
		c.lost[c.lostNext] = ef.Session
		c.lostNext = (c.lostNext + 1) % len(c.lost)
		c.mu.Lock()
		c.session, c.sessDL = "", nil
		c.mu.Unlock()
		if p := c.pause.inStep; p > 0 {
			c.cfg.logger.Info("simba session lost", "session", ef.Session, "reason", ef.Reason.String(), "paused_for", p.Round(time.Millisecond))
		} else {
			c.cfg.logger.Info("simba session lost", "session", ef.Session, "reason", ef.Reason.String())
		}
		c.emit(Event{Kind: EventSessionExpired, At: now, Session: ef.Session, Reason: RevokeReason(ef.Reason), Paused: c.pause.inStep}, nil)
	case engine.PubSessionClosed:
		c.gate.sessionGone(ef.Session)
		c.mu.Lock()
		c.session, c.sessDL = "", nil
		c.mu.Unlock()
	case engine.PubError:
		c.backendError(ef.Op, ef.Name, ef.Err, now)
	case engine.PubHolder:
		if h, ok := c.handle(ef.Name).(interface{ setHolder(SessionID, string) }); ok {
			h.setHolder(ef.Holder, ef.HolderOwner)
		}
	}
}

// publisher is anything with event subscribers: a lease handle or a group.
type publisher interface{ publish(Event) }

// emit delivers ev to the client's listeners and to p's subscribers.
func (c *Client) emit(ev Event, p publisher) {
	for _, l := range c.cfg.listeners {
		l(ev)
	}
	if p != nil {
		p.publish(ev)
	}
}

// register adds a handle for name, refusing a second handle for the same name; registering
// the handle that has the name already is a no-op.
func (c *Client) register(name string, h leaseHandle) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.awaitStopLocked(context.Background(), name) {
	}
	return c.registerLocked(name, h)
}

// ending is a handle's end under way (a group's Leave, an election's Stop), from the request
// that asks for it, posted while the handle has its name, until the loop takes it: a
// JoinGroup, NewElection or Lock of the name meanwhile waits for it (Client.awaitEndLocked)
// rather than fail as if the handle went on, since a Leave or Stop whose ctx had ended returns
// before a busy loop takes it. Guarded by Client.mu.
type ending struct{ taken chan struct{} }

// begin marks the end as under way (once).
func (e *ending) begin() {
	if e.taken == nil {
		e.taken = make(chan struct{})
	}
}

// done marks the end as taken by the loop, letting whoever waits for it go on.
func (e *ending) done() {
	if e.taken != nil {
		close(e.taken)
		e.taken = nil
	}
}

// awaitEndLocked waits, when end is under way, until the loop takes it, ctx ends or the loop
// exits, and reports whether it waited: the caller looks at the name again. c.mu is held, and
// released while it waits.
func (c *Client) awaitEndLocked(ctx context.Context, end *ending) bool {
	if end.taken == nil || c.closed || ctx.Err() != nil {
		return false
	}
	select {
	case <-c.loopDone:
		return false
	default:
	}
	taken := end.taken
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-taken:
	case <-ctx.Done():
	case <-c.loopDone:
	}
	return true
}

// awaitStopLocked is awaitEndLocked for name's handle, when it is an election.
func (c *Client) awaitStopLocked(ctx context.Context, name string) bool {
	e, ok := c.handles[name].(*Election)
	return ok && c.awaitEndLocked(ctx, &e.stopping)
}

// registerLocked is register with c.mu held.
func (c *Client) registerLocked(name string, h leaseHandle) error {
	if c.closed {
		return ErrClosed
	}
	if err := c.partitionOfJoinedLocked(name); err != nil {
		return err
	}
	switch old := c.handles[name]; {
	case old == h:
	case old != nil:
		if _, ok := old.(*lockQueue); ok {
			return invalid("%q is locked or being locked on this client", name)
		}
		return invalid("%q already has an election on this client", name)
	default:
		c.handles[name] = h
	}
	return nil
}

// partitionOfJoinedLocked refuses name, for an election or a lock, when it is a partition of a
// group this client has joined: the partition's events go to the group (handleFor), and a
// handle of that name would take them. The engine refuses starting such a name too, but only
// once the handle is registered. c.mu is held.
func (c *Client) partitionOfJoinedLocked(name string) error {
	group, p, ok := wire.ParsePartition(name)
	if !ok {
		return nil
	}
	if g := c.groups[group]; g != nil && p < g.partitions {
		return invalid("%q is partition %d of the joined group %q", name, p, group)
	}
	return nil
}

// partitionHandleLocked returns the name of an election or lock of this client that is a
// partition of group with the given partition count, or "". c.mu is held.
func (c *Client) partitionHandleLocked(group string, partitions int) string {
	for name := range c.handles {
		if g, p, ok := wire.ParsePartition(name); ok && g == group && p < partitions {
			return name
		}
	}
	return ""
}

// unregister forgets h as the handle of name.
func (c *Client) unregister(name string, h leaseHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handles[name] == h {
		delete(c.handles, name)
	}
}

// LockHeldError is returned by TryLock when another session holds the lock, or when another
// goroutine of this client holds or is taking it: then Self is set, Holder and Owner are this
// client's session and owner, and the message says "held by this client" rather than naming
// the owner, which would read as some other process holding it (Lock is not reentrant: see
// Lock). errors.Is(err, ErrLockHeld) holds for it either way. The message quotes, with Go
// escapes, an owner or session that is no valid owner (wire.ValidateOwner): both come from the
// store's record, which can be forged, and a raw one could put a terminal escape sequence or a
// fake line into a log.
type LockHeldError struct {
	// Name is the lock's name.
	Name string
	// Holder is the holding session, as the backend reported it (this client's session when
	// Self; empty if it had none at the time).
	Holder SessionID
	// Owner is the holding session's owner string.
	Owner string
	// Self reports that this client holds the lock or is taking it, by another Lock, TryLock
	// or WithLock of the same name: the backend was not asked.
	Self bool
}

// Error implements error.
func (e *LockHeldError) Error() string {
	if e.Self {
		return fmt.Sprintf("simba: lock %s held by this client (another Lock or TryLock of this client holds or is taking it; owner %s, session %s)", e.Name, shown(e.Owner), shown(string(e.Holder)))
	}
	if e.Owner == "" {
		return fmt.Sprintf("simba: lock %s held by session %s", e.Name, shown(string(e.Holder)))
	}
	return fmt.Sprintf("simba: lock %s held by %s (%s)", e.Name, shown(e.Owner), shown(string(e.Holder)))
}

// shown is an owner or session id as an error message may carry it: as it is when it is a
// valid owner, quoted with Go escapes otherwise. Both come from the backend's records, which
// anyone with write access to the store can forge, and status tools escape them; an error
// printed raw let such a record put a terminal escape sequence or a fake log line into the
// logs and terminals the error reaches.
func shown(s string) string {
	if wire.ValidateOwner(s) != nil {
		return strconv.Quote(s)
	}
	return s
}

// Is makes errors.Is(err, ErrLockHeld) hold.
func (e *LockHeldError) Is(target error) bool { return target == ErrLockHeld }

package engine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// election is the per-name record: an election (or lock, or partition) and the bookkeeping of
// the lease of that name (acquire in flight, unknown outcomes).
type election struct {
	name    string
	state   State
	flavor  Flavor
	hasWork bool
	group   *group
	part    int

	// future is the Lock/TryLock future waiting for a grant.
	future FutureID
	// waiters are Stop/StepDown futures waiting for the handover to end.
	waiters []FutureID
	// after is the state a handover ends in (Cooldown after step-down, Ended after stop).
	after State
	// until is the end of the cooldown or handover.
	until time.Duration

	// pendingStart: Start arrived during a handover that ends the election; it becomes a
	// candidate when the handover ends (its old lease released first).
	pendingStart  bool
	pendingFlavor Flavor
	pendingWork   bool
	pendingFuture FutureID
	pendingGroup  *group
	pendingPart   int

	// The acquire. At most one is in flight per name; current says it is the election's
	// current attempt (rule 1).
	inflight ReqID
	current  bool
	retrying bool // a retry timer is armed for retryAt
	retryAt  time.Duration
	// queueUntil is the session's local deadline when the acquire in flight (or the last one)
	// was sent: a queued waiter's entry lives at least that long at the backend (Options.Queue;
	// unused with Options.QueueLivesWithSession, whose entries live with the session).
	queueUntil time.Duration
	// queued: a queued acquire was sent since the last grant, so this session may be a waiter
	// for the name at the backend; an election that stops waiting withdraws (see unqueue).
	queued   bool
	waitSess bool
	hinted   bool
	// Hint-storm damping (see Engine.hint). byHint: the acquire in flight was sent because
	// of a released hint; hintRetry: the armed retry stands for coalesced hints (the acquire
	// it sends counts as sent by a hint); quietUntil: until then hints do not send acquires
	// at once but are coalesced into one retry at quietUntil.
	byHint     bool
	hintRetry  bool
	fails      int
	quietUntil time.Duration
	// backoffRetry: the armed retry waits out a failure's backoff (a retryable error), and
	// inBackingOff: e is in Engine.backingOff; poked: the backend was seen answering while
	// the acquire in flight was, so it is retried at once should it fail (see reachable).
	backoffRetry, inBackingOff, poked bool
	// overtaken: the current attempt's grant was this session's own released token (the
	// acquire overtook the release at the server), so the armed retry is sent early, as soon
	// as the releases of the name in flight have landed (see retryOvertaken); the retry timer
	// stays armed as the fallback. False when the armed retry is not such a one.
	overtaken bool
	// falseHint: a hint proved false at falseHintAt (see onAcquireReply).
	falseHint   bool
	falseHintAt time.Duration
	// unknown: an acquire or release failed (at unknownAt), so the session may hold the
	// lease without knowing; keep-alives ask about it until one sent at least a call timeout
	// (the renewal interval) after unknownAt does not list it (rule 3).
	unknown   bool
	unknownAt time.Duration
	// unknownQueued: a queued acquire's outcome is unknown too, so it may register this
	// session as a waiter when it lands — after the election stopped waiting, and after the
	// withdrawal the stop (or the failure) sent. Such an entry would hold a free lease back
	// for as long as the session lives where entries live with the session
	// (Options.QueueLivesWithSession), and until it lapses (up to a TTL) elsewhere, so the
	// keep-alive that settles the outcome withdraws it (see reconcile).
	unknownQueued bool

	// The term (Leader, Handover).
	token       int64
	adoptedReq  ReqID // the first request id issued after adoption
	workRunning bool
	// grantReq is the request id of the acquire the term was adopted from while no
	// keep-alive that asked about the lease has confirmed it since (0 once one has), and
	// grantUntil the local deadline that grant's own remaining time gives (rule 6). A
	// backend may copy the session's expiry into the lease at grant time and move it only
	// with keep-alives that name the lease (Redis does): a keep-alive sent before the
	// acquire, applied after it, renews the session but not the lease, so until a later
	// keep-alive lists the lease held the term may not outlive grantUntil.
	grantReq   ReqID
	grantUntil time.Duration
	grantArmed bool // TimerGrant is armed at grantUntil (once it is before the session's deadline)

	seenKA     ReqID
	seenToken  int64
	lastHolder spi.SessionID
	// pubHolder and pubOwner are the holder last published (PubHolder), which the client shows
	// (Election.Leader, the status page). A reply that names the holder without its owner (a
	// lease reserved for its first waiter) leaves the owner to a later reply, and adopt clears
	// both, since the client shows this client as the holder from then on and forgets that
	// when the term ends: the holder found after it is published again, even if it was known.
	pubHolder spi.SessionID
	pubOwner  string

	activeIdx int // 1-based position in Engine.active; 0 when absent
}

// sync keeps the active index and the election map in step with e's fields. Call it after
// changing state, inflight or unknown.
func (s *Engine) sync(e *election) {
	want := e.state == Leader || e.state == Handover || e.inflight != 0 || e.unknown
	switch {
	case want && e.activeIdx == 0:
		s.active = append(s.active, e)
		e.activeIdx = len(s.active)
	case !want && e.activeIdx != 0:
		i := e.activeIdx - 1
		last := s.active[len(s.active)-1]
		s.active[i] = last
		last.activeIdx = i + 1
		s.active[len(s.active)-1] = nil
		s.active = s.active[:len(s.active)-1]
		e.activeIdx = 0
	}
	if !want && e.state == Ended && !e.pendingStart && s.elections[e.name] == e {
		delete(s.elections, e.name)
		if e.inBackingOff {
			// Dropped while its retry waited out a backoff: its entry is stale from now on.
			if s.backingOffGone++; 2*s.backingOffGone > len(s.backingOff) {
				s.pruneBackingOff()
			}
		}
	}
}

func (s *Engine) start(ev Event) {
	fail := func(err error) {
		if ev.Future != 0 {
			s.complete(ev.Future, err)
		} else {
			s.emit(Effect{Kind: EfPublish, Publish: PubError, Name: ev.Name, Err: err})
		}
	}
	if s.closing {
		fail(spi.ErrClosed)
		return
	}
	if ev.Flavor > FlavorTryLock {
		fail(errorf(spi.ErrInvalidOption, "flavor %v cannot be started", ev.Flavor))
		return
	}
	if err := wire.ValidateName(ev.Name); err != nil {
		fail(err)
		return
	}
	if gname, p, ok := wire.ParsePartition(ev.Name); ok {
		if g := s.groups[gname]; g != nil && p < g.partitions {
			fail(errorf(spi.ErrInvalidOption, "%q is partition %d of the joined group %q", ev.Name, p, gname))
			return
		}
	}
	e := s.elections[ev.Name]
	if e != nil && e.state != Ended {
		if e.state == Handover && e.after == Ended && !e.pendingStart {
			e.pendingStart, e.pendingFlavor, e.pendingWork, e.pendingGroup = true, ev.Flavor, ev.HasWork, nil
			e.pendingFuture = 0
			if ev.Flavor == FlavorElection {
				s.complete(ev.Future, nil)
			} else {
				e.pendingFuture = ev.Future
			}
			return
		}
		fail(errorf(spi.ErrInvalidOption, "election %q is already running", ev.Name))
		return
	}
	if e == nil {
		e = &election{name: ev.Name}
		s.elections[ev.Name] = e
	}
	e.flavor, e.hasWork, e.group, e.part = ev.Flavor, ev.HasWork, nil, -1
	if ev.Flavor == FlavorElection {
		s.complete(ev.Future, nil)
	} else {
		e.future = ev.Future
	}
	s.becomeCandidate(e)
}

func (s *Engine) startPartition(g *group, p int) {
	name := wire.PartitionName(g.name, p)
	e := s.elections[name]
	if e != nil && e.state != Ended {
		if e.state == Handover && e.after == Ended && (!e.pendingStart || e.pendingFlavor == FlavorPartition) {
			e.pendingStart, e.pendingFlavor, e.pendingWork, e.pendingGroup, e.pendingPart = true, FlavorPartition, g.hasWork, g, p
			e.pendingFuture = 0
		}
		return
	}
	if e == nil {
		e = &election{name: name}
		s.elections[name] = e
	}
	e.flavor, e.hasWork, e.group, e.part = FlavorPartition, g.hasWork, g, p
	s.becomeCandidate(e)
}

func (s *Engine) cancelPendingStart(e *election, err error) {
	if e.pendingStart {
		e.pendingStart = false
		s.complete(e.pendingFuture, err)
		e.pendingFuture = 0
	}
}

// stop handles Stop (stepDown false) and StepDown, and the unassignment of a partition.
func (s *Engine) stop(name string, f FutureID, stepDown bool) {
	e := s.elections[name]
	if e == nil || e.state == Ended {
		s.complete(f, nil)
		return
	}
	if e.flavor == FlavorLock || e.flavor == FlavorTryLock {
		stepDown = false // a lock that steps down is unlocked
	}
	if e.pendingStart && stepDown && e.pendingFlavor != FlavorLock && e.pendingFlavor != FlavorTryLock {
		// Restarted during a stop's handover, then stepped down: a cooldown follows. (A
		// pending lock that steps down is unlocked: cancelled below.)
		e.pendingStart, e.after = false, Cooldown
	}
	s.cancelPendingStart(e, ErrStopped)
	then, reason := Ended, ReasonStopped
	if stepDown {
		then, reason = Cooldown, ReasonSteppedDown
	}
	before := s.lastReq
	var acq ReqID // the acquire in flight that f waits for instead of a withdrawal (cancelAcquire)
	switch e.state {
	case Candidate:
		acq = s.cancelAcquire(e)
		if stepDown {
			s.enter(e, Cooldown)
		} else {
			s.end(e, ErrStopped)
		}
	case Cooldown:
		if !stepDown {
			s.end(e, ErrStopped)
		}
	case Leader:
		if req := s.leaderExit(e, reason, then); req != 0 && e.state != Handover {
			s.completeOnRelease(req, f)
			if e.flavor == FlavorLock || e.flavor == FlavorTryLock {
				p := s.pending[req]
				p.lock = true
				s.pending[req] = p
			}
			return
		}
	case Handover:
		if !stepDown {
			e.after = Ended
		}
	}
	if e.state == Handover {
		if f != 0 {
			e.waiters = append(e.waiters, f)
		}
		return
	}
	if s.lastReq > before && s.pending[s.lastReq].op == OpWithdraw {
		// A waiter that stops returns once it has left the backend's waiter queue, so that
		// the lease it waited for is not held back for others after the stop returns.
		s.completeOnRelease(s.lastReq, f)
		return
	}
	if acq != 0 {
		// Its acquire was the only one that may have made this session a waiter: the stop
		// returns once that acquire is back (at once if it was dropped unsent) and, had it
		// queued, withdrawn — the withdrawal the stop would otherwise have sent itself.
		s.completeOnRelease(acq, f)
		return
	}
	s.complete(f, nil)
}

// cancelAcquire asks the driver to drop the acquire in flight of candidate e, which stops
// waiting (a Stop, a StepDown, an Unlock of a Lock or TryLock whose caller gave up, a
// Close), if it has not been sent yet (EfCancel), as a partition's stop does (awaitAcquire):
// the shell queues acquires behind its bound on calls in flight, and one sent after the stop
// could only take the lease for nobody, held until its release, which other processes'
// waiters wait for. An acquire already sent goes on, and its reply is handled as a stale
// attempt's (a grant released). It returns the acquire's request when that acquire is the
// only one that may have made the session a waiter for the name (a queued attempt sent since
// the last grant): e then no longer counts as queued, so the stop does not withdraw — a
// withdrawal of an entry a dropped acquire never made is a wasted call — and the acquire's
// reply withdraws if it did queue, or may have (a failure other than a refusal: the request
// may have been applied; onAcquireReply). It returns 0 otherwise.
func (s *Engine) cancelAcquire(e *election) ReqID {
	req := e.inflight
	if req == 0 {
		return 0
	}
	p, ok := s.pending[req]
	if !ok || p.op != OpAcquire || p.cancelled {
		return 0
	}
	p.cancelled = true
	s.pending[req] = p
	s.emit(Effect{Kind: EfCancel, Req: req, Op: OpAcquire, Name: e.name})
	if p.queued && !p.queuedBefore && e.queued {
		e.queued = false
		return req
	}
	return 0
}

// completeOnRelease makes future f complete with the reply of Release (or Withdraw) req.
func (s *Engine) completeOnRelease(req ReqID, f FutureID) {
	if f == 0 {
		return
	}
	p := s.pending[req]
	p.futures = append(p.futures, f)
	s.pending[req] = p
}

func (s *Engine) workExited(name string, token int64) {
	e := s.elections[name]
	if e == nil || e.token != token {
		return
	}
	switch e.state {
	case Leader:
		e.workRunning = false
	case Handover:
		s.endHandover(e, true)
	}
}

// enter moves e (not a leader) to Cooldown, Ended or Candidate.
func (s *Engine) enter(e *election, st State) {
	switch st {
	case Cooldown:
		s.unqueue(e)
		e.state, e.current, e.retrying, e.workRunning = Cooldown, false, false, false
		e.until = add(s.now, s.opt.Cooldown)
		s.arm(TimerCooldown, e.name, e.until)
		s.sync(e)
	case Candidate:
		s.becomeCandidate(e)
	default:
		s.end(e, ErrStopped)
	}
}

// end ends e; a Lock future still waiting completes with err.
func (s *Engine) end(e *election, err error) {
	s.unqueue(e)
	e.state, e.current, e.retrying, e.workRunning = Ended, false, false, false
	if e.future != 0 {
		s.complete(e.future, err)
		e.future = 0
	}
	s.sync(e)
}

// unqueue withdraws e from the name's waiter queue at the backend if it may be waiting there:
// a waiter that stops waiting must not hold a free lease back until its entry lapses.
func (s *Engine) unqueue(e *election) {
	if e.queued {
		s.withdraw(e)
	}
}

// withdraw leaves e's name's waiter queue (OpWithdraw) while the session is live, whether or
// not a queued acquire is known to have been sent since the last grant.
func (s *Engine) withdraw(e *election) {
	e.queued = false
	if s.sess.state == SessionLive {
		s.call(OpWithdraw, s.sess.id, pending{name: e.name}, Effect{Name: e.name})
	}
}

func (s *Engine) becomeCandidate(e *election) {
	e.state, e.current, e.retrying, e.fails, e.hinted, e.workRunning = Candidate, false, false, 0, false, false
	e.hintRetry = false
	if e.inflight == 0 {
		s.acquire(e)
	} else {
		s.sync(e) // the stale attempt's reply will start the new one
	}
}

// acquire sends e's acquire, or queues e for the next live session. A TryLock waits for a
// session only while an open is in flight (its outcome is at most one call timeout away):
// with none in flight — the backend is failing and the next open waits for its backoff, or
// the session was just lost — it fails at once with spi.ErrUnavailable (noSessionErr), and
// it fails the same way when the open it waited for fails (onOpenReply). It makes one
// attempt: it never waits out an outage. A Lock waits for the next session, except when the
// last open was refused for good and the next is not in flight yet (it waits for its
// backoff, BackoffMax/2 to BackoffMax): then it fails at once with that refusal, as a TryLock
// does, rather than wait for the next open only to be refused again (see "Permanent errors"
// in the package doc); an open in flight it waits for, whatever the last one's error. In a
// live session whose last keep-alive was refused for good (revoked credentials, a dropped
// schema) and whose next is not in flight yet, a Lock or TryLock fails at once with that
// refusal too, without an acquire the backend would refuse the same way; with a keep-alive in
// flight it makes its attempt as usual, and a keep-alive that succeeds lets them acquire again.
func (s *Engine) acquire(e *election) {
	if s.sess.state == SessionLive && s.sess.kaErr != nil && s.sess.kaReq == 0 &&
		(e.flavor == FlavorLock || e.flavor == FlavorTryLock) {
		s.end(e, fmt.Errorf("simba: acquire %s: the session's keep-alive was refused: %w", e.name, s.sess.kaErr))
		return
	}
	if s.sess.state != SessionLive {
		if s.sess.state == SessionOpening && s.sess.openReq == 0 &&
			(e.flavor == FlavorTryLock || (e.flavor == FlavorLock && s.permanentOpenErr())) {
			s.end(e, s.noSessionErr(e.name))
			return
		}
		if !e.waitSess {
			e.waitSess = true
			s.waiting = append(s.waiting, e)
		}
		s.sync(e)
		return
	}
	e.retrying, e.hinted, e.backoffRetry, e.poked, e.overtaken = false, false, false, false, false
	e.byHint, e.hintRetry = e.hintRetry, false
	queue := s.opt.Queue && e.flavor != FlavorTryLock
	e.queueUntil = s.sess.deadline
	before := e.queued
	e.queued = e.queued || queue
	e.inflight = s.call(OpAcquire, s.sess.id, pending{e: e, name: e.name, queued: queue, queuedBefore: before}, Effect{Name: e.name, Queue: queue, Once: e.flavor == FlavorTryLock})
	e.current = true
	s.sync(e)
}

// noSessionErr is the error of a TryLock of name that finds no live session to make its
// attempt in: retryable (spi.ErrUnavailable), wrapping the last open's error if one failed —
// unless that error is permanent (a missing schema, a TTL the server refuses), which comes
// back as itself, as it does to a Lock or TryLock that waited for that open (see "Permanent
// errors" in the package doc): ErrUnavailable would say that retrying may help.
func (s *Engine) noSessionErr(name string) error {
	if s.sess.openErr != nil {
		if spi.Classify(s.sess.openErr) == spi.Permanent {
			return fmt.Errorf("simba: acquire %s: no live session: opening one failed: %w", name, s.sess.openErr)
		}
		return spi.Unavailable("acquire "+name, fmt.Errorf("no live session: opening one failed: %w", s.sess.openErr))
	}
	return spi.Unavailable("acquire "+name, errNoSession)
}

// errNoSession is the cause of a TryLock's failure when no session is live and no open has
// failed yet (the session was just lost, or is reopened after a backoff).
var errNoSession = errors.New("no live session")

func (s *Engine) retryLater(e *election, at time.Duration) {
	e.retrying, e.retryAt, e.backoffRetry, e.overtaken = true, max(at, s.now), false, false
	s.arm(TimerRetry, e.name, e.retryAt)
	s.sync(e)
}

// onAcquireNotSent handles an acquire the driver dropped unsent on an EfCancel: nothing was
// acquired nor queued, and its outcome is known. The Leave parts waiting for it are done.
func (s *Engine) onAcquireNotSent(p pending, ev Event) {
	for _, f := range p.futures {
		s.complete(f, nil)
	}
	e := p.e
	if e.inflight != ev.Req {
		return // from a session already lost
	}
	e.inflight, e.current = 0, false
	if p.queued && !p.queuedBefore {
		e.queued = false // nothing to withdraw for it
	}
	s.forget(e.name, false)
	s.afterStale(e) // a partition started again meanwhile sends its own attempt now
}

func (s *Engine) onAcquireReply(p pending, ev Event) {
	e := p.e
	// futs are the Leave parts waiting for this acquire (see awaitAcquire): they complete with
	// ferr when this reply is handled, unless moved to the release of what it was granted.
	futs := p.futures
	var ferr error
	defer func() {
		for _, f := range futs {
			s.complete(f, ferr)
		}
	}()
	if e.inflight != ev.Req {
		return // from a session already lost
	}
	e.inflight = 0
	defer s.forget(e.name, false)
	current := e.current && e.state == Candidate
	e.current = false
	sent := s.sentAt(p, ev)
	if ev.Err != nil {
		if spi.Classify(ev.Err) != spi.Permanent && p.gen == s.sess.gen && s.sess.state == SessionLive {
			ferr = fmt.Errorf("simba: acquire of %s: outcome unknown, the next keep-alives settle it: %w", e.name, ev.Err)
		}
		// The call was abandoned now; the backend may still apply it, so keep-alives ask
		// about the name until one sent a call timeout from now says otherwise. A permanent
		// refusal is a certain answer: nothing was acquired (nor queued), so it leaves the
		// outcome as it was (an earlier attempt of unknown outcome stays unknown) and brings
		// no keep-alive forward; the retry or the Lock's error follows as for any failure.
		if spi.Classify(ev.Err) != spi.Permanent {
			e.unknown, e.unknownAt = true, s.now
			e.unknownQueued = e.unknownQueued || p.queued
			s.settleSoon()
		} else if p.queued && !p.queuedBefore {
			e.queued = false // no entry to withdraw should the election stop waiting
		}
		s.failed(OpAcquire, e.name, ev.Err)
		switch {
		case !current:
			if p.queued && spi.Classify(ev.Err) != spi.Permanent && e.state != Candidate {
				// A queued attempt of an election that no longer waits failed, or was cut
				// short with its caller: it may have registered this session as a waiter
				// already, so withdraw now (the stop's future waits for that), as after a
				// late HeldBy; the keep-alive that settles its outcome withdraws once more,
				// should the request land later still (reconcile).
				futs = s.withdrawLate(e, futs)
			}
			s.afterStale(e)
		case (e.flavor == FlavorLock || e.flavor == FlavorTryLock) && spi.Classify(ev.Err) == spi.Permanent:
			s.end(e, ev.Err) // as it is: not ErrUnavailable, which says that retrying may help
		case e.flavor == FlavorTryLock:
			s.end(e, spi.Unavailable("acquire "+e.name, ev.Err))
		case e.poked && spi.Classify(ev.Err) != spi.Permanent:
			// The backend answered meanwhile (reachable): this attempt was stuck.
			e.fails++
			s.retryLater(e, s.soon())
		case e.hinted && spi.Classify(ev.Err) != spi.Permanent:
			// A released hint came while this attempt was in flight, and the attempt failed:
			// the hint earns its follow-up (as after a HeldBy) at once, not after the
			// failure's backoff, as a hint that comes during the backoff does (Engine.hint).
			// The hint of a release right after a server's restart met an attempt failing
			// on a connection the restart broke and was lost: the waiter tried again at its
			// backoff, up to a renewal interval later. The follow-up opens a hint window (or
			// waits for the end of one already open), so a storm of hints against a failing
			// backend adds at most one attempt per window.
			e.fails++
			if !s.coalesceHint(e) {
				e.quietUntil = add(s.now, s.hintWindow())
				e.hintRetry = true
				s.retryLater(e, s.soon())
			}
		default:
			e.fails++
			s.retryLater(e, add(s.now, s.backoff(e.fails, ev.Err)))
			if spi.Classify(ev.Err) != spi.Permanent {
				e.backoffRetry = true
				if !e.inBackingOff {
					e.inBackingOff = true
					s.backingOff = append(s.backingOff, e)
				}
			}
		}
		e.poked = false
		return
	}
	a := ev.Acquire
	switch a.Kind {
	case spi.SessionExpired:
		if s.backendExpired() {
			if e.state == Candidate {
				s.acquire(e) // queued for the new session
			}
			return
		}
		e.fails++
		s.retryLater(e, add(s.now, s.backoff(e.fails, nil)))
	case spi.HeldBy:
		e.fails = 0
		// quiet: hints already proved false less than a hintWindow ago. An attempt a released
		// hint sent that finds the same holder still there proves this one false (or the
		// holder took the lease back). One false hint is common and harmless — a late hint of
		// the previous tenure's release, just before the genuine one — so it changes nothing;
		// a second within a hintWindow of the first is a storm: hints for this name in the
		// next hintWindow are coalesced into one retry at its end (see Engine.hint).
		quiet := s.now < e.quietUntil
		if current && e.byHint && a.Holder == e.lastHolder && (a.RemainingUnknown || a.Remaining > 0) {
			if e.falseHint && s.now <= add(e.falseHintAt, s.hintWindow()) {
				e.quietUntil = add(s.now, s.hintWindow())
			}
			e.falseHint, e.falseHintAt = true, s.now
		}
		e.lastHolder = a.Holder
		if a.Holder != e.pubHolder || (a.HolderOwner != "" && a.HolderOwner != e.pubOwner) {
			e.pubHolder, e.pubOwner = a.Holder, a.HolderOwner
			s.emit(Effect{Kind: EfPublish, Publish: PubHolder, Name: e.name, Holder: a.Holder, HolderOwner: a.HolderOwner})
		}
		switch {
		case !current:
			if p.queued && e.state != Candidate {
				// A late queued attempt registered this session after it stopped waiting.
				futs = s.withdrawLate(e, futs)
			}
			s.afterStale(e)
		case e.flavor == FlavorTryLock:
			e.future = s.completeHeld(e.future, e.name, a)
			s.end(e, nil)
		case e.hinted && !quiet:
			// A released hint arrived meanwhile: this HeldBy may be stale; try again at once
			// (one follow-up for every hint that came during the attempt).
			e.hintRetry = true
			s.acquire(e)
		default:
			var at time.Duration
			if a.RemainingUnknown {
				// The hint should come first; this is the fallback, should it be lost (see
				// unknownRetry).
				at = add(s.now, s.unknownRetry())
			} else {
				// The holder's remaining is clamped to [0, TTL]: a hostile or buggy reply can
				// make this candidate poll once per TTL at worst, never wait for ever.
				rem := min(max(a.Remaining, 0), s.opt.TTL)
				at = add(add(sent, rem), time.Duration(s.jitter*float64(s.opt.RetryJitter)))
			}
			if s.opt.Queue && !s.opt.QueueLivesWithSession && e.flavor != FlavorTryLock {
				// Fairness: the waiter's entry expires with the session's expiry as of the
				// attempt, which is no earlier than the local deadline then; re-attempt
				// before it so the entry keeps its place (but not sooner than half a
				// renewal interval from now, should keep-alives be failing). An entry that
				// lives with its session (QueueLivesWithSession) keeps its place while the
				// keep-alives keep the session alive: no re-attempt is needed for it.
				at = min(at, max(e.queueUntil, add(s.now, s.opt.RenewInterval/2)))
			}
			if e.hinted && e.quietUntil < at { // a quiet window: coalesced
				at, e.hintRetry = e.quietUntil, true
			}
			e.hinted = false
			s.retryLater(e, at)
		}
	case spi.Granted:
		// Rule 1: adopt only from the current attempt, before the deadline (checked on
		// entry to Step: a live session), with a token above every token this session
		// released for the name.
		adopt := current && a.Token > s.sess.released[e.name]
		if s.opt.Break == Rule1 {
			adopt = e.state == Candidate
		}
		// Rule 6: the grant is good until its own remaining time at most.
		until := s.deadlineFrom(sent, a.Remaining)
		if adopt && s.opt.Break != Rule6 && s.now >= until {
			// Granted, but by its own word the lease has lapsed already (the reply took longer
			// than the time it grants): not a term; release it and try again. A grant with no
			// time at all breaks the SPI (Granted.Remaining is in (0, ttl]): say so, since the
			// election would otherwise retry without end in silence.
			if a.Remaining <= 0 {
				s.emit(Effect{Kind: EfPublish, Publish: PubError, Op: OpAcquire, Name: e.name,
					Err: spi.AsPermanent(fmt.Errorf("backend granted %s (token %d) with remaining %v: a grant's remaining time must be in (0, ttl] (spi.Acquire)", e.name, a.Token, a.Remaining))})
			}
			e.fails++
			s.release(e.name, a.Token)
			s.retryLater(e, add(s.now, s.backoff(e.fails, nil)))
			return
		}
		if adopt {
			s.adopt(e, a.Token, ev.Req, until)
			return
		}
		if req := s.release(e.name, a.Token); req != 0 {
			// A Leave waiting for this acquire waits for the release of its grant too.
			for _, f := range futs {
				s.completeOnRelease(req, f)
			}
			futs = nil
		}
		if current {
			// Our own released token came back: the acquire overtook the release at the
			// server (the engine does not wait for the release before the next acquire).
			// The retry goes out as soon as the releases of the name in flight have landed
			// (retryOvertaken): the lease is free at the server then, or someone else's,
			// which the retry's reply says. The backoff stays armed as the fallback should
			// one fail or be lost.
			e.fails++
			s.retryLater(e, add(s.now, s.backoff(e.fails, nil)))
			e.overtaken = true
			return
		}
		s.afterStale(e)
	default:
		e.fails++
		s.retryLater(e, add(s.now, s.backoff(e.fails, nil)))
	}
}

// withdrawLate withdraws e, which no longer waits, from its name's waiter queue after a late
// queued attempt (answered HeldBy, or failed: it may have queued the session), and returns
// futs, the futures waiting for that attempt, unless they now wait for the withdrawal (nil).
func (s *Engine) withdrawLate(e *election, futs []FutureID) []FutureID {
	e.queued = true
	before := s.lastReq
	s.unqueue(e)
	if s.lastReq > before {
		for _, f := range futs {
			s.completeOnRelease(s.lastReq, f)
		}
		return nil
	}
	return futs
}

// afterStale continues after the reply of an attempt that is no longer current: a restarted
// candidate sends its own attempt now.
func (s *Engine) afterStale(e *election) {
	if e.state == Candidate && e.inflight == 0 {
		s.acquire(e)
		return
	}
	s.sync(e)
}

func (s *Engine) completeHeld(f FutureID, name string, a spi.Acquire) FutureID {
	if f != 0 {
		s.emit(Effect{Kind: EfComplete, Future: f, Name: name, Holder: a.Holder, HolderOwner: a.HolderOwner,
			Err: errorf(spi.ErrLockHeld, "%s held by %s (session %s)", name, a.HolderOwner, a.Holder)})
	}
	return 0
}

// adopt makes e a leader with token, from the grant of acquire req, good until until by the
// grant's own remaining time (rule 6).
func (s *Engine) adopt(e *election, token int64, req ReqID, until time.Duration) {
	e.state, e.token, e.adoptedReq = Leader, token, s.lastReq+1
	e.pubHolder, e.pubOwner = "", ""
	e.grantReq, e.grantUntil, e.grantArmed = 0, math.MaxInt64, false
	if s.opt.Break != Rule6 {
		e.grantReq, e.grantUntil = req, until
		s.armGrant(e)
	}
	e.queued = false // the grant removed this session's entry
	// An earlier attempt of unknown outcome stays unknown: it may still land after this
	// adoption (and after a release), so keep-alives keep asking about the name (rule 3).
	e.workRunning, e.fails = e.hasWork, 0
	at := s.termDeadline(e)
	ef := Effect{Kind: EfElected, Name: e.name, Token: token, Session: s.sess.id, Owner: s.opt.Owner, At: at, Until: e.grantUntil, Partition: -1}
	if e.group != nil {
		ef.Group, ef.Partition = e.group.name, e.part
	}
	s.emit(ef)
	if e.future != 0 {
		s.emit(Effect{Kind: EfComplete, Future: e.future, Name: e.name, Token: token, Session: s.sess.id, At: at})
		e.future = 0
	}
	s.sync(e)
}

// termDeadline is the local deadline of e's term: the session's, or the term's own bound
// while no keep-alive has confirmed it, whichever is first (rule 6).
func (s *Engine) termDeadline(e *election) time.Duration {
	return min(s.sess.deadline, e.grantUntil) // grantUntil is math.MaxInt64 once confirmed
}

// armGrant arms e's TimerGrant once its own bound is before the session's deadline (until
// then the session's deadline timer comes first).
func (s *Engine) armGrant(e *election) {
	if !e.grantArmed && e.grantUntil < s.sess.deadline {
		e.grantArmed = true
		s.arm(TimerGrant, e.name, e.grantUntil)
	}
}

// grantLapsed ends e's term at its own bound (rule 6) when no keep-alive confirmed it in
// time: the lease may have expired at the backend, so the term is revoked and the lease
// released (it may still be held) before the election goes on.
func (s *Engine) grantLapsed(e *election) {
	switch e.state {
	case Leader:
		s.revoke(e, ReasonDeadline)
		s.release(e.name, e.token)
		s.afterLoss(e)
	case Handover:
		s.endHandover(e, true)
	}
}

// revoke ends e's term (the lease may still be held: the caller releases it after). The term
// is the current session's: a lost session's terms are revoked before its id is dropped.
func (s *Engine) revoke(e *election, reason Reason) {
	s.emit(Effect{Kind: EfRevoked, Name: e.name, Token: e.token, Session: s.sess.id, Reason: reason})
}

// afterLoss continues after a leader lost its term involuntarily: a candidate again, except
// locks, which end (they never re-acquire behind their caller's back).
func (s *Engine) afterLoss(e *election) {
	if e.flavor == FlavorLock || e.flavor == FlavorTryLock {
		s.end(e, nil)
		return
	}
	s.becomeCandidate(e)
}

// leaderExit ends a leader's term voluntarily (stop, step-down, close): rule 2 revokes before
// releasing; rule 5 keeps the lease while the work runs.
// It returns the request id of the Release it sent (0 if none: a handover, or no live session).
func (s *Engine) leaderExit(e *election, reason Reason, then State) ReqID {
	work := e.workRunning
	if s.opt.Break == Rule2 {
		req := s.release(e.name, e.token)
		s.revoke(e, reason)
		s.enter(e, then)
		return req
	}
	s.revoke(e, reason)
	if work && s.opt.Break != Rule5 {
		e.state, e.after, e.until = Handover, then, s.termDeadline(e)
		s.handovers++
		s.arm(TimerHandover, e.name, e.until)
		s.sync(e)
		return 0
	}
	req := s.release(e.name, e.token)
	s.enter(e, then)
	return req
}

// endHandover ends e's handover (work exited, deadline passed, or the lease is lost).
func (s *Engine) endHandover(e *election, release bool) {
	s.handovers--
	var req ReqID
	if release {
		req = s.release(e.name, e.token)
	}
	for _, f := range e.waiters {
		if req != 0 {
			s.completeOnRelease(req, f)
		} else {
			s.complete(f, nil)
		}
	}
	e.waiters = nil
	e.state, e.workRunning = Ended, false
	if e.pendingStart {
		e.pendingStart = false
		e.flavor, e.hasWork, e.group, e.part = e.pendingFlavor, e.pendingWork, e.pendingGroup, e.pendingPart
		if e.group == nil {
			e.part = -1
		}
		e.future, e.pendingFuture = e.pendingFuture, 0
		s.becomeCandidate(e)
	} else {
		s.enter(e, e.after)
	}
	s.maybeFinishClose()
}

// release frees name's lease with token and remembers the token (rule 1). It returns the
// request id of the Release call, or 0 when there is no session to release from.
func (s *Engine) release(name string, token int64) ReqID {
	if s.sess.state != SessionLive && s.sess.state != SessionClosing {
		return 0 // the session is gone, and its leases with it
	}
	if s.sess.released == nil {
		s.sess.released = make(map[string]int64)
		s.sess.releasing = make(map[string]int)
	}
	if token > s.sess.released[name] {
		s.sess.released[name] = token
	}
	s.sess.releasing[name]++
	return s.call(OpRelease, s.sess.id, pending{name: name, token: token}, Effect{Name: name, Token: token})
}

// forget drops the session's release bookkeeping of name once nothing about it is in flight
// (see session.released). A release that failed keeps it: its outcome is unknown, and rule 3
// releases again.
func (s *Engine) forget(name string, releaseFailed bool) {
	if releaseFailed || s.sess.releasing[name] > 0 {
		return
	}
	if e := s.elections[name]; e != nil && (e.inflight != 0 || e.unknown) {
		return
	}
	delete(s.sess.released, name)
	delete(s.sess.releasing, name)
}

func (s *Engine) onReleaseReply(p pending, ev Event) {
	// Stop and StepDown return when the lease is released. When the release failed its outcome
	// is unknown; keep-alives settle it (rule 3), and the caller is told so.
	// A release that failed while the client is closing (a close that cut it short, as
	// ZooKeeper's does, or a call that failed by itself) is left to the session's close, which
	// releases the lease: its futures complete once that close is done, with an error matching
	// spi.ErrClosed, as they do when the close is done before this reply comes in. They
	// completed at once with nothing while the session's close was in flight, as if the lease
	// had been released (close-cut-release.txt).
	var ferr error
	switch {
	case ev.Err != nil && s.closing && s.sess.state != SessionClosed:
		for _, f := range p.futures {
			s.closeCut = append(s.closeCut, closeCutFuture{f: f, err: closeCutErr(p.name, ev.Err)})
		}
		p.futures = nil
	case ev.Err != nil && s.closing:
		ferr = closeCutErr(p.name, ev.Err)
	case ev.Err != nil && p.gen == s.sess.gen && s.sess.state == SessionLive:
		ferr = fmt.Errorf("simba: release of %s: outcome unknown, the next keep-alives settle it: %w", p.name, ev.Err)
	case ev.Err != nil && p.lock:
		// The session that held the lease was lost before the release could free it: the
		// lease went with the session (or lapses at its TTL at a backend that has not noticed
		// yet), so the lock was lost before its Unlock released it, and the Unlock says so
		// as one taken after the loss does (its term's RevokedError), not with nothing, as if
		// the release had freed the lease (release-lost.txt). A Stop or Leave completes with
		// nothing: what it waits for, the client holding nothing of the name, is done, as
		// when the session is lost during its handover or before it.
		reason := s.lostReason
		if p.gen != s.lostGen {
			reason = ReasonDeadline // a session lost before the last one: its reason is gone
		}
		ferr = &ReleaseLostError{Name: p.name, Token: p.token, Reason: reason, Err: ev.Err}
	}
	for _, f := range p.futures {
		s.complete(f, ferr)
	}
	if p.gen != s.sess.gen {
		return // the session is gone, and its bookkeeping with it
	}
	if s.sess.releasing[p.name]--; s.sess.releasing[p.name] <= 0 {
		delete(s.sess.releasing, p.name)
		if ev.Err == nil {
			s.retryOvertaken(p.name) // before forget: rule 1 keeps refusing the released token
			s.forget(p.name, false)
		}
	}
	if ev.Err == nil || s.sess.state != SessionLive {
		return
	}
	s.failed(OpRelease, p.name, ev.Err)
	// The lease may still be ours: keep-alives ask about it, and rule 3 releases it again.
	e := s.elections[p.name]
	if e == nil {
		e = &election{name: p.name, part: -1}
		s.elections[p.name] = e
	}
	e.unknown, e.unknownAt = true, s.now
	e.overtaken = false // an overtaken attempt's retry waits for its backoff, as before
	s.sync(e)
}

// retryOvertaken sends at once the retry of candidate name whose current attempt was granted
// this session's own released token (e.overtaken: the acquire overtook the release at the
// server), once the last release of the name in flight has landed, every one of them since
// that grant successfully: each release is conditioned on the session and the token, and the
// last one was sent after the grant came back, so the lease is free at the server now — or
// someone else's, which the retry's reply says. Waiting for the last release, not the first,
// sends no acquire while a release of the name is still on its way: such a release could
// otherwise land after the retry's new grant, and a backend whose release were conditioned on
// less than the token (ZooKeeper's releases of a lease it thinks held compare the node's
// version, which a new node of the same session has too) would free the new term's lease.
// A failed release leaves the retry to its backoff (onReleaseReply clears e.overtaken), as
// does an outcome still unknown (e.unknown): a call of unknown outcome may still land.
func (s *Engine) retryOvertaken(name string) {
	e := s.elections[name]
	if e == nil || !e.overtaken {
		return
	}
	if e.state == Candidate && e.inflight == 0 && e.retrying && !e.unknown &&
		s.sess.state == SessionLive && !s.closing {
		s.acquire(e) // clears retrying and overtaken: the timer's firing is ignored
	}
}

package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/simba-go/simba/internal/joinerr"
	"github.com/simba-go/simba/spi"
)

// ErrStopped completes the future of a Lock whose election was stopped (or stepped down)
// before it was granted.
var ErrStopped = errors.New("simba: election stopped before it was elected")

// ErrLeft completes the future of a Join that waited for an earlier Leave of its group to be
// done when a Leave of the group cancelled it (the shell's, for a JoinGroup given up on).
var ErrLeft = errors.New("simba: group left before it was joined")

// Engine is the state of one client: its session, elections and groups. It is not safe for
// concurrent use: one goroutine (the shell's loop, or the simulator) owns it and calls Step.
type Engine struct {
	opt    Options
	now    time.Duration
	out    []Effect
	jitter float64

	lastReq ReqID
	booted  bool
	closing bool
	losing  bool // inside loseSession: Close finishes after it, not in the middle

	sess      session
	closeFuts []FutureID
	// closeCut holds the futures of Stops (an Unlock's, a Leave's part) whose release failed
	// while the client was closing, and those of Leaves whose membership was still to be
	// deleted when Close came: the session's close releases those leases and deletes those
	// memberships, and the futures complete once it is done (closed), with an error matching
	// spi.ErrClosed (closeCutErr, leaveCutErr), as they would had the close been done before
	// their release's reply came in.
	closeCut []closeCutFuture
	// closeErr is what Close's futures complete with once the client is closed: nil, or the
	// error of the session's close call (see closed), kept for the Closes that come after.
	closeErr error
	// staleClose holds the sessions lost to their deadline whose best-effort close failed
	// retryably (the backend was unreachable): each is closed once more when the next session
	// opens, the backend answering again. Until then the backend holds their leases, and
	// waiters wait for them to expire; a server restarted in the outage may even have extended
	// them (etcd's new leader renews every lease: a lost holder's lease outlived the restart by
	// up to 2 × TTL in the chaos campaign of 2026-12-05, seed 1205).
	staleClose []spi.SessionID
	// lostGen and lostReason are the generation and reason of the last session lost
	// (loseSession), for a release of that session failing after the loss (ReleaseLostError).
	lostGen    uint64
	lostReason Reason
	// shortLived counts the sessions in a row that were lost within one renewal interval of
	// their opening (a backend that grants no time, or expires every session at once): from
	// the second, the next session is opened after a backoff, not at once, so such a backend
	// is not hammered with opens as fast as it answers.
	shortLived int
	handovers  int
	// reachQuiet: until then, signs that the backend answers again change nothing (see
	// reachable); backingOff holds the candidates whose retry waits out a failure's backoff
	// (entries may be stale: check backoffRetry), and groupsBackingOff the groups whose Join or
	// Leave retry does, or whose members read failed (stale too: check group.backoffRetry and
	// membersFailed). backingOffGone counts the entries of backingOff whose election was
	// dropped since it was last pruned: once they are half of it, it is pruned (pruneBackingOff),
	// so a client that starts and drops elections while its calls fail, and sees no sign that
	// would prune it, does not grow it without bound.
	reachQuiet       time.Duration
	backingOff       []*election
	backingOffGone   int
	groupsBackingOff []*group
	groupsGone       int // as backingOffGone, for groupsBackingOff
	// lastFail is when the latest call failed: only a success of a call sent after it is a
	// sign that the backend answers again.
	lastFail time.Duration

	elections map[string]*election
	// active holds the elections a keep-alive must ask about: those in Leader or Handover,
	// with an acquire in flight, or with an acquire or release of unknown outcome. Nothing
	// per event iterates over all elections; the keep-alive and session loss iterate active.
	active []*election
	// waiting holds candidates that wait for a live session (entries may be stale: check
	// waitSess).
	waiting []*election

	groups     map[string]*group
	groupNames []string // sorted keys of groups

	pending map[ReqID]pending
	// scratchNames is staleClosed's buffer.
	scratchNames []string
	scratch      []*election
	scratch2     []*election

	// barriers are the waits behind the engine's own futures (see part); lastPart numbers them.
	barriers map[FutureID]*barrier
	lastPart FutureID
}

// internalFuture marks the futures the engine makes for itself: a Leave waits for each of its
// partitions' stops through one. The shell numbers its futures from 1 and never reaches it.
const internalFuture FutureID = 1 << 63

// barrier completes its futures once every part it waits for is done, with the first error a
// part reported. A Leave's parts: each partition it stops (done when the lease is released or
// the session that held it is gone) and the group's membership (done when it is deleted).
type barrier struct {
	futs  []FutureID
	parts int
	errs  []error
}

type session struct {
	state    SessionState
	gen      uint64
	id       spi.SessionID
	deadline time.Duration
	openReq  ReqID
	openAt   time.Duration
	fails    int
	kaReq    ReqID
	kaAt     time.Duration
	// settleAt, when not zero, is when a keep-alive should ask about an acquire whose
	// outcome became unknown (see settleSoon): the first keep-alive sent at or after it
	// clears it.
	settleAt time.Duration
	closeReq ReqID
	// poked: the backend was seen answering (reachable) while this session's open or a
	// failing keep-alive was in flight: should that call fail, it is retried at once rather
	// than after a backoff.
	poked    bool
	openedAt time.Duration // when the open reply came
	// openErr is the error of this session's last failed open (nil if none failed): a
	// TryLock that finds no session and no open in flight fails with it (see noSessionErr).
	openErr error
	// kaErr is the permanent error that refused this session's last keep-alive (nil once one
	// succeeds, and for a new session): a Lock or TryLock that comes while the next keep-alive
	// waits for its retry fails with it at once, without an acquire (see acquire).
	kaErr error
	// released is the highest token this session released per name (rule 1), and releasing
	// the number of its releases in flight per name. A name's entries are dropped once no
	// release and no acquire for it is in flight and the last release succeeded (forget): an
	// acquire sent after that is handled after the release, so its token is a new tenure's,
	// above every token released. So the maps hold only names with calls in flight or of
	// unknown outcome, not every name the session ever released.
	released  map[string]int64
	releasing map[string]int
	// leftUnknown holds, per group, until when a Leave this session sent may still land: the
	// call failed at least once other than by a refusal (a timeout, a lost connection), and
	// its request may be applied up to one call timeout after the failure. A Join of the group
	// is not sent before then (sendJoin), or the late Leave would delete the membership it
	// makes. Entries are dropped when a Join finds them past; a new session starts empty (the
	// Leave could only delete the old session's membership).
	leftUnknown map[string]time.Duration
}

type pending struct {
	op    Op
	gen   uint64
	sent  time.Duration
	e     *election
	g     *group
	name  string
	token int64
	// queued: the acquire waited in the name's queue (Effect.Queue); queuedBefore: the
	// election may already have been waiting there when it was sent (election.queued), so a
	// refusal of this attempt, which queued nothing, leaves it so.
	queued, queuedBefore bool
	// futures are Stop/StepDown futures that complete with this Release's reply: they return
	// when the lease is released, not merely when the release was sent. On an acquire, they
	// are the parts of a Leave that wait for it (see awaitAcquire): they complete with its
	// reply, or with the release of what it was granted.
	futures []FutureID
	// cancelled: an EfCancel was emitted for this acquire (see awaitAcquire).
	cancelled bool
	// lost is the session a lost session's best-effort close closes (OpCloseSession) if that
	// close should be retried once after the next open (staleClose) when it fails retryably.
	lost spi.SessionID
	// stale marks the close of a lost session sent once more after the next open (staleClose).
	stale bool
	// lock: futures holds a lock's stop (an Unlock's), which says when its release fails
	// after its session was lost (ReleaseLostError).
	lock bool
}

// New returns an engine for opts, resolved by Options.Resolve (which fills only the derived
// defaults; start from Defaults() for the others). It does nothing until it is stepped with
// Boot.
func New(opts Options) (*Engine, error) {
	o, err := opts.Resolve()
	if err != nil {
		return nil, err
	}
	return &Engine{
		opt:       o,
		elections: make(map[string]*election),
		groups:    make(map[string]*group),
		pending:   make(map[ReqID]pending),
		barriers:  make(map[FutureID]*barrier),
	}, nil
}

// Step applies ev at time now (engine time: the duration since the client's monotonic clock
// origin) and returns the effects the driver must carry out, in order. The returned slice is
// reused by the next Step: copy what must outlive it. now never goes backwards: a smaller
// value is taken as the previous one.
func (s *Engine) Step(ev Event, now time.Duration) []Effect {
	s.out = s.out[:0]
	if now > s.now {
		s.now = now
	}
	s.jitter = ev.Jitter
	if !(s.jitter >= 0) { // also NaN
		s.jitter = 0
	} else if s.jitter > 1 {
		s.jitter = 1
	}
	// Rule 1 and 4: nothing is adopted or renewed after the local deadline; a late timer
	// (a paused client) changes nothing about that.
	s.checkDeadline()
	switch ev.Kind {
	case EvBoot:
		if !s.booted && !s.closing {
			s.booted = true
			s.openSession()
		}
	case EvStart:
		s.start(ev)
	case EvStop:
		if e := s.elections[ev.Name]; e != nil && e.flavor == FlavorPartition && e.group != nil && e.state != Ended {
			// Partitions follow the assignment; Leave the group to give them up.
			s.complete(ev.Future, errorf(spi.ErrInvalidOption, "%q is a partition of group %q: leave the group instead", ev.Name, e.group.name))
			break
		}
		s.stop(ev.Name, ev.Future, false)
	case EvStepDown:
		s.stop(ev.Name, ev.Future, true)
	case EvTimer:
		s.timer(ev.Timer)
	case EvReply:
		s.reply(ev)
	case EvHint:
		s.hint(ev.Hint)
	case EvWorkExited:
		s.workExited(ev.Name, ev.Token)
	case EvJoin:
		s.join(ev)
	case EvLeave:
		s.leave(ev.Name, ev.Future)
	case EvClose:
		s.close(ev.Future)
	case EvReachable:
		s.reachable(true)
	}
	return s.out
}

// --- effects ---

func (s *Engine) emit(ef Effect) { s.out = append(s.out, ef) }

func (s *Engine) call(op Op, sid spi.SessionID, p pending, ef Effect) ReqID {
	s.lastReq++
	id := s.lastReq
	p.op, p.gen, p.sent = op, s.sess.gen, s.now
	s.pending[id] = p
	ef.Kind, ef.Req, ef.Op, ef.Session = EfCall, id, op, sid
	s.emit(ef)
	return id
}

func (s *Engine) arm(kind TimerKind, name string, at time.Duration) {
	s.emit(Effect{Kind: EfArm, Timer: Timer{Kind: kind, Name: name}, At: at})
}

func (s *Engine) complete(f FutureID, err error) {
	if f&internalFuture != 0 {
		if b := s.barriers[f]; b != nil {
			delete(s.barriers, f)
			s.partDone(b, err)
		}
		return
	}
	if f != 0 {
		s.emit(Effect{Kind: EfComplete, Future: f, Err: err})
	}
}

// part adds a part to b and returns the engine's own future that marks it done when completed.
func (s *Engine) part(b *barrier) FutureID {
	s.lastPart++
	f := internalFuture | s.lastPart
	b.parts++
	s.barriers[f] = b
	return f
}

// partDone marks a part of b done with err; when it was the last, b's futures complete with
// every part's error, in the order they came (joinerr.Join: one error, or all on one line).
func (s *Engine) partDone(b *barrier, err error) {
	if err != nil {
		b.errs = append(b.errs, err)
	}
	if b.parts--; b.parts > 0 {
		return
	}
	err = joinerr.Join(b.errs...)
	for _, f := range b.futs {
		s.complete(f, err)
	}
	b.futs = nil
}

// deadlineFrom is the local deadline a reply grants: sentAt + remaining×(1−drift) − margin.
// remaining is first clamped to [0, TTL] (a backend can never legitimately grant more than the
// TTL it was asked for, and a negative remaining is an expired session), and the sum
// saturates: a huge or negative remaining from a hostile or buggy backend can shorten the
// deadline, never push it into the far future.
func (s *Engine) deadlineFrom(sent, remaining time.Duration) time.Duration {
	remaining = min(max(remaining, 0), s.opt.TTL)
	return add(sent, time.Duration(float64(remaining)*(1-s.opt.Drift))-s.opt.Margin)
}

// HintWindow bounds how long released hints for a name are coalesced after one proved false
// (Engine.hint); the window is min(HintWindow, the renewal interval). 100 ms caps a storm of
// forged hints at about twenty acquires per second per waiter and name — negligible load — while
// the only honest case it can delay (a holder that releases and re-takes a lease while others
// wait) waits at most 100 ms, far below the renewal interval that lease timing works at.
const HintWindow = 100 * time.Millisecond

func (s *Engine) hintWindow() time.Duration { return min(HintWindow, s.opt.RenewInterval) }

// unknownRetry is how long after a HeldBy reply with the holder's time left unknown a candidate
// tries again if no released hint came meanwhile: one TTL, or two where the backend's hints
// survive its reconnects (Options.SteadyHints). The hint is what brings the grant; this retry
// only bounds the wait should the hint be lost. It is measured from the reply, and a waiter
// makes it while the holder lives on, so its phase against a holder's crash is arbitrary: a
// crashed holder's lease goes up to a TTL after the crash, and a retry one TTL after an attempt
// falls into that window (costing the failover a second acquire) unless the attempt came
// early enough. Two TTLs leave every attempt made within a TTL before the crash (as a waiter's
// first one, in a failover that soon follows it) with its retry after the release, and halve
// the share of failovers that take a second acquire otherwise (at most TTL/(2·TTL)), for at
// most one TTL more of waiting when a hint is lost after all. The backends keep watching a
// waited-for name for longer than that (spi.SteadyHints).
func (s *Engine) unknownRetry() time.Duration {
	if s.opt.SteadyHints {
		return 2 * s.opt.TTL // TTL ≤ MaxDuration: no overflow
	}
	return s.opt.TTL
}

// add returns a + b saturated to the range of time.Duration: no time sum the engine makes
// wraps around, whatever the driver's clock or a backend reports.
func add(a, b time.Duration) time.Duration {
	c := a + b
	if (c > a) != (b > 0) { // the sum wrapped
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return c
}

// backoff draws the delay before retry number fails (1-based): full jitter below
// min(BackoffMin·2^(fails−1), BackoffMax). A permanent error's retry (a background one: see
// "Permanent errors" in the package doc) waits between BackoffMax/2 and BackoffMax, whatever
// the jitter, so that a backend that refuses for good is asked at most about once per
// BackoffMax, never at once. The doubling stops at BackoffMax, so it cannot overflow.
func (s *Engine) backoff(fails int, err error) time.Duration {
	bound := s.opt.BackoffMax
	if spi.Classify(err) == spi.Permanent {
		return bound/2 + time.Duration(s.jitter*float64(bound-bound/2))
	}
	b := s.opt.BackoffMin
	for i := 1; i < fails && b < bound; i++ {
		b *= 2 // b < bound ≤ MaxDuration: no overflow
	}
	bound = min(b, bound)
	return time.Duration(s.jitter * float64(bound))
}

// failed publishes a permanent error (PubError): every one, the driver's log damps repeats.
func (s *Engine) failed(op Op, name string, err error) {
	if spi.Classify(err) == spi.Permanent {
		s.emit(Effect{Kind: EfPublish, Publish: PubError, Op: op, Name: name, Err: err})
	}
}

// sentAt is the send time of a reply, clamped to [issued, now].
func (s *Engine) sentAt(p pending, ev Event) time.Duration {
	return min(max(ev.SentAt, p.sent), s.now)
}

// --- session ---

func (s *Engine) openSession() {
	s.sess = session{state: SessionOpening, gen: s.sess.gen + 1}
	s.sess.openReq = s.call(OpOpenSession, "", pending{}, Effect{Owner: s.opt.Owner, TTL: s.opt.TTL})
}

func (s *Engine) checkDeadline() {
	if s.sess.state == SessionLive && s.now >= s.sess.deadline {
		s.loseSession(ReasonDeadline)
	}
}

func (s *Engine) onOpenReply(p pending, ev Event) {
	if p.gen != s.sess.gen || ev.Req != s.sess.openReq {
		return
	}
	s.sess.openReq = 0
	if s.closing {
		if ev.Err == nil {
			s.sess.id = ev.Session.ID
			s.sess.state = SessionClosing
			s.sess.closeReq = s.call(OpCloseSession, s.sess.id, pending{}, Effect{})
		} else {
			s.closed()
		}
		return
	}
	if ev.Err != nil {
		s.sess.fails++
		s.sess.openErr = ev.Err
		s.failed(OpOpenSession, "", ev.Err)
		permanent := spi.Classify(ev.Err) == spi.Permanent
		// Nobody waiting for a lock should hang on a backend that cannot work, and a TryLock
		// makes one attempt: it waited for this open, which failed, and does not wait for
		// the next.
		for _, e := range s.waiting {
			if !e.waitSess || e.state != Candidate || e.future == 0 {
				continue
			}
			switch {
			case permanent:
				s.end(e, ev.Err)
			case e.flavor == FlavorTryLock:
				s.end(e, s.noSessionErr(e.name))
			}
		}
		s.sess.openAt = add(s.now, s.backoff(s.sess.fails, ev.Err))
		if s.sess.poked && !permanent {
			s.sess.openAt = s.soon() // the backend answered meanwhile: this open was stuck
		}
		s.sess.poked = false
		s.arm(TimerOpen, "", s.sess.openAt)
		return
	}
	sent := s.sentAt(p, ev)
	s.sess.state = SessionLive
	s.sess.id = ev.Session.ID
	s.sess.fails, s.sess.openErr, s.sess.kaErr = 0, nil, nil
	s.sess.openedAt = s.now
	s.sess.deadline = s.deadlineFrom(sent, ev.Session.Remaining)
	s.emit(Effect{Kind: EfPublish, Publish: PubSessionOpened, Session: s.sess.id, At: s.sess.deadline})
	s.emit(Effect{Kind: EfDeadline, Session: s.sess.id, At: s.sess.deadline})
	s.sess.kaAt = max(add(sent, s.opt.RenewInterval), s.now)
	s.arm(TimerRenew, "", s.sess.kaAt)
	s.arm(TimerDeadline, "", s.sess.deadline)
	if s.now >= s.sess.deadline { // the reply came too late to be of use
		s.loseSession(ReasonDeadline)
		return
	}
	// The backend answers again: close the lost sessions it could not be told of (once
	// more, best effort; a failure now is not retried, the session expires by itself).
	for _, old := range s.staleClose {
		s.call(OpCloseSession, old, pending{stale: true}, Effect{})
	}
	s.staleClose = s.staleClose[:0]
	for _, name := range s.groupNames {
		if g := s.groups[name]; !g.leaving {
			s.sendJoin(g)
		}
	}
	waiting := s.waiting
	s.waiting = nil
	for _, e := range waiting {
		if e.waitSess {
			e.waitSess = false
			if e.state == Candidate && e.inflight == 0 && !e.retrying {
				s.acquire(e)
			}
		}
	}
}

func (s *Engine) sendKeepAlive() {
	if s.sess.settleAt != 0 && s.now >= s.sess.settleAt {
		s.sess.settleAt = 0 // this one asks
	}
	names := make([]string, 0, len(s.active))
	for _, e := range s.active {
		// Rule 3: ask about acquires in flight or of unknown outcome too, so a grant whose
		// reply is lost is found and released.
		if e.state == Leader || e.state == Handover || s.opt.Break != Rule3 {
			names = append(names, e.name)
		}
	}
	slices.Sort(names)
	var groups []string
	for _, name := range s.groupNames {
		if g := s.groups[name]; g.joined && !g.leaving {
			groups = append(groups, name)
		}
	}
	s.sess.kaReq = s.call(OpKeepAlive, s.sess.id, pending{}, Effect{Names: names, Groups: groups})
}

// settleDelay is how long after an acquire's outcome became unknown (its call failed or was
// cut short: the request may still land) a keep-alive asks about the name, rather than the
// next renewal up to a renewal interval later. A grant that landed for nobody (the caller
// gave up) is then released at once (rule 3), and one a candidate still wants is adopted, so
// a caller's context that ends during an acquire does not keep the lease from everyone else
// for a renewal interval. The delay lets a request that is still on its way land first; one
// that lands later is found by the next renewal, as before.
const settleDelay = 20 * time.Millisecond

// settleSoon moves the next keep-alive to settleDelay from now (at most a quarter of the
// renewal interval), if it is due later: one extra keep-alive however many acquires failed
// before it is sent. Not while keep-alives are failing: their backoff stands, so an outage
// that fails every acquire does not send a keep-alive after each of them.
func (s *Engine) settleSoon() {
	if s.sess.fails > 0 {
		return
	}
	at := add(s.now, min(settleDelay, s.opt.RenewInterval/4))
	if s.sess.settleAt == 0 || at < s.sess.settleAt {
		s.sess.settleAt = at
	}
	if s.sess.state == SessionLive && s.sess.kaReq == 0 && s.sess.settleAt < s.sess.kaAt {
		s.sess.kaAt = s.sess.settleAt
		s.arm(TimerRenew, "", s.sess.kaAt)
	}
}

func (s *Engine) onKeepAliveReply(p pending, ev Event) {
	if p.gen != s.sess.gen || ev.Req != s.sess.kaReq {
		return
	}
	s.sess.kaReq = 0
	ka := ev.KeepAlive
	if ev.Err == nil && ka.Expired {
		if s.opt.Break != Rule4 {
			s.loseSession(ReasonSessionExpired)
			return
		}
		ev.Err = errors.New("session expired (ignored: rule 4 broken)")
	}
	if ev.Err != nil {
		// Retried inside the remaining time: the deadline timer ends the session first if
		// the retries do not succeed in time.
		s.sess.fails++
		s.failed(OpKeepAlive, "", ev.Err)
		s.sess.kaAt = add(s.now, s.backoff(s.sess.fails, ev.Err))
		s.sess.kaErr = nil
		if spi.Classify(ev.Err) == spi.Permanent {
			s.sess.kaAt = min(s.sess.kaAt, s.keepAliveBy())
			s.sess.kaErr = ev.Err
		} else if s.sess.poked {
			s.sess.kaAt = min(s.sess.kaAt, s.soon())
		}
		s.sess.poked = false
		s.arm(TimerRenew, "", s.sess.kaAt)
		return
	}
	s.sess.fails, s.sess.poked, s.sess.kaErr = 0, false, nil
	sent := s.sentAt(p, ev)
	// The latest reply is the backend's freshest word, even when it shortens the deadline
	// (at most one keep-alive is in flight, so replies arrive in order).
	if dl := s.deadlineFrom(sent, ka.Remaining); dl != s.sess.deadline {
		s.sess.deadline = dl
		s.emit(Effect{Kind: EfDeadline, Session: s.sess.id, At: dl})
		s.arm(TimerDeadline, "", dl)
		if s.now >= dl { // already past: the session may be gone at the backend
			s.loseSession(ReasonDeadline)
			return
		}
	}
	s.sess.kaAt = max(add(sent, s.opt.RenewInterval), s.now)
	if s.sess.settleAt != 0 {
		s.sess.kaAt = min(s.sess.kaAt, max(s.sess.settleAt, s.now))
	}
	s.arm(TimerRenew, "", s.sess.kaAt)
	found := s.seeHeld(ev.Req, ka.Held)
	s.confirmGrants(ev.Req)
	s.reconcile(ev.Req, sent, ka.Held, ka.Unrenewed, ka.Corrupt, found)
	if len(ka.Members) > 0 {
		for _, name := range s.groupNames {
			g := s.groups[name]
			m, ok := ka.Members[name]
			if !ok || !g.joined || g.leaving {
				continue
			}
			g.membersFailed = false // this view stands for the read that failed
			if sent >= g.joinedAt && !slices.Contains(m, s.sess.id) {
				// A Leave of an earlier membership landed after this Join: join again.
				g.joined = false
				s.setView(g, m, nil)
				if g.joinReq == 0 {
					s.sendJoin(g)
				}
				continue
			}
			if sent >= g.viewSent { // else a members read sent after it brought newer news
				g.viewSent = sent
				s.setView(g, m, nil)
			}
			s.armLapse(g, ka.MembersRemaining)
		}
	}
}

// keepAliveBy is the latest time a keep-alive refused for good (a permanent error) is retried:
// halfway from now to the session's local deadline, and BackoffMin from now at least. A
// permanent error's retry waits BackoffMax/2 to BackoffMax (backoff), and no sign that the
// backend answers brings it forward (reachable), so after two or three refusals in a row the
// next try could come only after the deadline: a backend healed meanwhile (the key repaired,
// the migration applied) would then see the session lapse although it answered again well
// before. Halving the time left keeps a try within reach of the deadline — one every
// BackoffMin in its last moments, about log2(TTL/BackoffMin) more calls per session lifetime
// while the refusal lasts — and changes nothing for safety: the deadline timer revokes the
// terms on time whenever the tries come (rule 4).
func (s *Engine) keepAliveBy() time.Duration {
	return add(s.now, max((s.sess.deadline-s.now)/2, s.opt.BackoffMin))
}

// confirmGrants applies rule 6 to the reply of keep-alive req: a term whose lease the reply
// lists held with its token, from a request sent after the acquire it was adopted from (so
// the keep-alive asked about the lease and renewed it with the session), is confirmed before
// its own bound: its deadline is the session's from now on. The bound of a term still
// unconfirmed now comes before the session's deadline, so its timer is armed.
func (s *Engine) confirmGrants(req ReqID) {
	for _, e := range s.active {
		if e.grantReq == 0 || e.state != Leader { // a Handover's end is fixed as of its stop
			continue
		}
		if req > e.grantReq && s.now < e.grantUntil {
			if e.seenKA == req && e.seenToken == e.token {
				e.grantReq, e.grantUntil = 0, math.MaxInt64
				s.emit(Effect{Kind: EfDeadline, Session: s.sess.id, Name: e.name, Token: e.token, At: math.MaxInt64})
				continue
			}
			if e.adoptedReq <= req && s.opt.Break != Rule3 {
				continue // missing from a reply sent after its adoption: reconcile revokes it
			}
		}
		s.armGrant(e)
	}
}

// armLapse schedules the read of g's members for when the first of its other members would
// expire, by a keep-alive reply's MembersRemaining (remaining, absent for g: nothing to
// schedule). The reply arrives after the backend measured it, so now + remaining is no
// earlier than the expiry; the drift and a millisecond (the backends' precision) are added so
// that the read does not come before it on a slower clock. The next keep-alive reply replaces
// the time, so a member that keeps renewing causes no read (unless its time left at a
// keep-alive is under one renewal interval — a much shorter TTL, a slow link: then at most one
// read per keep-alive); one that stops causes one.
func (s *Engine) armLapse(g *group, remaining map[string]time.Duration) {
	r, ok := remaining[g.name]
	if !ok {
		g.lapseAt = 0
		return
	}
	// Clamped like every remaining time (another member's TTL may differ, but a later time
	// would be replaced by the next keep-alive reply before it came).
	r = min(max(r, 0), s.opt.TTL)
	g.lapseAt = add(s.now, add(add(r, time.Duration(float64(r)*s.opt.Drift)), time.Millisecond))
	s.arm(TimerMembers, g.name, g.lapseAt)
}

// seeHeld records on each election the reply of keep-alive req lists (seenKA, seenToken) and
// returns those elections, nil for names it has none of, in held's order (rules 3 and 6 read
// them). The slice is scratch space, valid until the next call.
func (s *Engine) seeHeld(req ReqID, held []spi.Held) []*election {
	found := s.scratch[:0]
	for _, h := range held {
		e := s.elections[h.Name]
		found = append(found, e)
		if e != nil {
			e.seenKA, e.seenToken = req, h.Token
		}
	}
	s.scratch = found[:0]
	return found
}

// reconcile applies rule 3 to the reply of keep-alive req, sent at sent, whose held leases'
// elections are found (seeHeld). A term missing from the reply is revoked as taken over, or, if
// the reply lists its name among those it could not renew (unrenewed), as not renewed
// (ReasonDeadline): nobody took it, but the client can no longer count on it; or, if it lists
// it among those whose record is corrupt (corrupt), as ReasonCorruptRecord.
func (s *Engine) reconcile(req ReqID, sent time.Duration, held []spi.Held, unrenewed, corrupt []string, found []*election) {
	if s.opt.Break == Rule3 {
		return
	}
	// A term adopted before the request was sent but missing from the reply is taken over.
	act := append(s.scratch2[:0], s.active...)
	for _, e := range act {
		seen := e.seenKA == req
		switch {
		case (e.state == Leader || e.state == Handover) && e.adoptedReq <= req && !(seen && e.seenToken == e.token):
			if e.state == Leader {
				reason := ReasonTakenOver
				switch {
				case slices.Contains(unrenewed, e.name):
					reason = ReasonDeadline
				case slices.Contains(corrupt, e.name):
					reason = ReasonCorruptRecord
				}
				s.revoke(e, reason)
				s.afterLoss(e)
			} else {
				s.endHandover(e, false)
			}
		case e.unknown && !seen && sent >= add(e.unknownAt, s.opt.RenewInterval) && !slices.Contains(unrenewed, e.name):
			// Asked about long enough after the unknown outcome (one call timeout): not ours.
			// Unless the backend could not renew the name (unrenewed: a Redis Cluster master
			// that did not answer): that says nothing of whether the acquire landed, so it
			// stays unknown and is asked about again.
			e.unknown = false
			if e.unknownQueued && e.state != Candidate && e.state != Leader && e.state != Handover {
				// The queued attempt has landed by now, and may have left an entry, after
				// the withdrawal of its stop, while the election no longer waits: one that
				// lives as long as the session (QueueLivesWithSession), or lapses only with
				// the session's expiry as of the attempt, up to a TTL away, the free lease
				// reserved for a session that does not want it meanwhile. Withdraw it (a
				// waiting candidate keeps it; a grant removed it).
				s.withdraw(e)
			}
			e.unknownQueued = false
			s.sync(e)
			s.forget(e.name, false)
		}
	}
	s.scratch2 = act[:0]
	// A lease that no election wants and no acquire is in flight for is released.
	for i, h := range held {
		e := found[i]
		if e != nil {
			if (e.state == Leader || e.state == Handover) && e.token == h.Token {
				continue // confirmed
			}
			if e.inflight != 0 {
				continue // its reply decides
			}
			if e.state == Candidate && h.Token > s.sess.released[h.Name] {
				s.acquire(e) // we hold what it wants: the acquire is granted at once
				continue
			}
		}
		s.release(h.Name, h.Token)
	}
}

// loseSession ends the current session (rule 4: it never comes back): every term is revoked
// and a new session opened.
//
// A session the backend reports expired after this client sent its close (Close) was not
// lost: the close ended it (etcd revokes the session's lease, and a keep-alive that was in
// flight behind the close finds none). It ends as closed, without a session-lost, which the
// shell logs as "simba session lost" and simbaprom counts: at a graceful shutdown that read
// as a failure.
func (s *Engine) loseSession(reason Reason) {
	old := s.sess.id
	closedByUs := reason == ReasonSessionExpired && s.sess.state == SessionClosing
	s.lostGen, s.lostReason = s.sess.gen, reason
	s.sess.state = SessionOpening // not live while the elections are told
	s.sess.kaReq, s.sess.settleAt, s.sess.kaErr = 0, 0, nil
	s.losing = true
	if !closedByUs {
		s.emit(Effect{Kind: EfPublish, Publish: PubSessionLost, Session: old, Reason: reason})
	}
	act := append(s.scratch2[:0], s.active...)
	for _, e := range act {
		e.inflight, e.current, e.unknown, e.unknownQueued = 0, false, false, false
		switch e.state {
		case Leader:
			s.revoke(e, reason)
			s.afterLoss(e)
		case Handover:
			s.endHandover(e, false)
		case Candidate:
			s.acquire(e) // queues it for the next session
		default:
			s.sync(e)
		}
	}
	s.scratch2 = act[:0]
	for _, name := range slices.Clone(s.groupNames) {
		g := s.groups[name]
		g.joined, g.joinReq, g.membersReq, g.membersDirty, g.retrying, g.lapseAt = false, 0, 0, false, false, 0
		g.backoffRetry, g.membersFailed, g.poked = false, false, false
		g.leaveReq = 0 // a leave in flight was the lost session's
		// A Join of unknown outcome was the lost session's: its membership ended with it.
		g.unknown = false
		s.setView(g, nil, nil)
		if g.leaving {
			s.dropGroup(g) // its membership ended with the session
		}
	}
	s.losing = false
	if reason == ReasonDeadline {
		// The backend may not have noticed yet: end it there too (best effort; retried once
		// after the next open if the backend could not be reached: staleClose).
		s.call(OpCloseSession, old, pending{lost: old}, Effect{})
	}
	if s.closing {
		s.closed()
		return
	}
	if s.now < add(s.sess.openedAt, s.opt.RenewInterval) {
		s.shortLived++
	} else {
		s.shortLived = 0
	}
	if s.shortLived < 2 {
		s.openSession()
		return
	}
	s.sess = session{state: SessionOpening, gen: s.sess.gen + 1}
	s.sess.openAt = add(s.now, s.backoff(s.shortLived-1, nil))
	s.arm(TimerOpen, "", s.sess.openAt)
}

func (s *Engine) maybeFinishClose() {
	if !s.closing || s.handovers > 0 || s.losing {
		return
	}
	switch s.sess.state {
	case SessionLive:
		s.sess.state = SessionClosing
		s.sess.closeReq = s.call(OpCloseSession, s.sess.id, pending{}, Effect{})
	case SessionOpening:
		if s.sess.openReq == 0 {
			s.closed()
		}
	case SessionNone:
		s.closed()
	}
}

func (s *Engine) closed() {
	if s.sess.state == SessionClosed {
		return
	}
	s.sess.state = SessionClosed
	s.emit(Effect{Kind: EfPublish, Publish: PubSessionClosed, Session: s.sess.id})
	for _, c := range s.closeCut {
		s.complete(c.f, c.err)
	}
	s.closeCut = nil
	for _, f := range s.closeFuts {
		s.completeClose(f)
	}
	s.closeFuts = nil
}

// closeCutFuture is a future that completes with err once the client is closed (closeCut).
type closeCutFuture struct {
	f   FutureID
	err error
}

// closeCutErr is the error a Stop's future completes with when its release of name failed with
// err while the client was closing: it matches spi.ErrClosed (the lease goes with the session's
// close), not the release's error (nothing for the caller to retry or to settle).
func closeCutErr(name string, err error) error {
	return fmt.Errorf("simba: release of %s failed during the close (%v), whose session close releases the lease: %w", name, err, spi.ErrClosed)
}

// ReleaseLostError completes the future of a lock's stop (an Unlock's) whose release failed
// after the session that held the lease was lost: the lease went with the session, which
// Reason says how it ended (ReasonDeadline or ReasonSessionExpired), so the lock was lost
// before the release could free it. Err is the release's error.
type ReleaseLostError struct {
	Name   string
	Token  int64
	Reason Reason
	Err    error
}

// Error says that the release failed after the session was lost, and why.
func (e *ReleaseLostError) Error() string {
	return fmt.Sprintf("simba: release of %s (token %d) failed (%v) after its session was lost (%v), and the lease with it", e.Name, e.Token, e.Err, e.Reason)
}

// Is makes errors.Is(err, spi.ErrNotHeld) hold: the lease is no longer held.
func (e *ReleaseLostError) Is(target error) bool { return target == spi.ErrNotHeld }

// leaveCutErr is the error a Leave's future completes with when the Leave of group name had
// not deleted the membership when Close came: it matches spi.ErrClosed (the membership goes
// with the session's close).
func leaveCutErr(name string) error {
	return fmt.Errorf("simba: leave of group %s cut short by the close, whose session close deletes the membership: %w", name, spi.ErrClosed)
}

// closeFailed is the error Close's futures complete with when the session's close call failed
// with err: not retried (the session lapses at its TTL at the backend), but not hidden either.
// A permanent error comes as itself (the backend refused: the session was not closed); any
// other matches spi.ErrUnavailable (the outcome is unknown: the close may have landed). Either
// way the effect names the session (Effect.Session).
func closeFailed(id spi.SessionID, err error) error {
	if spi.Classify(err) != spi.Permanent && !errors.Is(err, spi.ErrUnavailable) {
		err = spi.Unavailable("close session "+string(id), err)
	}
	return err
}

// completeClose completes a Close's future f with closeErr, naming the session it concerns.
func (s *Engine) completeClose(f FutureID) {
	if f == 0 {
		return
	}
	var id spi.SessionID
	if s.closeErr != nil {
		id = s.sess.id
	}
	s.emit(Effect{Kind: EfComplete, Future: f, Err: s.closeErr, Session: id})
}

func (s *Engine) close(f FutureID) {
	if s.sess.state == SessionClosed {
		s.completeClose(f)
		return
	}
	if f != 0 {
		s.closeFuts = append(s.closeFuts, f)
	}
	if s.closing {
		return
	}
	s.closing = true
	names := make([]string, 0, len(s.elections))
	for name := range s.elections {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		e := s.elections[name]
		s.cancelPendingStart(e, spi.ErrClosed)
		switch e.state {
		case Candidate, Cooldown:
			// Its acquire still waiting for a call slot is dropped unsent: sent during the
			// close, it could take the lease for nobody until the session's close lands.
			s.cancelAcquire(e)
			s.end(e, spi.ErrClosed)
		case Leader:
			s.leaderExit(e, ReasonClosed, Ended)
		case Handover:
			e.after = Ended
		}
	}
	for _, name := range s.groupNames {
		g := s.groups[name]
		if len(g.assigned) > 0 {
			s.emit(Effect{Kind: EfMembers, Group: name})
		}
		if f := g.leavePart; f != 0 {
			// A Leave under way: closing the session deletes the membership, and the Leave,
			// which met the Close, says so once that close is done, as a Stop whose release
			// the close cut short does (close-cut-leave.txt). It completed at once with
			// nothing, as if the membership had been deleted before Close began.
			g.leavePart = 0
			s.closeCut = append(s.closeCut, closeCutFuture{f: f, err: leaveCutErr(name)})
		}
		s.cancelRejoin(g, spi.ErrClosed)
	}
	s.groups = make(map[string]*group)
	s.groupNames = nil
	s.maybeFinishClose()
}

// --- dispatch ---

func (s *Engine) timer(t Timer) {
	switch t.Kind {
	case TimerOpen:
		if s.sess.state == SessionOpening && s.sess.openReq == 0 && s.sess.openAt <= s.now && !s.closing {
			s.sess.openReq = s.call(OpOpenSession, "", pending{}, Effect{Owner: s.opt.Owner, TTL: s.opt.TTL})
		}
	case TimerRenew:
		if s.sess.state == SessionLive && s.sess.kaReq == 0 && s.sess.kaAt <= s.now {
			s.sendKeepAlive()
		}
	case TimerDeadline:
		// checkDeadline already acted.
	case TimerRetry:
		if e := s.elections[t.Name]; e != nil && e.state == Candidate && e.inflight == 0 && e.retrying && e.retryAt <= s.now {
			e.retrying = false
			s.acquire(e)
		}
	case TimerCooldown:
		if e := s.elections[t.Name]; e != nil && e.state == Cooldown && e.until <= s.now {
			s.becomeCandidate(e)
		}
	case TimerHandover:
		if e := s.elections[t.Name]; e != nil && e.state == Handover && e.until <= s.now {
			s.endHandover(e, true)
		}
	case TimerGrant:
		if e := s.elections[t.Name]; e != nil && e.grantReq != 0 && e.grantUntil <= s.now {
			s.grantLapsed(e)
		}
	case TimerMembers:
		if g := s.groups[t.Name]; g != nil && g.lapseAt != 0 && g.lapseAt <= s.now && g.joined && !g.leaving && s.sess.state == SessionLive {
			g.lapseAt = 0
			s.sendMembers(g)
		}
	case TimerJoin:
		if g := s.groups[t.Name]; g != nil && g.retrying && g.retryAt <= s.now && s.sess.state == SessionLive {
			g.retrying = false
			if g.leaving {
				s.sendLeave(g)
			} else if !g.joined && g.joinReq == 0 {
				s.sendJoin(g)
			}
		}
	}
}

func (s *Engine) reply(ev Event) {
	p, ok := s.pending[ev.Req]
	if !ok || p.op != ev.Op {
		return // unknown or duplicate reply
	}
	delete(s.pending, ev.Req)
	if ev.NotSent {
		// Dropped unsent on an EfCancel: nothing reached the backend, so it says nothing
		// about it either (no sign that it answers, no failure).
		if p.op == OpAcquire {
			s.onAcquireNotSent(p, ev)
		}
		return
	}
	if ev.Err != nil {
		s.lastFail = s.now
	} else if s.sentAt(p, ev) > s.lastFail {
		// The backend answered a request sent after the latest failure: calls waiting out a
		// failure's backoff need not wait it out (once this reply is handled).
		defer func() {
			if s.sess.state == SessionLive {
				s.reachable(false)
			}
		}()
	}
	switch p.op {
	case OpOpenSession:
		s.onOpenReply(p, ev)
	case OpKeepAlive:
		s.onKeepAliveReply(p, ev)
	case OpCloseSession:
		if p.lost != "" && ev.Err != nil && spi.Classify(ev.Err) == spi.Retryable {
			s.staleClose = append(s.staleClose, p.lost)
		}
		if p.stale && ev.Err == nil {
			s.staleClosed()
		}
		if ev.Req == s.sess.closeReq && s.sess.state == SessionClosing {
			s.failed(OpCloseSession, "", ev.Err)
			if ev.Err != nil {
				s.closeErr = closeFailed(s.sess.id, ev.Err)
			}
			s.closed()
		}
	case OpAcquire:
		s.onAcquireReply(p, ev)
	case OpRelease:
		s.onReleaseReply(p, ev)
	case OpJoin:
		s.onJoinReply(p, ev)
	case OpLeave:
		s.onLeaveReply(p, ev)
	case OpMembers:
		s.onMembersReply(p, ev)
	case OpWithdraw:
		// Best effort: a withdrawal that failed leaves an entry that lapses by itself
		// (spi.Queuer), or, where entries live with the session (QueueLivesWithSession),
		// one the backend withdraws again itself (spi.SessionQueue), so a failure is
		// reported and not retried, and the stop that caused it completes either way.
		if ev.Err != nil {
			s.failed(OpWithdraw, p.name, ev.Err)
		}
		for _, f := range p.futures {
			s.complete(f, nil)
		}
	}
}

// hint handles a backend hint. A released hint makes a candidate acquire at once — the
// hand-over latency of backends with hints depends on it — but hints can be forged (anyone
// who can PUBLISH on a Redis channel or NOTIFY on PostgreSQL) or come in storms, and each
// would cost every waiter an acquire. So hints are damped per name:
//   - while an acquire is in flight, any number of hints make at most one follow-up acquire
//     when its reply is HeldBy, or a retryable failure (then no sooner than the end of a hint
//     window that such a follow-up opened: hint-failed-attempt.txt);
//   - when an acquire a hint sent finds the same holder still live (the hint was false),
//     hints for the next hintWindow are coalesced into one retry at its end.
//
// A genuine release is not slowed: the first hint after a HeldBy acts at once, and a
// hand-over to another session (a different holder) opens no window. A storm of false hints
// costs each waiter at most about two acquires per hintWindow: the coalesced retry at the
// window's end and, should its reply be HeldBy while hints kept coming, one follow-up
// (TestHintStormIsDamped bounds it so, and the README quotes it).
// staleClosed handles the success of a lost session's close sent once more after the next open
// (staleClose): the leases the lost session held, and its places in the names' waiter queues,
// are gone only now. The acquires sent with that close, and any since, may have been answered
// before it landed (held by the lost session, or queued behind its place), and would try again
// only at the holder's remaining time or their session's deadline (a TTL): every candidate is
// told, as by a released hint, so that it tries again at once (after its reply, if one is in
// flight). Rare (once after an outage that lost a session), so it may go over all elections;
// in sorted order, for a deterministic engine.
func (s *Engine) staleClosed() {
	names := s.scratchNames[:0]
	for name, e := range s.elections {
		if e.state == Candidate {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		s.hint(spi.Hint{Kind: spi.Released, Name: name})
	}
	s.scratchNames = names[:0]
}

func (s *Engine) hint(h spi.Hint) {
	switch h.Kind {
	case spi.Released:
		e := s.elections[h.Name]
		if e == nil || e.state != Candidate {
			return
		}
		switch {
		case e.inflight != 0:
			e.hinted = true // a HeldBy reply may predate the release: retry at once then
		case e.waitSess:
		case s.coalesceHint(e):
		default:
			e.hintRetry = true
			s.acquire(e)
		}
	case spi.GroupChanged:
		if g := s.groups[h.Name]; g != nil && g.joined && !g.leaving {
			s.sendMembers(g)
		}
	}
}

// coalesceHint gives a released hint for candidate e (no attempt in flight) that comes within
// a hint window (hints just proved false, or a follow-up already sent) one retry at the end of
// the window, coalesced with any other, unless one is armed before it; it reports whether the
// window was open. Engine.hint and a failed attempt that a hint came during share it.
func (s *Engine) coalesceHint(e *election) bool {
	if s.now >= e.quietUntil {
		return false
	}
	if !e.retrying || e.retryAt > e.quietUntil {
		s.retryLater(e, e.quietUntil)
	}
	e.hintRetry = true
	return true
}

// soon is when a call the backend is known to answer again is retried: within a jitter of
// BackoffMin of now, so that clients told at the same moment (a database back after a
// failover) spread their retries.
func (s *Engine) soon() time.Duration {
	return add(s.now, time.Duration(s.jitter*float64(s.opt.BackoffMin)))
}

// reachable handles a sign that the backend answers again: EvReachable (the shell's probe
// succeeded while the session's calls were failing), or the success of a call while other
// calls wait out a failure's backoff (the backend answers on another path). Without it a
// client whose server came back reopened its session, renewed it or retried an acquire only
// when the backoff drawn after its last failure ran out (up to BackoffMax, the renewal
// interval), and a call stuck on a connection the outage silenced failed only at its timeout
// and then waited out a backoff as well. Now:
//   - an open, keep-alive, acquire (a partition's too) or group Join or Leave whose retry
//     waits out a failure's backoff is retried at once (soon: within a jitter of BackoffMin);
//   - the session's open, a failing keep-alive, or an acquire or Join after failures, in
//     flight now, is retried at once should it fail (poked), instead of after a backoff;
//   - a group whose members read failed, and whose members no keep-alive brought since, is
//     read again at once (else its view waited for the next keep-alive, up to a renewal
//     interval).
//
// What it keeps: the failure counts stay, so retries that still fail back off as before
// (growing to BackoffMax); permanent errors keep BackoffMax (a sign is no reason to hammer a
// backend that refuses); a Join of unknown outcome still holds its group's Leave back for a
// call timeout (that wait is no backoff); a backend that loses sessions as fast as it opens
// them keeps its backoff between opens (shortLived); a candidate in cooldown stays there; and a
// waiter's place in a queue is taken as usual, by the acquire. Damping: a sign acts at most once per
// BackoffMax (reachQuiet), so a link that flaps, or probes that succeed while the calls keep
// failing, add at most one retry of each call per BackoffMax to the backoff's own.
//
// probe says the sign is EvReachable; the success of a call (not a probe) pokes no acquire in
// flight, so that it costs nothing per reply while nothing waits out a backoff.
func (s *Engine) reachable(probe bool) {
	if !s.booted || s.closing || s.now < s.reachQuiet {
		return
	}
	soon := s.soon()
	acted := false
	switch s.sess.state {
	case SessionOpening:
		switch {
		case s.sess.openReq != 0:
			s.sess.poked, acted = true, true
		case s.shortLived < 2 && s.sess.openAt > soon && !s.permanentOpenErr():
			s.sess.openAt = soon
			s.arm(TimerOpen, "", soon)
			acted = true
		}
	case SessionLive:
		if s.sess.fails > 0 {
			switch {
			case s.sess.kaReq != 0:
				s.sess.poked, acted = true, true
			case s.sess.kaAt > soon:
				s.sess.kaAt = soon
				s.arm(TimerRenew, "", soon)
				acted = true
			}
		}
		if probe {
			for _, e := range s.active {
				if e.inflight != 0 && e.current && e.state == Candidate && e.fails > 0 {
					e.poked, acted = true, true
				}
			}
		}
		if probe {
			for _, name := range s.groupNames {
				if g := s.groups[name]; g.joinReq != 0 && g.fails > 0 {
					g.poked, acted = true, true
				}
			}
		}
		kept := s.backingOff[:0]
		for _, e := range s.backingOff {
			if !backingOff(e) {
				e.backoffRetry, e.inBackingOff = false, false // stale
				continue
			}
			if e.retryAt > soon {
				e.backoffRetry, e.inBackingOff = false, false
				s.retryLater(e, soon)
				acted = true
				continue
			}
			kept = append(kept, e)
		}
		clear(s.backingOff[len(kept):])
		s.backingOff, s.backingOffGone = kept, 0
		keptG := s.groupsBackingOff[:0]
		for _, g := range s.groupsBackingOff {
			if s.groups[g.name] != g {
				g.inReach = false // dropped
				continue
			}
			if g.backoffRetry && (!g.retrying || g.joinReq != 0) {
				g.backoffRetry = false // stale
			}
			if g.membersFailed && (!g.joined || g.leaving) {
				g.membersFailed = false // stale
			}
			if g.backoffRetry && g.retryAt > soon {
				s.retryGroupAt(g, soon, false)
				acted = true
			}
			if g.membersFailed {
				g.membersFailed = false
				s.sendMembers(g)
				acted = true
			}
			if g.backoffRetry {
				keptG = append(keptG, g)
			} else {
				g.inReach = false
			}
		}
		clear(s.groupsBackingOff[len(keptG):])
		s.groupsBackingOff, s.groupsGone = keptG, 0
	}
	if acted {
		s.reachQuiet = add(s.now, s.opt.BackoffMax)
	}
}

// backingOff reports whether e's armed retry still waits out a failure's backoff (its entry
// in Engine.backingOff is not stale).
func backingOff(e *election) bool {
	return e.backoffRetry && e.retrying && e.state == Candidate && e.inflight == 0
}

// pruneBackingOff drops the stale entries of backingOff (see Engine.backingOffGone).
func (s *Engine) pruneBackingOff() {
	kept := s.backingOff[:0]
	for _, e := range s.backingOff {
		if backingOff(e) {
			kept = append(kept, e)
		} else {
			e.backoffRetry, e.inBackingOff = false, false
		}
	}
	clear(s.backingOff[len(kept):])
	s.backingOff, s.backingOffGone = kept, 0
}

// pruneGroupsBackingOff drops the entries of groupsBackingOff whose group was dropped.
func (s *Engine) pruneGroupsBackingOff() {
	kept := s.groupsBackingOff[:0]
	for _, g := range s.groupsBackingOff {
		if s.groups[g.name] == g {
			kept = append(kept, g)
		} else {
			g.inReach = false
		}
	}
	clear(s.groupsBackingOff[len(kept):])
	s.groupsBackingOff, s.groupsGone = kept, 0
}

// permanentOpenErr reports whether the last open failed with a permanent error (its retry
// keeps BackoffMax).
func (s *Engine) permanentOpenErr() bool {
	return s.sess.openErr != nil && spi.Classify(s.sess.openErr) == spi.Permanent
}

// backendExpired reports whether a SessionExpired reply must end the session (it always must,
// unless rule 4 is broken for a test).
func (s *Engine) backendExpired() bool {
	if s.opt.Break == Rule4 {
		return false
	}
	s.loseSession(ReasonSessionExpired)
	return true
}

func errorf(base error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", base, fmt.Sprintf(format, args...))
}

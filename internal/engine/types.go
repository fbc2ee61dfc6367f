package engine

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/spi"
)

// ReqID identifies one backend call the engine asked for (a Call effect). The driver echoes it
// in the Reply event. Ids increase by one per call, starting at 1, and are never reused.
type ReqID uint64

// FutureID identifies a caller waiting for an answer (Lock, Stop, StepDown, Close...). The
// driver chooses it (non-zero) and passes it in the event; the engine echoes it in exactly one
// Complete effect. Zero means "nobody waits".
type FutureID uint64

// EventKind says which event an Event is.
type EventKind uint8

// The events. Each is described on Event.
const (
	EvBoot EventKind = iota + 1
	EvStart
	EvStop
	EvStepDown
	EvTimer
	EvReply
	EvHint
	EvWorkExited
	EvJoin
	EvLeave
	EvClose
	EvReachable
	numEventKinds
)

var eventKindNames = [...]string{"", "boot", "start", "stop", "step-down", "timer", "reply", "hint", "work-exited", "join", "leave", "close", "reachable"}

// String names the kind as transcripts print it.
func (k EventKind) String() string {
	if k > 0 && k < numEventKinds {
		return eventKindNames[k]
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Op is a backend operation of the SPI (DESIGN.md §3).
type Op uint8

// The operations a Call effect asks for.
const (
	OpOpenSession Op = iota + 1
	OpKeepAlive
	OpCloseSession
	OpAcquire
	OpRelease
	OpJoin
	OpLeave
	OpMembers
	// OpWithdraw leaves the waiter queue of Name (spi.Queuer.Withdraw); only with Options.Queue.
	OpWithdraw
	numOps
)

var opNames = [...]string{"", "open-session", "keep-alive", "close-session", "acquire", "release", "join", "leave", "members", "withdraw"}

// String names the operation as transcripts print it.
func (o Op) String() string {
	if o > 0 && o < numOps {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Flavor says what an election is used for.
type Flavor uint8

// Election flavors.
const (
	// FlavorElection is a long-lived candidacy: after losing a term it is a candidate again.
	FlavorElection Flavor = iota
	// FlavorLock is a mutex: the Start future completes with the term when granted; the
	// election ends when its term ends (it never re-acquires behind the caller's back).
	FlavorLock
	// FlavorTryLock is a lock that makes a single attempt: the Start future completes with
	// the acquire's reply — the term, or spi.ErrLockHeld naming the holder — or with
	// spi.ErrUnavailable when the acquire fails or no session is live to send it in (it waits
	// only for an open in flight, never for the next one).
	FlavorTryLock
	// FlavorPartition is a partition of a joined group; the engine starts and stops these
	// itself. Start refuses it.
	FlavorPartition
)

var flavorNames = [...]string{"election", "lock", "trylock", "partition"}

// String names the flavor.
func (f Flavor) String() string {
	if int(f) < len(flavorNames) {
		return flavorNames[f]
	}
	return "flavor(" + strconv.Itoa(int(f)) + ")"
}

// State is the state of an election (DESIGN.md §2).
type State uint8

// Election states.
const (
	// Ended: not running (never started, stopped, or a lock that ended).
	Ended State = iota
	// Candidate: wants the lease; acquires when the session is live.
	Candidate
	// Leader: holds a valid term.
	Leader
	// Handover: the term was revoked (stop or step-down) but its work still runs, so the lease
	// is kept until the work exits or the session's local deadline as of the stop passes.
	Handover
	// Cooldown: stepped down; a candidate again when the cooldown ends.
	Cooldown
	numStates
)

var stateNames = [...]string{"ended", "candidate", "leader", "handover", "cooldown"}

// String names the state as transcripts print it.
func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// SessionState is the state of the client's session.
type SessionState uint8

// Session states.
const (
	// SessionNone: before Boot.
	SessionNone SessionState = iota
	// SessionOpening: an OpenSession call is in flight or waits for its retry timer.
	SessionOpening
	// SessionLive: the session is open and its local deadline has not passed.
	SessionLive
	// SessionClosing: Close has been asked and the engine waits for handovers or CloseSession.
	SessionClosing
	// SessionClosed: the client is closed; every later request fails with spi.ErrClosed.
	SessionClosed
	numSessionStates
)

var sessionStateNames = [...]string{"none", "opening", "live", "closing", "closed"}

// String names the state as transcripts print it.
func (s SessionState) String() string {
	if s < numSessionStates {
		return sessionStateNames[s]
	}
	return "session-state(" + strconv.Itoa(int(s)) + ")"
}

// Reason says why a term was revoked.
type Reason uint8

// Revocation reasons.
const (
	// ReasonDeadline: the session's local deadline passed without a renewal, or a term's own
	// bound (rule 6) before a keep-alive confirmed it, or a keep-alive could not renew the
	// term's lease (spi.KeepAlive.Unrenewed: its Redis Cluster master did not answer).
	ReasonDeadline Reason = iota + 1
	// ReasonTakenOver: a keep-alive reply did not list the lease (and did not report it
	// unrenewed or corrupt).
	ReasonTakenOver
	// ReasonSessionExpired: the backend reported the session expired.
	ReasonSessionExpired
	// ReasonStopped: the election was stopped (or its partition is no longer assigned here).
	ReasonStopped
	// ReasonSteppedDown: the leader stepped down.
	ReasonSteppedDown
	// ReasonClosed: the client was closed.
	ReasonClosed
	// ReasonCorruptRecord: a keep-alive reply left the lease out and named it corrupt
	// (spi.KeepAlive.Corrupt: its record is not one the backend writes, such as a Redis lease
	// key written over with another type).
	ReasonCorruptRecord
	numReasons
)

var reasonNames = [...]string{"", "deadline", "taken-over", "session-expired", "stopped", "stepped-down", "closed", "corrupt-record"}

// String names the reason as transcripts print it.
func (r Reason) String() string {
	if r > 0 && r < numReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// TimerKind says what a timer is for.
type TimerKind uint8

// Timer kinds. Session timers have an empty Timer.Name; election timers carry the election's
// name, group timers the group's.
const (
	// TimerOpen retries OpenSession after a failure.
	TimerOpen TimerKind = iota + 1
	// TimerRenew sends the next keep-alive (or retries a failed one).
	TimerRenew
	// TimerDeadline fires at the session's local deadline.
	TimerDeadline
	// TimerRetry retries an election's acquire.
	TimerRetry
	// TimerCooldown ends an election's cooldown.
	TimerCooldown
	// TimerHandover ends an election's handover at the session's deadline as of the stop.
	TimerHandover
	// TimerJoin retries a failed Join of a group.
	TimerJoin
	// TimerGrant fires at a term's own bound (rule 6): the deadline its grant gave, should no
	// keep-alive have confirmed the lease by then.
	TimerGrant
	// TimerMembers reads a group's members when the first of the other members would expire
	// (spi.KeepAlive.MembersRemaining).
	TimerMembers
	numTimerKinds
)

var timerKindNames = [...]string{"", "open", "renew", "deadline", "retry", "cooldown", "handover", "join", "grant", "members"}

// String names the kind as transcripts print it.
func (k TimerKind) String() string {
	if k > 0 && k < numTimerKinds {
		return timerKindNames[k]
	}
	return "timer(" + strconv.Itoa(int(k)) + ")"
}

// Timer identifies one timer. It is comparable: drivers key their pending timers by it.
type Timer struct {
	Kind TimerKind
	Name string
}

// String prints the timer as "renew" or "retry(name)".
func (t Timer) String() string {
	if t.Name == "" {
		return t.Kind.String()
	}
	return t.Kind.String() + "(" + t.Name + ")"
}

// PublishKind says what a Publish effect reports.
type PublishKind uint8

// Kinds of published events.
const (
	// PubSessionOpened: a session opened (Session, At = its local deadline).
	PubSessionOpened PublishKind = iota + 1
	// PubSessionLost: the session ended without Close (Session, Reason: deadline or
	// session-expired). A new one is being opened.
	PubSessionLost
	// PubSessionClosed: Close finished (Session may be empty).
	PubSessionClosed
	// PubError: a backend call failed permanently (Op, Name, Err), published on every
	// failure. A call made in the background (open, keep-alive, an election's acquire, a Join)
	// is retried after BackoffMax/2 to BackoffMax, since an operator may fix the cause (apply a
	// migration); one a caller waits for returns the error to it instead (see "Permanent
	// errors" in the package doc).
	PubError
	// PubHolder: an acquire found Name held by Holder (HolderOwner); published when the holder
	// changes.
	PubHolder
	numPublishKinds
)

var publishKindNames = [...]string{"", "session-opened", "session-lost", "session-closed", "error", "holder"}

// String names the kind as transcripts print it.
func (k PublishKind) String() string {
	if k > 0 && k < numPublishKinds {
		return publishKindNames[k]
	}
	return "publish(" + strconv.Itoa(int(k)) + ")"
}

// Event is one input of Step. Kind says which fields matter:
//
//   - EvBoot: none. Opens the first session.
//   - EvStart: Name, Flavor, HasWork, Future (completes with the term for locks; at once for
//     elections).
//   - EvStop, EvStepDown: Name, Future (completes once the lease is released; when it is not
//     held, at once, or once a candidate that may wait in the backend's queue has withdrawn —
//     after the reply of its acquire in flight when that acquire was its only queued attempt,
//     at once if the driver dropped it unsent on the EfCancel the stop emits).
//   - EvTimer: Timer (the key of an earlier Arm effect).
//   - EvReply: Req, Op (both copied from the Call), SentAt (when the request was sent), and the
//     result for Op: Err (any op), or Session (OpenSession), KeepAlive, Acquire, Status (Join,
//     Leave), Members (Members). Release and CloseSession carry only Err. Name is the Call's
//     (the lease or group; "" for session calls), for the driver's logs: Step goes by Req.
//     NotSent (no result, no Err): the driver dropped the call unsent, as an EfCancel asked;
//     nothing reached the backend.
//   - EvHint: Hint.
//   - EvWorkExited: Name and Token of the term whose work returned.
//   - EvJoin: Name (the group), Partitions, HasWork, Future (completes at once).
//   - EvLeave: Name (the group), Future (completes when every partition the session led is
//     released, after its handover, every acquire of the group's partitions in flight has its
//     reply (EfCancel asks the driver to drop those not sent yet) and what it was granted is
//     released, and the membership is deleted or gone with the session; with every error
//     among them, such as each release or acquire of unknown outcome, joined on one line).
//   - EvClose: Future (completes when every handover ended and the session is closed).
//   - EvReachable: none. The backend answered again after the session's calls failed (the
//     shell's probe succeeded): the calls that wait out a failure's backoff are retried
//     without waiting it out (Engine.reachable).
//
// Jitter, in [0, 1], is the driver's random draw for this event; the engine multiplies it into
// retry delays (backoff and the retry after HeldBy), so it never draws randomness itself.
type Event struct {
	Kind       EventKind
	Name       string
	Flavor     Flavor
	HasWork    bool
	Partitions int
	Future     FutureID
	Token      int64
	Timer      Timer
	Req        ReqID
	Op         Op
	SentAt     time.Duration
	Err        error
	Session    spi.Session
	KeepAlive  spi.KeepAlive
	Acquire    spi.Acquire
	Status     spi.Status
	Members    []spi.SessionID
	Hint       spi.Hint
	Jitter     float64
	// NotSent (EvReply) says the call was never sent: the driver dropped it on an EfCancel.
	NotSent bool
}

// ReplyTo starts the Reply event for a Call effect: Kind, Req, Op and Name are set; the caller
// sets SentAt and the result.
func ReplyTo(call Effect) Event {
	return Event{Kind: EvReply, Req: call.Req, Op: call.Op, Name: call.Name}
}

// String prints the event in the stable form transcripts and logs use.
func (ev Event) String() string {
	var b strings.Builder
	b.WriteString(ev.Kind.String())
	switch ev.Kind {
	case EvStart:
		b.WriteString(" " + ev.Name)
		if ev.Flavor != FlavorElection {
			b.WriteString(" " + ev.Flavor.String())
		}
		if ev.HasWork {
			b.WriteString(" work")
		}
	case EvStop, EvStepDown:
		b.WriteString(" " + ev.Name)
	case EvTimer:
		b.WriteString(" " + ev.Timer.String())
	case EvReply:
		b.WriteString(" " + strconv.FormatUint(uint64(ev.Req), 10) + " " + ev.Op.String() + " sent=" + ev.SentAt.String())
		writeResult(&b, ev)
	case EvHint:
		b.WriteString(" " + ev.Hint.Kind.String() + " " + ev.Hint.Name)
	case EvWorkExited:
		b.WriteString(" " + ev.Name + " token=" + strconv.FormatInt(ev.Token, 10))
	case EvJoin:
		b.WriteString(" " + ev.Name + " partitions=" + strconv.Itoa(ev.Partitions))
		if ev.HasWork {
			b.WriteString(" work")
		}
	case EvLeave:
		b.WriteString(" " + ev.Name)
	}
	if ev.Future != 0 {
		b.WriteString(" f" + strconv.FormatUint(uint64(ev.Future), 10))
	}
	if ev.Jitter != 0 {
		b.WriteString(" jitter=" + strconv.FormatFloat(ev.Jitter, 'g', -1, 64))
	}
	return b.String()
}

func writeResult(b *strings.Builder, ev Event) {
	if ev.NotSent {
		b.WriteString(" not-sent")
		return
	}
	if ev.Err != nil {
		b.WriteString(" err(" + spi.Classify(ev.Err).String() + ")=" + strconv.Quote(ev.Err.Error()))
		return
	}
	switch ev.Op {
	case OpOpenSession:
		b.WriteString(" id=" + string(ev.Session.ID) + " remaining=" + ev.Session.Remaining.String())
	case OpKeepAlive:
		ka := ev.KeepAlive
		if ka.Expired {
			b.WriteString(" expired")
			return
		}
		b.WriteString(" remaining=" + ka.Remaining.String() + " held=[")
		for i, h := range ka.Held {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(h.Name + ":" + strconv.FormatInt(h.Token, 10))
		}
		b.WriteByte(']')
		if len(ka.Unrenewed) > 0 {
			b.WriteString(" unrenewed=[" + strings.Join(ka.Unrenewed, " ") + "]")
		}
		if len(ka.Corrupt) > 0 {
			b.WriteString(" corrupt=[" + strings.Join(ka.Corrupt, " ") + "]")
		}
		if len(ka.Members) > 0 {
			groups := make([]string, 0, len(ka.Members))
			for g := range ka.Members {
				groups = append(groups, g)
			}
			slices.Sort(groups)
			for _, g := range groups {
				b.WriteString(" " + g + "=")
				writeIDs(b, ka.Members[g])
			}
		}
		if len(ka.MembersRemaining) > 0 {
			groups := make([]string, 0, len(ka.MembersRemaining))
			for g := range ka.MembersRemaining {
				groups = append(groups, g)
			}
			slices.Sort(groups)
			b.WriteString(" lapse=[")
			for i, g := range groups {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(g + ":" + ka.MembersRemaining[g].String())
			}
			b.WriteByte(']')
		}
	case OpAcquire:
		a := ev.Acquire
		b.WriteString(" " + a.Kind.String())
		switch a.Kind {
		case spi.Granted:
			b.WriteString(" token=" + strconv.FormatInt(a.Token, 10) + " remaining=" + a.Remaining.String())
		case spi.HeldBy:
			b.WriteString(" holder=" + string(a.Holder) + " owner=" + a.HolderOwner)
			if a.RemainingUnknown {
				b.WriteString(" remaining=unknown")
			} else {
				b.WriteString(" remaining=" + a.Remaining.String())
			}
		}
	case OpJoin, OpLeave:
		b.WriteString(" " + ev.Status.String())
	case OpMembers:
		b.WriteByte(' ')
		writeIDs(b, ev.Members)
	default:
		b.WriteString(" ok")
	}
}

func writeIDs(b *strings.Builder, ids []spi.SessionID) {
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(id))
	}
	b.WriteByte(']')
}

// EffectKind says which effect an Effect is.
type EffectKind uint8

// The effects. Each is described on Effect.
const (
	EfCall EffectKind = iota + 1
	EfArm
	EfDeadline
	EfElected
	EfRevoked
	EfComplete
	EfPublish
	EfMembers
	EfCancel
	numEffectKinds
)

var effectKindNames = [...]string{"", "call", "arm", "deadline", "elected", "revoked", "complete", "publish", "members", "cancel"}

// String names the kind as transcripts print it.
func (k EffectKind) String() string {
	if k > 0 && k < numEffectKinds {
		return effectKindNames[k]
	}
	return "effect(" + strconv.Itoa(int(k)) + ")"
}

// Effect is one output of Step: something the driver must do. Kind says which fields matter:
//
//   - EfCall: make backend call Op with Req without blocking Step (it may start later and on
//     any goroutine: see the package doc), with a timeout of one renewal interval from when it
//     is sent; when it returns, step a Reply event (ReplyTo) carrying Req, Op, the time the
//     request was sent and the result. Arguments: Session; Name (Acquire, Release: the
//     lease; Join, Leave, Members: the group); Token (Release); Names and Groups (KeepAlive);
//     Owner and TTL (OpenSession); Name (Withdraw: the lease); Queue (Acquire: wait in the
//     name's waiter queue, spi.Queuer.AcquireQueued). Replies may arrive in any order or
//     never (a lost reply is an error reply after the timeout).
//   - EfArm: (re)arm Timer to fire at At (engine time): step a Timer event then. An Arm
//     replaces any pending firing of the same Timer. Stale or early firings are ignored, so a
//     driver need not cancel anything.
//   - EfDeadline: with Name empty, the session's local deadline is now At; publish it to
//     every valid term of Session (Term.IsValid compares the clock against it). With Name
//     set, a keep-alive confirmed the term Name/Token (rule 6): its own bound (Until of its
//     EfElected) no longer applies, and its deadline is the session's from now on.
//   - EfElected: a new term: Name, Token, Session, Owner, At (its deadline when adopted: the
//     earlier of the session's local deadline and Until), Until (the term's own bound by its
//     grant's remaining time, rule 6: the term is valid only before both the session's
//     deadline and Until, until an EfDeadline naming it lifts Until; math.MaxInt64 when there
//     is none), Group and Partition for partitions (Partition is -1 otherwise). Start the
//     election's work, if any, under a context cancelled by the matching Revoked.
//   - EfRevoked: the term Name/Token of Session is over (Reason): mark it invalid and cancel
//     its context before doing anything else this step asks.
//   - EfComplete: answer Future with Err (nil on success); for Lock and TryLock futures Name,
//     Token, Session and At describe the term, and Holder/HolderOwner name the holder when
//     Err is spi.ErrLockHeld; for a Close's future whose session's close call failed, Err is
//     that failure (permanent, or matching spi.ErrUnavailable) and Session names the session.
//   - EfPublish: an event for listeners (Publish says which; see PublishKind).
//   - EfMembers: the view of Group changed: Members (sorted) and Assigned, the partitions this
//     client owns.
//   - EfCancel: the engine no longer wants the acquire Req (Op and Name as its Call's):
//     its election, lock or partition stopped while the acquire waited — a Stop, a StepDown,
//     the Stop of a Lock whose caller gave up, a Close, a Leave or a new view. A driver that
//     has not sent that call yet (it queues calls behind a bound on the calls in flight) must
//     not send it, and steps its Reply at once with NotSent set and no result; one already
//     sent goes on, and its reply is stepped as usual. A driver that sends every call at once
//     may ignore the effect.
type Effect struct {
	Kind        EffectKind
	Req         ReqID
	Op          Op
	Session     spi.SessionID
	Name        string
	Token       int64
	Names       []string
	Groups      []string
	Owner       string
	TTL         time.Duration
	Timer       Timer
	At          time.Duration
	Reason      Reason
	Future      FutureID
	Err         error
	Publish     PublishKind
	Holder      spi.SessionID
	HolderOwner string
	Group       string
	Partition   int
	// Until (EfElected) is the term's own bound (rule 6); see EfElected.
	Until    time.Duration
	Members  []spi.SessionID
	Assigned []int
	// Queue (EfCall of OpAcquire) says the caller waits for the lease: call AcquireQueued
	// (spi.Queuer) instead of Acquire. Only set when Options.Queue is.
	Queue bool
	// Once (EfCall of OpAcquire) says the acquire is a TryLock's one attempt: should it find
	// the lease held, the caller stops waiting for it at once (the shell tells a backend that
	// implements spi.WaitEnder, which drops its hint state for the wait). Not printed.
	Once bool
}

// String prints the effect in the stable form transcripts and logs use.
func (ef Effect) String() string {
	var b strings.Builder
	b.WriteString(ef.Kind.String())
	switch ef.Kind {
	case EfCall:
		b.WriteString(" " + strconv.FormatUint(uint64(ef.Req), 10) + " " + ef.Op.String())
		if ef.Session != "" {
			b.WriteString(" " + string(ef.Session))
		}
		switch ef.Op {
		case OpOpenSession:
			b.WriteString(" owner=" + ef.Owner + " ttl=" + ef.TTL.String())
		case OpKeepAlive:
			b.WriteString(" names=[" + strings.Join(ef.Names, " ") + "] groups=[" + strings.Join(ef.Groups, " ") + "]")
		case OpAcquire, OpJoin, OpLeave, OpMembers, OpWithdraw:
			b.WriteString(" " + ef.Name)
			if ef.Queue {
				b.WriteString(" queued")
			}
		case OpRelease:
			b.WriteString(" " + ef.Name + " token=" + strconv.FormatInt(ef.Token, 10))
		}
	case EfArm:
		b.WriteString(" " + ef.Timer.String() + " at=" + ef.At.String())
	case EfDeadline:
		if ef.Name != "" {
			b.WriteString(" " + ef.Name + " token=" + strconv.FormatInt(ef.Token, 10) + " confirmed")
		} else {
			b.WriteString(" " + string(ef.Session) + " at=" + ef.At.String())
		}
	case EfElected:
		b.WriteString(" " + ef.Name + " token=" + strconv.FormatInt(ef.Token, 10) + " " + string(ef.Session) + " owner=" + ef.Owner + " deadline=" + ef.At.String())
		if ef.Until != math.MaxInt64 {
			b.WriteString(" until=" + ef.Until.String())
		}
	case EfRevoked:
		b.WriteString(" " + ef.Name + " token=" + strconv.FormatInt(ef.Token, 10) + " reason=" + ef.Reason.String())
	case EfComplete:
		b.WriteString(" f" + strconv.FormatUint(uint64(ef.Future), 10))
		if ef.Err != nil {
			b.WriteString(" err=" + strconv.Quote(ef.Err.Error()))
		} else {
			b.WriteString(" ok")
			if ef.Token != 0 {
				b.WriteString(" " + ef.Name + " token=" + strconv.FormatInt(ef.Token, 10))
			}
		}
	case EfPublish:
		b.WriteString(" " + ef.Publish.String())
		if ef.Session != "" {
			b.WriteString(" " + string(ef.Session))
		}
		if ef.Op != 0 {
			b.WriteString(" op=" + ef.Op.String())
		}
		if ef.Name != "" {
			b.WriteString(" " + ef.Name)
		}
		if ef.Reason != 0 {
			b.WriteString(" reason=" + ef.Reason.String())
		}
		if ef.Holder != "" {
			b.WriteString(" holder=" + string(ef.Holder) + " owner=" + ef.HolderOwner)
		}
		if ef.Publish == PubSessionOpened {
			b.WriteString(" deadline=" + ef.At.String())
		}
		if ef.Err != nil {
			b.WriteString(" err=" + strconv.Quote(ef.Err.Error()))
		}
	case EfCancel:
		b.WriteString(" " + strconv.FormatUint(uint64(ef.Req), 10) + " " + ef.Op.String() + " " + ef.Name)
	case EfMembers:
		b.WriteString(" " + ef.Group + " ")
		writeIDs(&b, ef.Members)
		b.WriteString(" assigned=[")
		for i, p := range ef.Assigned {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Itoa(p))
		}
		b.WriteByte(']')
	}
	return b.String()
}

package simba

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/spi"
)

// EventKind says what an Event reports.
type EventKind uint8

// The kinds of Event a client publishes.
const (
	// EventSessionOpened: a new backend session is live (Session set).
	EventSessionOpened EventKind = iota + 1
	// EventSessionExpired: the session expired; every term it backed was revoked.
	EventSessionExpired
	// EventElected: this client became the holder of Name with Token.
	EventElected
	// EventRevoked: this client's term of Name ended (Reason says why).
	EventRevoked
	// EventMembers: the member view of group Name changed (Members, Partitions set).
	EventMembers
	// EventBackendError: a backend call failed (Op, Class, Err; Name when the call concerned a
	// lease or group). Every failed call is reported, but for one on a session the client had
	// sent the close of, which the close subsumes; retryable errors are retried, and so are
	// permanent ones, at the longest backoff (a Lock, TryLock or JoinGroup waiting on the call
	// fails with the permanent error instead). An error of the client's session (Name empty:
	// Op OpOpenSession, OpKeepAlive or OpCloseSession, or a session request the client refused)
	// concerns every election and group, since each one's terms stand on the session: each of
	// their subscribers (Events, All) receives it, once, like the listeners (WithListener). A
	// program subscribed to an election and a group thus reads one session error on both
	// channels, which is what a part of the program that watches only one of them needs; to
	// see every error once, use a listener, or take the session's (Name empty) from one
	// channel only.
	EventBackendError
	// EventClosed: the client finished closing.
	EventClosed
	// EventPaused: the client did not run for a while (Paused says how long, at least): the
	// process was stopped (SIGSTOP), frozen with its VM or container, starved of CPU, or the
	// client's loop was blocked (a listener that does not return), as its session timers,
	// found overdue, tell. Published once a pause, before anything it caused, when the
	// session's local deadline passed in it (the session lost and its terms revoked, the
	// EventSessionExpired and EventRevoked that follow carry Paused too), or when it lasted a
	// renewal interval or more (and at least a second) though the session outlived it; a
	// shorter pause that cost nothing is not published. A suspend of the machine is one too,
	// on the default clock (package doc, Time): Paused is at least the time slept.
	// Listeners only (WithListener).
	EventPaused
)

var eventKindNames = [...]string{
	EventSessionOpened:  "session-opened",
	EventSessionExpired: "session-expired",
	EventElected:        "elected",
	EventRevoked:        "revoked",
	EventMembers:        "members",
	EventBackendError:   "backend-error",
	EventClosed:         "closed",
	EventPaused:         "paused",
}

// String names the kind.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is what listeners, Election.Events and Election.All receive.
type Event struct {
	// Kind says what happened, and so which of the fields below are set.
	Kind EventKind
	// At is the client's monotonic clock reading when the event happened.
	At time.Duration
	// Session is the backend session concerned.
	Session SessionID
	// Name is the lease (or, for EventMembers, the group) concerned.
	Name string
	// Token is the fencing token (EventElected, EventRevoked).
	Token int64
	// Term is the term granted (EventElected): its Remaining and IsValid follow it as
	// keep-alives extend it and its revocation ends it, so a listener (a status page) can show
	// any held lease's time left, a Lock's included. The zero Term for other kinds.
	Term Term
	// Reason says why a term was revoked (EventRevoked).
	Reason RevokeReason
	// Members is the group's live members; Partitions those assigned to this client
	// (EventMembers).
	Members    []SessionID
	Partitions []int
	// Op is the backend operation that failed, one of OpOpenSession, OpKeepAlive,
	// OpCloseSession, OpAcquire, OpRelease, OpJoin, OpLeave, OpMembers and OpWithdraw; empty
	// for a request the client refused (EventBackendError).
	Op string
	// Class says whether the failure is retryable or permanent (EventBackendError).
	Class spi.Class
	// Err is the failure (EventBackendError).
	Err error
	// Paused is how long the client did not run, at least (EventPaused); on EventSessionExpired
	// and EventRevoked, the pause noticed as the session's deadline passed, their likely cause
	// (zero when there was none: a network cut, a backend down).
	Paused time.Duration
}

// The backend operations, as Event.Op and CallInfo.Op name them (and simbaprom's op label).
const (
	// OpOpenSession opens the client's backend session.
	OpOpenSession = "open-session"
	// OpKeepAlive extends the session.
	OpKeepAlive = "keep-alive"
	// OpCloseSession closes the session (Close).
	OpCloseSession = "close-session"
	// OpAcquire asks for a lease (or confirms one held), queued as a waiter where the backend
	// has waiter queues.
	OpAcquire = "acquire"
	// OpRelease gives a lease up.
	OpRelease = "release"
	// OpJoin joins a partition group.
	OpJoin = "join"
	// OpLeave leaves a partition group.
	OpLeave = "leave"
	// OpMembers reads a partition group's live members.
	OpMembers = "members"
	// OpWithdraw leaves a lease's waiter queue (a waiting Lock or candidacy that gave up),
	// on backends with waiter queues.
	OpWithdraw = "withdraw"
)

// String renders the event for logs, with the fields that mean something for its kind only
// (see LogValue for the same as log attributes):
//
//	session-opened <session>
//	session-expired <session> (<reason>)[ paused <paused>]
//	elected <name>#<token>
//	revoked <name>#<token> (<reason>)[ paused <paused>]
//	members <group> members=[...] partitions=[...]
//	backend-error <op>[ <name>] (<class>): <err>
//	closed
//	paused <paused> <session>
func (e Event) String() string {
	switch e.Kind {
	case EventSessionExpired:
		return fmt.Sprintf("%v %s (%v)%s", e.Kind, e.Session, e.Reason, pausedSuffix(e.Paused))
	case EventElected:
		return fmt.Sprintf("%v %s#%d", e.Kind, e.Name, e.Token)
	case EventRevoked:
		return fmt.Sprintf("%v %s#%d (%v)%s", e.Kind, e.Name, e.Token, e.Reason, pausedSuffix(e.Paused))
	case EventMembers:
		return fmt.Sprintf("%v %s members=%v partitions=%v", e.Kind, e.Name, e.Members, e.Partitions)
	case EventBackendError:
		if e.Name != "" {
			return fmt.Sprintf("%v %s %s (%v): %v", e.Kind, e.Op, e.Name, e.Class, e.Err)
		}
		return fmt.Sprintf("%v %s (%v): %v", e.Kind, e.Op, e.Class, e.Err)
	case EventClosed:
		return e.Kind.String()
	case EventPaused:
		return fmt.Sprintf("%v %v %s", e.Kind, e.Paused.Round(time.Millisecond), e.Session)
	}
	return fmt.Sprintf("%v %s", e.Kind, e.Session)
}

// pausedSuffix is " paused <d>" for a revocation or session loss a pause caused, else empty.
func pausedSuffix(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return " paused " + d.Round(time.Millisecond).String()
}

// LogValue implements slog.LogValuer: a logged Event is a group of the attributes that mean
// something for its kind — kind, at and, as set for the kind, session, name, token, reason,
// paused, members, partitions, op, class and err — so that a log (text or JSON) shows no
// zero Reason, Token or Class of an event that has none.
func (e Event) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("kind", e.Kind.String()), slog.Duration("at", e.At))
	if e.Session != "" {
		attrs = append(attrs, slog.String("session", string(e.Session)))
	}
	switch e.Kind {
	case EventSessionExpired:
		attrs = append(attrs, slog.String("reason", e.Reason.String()))
	case EventElected:
		attrs = append(attrs, slog.String("name", e.Name), slog.Int64("token", e.Token))
	case EventRevoked:
		attrs = append(attrs, slog.String("name", e.Name), slog.Int64("token", e.Token), slog.String("reason", e.Reason.String()))
	case EventMembers:
		attrs = append(attrs, slog.String("name", e.Name), slog.Any("members", e.Members), slog.Any("partitions", e.Partitions))
	case EventBackendError:
		if e.Name != "" {
			attrs = append(attrs, slog.String("name", e.Name))
		}
		attrs = append(attrs, slog.String("op", e.Op), slog.String("class", e.Class.String()), slog.Any("err", e.Err))
	}
	switch e.Kind {
	case EventSessionExpired, EventRevoked, EventPaused:
		if e.Paused > 0 || e.Kind == EventPaused {
			attrs = append(attrs, slog.Duration("paused", e.Paused))
		}
	}
	return slog.GroupValue(attrs...)
}

// RevokeReason says why a term ended.
type RevokeReason uint8

// The reasons a term ends.
const (
	// RevokedDeadline: the session's local deadline passed before a keep-alive confirmed it,
	// or a keep-alive could not renew the term's lease (Redis Cluster: the master of its slot
	// did not answer while the session's did): the term was not renewed, nobody took it.
	RevokedDeadline RevokeReason = iota + 1
	// RevokedTakenOver: the backend no longer lists the lease as ours (and did not say it
	// failed to renew it).
	RevokedTakenOver
	// RevokedSessionExpired: the backend reported the session expired.
	RevokedSessionExpired
	// RevokedStopped: Stop (or Unlock, or Leave) ended the term, or, for a partition, a
	// membership change gave it to another member and this one handed it over.
	RevokedStopped
	// RevokedSteppedDown: StepDown ended the term.
	RevokedSteppedDown
	// RevokedClosed: the client was closed.
	RevokedClosed
	// RevokedCorruptRecord: the backend found the lease's record not of the kind it writes
	// (Redis: the lease key written over with another type than a hash), so no session holds
	// it: nobody took it over, the record needs an operator (see ErrCorruptRecord, which
	// the term's RevokedError matches).
	RevokedCorruptRecord
)

var revokeReasonNames = [...]string{
	RevokedDeadline:       "deadline",
	RevokedTakenOver:      "taken-over",
	RevokedSessionExpired: "session-expired",
	RevokedStopped:        "stopped",
	RevokedSteppedDown:    "stepped-down",
	RevokedClosed:         "closed",
	RevokedCorruptRecord:  "corrupt-record",
}

// String names the reason; the zero RevokeReason, the Reason of an Event that is no
// revocation or session loss, is "none".
func (r RevokeReason) String() string {
	if r == 0 {
		return "none"
	}
	if int(r) < len(revokeReasonNames) && revokeReasonNames[r] != "" {
		return revokeReasonNames[r]
	}
	return fmt.Sprintf("RevokeReason(%d)", uint8(r))
}

// RevokedError is the cause of a revoked term's context (context.Cause) and of errors that
// report a revocation.
type RevokedError struct {
	// Name is the lease and Token the fencing token of the term that ended; Reason says why it
	// ended (RevokedClosed after Client.Close, for one).
	Name   string
	Token  int64
	Reason RevokeReason
}

// Error implements error.
func (e *RevokedError) Error() string {
	if e.Reason == RevokedCorruptRecord {
		return fmt.Sprintf("simba: term %s#%d revoked: %v (the lease's record at the backend is not one Simba writes, e.g. a Redis key written over with another type: nobody took the lease over, the record needs an operator)", e.Name, e.Token, e.Reason)
	}
	return fmt.Sprintf("simba: term %s#%d revoked: %v", e.Name, e.Token, e.Reason)
}

// Is makes errors.Is(err, ErrNotHeld) hold: a revoked term is no longer held; errors.Is(err,
// ErrClosed) for a term the client's Close revoked; and errors.Is(err, ErrCorruptRecord) for
// one whose lease record was found corrupt (RevokedCorruptRecord).
func (e *RevokedError) Is(target error) bool {
	return target == ErrNotHeld || target == ErrClosed && e.Reason == RevokedClosed ||
		target == ErrCorruptRecord && e.Reason == RevokedCorruptRecord
}

// publicOps names each engine operation as the client reports it (Event.Op, CallInfo.Op): every
// engine.Op has its Op constant here (TestEveryOpIsDocumented).
var publicOps = [...]string{
	engine.OpOpenSession:  OpOpenSession,
	engine.OpKeepAlive:    OpKeepAlive,
	engine.OpCloseSession: OpCloseSession,
	engine.OpAcquire:      OpAcquire,
	engine.OpRelease:      OpRelease,
	engine.OpJoin:         OpJoin,
	engine.OpLeave:        OpLeave,
	engine.OpMembers:      OpMembers,
	engine.OpWithdraw:     OpWithdraw,
}

// publicOp returns op's name as the client reports it.
func publicOp(op engine.Op) string {
	if int(op) < len(publicOps) && publicOps[op] != "" {
		return publicOps[op]
	}
	return op.String()
}

// Package engine is the pure decision logic of a Simba client (DESIGN.md §2–§4): one session,
// its elections (and locks, and the partitions of joined groups), and the six rules that
// keep terms safe (DESIGN.md §2 lists five; rule 6 is below). It has no goroutines, clock
// reads, randomness or I/O. Everything it learns arrives as an Event; everything it decides
// leaves as an Effect. Because Step is a
// function of the state and the event, every race is a sequence of events: the transcripts
// under testdata/ and the simulator (internal/sim) replay them exactly.
//
// # Driving the engine
//
// Create one Engine per client with New (it validates Options; Defaults() returns the defaults
// of DESIGN.md §4, the only place they are defined), then call Step(ev, now) from a single
// goroutine, once per event, and carry out the returned effects in order before the next
// Step. now is the client's monotonic time (spi.Clock.Now(): a duration since an arbitrary
// origin); it must not go backwards (a smaller value is taken as the previous one). The
// returned slice is reused by the next Step: copy what must outlive it (the slices inside
// effects — Names, Groups, Members, Assigned — are never reused and may be kept).
//
// Start with an EvBoot event: it opens the session. Then feed:
//
//   - user requests: EvStart (an election, or a Lock/TryLock with a Future that completes with
//     the term or an error), EvStop, EvStepDown, EvJoin and EvLeave (groups), EvClose;
//   - EvWorkExited when the work started for a term (Elected) returns, with that term's
//     name and token;
//   - EvHint for each backend hint (spi.Hinter), if the backend has them (hints can be forged
//     or come in storms: the engine damps them per name, see HintWindow);
//   - EvReachable when the backend answers again while the session's calls were failing (the
//     shell's probe): calls that wait out a failure's backoff (opens, keep-alives, acquires,
//     group Joins and Leaves) are retried at once, and a failed members read is read again, at
//     most once per BackoffMax (Engine.reachable);
//   - EvTimer and EvReply, as the effects below ask.
//
// Effects and what the driver does with them:
//
//   - EfCall: make backend call Op with the arguments in the effect, without blocking Step:
//     events go on being stepped while the call runs, and its outcome comes back as a reply.
//     The call may start later than the Step that asked for it, and on any goroutine; its
//     timeout of one renewal interval (Options.RenewInterval) counts from when it is sent.
//     The shell (callgate.go in package simba) runs at most 32 backend calls of a client at
//     once, the session's own (open, keep-alive, close) excepted: those start at once and
//     never wait behind the others, so a keep-alive is not held past its timeout. The rest
//     queue, a lock's, election's or group's own calls ahead of group partitions', and start
//     as earlier calls end; an acquire or release that a Lock or Unlock asked for may run on
//     that caller's goroutine. When the call returns — with a result, an error, or the
//     timeout's error — step exactly one reply: ReplyTo(call) with SentAt set to the time the
//     request was actually sent (never earlier than the Step that asked for it: for a queued
//     call, when it left the queue) and Err or the result field for Op (Session, KeepAlive,
//     Acquire, Status, Members). Every call must get its reply, even late: the engine ignores
//     replies that no longer matter, but waits for the one it needs (at most one keep-alive
//     and one acquire per name are in flight, and the next waits for the reply). A call the
//     driver decides not to send (the shell drops a queued acquire of a session lost
//     meanwhile) gets an error reply instead. Replies may come in any order.
//   - EfArm: fire Timer at At: step EvTimer{Timer} when the clock reaches At. An Arm replaces
//     any pending firing of the same Timer (it is comparable: key a map by it). The engine
//     checks every timer against its own state, so early, late, duplicate or stale firings are
//     harmless and no cancellation is ever needed.
//   - EfDeadline: the local deadline of session Session is now At (sentAt + remaining×(1−drift)
//     − margin, with remaining clamped to [0, TTL] and the sum saturated, so no reply can push
//     it into the far future); store it where the terms of that session read it (Term.IsValid is
//     `!revoked && clock.Now() < deadline`).
//   - EfElected: a new term (Name, Token, Session, Owner, At = the deadline when adopted; Group
//     and Partition for partitions, Partition is -1 otherwise): create the Term, run OnElected
//     and start the leader work under a context that Revoked cancels.
//   - EfRevoked: the term Name/Token of Session ended (Reason): mark it revoked and cancel its context
//     first — a Release of its lease may follow in the same batch, and rule 2 needs the term
//     invalid before the release leaves.
//   - EfComplete: answer Future (nil Err is success; for locks Name/Token/Session/At describe
//     the term; spi.ErrLockHeld comes with Holder/HolderOwner).
//   - EfPublish: hand the event to listeners (session opened/lost/closed, permanent errors,
//     the holder seen by a candidate).
//   - EfMembers: the view of Group changed (Members, and Assigned: this client's partitions).
//   - EfCancel: the acquire Req is no longer wanted (its election, lock or partition
//     stopped: a Stop or StepDown, a Close, a Leave, or a new view). If it still waits to be
//     sent, drop it and step its reply at once with NotSent set (nothing else); if it was
//     sent, do nothing: its reply comes as usual. A Leave waits for the reply either way, and
//     for the release of a grant it brings (testdata/leave-taking.txt); so does a Stop whose
//     candidate's only queued attempt was that acquire, which withdraws after it only if it
//     queued or may have (HeldBy, or a failure other than a refusal: testdata/lock-cancel.txt,
//     testdata/late-queued.txt).
//
// Request ids (ReqID) are the engine's: it numbers calls 1, 2, 3… and matches replies by id
// and Op, so a reply to a call from an earlier session, or to an attempt that is no longer
// current, is recognised and changes nothing (or releases a grant nobody wants). Future ids
// are the driver's: any non-zero value, completed by exactly one EfComplete.
//
// The engine draws no randomness: each event carries Jitter in [0, 1], the driver's random
// draw, which the engine multiplies into the delays it picks on that event (full-jitter
// backoff from 50 ms up to the renewal interval; up to 25 ms added to a candidate's retry at
// the holder's remaining time). A simulator makes Jitter from its seed; the shell from a hash
// of its seed (WithSeed, random by default), the event and the clock's reading.
//
// # Semantics in brief
//
// The session opens with retries and backoff; it is renewed once per renewal interval with
// one keep-alive in flight, and failed keep-alives are retried inside the remaining time.
// When the local deadline passes, or the backend answers SessionExpired, every term is
// revoked (deadline / session-expired), the old session is closed best-effort and a new one
// opened — never resurrected (rule 4). A deadline's close that fails retryably is sent once
// more when the next session opens (the backend answers again), so that the lost session's
// leases are freed then rather than when the backend expires them.
//
// An election is Candidate, Leader, Handover, Cooldown or Ended (DESIGN.md §2). A term is
// adopted only from a reply to the election's current attempt, before the local deadline,
// with a token above every token the session released for the name (rule 1). A name's next
// acquire does not wait for the session's release of its previous term, so at the server it
// may overtake that release (about 1 % of same-client lock churn's acquires) and come back
// granted with the released token: rule 1 refuses it, the token is released again, and the
// attempt is retried as soon as the releases of the name in flight have all landed
// successfully — the lease is free at the server then, or someone else's, which the retry's
// reply says — not after a blind backoff (0-50 ms) as before; the backoff stays armed as the
// fallback, and is what retries when one of those releases fails (its outcome is unknown, and
// it may still land) or the name has an outcome still unknown. The retry waits for the last
// release rather than the first, so that no release of the name is on its way when it is sent
// (ZooKeeper's release of a lease its backend thinks held compares the node's version, not
// its token, and a new node of the same session has that version too). A term is
// revoked before its lease is released, and the release carries the token (rule 2). Each
// keep-alive asks about the names of current terms, acquires in flight and acquires or
// releases of unknown outcome, and the joined groups; a term adopted before the request but
// missing from the reply is revoked (taken-over; deadline when the reply names it unrenewed:
// the backend could not renew it; corrupt-record when it names it corrupt: its record is not
// one the backend writes), and a lease in the reply that nothing
// wants is released (rule 3). An acquire whose outcome became unknown (any failure but a
// refusal) brings the next keep-alive forward to 20 ms later (settleDelay, at most a quarter
// of the renewal interval), once however many fail before it is sent: a grant that landed
// for a caller who gave up is released then, not a renewal interval later; not while
// keep-alives fail, whose backoff stands. A stopped or stepped-down term whose work still runs
// keeps its lease until the work exits or the deadline as of the stop, whichever is first
// (rule 5).
// A term is good until its grant's own remaining time at most (the acquire's send time plus
// its Remaining, as every deadline is made) until a keep-alive that asked about the lease
// lists it held; until then that bound also bounds the session's deadline, and a grant
// whose bound has passed when its reply is handled is released, not adopted (rule 6). A
// backend may keep a lease's expiry apart from its session's — Redis copies the session's
// expiry into the lease at grant time and moves it only with keep-alives that name the
// lease — so a keep-alive sent before the acquire and applied after it renews the session,
// not the lease.
// The futures of Stop and StepDown complete with the reply of the Release they cause (after
// the handover, if any), so a caller returns once the lease is free at the backend; a failed
// release completes them with an error saying the outcome is unknown — except while the
// client is closing: then the session's close releases the lease, and they complete once that
// close is done, with an error matching spi.ErrClosed (close-cut-release.txt); and after the
// session was lost: the lease went with it, a lock's stop completes with ReleaseLostError (the
// lock was lost first), an election's with nothing (release-lost.txt). A Leave whose membership
// is still to be deleted when Close comes completes once the session's close is done, with an
// error matching spi.ErrClosed (close-cut-leave.txt). Locks end with their
// term instead of becoming candidates again. A TryLock makes one attempt and never waits out
// an outage: with no live session it waits only for an open in flight, and fails with
// spi.ErrUnavailable (wrapping the open's error) when that open fails or none is in flight. Partitions are elections named
// wire.PartitionName(group, p) that the engine starts and stops as rendezvous hashing
// (wire.Owner over the member view) assigns them. The member view comes from a Members read
// after each Join, from every keep-alive reply, from a read on each GroupChanged hint, and from
// a read when the first other member would expire (KeepAlive.MembersRemaining, where the
// backend tells it), so a member that stops renewing loses its partitions when its session
// expires even on backends that notify no expiry.
//
// # Permanent errors
//
// A backend call's error is permanent when spi.Classify says so (a missing schema, an invalid
// option such as a TTL the server refuses, a record of the wrong kind, a token overflow, TLS
// that cannot work, context.Canceled): retrying the same call cannot heal it, only an operator
// can. The engine follows one rule for them, by who waits for the call:
//
//   - A call made for a caller who waits returns the error to that caller, and the engine does
//     not retry it for them: a Lock's or TryLock's acquire (the future completes with the error
//     as it is, not ErrUnavailable), the open of a session a Lock or TryLock waits for (every
//     such waiter fails with it; a Lock or TryLock that finds the last open refused and the
//     next not yet sent fails at once with that error, also as it is, rather than wait out the
//     open's backoff to be refused again, while one that finds an open in flight waits for
//     it; in a live session whose last keep-alive was refused and whose next is not in flight,
//     a Lock or TryLock fails at once with that refusal, sending no acquire:
//     testdata/keepalive-refused.txt), a Stop's, StepDown's or Unlock's release (the future says the outcome is
//     unknown, wrapping the error; keep-alives settle the lease, rule 3), and a group's Leave
//     (its future completes with the error; the leave itself goes on, see below).
//   - A call made in the background, which nobody waits for, publishes the error (PubError)
//     and is retried after between BackoffMax/2 and BackoffMax, whatever the jitter, so it
//     heals by itself once the cause is fixed (the key deleted, the server's configuration
//     changed, the migration applied): the session's open and keep-alive, an election's or a
//     partition's acquire (an election's user learns of it from the published error: the
//     handle's Err and events), a group's Join (the JoinGroup future completed at once), and a
//     group's leave once its Leave has returned the refusal: the membership it could not delete
//     would stay at the backend as long as the session lives (SQL, ZooKeeper and etcd keep
//     memberships with the session), and the other members would go on assigning partitions
//     to a member that leads none, so the leave is retried in the background until it
//     succeeds or the session ends (its memberships with it: a lost session's next one has
//     nothing to leave; Close deletes them). No group callback fires for the group meanwhile,
//     and keep-alives do not renew its membership. A Join of the group cancels the pending
//     leave and is taken at once (a leave call still in flight holds the Join's call back
//     until its reply, so that it cannot land after the Join); a Leave of it completes at once. A
//     failed members read is not retried by itself: every keep-alive brings the members. A
//     keep-alive's retry comes no later than halfway to the session's local deadline (and
//     BackoffMin from now at least), so that a backend healed before the deadline renews the
//     session in time; if none succeeds, the deadline revokes the terms on time as always.
//   - Best-effort calls whose effect lapses by itself publish the error and are not retried:
//     a Withdraw (the waiter's entry lapses, or the backend withdraws it; the Stop completes
//     without it) and the session's close (the session expires with its TTL; Close's future
//     completes with the error, permanent or matching spi.ErrUnavailable, and Session naming
//     the session, and so does every later Close).
//
// A refused call did not land, unlike one that failed otherwise (a timeout, a lost
// connection), whose request may still be applied: a refused acquire leaves no outcome
// unknown (no keep-alive is brought forward to settle it, none asks about the name for it, and
// a queued one leaves no waiter entry to withdraw; testdata/acquire-refused.txt), and a refused
// Join leaves no outcome unknown that a Leave would wait out (the group is left at once,
// without a Leave call, if no Join can have landed). The other way round, a Leave that failed
// otherwise may still land up to one call timeout after it was abandoned, so a Join of the
// group (the rejoin after the Leave, or one that cancels a pending leave) sends its call only
// once it no longer can; the Join itself is taken at once (testdata/leave-unknown.txt).
//
// The engine publishes every failure; the driver damps what it logs (package simba logs a
// permanent error at ERROR once per call and distinct error, then once a minute while it
// repeats). Retryable errors back off with full jitter from BackoffMin up to BackoffMax and are
// retried at once on a sign that the backend answers again (reachable); permanent ones are not.
// testdata/permanent.txt walks through each case.
//
// # For tests and the simulator
//
// The read-only accessors (SessionState, SessionID, Deadline, Election, Elections, Group,
// Closed) expose what invariant checkers need. Options.Break disables one rule of DESIGN.md
// §2 and rule 6 (Rule1…Rule6) so mutation tests can prove each rule is needed; it must never be set
// outside tests. Every Event and Effect has a stable String form, used by logs and by the
// transcripts (go test ./internal/engine -run TestTranscripts -rewrite regenerates them).
package engine

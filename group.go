package simba

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
)

// PartitionGroup is this client's membership of a group of P partitions. Partition p is the
// lease named "<group>.<p>"; each member contends only for the partitions rendezvous hashing
// assigns to it (wire.Owner over the live members) and hands over those it no longer owns, so
// after a membership change every partition ends up led by exactly one member.
//
// Rendezvous hashing moves only the share of a member that joins or leaves, but it balances
// only on average: each member's share spreads like a random draw around P/N. With 64
// partitions over 20 members the busiest member leads about twice the mean share and the least
// busy often none; with about 100 partitions per member the shares stay within about 20 % of
// the mean. Choose P well above the number of members when even load matters.
type PartitionGroup struct {
	c          *Client
	name       string
	partitions int
	disp       *serialDispatcher

	onAssigned func(ctx context.Context, p int, t Term)
	onRevoked  func(ctx context.Context, p int, t Term, reason RevokeReason)
	work       func(ctx context.Context, p int, t Term) error

	// leaving is g's Leave under way while g is its group's handle (Client.awaitEndLocked).
	leaving ending

	mu       sync.Mutex
	members  []SessionID
	assigned []int
	parts    map[int]*leaseCore
	events   leaseCore // subscribers of group-level events
}

// GroupOption configures a PartitionGroup (OnAssigned, OnUnassigned, RunPartition). The zero
// GroupOption is invalid.
type GroupOption struct{ apply func(*PartitionGroup) error }

// OnAssigned sets a callback run when this client starts leading partition p. Callbacks of a
// group run one at a time, in order. Its ctx is never cancelled, as OnElected's: it only
// marks the callback for Close; watch t.Context() (or use RunPartition) to follow the term.
func OnAssigned(fn func(ctx context.Context, p int, t Term)) GroupOption {
	return GroupOption{func(g *PartitionGroup) error {
		if fn == nil {
			return invalid("OnAssigned function is nil")
		}
		g.onAssigned = fn
		return nil
	}}
}

// OnUnassigned sets a callback run when this client's term of partition p ends (rebalanced
// away, lost, or the group left). Its ctx is never cancelled, as OnElected's.
func OnUnassigned(fn func(ctx context.Context, p int, t Term, reason RevokeReason)) GroupOption {
	return GroupOption{func(g *PartitionGroup) error {
		if fn == nil {
			return invalid("OnUnassigned function is nil")
		}
		g.onRevoked = fn
		return nil
	}}
}

// RunPartition sets per-partition leader work: fn runs for each term of each partition this
// client leads, with a ctx cancelled on revocation; a partition rebalanced away is handed over
// only after fn returns (or the term's local deadline as it stood at the rebalance passes, as
// in RunWhileLeader's handover). As in RunWhileLeader, fn returning while its term lasts leaves
// the partition led without work until the term ends, a panic in fn is not recovered, and
// Leave called from inside fn returns once the group's terms are revoked. As there too, the
// work of a partition runs one term at a time in a client: a term of p won back while fn of
// the last term of p still runs (ignoring its cancelled ctx) gets fn called only once that
// one has returned, and none if it ends first.
func RunPartition(fn func(ctx context.Context, p int, t Term) error) GroupOption {
	return GroupOption{func(g *PartitionGroup) error {
		if fn == nil {
			return invalid("RunPartition function is nil")
		}
		g.work = fn
		return nil
	}}
}

// JoinGroup joins group with the given number of partitions. It validates the group name (every
// partition name must be a valid lease name: ErrInvalidName), the partition count (1 to
// 65,536, wire.MaxPartitions: ErrInvalidOption) and the options before any I/O and returns once
// the engine has taken the request; membership and partitions then follow in the background.
// A group this client has joined already (its handle not left) cannot be joined again
// (ErrInvalidOption): one client is one member, and the first handle goes on as it was.
// A group this client is still leaving (a Leave under way, even one whose ctx ended and that
// goes on in the background) is joined once that leave's membership is deleted: JoinGroup
// waits for that (bounded by ctx), then joins, rather than fail.
// A group one of whose partitions has an election (started or not) or a lock on this client
// cannot be joined (ErrInvalidOption), nor can such a partition get one while the group is
// joined. A JoinGroup that returns ctx's error leaves nothing joined: a ctx that had ended
// before the call is refused at once, and if the engine takes the join after ctx ended, or
// ctx ends while the join waits for a leave, the join is withdrawn (the group left again at
// once, if it was joined meanwhile). A Close while it waits makes it return ErrClosed.
//
// Every member of a group must join it with the same partition count: the backend keeps no
// count, so nothing checks it, and each member hashes only its own partitions over all the
// members. With members of 4 and of 8 partitions, the partitions 4 to 7 that hashing gives a
// member of 4 are led by nobody. To change the count, use a new group name.
func (c *Client) JoinGroup(ctx context.Context, group string, partitions int, opts ...GroupOption) (*PartitionGroup, error) {
	if ctx == nil {
		return nil, nilContext("JoinGroup")
	}
	// A partition count is an option, not a name: out of range, it is ErrInvalidOption.
	if partitions < 1 || partitions > wire.MaxPartitions {
		return nil, invalid("group %q: partition count %d is outside [1, %d]", group, partitions, wire.MaxPartitions)
	}
	if err := wire.ValidateGroup(group, partitions); err != nil {
		return nil, err
	}
	// A ctx that has already ended is refused before the request, as Lock refuses it: stepped
	// inline, the engine would take the join at once and JoinGroup return the group.
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	g := &PartitionGroup{c: c, name: group, partitions: partitions, disp: newSerialDispatcher(c.cfg.callbacks, &c.callbacks, &c.insideG), parts: make(map[int]*leaseCore)}
	g.events = leaseCore{c: c, name: group, disp: g.disp}
	for _, o := range opts {
		if o.apply == nil {
			return nil, invalid("zero group option")
		}
		if err := o.apply(g); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		old := c.groups[group]
		if old == nil {
			break
		}
		// A Leave of the group under way, its event not yet taken by the loop: wait for it,
		// then join (the engine makes the join wait for the leave's membership too).
		if c.awaitEndLocked(ctx, &old.leaving) && ctx.Err() == nil {
			continue
		}
		underWay := old.leaving.taken != nil
		c.mu.Unlock()
		switch {
		case ctx.Err() != nil: // it ended while this waited
			return nil, ctxErr(ctx)
		case !underWay:
			return nil, invalid("group %q is already joined on this client", group)
		}
		return nil, ErrClosed // the loop exited
	}
	if name := c.partitionHandleLocked(group, partitions); name != "" {
		c.mu.Unlock()
		return nil, invalid("partition %q of group %q has an election or a lock on this client", name, group)
	}
	c.groups[group] = g
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		c.dropGroupHandleLocked(g)
		c.mu.Unlock()
	}
	// The engine may take the join after ctx has ended (its event waited for a busy loop), or
	// keep it waiting for a Leave of the group past ctx's end: a join the caller gave up on is
	// left at once, right after the step that takes it or as soon as the loop has the caller's
	// giving up, so that no group the caller has no *PartitionGroup for stays joined. A Leave
	// of a group whose join still waits cancels the join (the engine's rule).
	ev := engine.Event{Kind: engine.EvJoin, Name: group, Partitions: partitions, HasWork: g.work != nil}
	abandoned, err := c.requestUndoable(ctx, ev, nil, func(accepted bool) {
		if accepted {
			c.step(engine.Event{Kind: engine.EvLeave, Name: group})
		}
		forget()
	})
	switch {
	case err == nil:
		return g, nil
	case abandoned:
		return nil, err // the step leaves the group again, if the engine joins it
	}
	forget()
	return nil, err
}

// Name is the group name.
func (g *PartitionGroup) Name() string { return g.name }

// Partitions is the group's partition count.
func (g *PartitionGroup) Partitions() int { return g.partitions }

// Leave leaves the group: every partition this client leads is revoked (RevokedStopped) and handed
// over. Like Election.Stop, it returns once the work is done: each of those partitions released
// (after its RunPartition work returned) and the membership deleted, or gone with a lost session.
// A group still taking its partitions has acquires under way: those not sent yet (a client runs
// 32 calls at once, so a big group's acquires wait for a slot) are dropped unsent, and Leave
// waits for those sent to come back and for the release of any partition they were granted, so
// that it returns with none of the group's partitions held by this client.
// Work that ignores its ctx is waited for only until the term's local deadline as it stood at the
// Leave (see RunPartition): then the partition is released, and Leave returns nil, while that work
// still runs with an invalid term. A release whose outcome is unknown is reported as an error
// (keep-alives settle it), and so is an acquire under way at the Leave whose outcome is unknown
// (it failed, so it may still land; keep-alives release it then): one per such partition,
// joined on one line, each found by errors.Is and errors.As. A leave the backend refuses with a permanent error (IsPermanent: a missing schema,
// a Redis group key of another type, ErrCorruptRecord) is returned by Leave at once, and
// reported as a backend error (an event and an ERROR line); the membership it could not delete
// would stay as long as the session lives, the other members assigning it partitions, so the
// client retries the leave in the background every BackoffMax/2 to BackoffMax (events, and
// the log damped to one ERROR line a minute) until it succeeds, the session ends, or a
// JoinGroup of the group cancels it. No callback of the group runs meanwhile. A leave failing
// with a retryable error is retried before Leave returns. If
// ctx ends first Leave returns ctx's error, and leaving goes on; a JoinGroup of
// the group meanwhile waits until the membership is deleted, then joins (see JoinGroup). Called from inside the group's own RunPartition work,
// which the handover would wait for, Leave returns once the engine has taken it (every term
// of the group revoked, the work's ctx cancelled): the partitions are released as their work
// returns, the caller's own once it returns.
//
// A Leave of a handle that has left (a second Leave, a deferred one) leaves nothing more: it
// returns once the first Leave's work is done, or at once. Once this client has joined the
// group again, it returns nil at once and never reaches the new membership, even when it races
// with that JoinGroup: where the client steps requests, one at a time and in order, it checks
// that no other handle has the group before it steps a Leave. After the client's Close, Leave
// returns ErrClosed, as every operation does (see Client.Close); so does a Leave whose
// partition's release was in flight when Close cut it short, once the session's close, which
// releases the lease, is done, and a Leave whose membership was still to be deleted when Close
// came (its leave call in flight, or waiting for a join's reply), whatever that call's outcome:
// the session's close deletes the membership. Only a Leave whose work was all done before
// Close began returns nil. A partition's release that fails after the client's session was
// lost counts as done, as the membership gone with it does: the lease went with the session.
func (g *PartitionGroup) Leave(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Leave")
	}
	// The engine knows groups by name: the Leave is stepped only if no other handle has the
	// group as the loop takes it (current), or it would leave a newer membership (a deferred
	// Leave of the first join, say). A check made here could race with a JoinGroup.
	ev := engine.Event{Kind: engine.EvLeave, Name: g.name}
	// Once the engine has taken the Leave (whatever err says), and not before: a Leave whose ctx
	// ends while it waits for the loop is taken later, and its revocations must still find the
	// group's partitions. Close still waits for its callbacks.
	after := func() {
		g.c.mu.Lock()
		g.c.dropGroupHandleLocked(g)
		g.c.mu.Unlock()
	}
	g.c.mu.Lock()
	if g.c.groups[g.name] == g {
		g.leaving.begin()
	}
	g.c.mu.Unlock()
	if g.runsWork(g.c.workName()) {
		return g.c.requestTaken(ctx, ev, g.current, after)
	}
	_, err := g.c.requestIf(ctx, ev, g.current, after)
	return err
}

// dropGroupHandleLocked makes g no longer its group's handle on c (if it is), and lets a
// JoinGroup waiting for g's Leave go on. c.mu is held.
func (c *Client) dropGroupHandleLocked(g *PartitionGroup) {
	if c.groups[g.name] != g {
		return
	}
	delete(c.groups, g.name)
	g.leaving.done()
}

// current is the guard of g's Leave, on the loop goroutine (requestIf): it reports whether g's
// group has no other handle on this client. JoinGroup makes the handle the group's before it
// posts the join, and the step of a Leave lets the handle go, so when the loop takes a Leave,
// another handle of the group means that g has left (JoinGroup refuses a group joined), and
// that the membership the engine has of the group, or is about to have, is that handle's. With
// no handle at all, the engine is leaving g's membership (the Leave waits for that too) or an
// earlier one, or has none.
func (g *PartitionGroup) current() bool {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	cur := g.c.groups[g.name]
	return cur == nil || cur == g
}

// runsWork reports whether name, the lease whose work a goroutine runs, is a partition of g.
func (g *PartitionGroup) runsWork(name string) bool {
	rest, ok := strings.CutPrefix(name, g.name+".")
	if !ok {
		return false
	}
	p, err := strconv.Atoi(rest)
	return err == nil && p >= 0 && p < g.partitions && strconv.Itoa(p) == rest
}

// Members is the group's live membership as last reported by the backend, sorted.
func (g *PartitionGroup) Members() []SessionID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.members)
}

// Assigned lists the partitions rendezvous hashing assigns to this client in the current view,
// ascending. A partition is led (has a valid term) shortly after it is assigned; see Held.
func (g *PartitionGroup) Assigned() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.assigned)
}

// Held returns the partitions this client leads now, with their valid terms.
func (g *PartitionGroup) Held() map[int]Term {
	g.mu.Lock()
	parts := make(map[int]*leaseCore, len(g.parts))
	for p, l := range g.parts {
		parts[p] = l
	}
	g.mu.Unlock()
	out := make(map[int]Term)
	for p, l := range parts {
		if t, ok := l.current(); ok {
			out[p] = t
		}
	}
	return out
}

// Events returns a channel of the group's events (members, elected/revoked for each partition,
// and backend errors: the group's and its partitions' calls' and, with Name empty, its
// session's, which every election's and group's subscribers receive too; see
// EventBackendError) from now until ctx ends: then, or when the client finishes closing, the channel is
// closed and forgotten. It is buffered; if the reader falls behind, events are dropped rather
// than blocking the client, and counted (DroppedEvents). A nil ctx never ends.
func (g *PartitionGroup) Events(ctx context.Context) <-chan Event { return g.events.events(ctx) }

// DroppedEvents is the number of the group's events dropped so far because a subscriber of the
// group was full.
func (g *PartitionGroup) DroppedEvents() uint64 { return g.events.dropped.Load() }

// Err returns the permanent backend error that keeps this group from working, or nil: a
// missing or old schema (matching ErrSchemaMissing), a DSN that names the wrong kind of server,
// bad credentials or permissions. It is set when a join or members call of the group, or a
// call of the client's session, fails permanently (an EventBackendError with Class Permanent
// reports it too) and cleared when such a call succeeds. A refused join is retried every
// BackoffMax/2 to BackoffMax (the renewal interval), so the group joins by itself once the
// cause is fixed; the log has an ERROR line for the error once, then one a minute while it
// repeats.
func (g *PartitionGroup) Err() error {
	if err := g.events.lastErrs.permanent(); err != nil {
		return err
	}
	return g.c.sessErr.permanent()
}

func (g *PartitionGroup) view(members []SessionID, assigned []int) {
	g.mu.Lock()
	g.members = slices.Clone(members)
	g.assigned = slices.Clone(assigned)
	g.mu.Unlock()
}

// partition returns the handle of partition p, creating it on first use.
func (g *PartitionGroup) partition(p int) leaseHandle {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.parts[p]; l != nil {
		return partitionHandle{l, g}
	}
	l := &leaseCore{c: g.c, name: wire.PartitionName(g.name, p), disp: g.disp}
	if fn := g.onAssigned; fn != nil {
		l.onElected = func(ctx context.Context, t Term) { fn(ctx, p, t) }
	}
	if fn := g.onRevoked; fn != nil {
		l.onRevoked = func(ctx context.Context, t Term, r RevokeReason) { fn(ctx, p, t, r) }
	}
	if fn := g.work; fn != nil {
		l.work = func(ctx context.Context, t Term) error { return fn(ctx, p, t) }
	}
	g.parts[p] = l
	return partitionHandle{l, g}
}

// partitionHandle forwards a partition's events to the group's subscribers too.
type partitionHandle struct {
	*leaseCore
	g *PartitionGroup
}

func (h partitionHandle) publish(ev Event) {
	h.leaseCore.publish(ev)
	h.g.events.publish(ev)
}

func (g *PartitionGroup) publish(ev Event) { g.events.publish(ev) }

func (g *PartitionGroup) errs() *errNote { return g.events.errs() }

package sql

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// The interpreter: every SPI operation runs the steps spec/sql.yaml declares for it on the
// backend's dialect (wire.SQLDialect.Operations), over the one neutral queries interface of
// generated/sqlq. A step runs its statement, then (if the spec says so) ends the operation when
// a one statement returned no row, or runs a named decision (below) whose outcome either ends
// the operation or lets the later steps run; steps may be conditional on an outcome or on a
// parameter being given. A batch operation queues its statements in one round trip and runs
// the decisions afterwards, in step order; a pipelined transaction (PostgreSQL's
// acquire_queued) sends each step with the steps the spec pipelines after it in one round trip,
// BEGIN and COMMIT in the first and last, and runs the decisions between round trips. Nothing
// here knows a statement's order: reorder the
// spec's steps and regenerate, and this code runs the new order.

// opState is what one run of an operation reads and fills: the statements' parameters and
// values (sqlq.State), the current outcome and what the decisions decided.
type opState struct {
	sqlq.State
	outcome   string
	acquire   spi.Acquire // acquire's reply, when a decision granted or refused
	owed      bool        // acquire's HeldBy names the first waiter the free lease is owed to
	remaining int64       // the session's time left in milliseconds, when a decision read it
	// queued, set by a keep-alive, tells whether the session may have live waiter entries. The
	// decision that the session was renewed asks it and gives queued_id (the session's id) when
	// so, which the waiter statements of MySQL/MariaDB and SQLite need to run (spec/sql.yaml:
	// keep_alive_waiters_join, keep_alive_waiters_correlated). Asked after the renewal
	// committed, not before the keep-alive: an AcquireQueued noted after the answer began after
	// the renewal, and its entry took the renewed expiry; one noted before is seen.
	queued func() bool
}

// decision reads the values the steps so far returned (s is the statement just run) and
// answers one of its outcomes as spec/sql.yaml declares them (wire.SQLDecisions).
type decision func(st *opState, s sqlq.Statement) (string, error)

// decisions are the named decisions of spec/sql.yaml, exactly those (checked when a backend is
// made, and by TestDecisionsMatchSpec).
var decisions = map[string]decision{
	"renewed": func(st *opState, _ sqlq.Statement) (string, error) {
		st.remaining = st.Out.KeepAliveRenew
		st.noteQueued()
		return "live", nil
	},
	"session_live": func(st *opState, _ sqlq.Statement) (string, error) {
		if st.Out.SessionRemaining <= 0 {
			return "session_expired", nil
		}
		st.remaining = st.Out.SessionRemaining
		st.noteQueued()
		return "live", nil
	},
	"member_row": func(st *opState, s sqlq.Statement) (string, error) {
		var live bool
		switch s {
		case sqlq.StmtJoin:
			live = st.Out.Join.SessionLive
		case sqlq.StmtLeave:
			live = st.Out.Leave.SessionLive
		default:
			return "", fmt.Errorf("decision member_row after %s", s)
		}
		if !live {
			return "session_expired", nil
		}
		return "live", nil
	},
	"acquired":            decideAcquired,
	"acquired_queued":     decideAcquired,
	"lease_holder":        decideLeaseHolder,
	"lease_holder_queued": decideLeaseHolder,
}

// noteQueued gives queued_id, after a renewal, when the session may have live waiter entries.
func (st *opState) noteQueued() {
	if st.queued != nil && st.queued() {
		st.Args.QueuedID = st.Args.ID
	}
}

// decideAcquired reads PostgreSQL's one-statement acquire. After a race the statement may
// report neither a grant nor a live holder: its final SELECT reads the statement's snapshot,
// taken before the concurrent winner it waited for committed, so the holder is empty, the
// caller itself or the expired previous holder, with 0 remaining (stale). The spec runs the
// statement again then (re-running is safe, as an acquire by the caller is idempotent; the new
// snapshot sees the winner); if the race persists the reply is HeldBy with remaining 0 ("retry
// soon"), never a grant. A stored token the statement refused to take (negative, or at the int64
// maximum for a new tenure) is ErrCorruptToken / ErrTokenOverflow: nothing was written.
func decideAcquired(st *opState, _ sqlq.Statement) (string, error) {
	r, sid, name := st.Out.Acquire, st.Args.SessionID, st.Args.Name
	switch {
	case !r.SessionLive:
		return "session_expired", nil
	case r.Granted && r.Token <= 0:
		// Only a re-acquire keeps the stored token (a new tenure's is at least the clock in
		// µs): the holder's own row was written over with a token no tenure has. Granting it
		// would have the client adopt it, and its keep-alive revoke it as corrupt, at every
		// renewal; the statement rewrote the row as it was.
		return "", tokenOfNoTenure(name, r.Token)
	case r.Granted:
		// The statement deleted the grantee's waiter entry, if it had one.
		st.acquire = spi.Acquire{Kind: spi.Granted, Token: r.Token, Remaining: millis(r.RemainingMs)}
		return "granted", nil
	case r.StoredToken < 0:
		return "", corruptToken(name, r.StoredToken)
	}
	stale := r.HolderID == "" || r.HolderID == sid || r.RemainingMs <= 0
	if stale && r.WaiterID != "" && r.WaiterID != sid && r.WaiterRemainingMs > 0 {
		// Free, but owed to the first live waiter (spi.Queuer): reserved for it.
		st.acquire = spi.Acquire{Kind: spi.HeldBy, Holder: spi.SessionID(r.WaiterID), Remaining: millis(r.WaiterRemainingMs)}
		st.owed = true
		return "held_by", nil
	}
	if stale && r.StoredToken == math.MaxInt64 && r.HolderID != sid {
		return "", tokenOverflow(name, r.StoredToken)
	}
	rem := max(r.RemainingMs, 0)
	if stale {
		rem = 0
	}
	st.acquire = spi.Acquire{Kind: spi.HeldBy, Holder: spi.SessionID(r.HolderID), HolderOwner: r.HolderOwner, Remaining: millis(rem)}
	if stale {
		return "stale", nil
	}
	return "held_by", nil
}

// decideLeaseHolder reads the lease with its holder's session row locked (the multi-statement
// acquire, DESIGN.md §5): the caller holds it (same token), it is free or its holder expired
// (take it with next_token: max(token + 1, the database clock in µs)), or a live session holds
// it. A negative stored token, or one with no successor, is an error: the transaction rolls
// back and nothing is written.
func decideLeaseHolder(st *opState, _ sqlq.Statement) (string, error) {
	l, mine, sid, name := st.Out.AcquireReadLease, st.Out.AcquireLockSession, st.Args.SessionID, st.Args.Name
	switch {
	case l.Token < 0:
		return "", corruptToken(name, l.Token)
	case l.HolderID == sid && l.Token <= 0:
		// The caller's own row written over with a token no tenure has (see decideAcquired).
		return "", tokenOfNoTenure(name, l.Token)
	case l.HolderID == sid:
		st.acquire = spi.Acquire{Kind: spi.Granted, Token: l.Token, Remaining: millis(mine)}
		return "granted", nil
	case l.HolderID == "" || l.HolderRemainingMs <= 0:
		if l.WaiterID != "" && l.WaiterID != sid && l.WaiterRemainingMs > 0 {
			// Free, but owed to the first live waiter (spi.Queuer): reserved for it.
			st.acquire = spi.Acquire{Kind: spi.HeldBy, Holder: spi.SessionID(l.WaiterID), Remaining: millis(l.WaiterRemainingMs)}
			st.owed = true
			return "held_by", nil
		}
		switch {
		case l.NextToken <= l.Token && l.Token == math.MaxInt64:
			return "", tokenOverflow(name, l.Token)
		case l.NextToken <= l.Token:
			// next_token -1 for a token below the maximum: the stored value compares above
			// every integer without being one (SQLite, a text or blob: read as 0).
			return "", tokenNotInteger(name)
		}
		st.Args.NextToken = l.NextToken
		st.acquire = spi.Acquire{Kind: spi.Granted, Token: l.NextToken, Remaining: millis(mine)}
		if l.WaiterID == sid {
			return "take_head", nil
		}
		return "take", nil
	}
	st.acquire = spi.Acquire{Kind: spi.HeldBy, Holder: spi.SessionID(l.HolderID), HolderOwner: l.HolderOwner, Remaining: millis(l.HolderRemainingMs)}
	return "held_by", nil
}

// step is one compiled step of an operation.
type step struct {
	wire.SQLStep
	stmt     sqlq.Statement
	decide   decision
	outcomes []string // every outcome decide may answer
}

// plan is one operation compiled for the backend's dialect.
type plan struct {
	name     string
	tx       bool
	batch    bool
	pipeline bool // a pipelined transaction (wire.SQLOperation.Pipeline)
	steps    []step
	// first is the operation run first, on its own (empty: none); the steps run only after
	// one of the outcomes in firstContinue.
	first         string
	firstContinue []string
}

// compilePlans compiles the operation table of dialect, failing on a statement the neutral
// interface does not have or a decision this package does not implement.
func compilePlans(dialect string) (map[string]*plan, error) {
	wd, ok := wire.SQLDialectByName(dialect)
	if !ok {
		return nil, fmt.Errorf("sql: unknown dialect %q", dialect)
	}
	outcomes := wire.SQLDecisions()
	plans := make(map[string]*plan, len(wd.Operations))
	for name, op := range wd.Operations {
		p := &plan{name: name, tx: op.Transaction, batch: op.Batch, pipeline: op.Pipeline && op.Transaction, first: op.First, firstContinue: op.FirstContinue}
		for _, ws := range op.Steps {
			s := step{SQLStep: ws}
			if s.stmt, ok = sqlq.StatementByName(ws.Query); !ok {
				return nil, fmt.Errorf("sql %s: operation %s: no statement %s in generated/sqlq", dialect, name, ws.Query)
			}
			if ws.Decide != "" {
				if s.decide = decisions[ws.Decide]; s.decide == nil {
					return nil, fmt.Errorf("sql %s: operation %s: decision %s is not implemented", dialect, name, ws.Decide)
				}
				s.outcomes = outcomes[ws.Decide]
			}
			p.steps = append(p.steps, s)
		}
		plans[name] = p
	}
	for name, p := range plans {
		if f := plans[p.first]; p.first != "" && (f == nil || f.first != "") {
			return nil, fmt.Errorf("sql %s: operation %s: first operation %s is missing or has a first of its own", dialect, name, p.first)
		}
	}
	return plans, nil
}

// run runs operation name with the parameters st.Args on the backend's dialect: in a
// transaction, a batch or statement by statement, as the spec declares, after the operation's
// first try if it has one. On return st holds the values, the final outcome and what the
// decisions decided.
func (b *Backend) run(ctx context.Context, name string, st *opState) error {
	p := b.plans[name]
	if p == nil {
		return fmt.Errorf("sql %s: no operation %s in the spec", b.name, name)
	}
	if p.first != "" {
		if err := b.run(ctx, p.first, st); err != nil {
			return err
		}
		if !slices.Contains(p.firstContinue, st.outcome) {
			return nil // the first try's outcome is the reply
		}
		st.acquire, st.remaining = spi.Acquire{}, 0
	}
	if pl, ok := b.d.(pipeliner); ok && p.pipeline {
		return pl.withPipeline(ctx, func(q sqlq.Queries, tx *pipeTx) error {
			if b.wrap != nil {
				q = b.wrap(q)
			}
			// A run again after a deadlock starts afresh.
			st.Out, st.NoRow, st.outcome = sqlq.Results{}, [sqlq.NumStatements]bool{}, ""
			return p.runPipelined(ctx, q, st, tx)
		})
	}
	return b.d.with(ctx, p.tx, func(q sqlq.Queries) error {
		if b.wrap != nil {
			q = b.wrap(q)
		}
		// A run again after a deadlock starts afresh.
		st.Out, st.NoRow, st.outcome = sqlq.Results{}, [sqlq.NumStatements]bool{}, ""
		if p.batch {
			return p.runBatch(ctx, q, st)
		}
		return p.runSteps(ctx, q, st)
	})
}

func (p *plan) runSteps(ctx context.Context, q sqlq.Queries, st *opState) error {
	for i := range p.steps {
		s := &p.steps[i]
		if !p.runs(s, st) {
			continue
		}
		for attempt := 1; ; attempt++ {
			st.NoRow[s.stmt] = false
			if err := sqlq.Exec(ctx, q, s.stmt, &st.State); err != nil {
				return err
			}
			again, end, err := p.after(s, st)
			if err != nil || end {
				return err
			}
			if !again || attempt >= s.Attempts {
				break
			}
		}
		if s.decide != nil && slices.Contains(s.Reply, st.outcome) {
			return nil
		}
	}
	return nil
}

func (p *plan) runBatch(ctx context.Context, q sqlq.Queries, st *opState) error {
	var buf [8]sqlq.Statement
	stmts := buf[:0]
	for i := range p.steps {
		if s := &p.steps[i]; s.If == "" || st.Args.Given(s.If) {
			stmts = append(stmts, s.stmt)
		}
	}
	if err := q.Batch(ctx, stmts, &st.State); err != nil {
		return err
	}
	for i := range p.steps {
		s := &p.steps[i]
		if s.If != "" && !st.Args.Given(s.If) {
			continue
		}
		if _, end, err := p.after(s, st); err != nil || end {
			return err
		}
		if s.decide != nil && slices.Contains(s.Reply, st.outcome) {
			return nil
		}
	}
	return nil
}

// pipeliner is a dialect that pipelines a transaction (PostgreSQL): withPipeline runs fn in
// one transaction on one connection, like with(ctx, true, fn), but sends the dialect's begin
// with fn's first batch instead of on its own, and COMMIT with the batch fn sends after setting
// tx.commitNext (or on its own after fn when none did); tx.rollback makes it roll back though
// fn succeeded.
type pipeliner interface {
	withPipeline(ctx context.Context, fn func(q sqlq.Queries, tx *pipeTx) error) error
}

// pipeTx is one run of a pipelined transaction, between the interpreter and the dialect.
type pipeTx struct {
	begun      bool // the begin was sent (in a batch or on its own)
	commitNext bool // the next batch ends with COMMIT
	committed  bool // a batch that ended with COMMIT succeeded
	rollback   bool // end with ROLLBACK although fn succeeded: statements after the end ran
}

// runPipelined runs a pipelined transaction's steps (spec/sql.yaml, operation attribute
// pipeline): each step with its following pipeline steps in one batch, one round trip, then
// their no_rows and decisions in step order on the client, as runSteps would. The spec's
// generator checks that whether a step of a batch runs does not depend on a decision of the
// same batch (a when is read before the batch is sent) and that a repeated step ends its
// batch (its repeats run alone). COMMIT goes in the batch that is the last to run: no step of
// it decides (no decision can fail or reply after COMMIT), no step but its last can end the
// operation by no_rows, and no later step can run at the current outcome. When a step ends
// the operation before the last statement of its batch, the later statements ran: the
// transaction is rolled back then, never committed (tx.rollback).
func (p *plan) runPipelined(ctx context.Context, q sqlq.Queries, st *opState, tx *pipeTx) error {
	var sbuf [8]sqlq.Statement
	var rbuf [8]*step
	for i := 0; i < len(p.steps); {
		j := i + 1
		for j < len(p.steps) && p.steps[j].Pipeline {
			j++
		}
		stmts, runs := sbuf[:0], rbuf[:0]
		commit := true
		for k := i; k < j; k++ {
			if s := &p.steps[k]; p.runs(s, st) {
				if s.decide != nil || (s.NoRows != "" && k < j-1) {
					commit = false
				}
				stmts, runs = append(stmts, s.stmt), append(runs, s)
			}
		}
		if len(runs) == 0 {
			i = j
			continue
		}
		for k := j; commit && k < len(p.steps); k++ {
			commit = !p.runs(&p.steps[k], st)
		}
		tx.commitNext = commit
		for _, s := range runs {
			st.NoRow[s.stmt] = false
		}
		if err := q.Batch(ctx, stmts, &st.State); err != nil {
			return err
		}
		tx.commitNext = false
		for k, s := range runs {
			again, end, err := p.after(s, st)
			for attempt := 2; err == nil && again && attempt <= s.Attempts; attempt++ {
				st.NoRow[s.stmt] = false // the generator keeps a repeated step last in its batch
				if err = q.Batch(ctx, stmts[k:k+1], &st.State); err == nil {
					again, end, err = p.after(s, st)
				}
			}
			if err != nil {
				return err
			}
			if end || (s.decide != nil && slices.Contains(s.Reply, st.outcome)) {
				tx.rollback = k < len(runs)-1
				return nil
			}
		}
		i = j
	}
	return nil
}

// runs tells whether step s runs at the current outcome and parameters.
func (p *plan) runs(s *step, st *opState) bool {
	return (s.When == "" || s.When == st.outcome) && (s.If == "" || st.Args.Given(s.If))
}

// after applies step s's no_rows and decision to the values its statement returned: end says
// the operation ends here, again that the step is to run again (its repeat outcome).
func (p *plan) after(s *step, st *opState) (again, end bool, err error) {
	if st.NoRow[s.stmt] {
		if s.NoRows == "" {
			return false, false, fmt.Errorf("operation %s: %s returned no row", p.name, s.stmt)
		}
		st.outcome = s.NoRows
		return false, true, nil
	}
	if s.decide == nil {
		return false, false, nil
	}
	o, err := s.decide(st, s.stmt)
	if err != nil {
		return false, false, err
	}
	if !slices.Contains(s.outcomes, o) {
		return false, false, fmt.Errorf("operation %s: decision %s answered %q, which the spec does not declare", p.name, s.Decide, o)
	}
	st.outcome = o
	return s.Repeat != "" && o == s.Repeat, false, nil
}

// The SPI operations on the interpreter: each sets its parameters, runs the spec's steps and
// builds its reply from the values and the decisions.

func (b *Backend) openSession(ctx context.Context, id, owner string, ttlMs int64) error {
	st := &opState{}
	st.Args.ID, st.Args.Owner, st.Args.TtlMs = id, owner, ttlMs
	return b.run(ctx, "open_session", st)
}

// keepAlive renews the session, then lists the held leases and (when groups are asked) the
// groups' members: a fixed number of statements whatever the number of leases.
func (b *Backend) keepAlive(ctx context.Context, sid string, groups []string) (spi.KeepAlive, error) {
	st := &opState{queued: func() bool { return b.queued.has(sid) }}
	st.Args.ID, st.Args.SessionID, st.Args.GroupNames = sid, sid, groups
	if err := b.run(urgentCtx(ctx), "keep_alive", st); err != nil { // ahead at the SQLite file gate
		return spi.KeepAlive{}, err
	}
	if st.outcome == "session_expired" {
		return spi.KeepAlive{Expired: true}, nil
	}
	ka := spi.KeepAlive{Remaining: millis(st.remaining)}
	if len(st.Out.KeepAliveHeld) > 0 {
		ka.Held = make([]spi.Held, 0, len(st.Out.KeepAliveHeld))
		for _, h := range st.Out.KeepAliveHeld {
			if h.Token <= 0 {
				// A negative token is no token Simba grants (the row was written over by
				// something else): not held as any term knows it, and its record needs an
				// operator (every acquire of it fails with spi.ErrCorruptToken), so the
				// client revokes its term as corrupt-record rather than taken over. Nor is 0
				// (a tenure's token is at least 1; only a free row starts at 0), which is
				// also how a token that is no integer reads on SQLite.
				ka.Corrupt = append(ka.Corrupt, h.Name)
				continue
			}
			ka.Held = append(ka.Held, spi.Held{Name: h.Name, Token: h.Token})
		}
	}
	if len(groups) > 0 {
		ka.Members = memberMap(len(groups))
		for _, m := range st.Out.KeepAliveMembers {
			ka.Members[m.GroupName] = append(ka.Members[m.GroupName], spi.SessionID(m.SessionID))
			// The first of the other members to expire (no NOTIFY tells it): the client reads
			// the members again then. A member whose id is not a client's is left out here as
			// it is from the view.
			if m.SessionID == sid || !wire.IsClientSessionID(m.SessionID) {
				continue
			}
			ka.NoteMemberRemaining(m.GroupName, millis(m.RemainingMs))
		}
	}
	return ka, nil
}

func (b *Backend) closeSession(ctx context.Context, sid string) error {
	st := &opState{}
	st.Args.ID, st.Args.SessionID = sid, sid
	return b.run(ctx, "close_session", st)
}

// acquire runs op: acquire, or acquire_queued (which also registers a waiter).
func (b *Backend) acquire(ctx context.Context, op, sid, name string) (spi.Acquire, error) {
	r, _, err := b.acquireOwed(ctx, op, sid, name)
	return r, err
}

// acquireOwed is acquire that also tells (owed) that a HeldBy names the first waiter the free
// lease is owed to, not its holder.
func (b *Backend) acquireOwed(ctx context.Context, op, sid, name string) (r spi.Acquire, owed bool, err error) {
	st := &opState{}
	st.Args.SessionID, st.Args.Name = sid, name
	if err := b.run(ctx, op, st); err != nil {
		return spi.Acquire{}, false, err
	}
	if st.outcome == "session_expired" {
		return spi.Acquire{Kind: spi.SessionExpired}, false, nil
	}
	if st.acquire.Kind == 0 {
		return spi.Acquire{}, false, fmt.Errorf("sql %s: acquire ended with outcome %q and no reply", b.name, st.outcome)
	}
	return st.acquire, st.owed && st.acquire.Kind == spi.HeldBy, nil
}

// withdraw deletes sid's entry from name's waiter queue.
func (b *Backend) withdraw(ctx context.Context, sid, name string) error {
	st := &opState{}
	st.Args.SessionID, st.Args.Name = sid, name
	return b.run(ctx, "withdraw", st)
}

func (b *Backend) release(ctx context.Context, sid, name string, token int64) error {
	st := &opState{}
	st.Args.SessionID, st.Args.Name, st.Args.Token = sid, name, token
	return b.run(ctx, "release", st)
}

// joinLeaveOp runs join or leave and tells whether the session is live.
func (b *Backend) joinLeaveOp(ctx context.Context, op, sid, group string) (bool, error) {
	st := &opState{}
	st.Args.ID, st.Args.SessionID, st.Args.GroupName = sid, sid, group
	if err := b.run(ctx, op, st); err != nil {
		return false, err
	}
	return st.outcome != "session_expired", nil
}

func (b *Backend) join(ctx context.Context, sid, group string) (bool, error) {
	return b.joinLeaveOp(ctx, "join", sid, group)
}

func (b *Backend) leave(ctx context.Context, sid, group string) (bool, error) {
	return b.joinLeaveOp(ctx, "leave", sid, group)
}

func (b *Backend) members(ctx context.Context, group string) ([]string, error) {
	st := &opState{}
	st.Args.GroupName = group
	err := b.run(ctx, "members", st)
	return st.Out.Members, err
}

func (b *Backend) housekeeping(ctx context.Context) error {
	return b.run(ctx, "housekeeping", &opState{})
}

func (b *Backend) inspect(ctx context.Context) (spi.Snapshot, error) {
	st := &opState{}
	if err := b.run(ctx, "inspect", st); err != nil {
		return spi.Snapshot{}, err
	}
	s := spi.Snapshot{Groups: memberMap(0)}
	for _, l := range st.Out.InspectLeases {
		s.Leases = append(s.Leases, leaseInfo(l.Name, l.HolderID, l.Owner, l.Token, l.RemainingMs))
	}
	for _, x := range st.Out.InspectSessions {
		s.Sessions = append(s.Sessions, spi.BoundSession(spi.SessionInfo{ID: spi.SessionID(x.ID), Owner: x.Owner, Remaining: millis(x.RemainingMs)}))
	}
	for _, m := range st.Out.InspectMembers {
		s.Groups[m.GroupName] = append(s.Groups[m.GroupName], spi.SessionID(m.SessionID))
	}
	return s, nil
}

// inspectLease runs inspect_lease: false when the lease has no row (the spec's no_rows
// outcome, absent).
func (b *Backend) inspectLease(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	st := &opState{}
	st.Args.Name = name
	if err := b.run(ctx, "inspect_lease", st); err != nil || st.outcome == "absent" {
		return spi.LeaseInfo{}, false, err
	}
	l := st.Out.InspectLease
	return leaseInfo(name, l.HolderID, l.Owner, l.Token, l.RemainingMs), true, nil
}

func (b *Backend) schemaVersion(ctx context.Context) (int64, error) {
	st := &opState{}
	// It only reads: on SQLite it neither takes the writers' gate nor switches the file to
	// WAL mode, so a command that fails on a missing schema leaves the file as it was.
	err := b.run(readOnlyCtx(ctx), "schema_version", st)
	return st.Out.SchemaVersion, err
}

func (b *Backend) databaseNow(ctx context.Context) (int64, error) {
	st := &opState{}
	err := b.run(ctx, "database_now", st)
	return st.Out.DatabaseNow, err
}

// clearForeignHolder frees name if its holder is exactly holder (a foreign session id),
// keeping the token.
func (b *Backend) clearForeignHolder(ctx context.Context, name, holder string) error {
	st := &opState{}
	st.Args.Name, st.Args.SessionID = name, holder
	return b.run(ctx, "clear_foreign_holder", st)
}

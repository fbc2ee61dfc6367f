package sim

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/spi"
)

// step runs one engine step of client c at the current backend time and carries out its
// effects, as the shell's loop does. callIdx is the call a reply answers (-1 otherwise).
func (s *Sim) step(c *client, ev engine.Event, callIdx int32) {
	ev.Jitter = s.rng.Float64()
	now := c.clock(s.now)
	r := s.tr.slot()
	r.at, r.ct, r.client, r.kind, r.ev = s.now, now, c.idx, recEvent, ev
	s.stats.Steps++
	if ev.Kind == engine.EvReply && c.eng.SessionState() == engine.SessionLive && now >= c.eng.Deadline() {
		s.stats.PastDeadline++
	}
	effs := c.eng.Step(ev, now)
	for i := range effs {
		s.apply(c, &effs[i], now)
		if c.eng == nil {
			return
		}
	}
	if callIdx >= 0 && ev.Err == nil && expiredReply(&ev) {
		s.checkRule4(c, s.calls[callIdx].ef.Session)
	}
}

// expiredReply reports whether the reply says the session no longer exists.
func expiredReply(ev *engine.Event) bool {
	switch ev.Op {
	case engine.OpKeepAlive:
		return ev.KeepAlive.Expired
	case engine.OpAcquire:
		return ev.Acquire.Kind == spi.SessionExpired
	case engine.OpJoin, engine.OpLeave:
		return ev.Status == spi.Expired
	}
	return false
}

// apply carries out one effect of client c at client time now.
func (s *Sim) apply(c *client, ef *engine.Effect, now time.Duration) {
	r := s.tr.slot()
	r.at, r.ct, r.client, r.kind, r.ef = s.now, now, c.idx, recEffect, *ef
	switch ef.Kind {
	case engine.EfCall:
		if ef.Op == engine.OpRelease {
			s.checkRule2(c, ef)
		}
		s.startCall(c, ef, now)
	case engine.EfArm:
		c.timerSeq++
		c.timers[ef.Timer] = c.timerSeq
		s.q.push(item{at: max(c.backendAt(ef.At), s.now), kind: kTimer, client: c.idx, inc: c.inc, arm: c.timerSeq, timer: ef.Timer})
	case engine.EfDeadline:
		s.onDeadline(c, ef, now)
	case engine.EfElected:
		s.onElected(c, ef, now)
	case engine.EfRevoked:
		s.onRevoked(c, ef, now)
	case engine.EfComplete:
		s.onComplete(c, ef)
	case engine.EfPublish:
		// Session ids are recorded when the backend opens them.
	case engine.EfMembers:
		// The view is checked against the model when the run has settled.
	case engine.EfCancel:
		s.cancelCall(c, ef)
	}
}

// cancelCall drops client c's acquire ef.Req if its request has not reached the backend yet:
// the model stands for the shell's queue of calls waiting for a slot with the request's way
// to the backend (a request lost on its way, or one that reached the backend, goes on).
func (s *Sim) cancelCall(c *client, ef *engine.Effect) {
	for i := len(s.calls) - 1; i >= 0; i-- {
		cl := &s.calls[i]
		if cl.client != c.idx || cl.inc != c.inc || cl.ef.Req != ef.Req {
			continue
		}
		if cl.ef.Op != engine.OpAcquire || cl.answered || cl.dropped || cl.handled {
			return
		}
		cl.dropped = true
		s.stats.Dropped++
		s.note(c.idx, nDropped, int64(ef.Req), ef.Op.String())
		cl.reply = engine.ReplyTo(cl.ef)
		cl.reply.SentAt, cl.reply.NotSent = cl.sentC, true
		s.q.push(item{at: s.now, kind: kReply, client: c.idx, inc: c.inc, idx: int32(i)})
		return
	}
}

// --- calls ---

// startCall sends the call ef of client c, sent at client time sent, and decides its fate.
func (s *Sim) startCall(c *client, ef *engine.Effect, sent time.Duration) {
	s.stats.Calls++
	if ef.Op == engine.OpAcquire && ef.Queue {
		delete(c.withdrawals, ef.Name) // waiting again: its entry, if any, is its place
	}
	idx := int32(len(s.calls))
	s.calls = append(s.calls, call{client: c.idx, inc: c.inc, ef: *ef, sentB: s.now, sentC: sent})
	cl := &s.calls[idx]
	f := &s.cfg.Faults
	timeout := c.renewB // the call timeout (one renewal interval) in backend time
	l1, l2 := s.latency(), s.latency()
	u := -1.0
	if !s.healed {
		u = s.rng.Float64()
		if s.rng.Float64() < f.Slow {
			if s.rng.IntN(2) == 0 {
				l1 = s.between(l1, timeout*9/10)
			} else {
				l2 = s.between(l2, timeout*9/10)
			}
			c.disturbed = max(c.disturbed, s.now+timeout)
		}
		// Drawn only when set (LeaseExpiry seeds), so other seeds replay as before.
		if f.SlowKeepAlive > 0 && ef.Op == engine.OpKeepAlive && s.rng.Float64() < f.SlowKeepAlive {
			l1 = s.between(l1, timeout*9/10)
			c.disturbed = max(c.disturbed, s.now+timeout)
		}
	}
	req := int64(ef.Req)
	op := ef.Op.String()
	scheduleTimeout := func() {
		cl.timeout = true
		s.q.push(item{at: s.now + timeout, kind: kTimeout, client: c.idx, inc: c.inc, idx: idx})
		c.disturbed = max(c.disturbed, s.now+timeout)
	}
	switch p := f.LostRequest; {
	case u < 0:
		// Healed: a normal call.
	case u < p:
		s.note(c.idx, nLostRequest, req, op)
		scheduleTimeout()
		return
	case u < p+f.LostReply:
		s.note(c.idx, nLostReply, req, op)
		scheduleTimeout()
		s.q.push(item{at: s.now + l1, kind: kCall, client: c.idx, idx: idx})
		return
	case u < p+f.LostReply+f.Timeout:
		s.note(c.idx, nTimedOut, req, op)
		scheduleTimeout()
		land := s.between(timeout/2, timeout*3/2) // often after the client gave up
		if !s.LandAfterTimeout {
			land = s.between(timeout/2, timeout)
		}
		s.q.push(item{at: s.now + land, kind: kCall, client: c.idx, idx: idx})
		return
	case u < p+f.LostReply+f.Timeout+f.Late:
		// A backend that ignores the call's context: the reply comes whenever it comes.
		s.note(c.idx, nLate, req, op)
		rtt := s.between(timeout/2, 2*timeout)
		l1 = min(l1, rtt/2)
		cl.replyLag, cl.deliver = rtt-l1, true
		c.disturbed = max(c.disturbed, s.now+rtt)
		s.q.push(item{at: s.now + l1, kind: kCall, client: c.idx, idx: idx})
		return
	}
	if l1+l2 >= timeout {
		scheduleTimeout()
	} else {
		cl.replyLag, cl.deliver = l2, true
	}
	s.q.push(item{at: s.now + l1, kind: kCall, client: c.idx, idx: idx})
}

// handleCall carries out call idx at the backend, now.
func (s *Sim) handleCall(idx int32) {
	cl := &s.calls[idx]
	c := &s.clients[cl.client]
	ef := &cl.ef
	if cl.dropped {
		return // dropped unsent (cancelCall)
	}
	cl.handled = true
	if s.down(s.now) {
		s.note(cl.client, nDown, int64(ef.Req), ef.Op.String())
		c.disturbed = max(c.disturbed, s.now+c.renewB)
		if cl.timeout || s.rng.IntN(2) == 0 {
			if !cl.timeout { // the connection hangs until the client gives up
				cl.timeout = true
				s.q.push(item{at: cl.sentB + c.renewB, kind: kTimeout, client: cl.client, inc: cl.inc, idx: idx})
			}
			return
		}
		cl.reply = engine.ReplyTo(*ef)
		cl.reply.SentAt, cl.reply.Err = cl.sentC, errDown
		if s.cfg.Faults.Refusals {
			// A Leave too: its caller gets the refusal, and the engine retries the leave in
			// the background while the session lives (the model's memberships live with the
			// session); it used to let the group go, leaving the membership behind, whose
			// partitions went unled (liveness, seed 260).
			cl.reply.Err = errRefused
		}
		s.q.push(item{at: s.now + s.latency(), kind: kReply, client: cl.client, inc: cl.inc, idx: idx})
		return
	}
	s.note(cl.client, nHandled, int64(ef.Req), ef.Op.String())
	ev := engine.ReplyTo(*ef)
	ev.SentAt = cl.sentC
	m := s.model
	switch ef.Op {
	case engine.OpOpenSession:
		ev.Session, ev.Err = m.OpenSession(s.now, ef.Owner, ef.TTL)
		if ev.Err == nil {
			s.sess[ev.Session.ID] = sessRec{client: cl.client, inc: cl.inc}
		}
	case engine.OpKeepAlive:
		ev.KeepAlive, ev.Err = m.KeepAlive(s.now, ef.Session, ef.Names, ef.Groups)
		if ev.Err == nil && !ev.KeepAlive.Expired && cl.inc == c.inc {
			s.retryWithdrawals(c, ef.Session)
		}
	case engine.OpCloseSession:
		ev.Err = m.CloseSession(s.now, ef.Session)
	case engine.OpAcquire:
		before, _ := m.Lease(s.now, ef.Name)
		if ef.Queue {
			ev.Acquire, ev.Err = m.AcquireQueued(s.now, ef.Session, ef.Name)
		} else {
			ev.Acquire, ev.Err = m.Acquire(s.now, ef.Session, ef.Name)
		}
		if ev.Err == nil {
			s.checkFair(cl.client, ef, before, ev.Acquire)
		}
	case engine.OpRelease:
		ev.Err = m.Release(s.now, ef.Session, ef.Name, ef.Token)
	case engine.OpJoin:
		ev.Status, ev.Err = m.Join(s.now, ef.Session, ef.Name)
	case engine.OpLeave:
		ev.Status, ev.Err = m.Leave(s.now, ef.Session, ef.Name)
	case engine.OpMembers:
		ev.Members, ev.Err = m.Members(s.now, ef.Name)
	case engine.OpWithdraw:
		ev.Err = m.Withdraw(s.now, ef.Session, ef.Name)
		if ev.Err == nil {
			s.withdrawn(ef.Session, ef.Name)
		}
	}
	if ev.Err != nil {
		s.fail("model-error", "the model refused %v from c%d: %v", ef.String(), cl.client, ev.Err)
		return
	}
	cl.reply = ev
	if cl.deliver {
		s.q.push(item{at: s.now + cl.replyLag, kind: kReply, client: cl.client, inc: cl.inc, idx: idx})
	}
	s.sendHints()
}

// entriesLiveWithSession reports whether the engines (and the fair-queue check) are told that
// waiter entries live with their session: Faults.SessionWaiters, or the false claim of the
// falseSessionWaiters mutation.
func (s *Sim) entriesLiveWithSession() bool {
	return s.cfg.Faults.SessionWaiters || s.falseSessionWaiters
}

// withdrawn records at the fair-queue check that session left name's waiter queue.
func (s *Sim) withdrawn(session spi.SessionID, name string) {
	s.fairQ[name] = slices.DeleteFunc(s.fairQ[name], func(w shadowWaiter) bool { return w.id == session })
}

// withdrawFailed records that the call ef of client c failed at the client, if it is a
// withdrawal from a queue whose entries live with the session: c's backend runs it again with
// the session's next keep-alive, as ZooKeeper's and etcd's do (spi.SessionQueue).
func (s *Sim) withdrawFailed(c *client, ef *engine.Effect) {
	if ef.Op != engine.OpWithdraw || !s.model.SessionWaiters() || s.noWithdrawRetry {
		return
	}
	if c.withdrawals == nil {
		c.withdrawals = make(map[string]spi.SessionID)
	}
	c.withdrawals[ef.Name] = ef.Session
}

// retryWithdrawals runs the failed withdrawals of client c's session at the model, after a
// keep-alive of it did.
func (s *Sim) retryWithdrawals(c *client, session spi.SessionID) {
	for _, name := range slices.Sorted(maps.Keys(c.withdrawals)) {
		if c.withdrawals[name] != session {
			continue
		}
		delete(c.withdrawals, name)
		s.note(c.idx, nWithdrawAgain, 0, name)
		if err := s.model.Withdraw(s.now, session, name); err != nil {
			s.fail("model-error", "the model refused the withdrawal of c%d (session %s) from %s: %v", c.idx, session, name, err)
			return
		}
		s.withdrawn(session, name)
	}
}

// sendHints delivers the model's queued hints to every running client, each after its own
// latency (or never, if lost).
func (s *Sim) sendHints() {
	hs := s.model.TakeHints()
	if !s.cfg.Faults.Hints {
		return
	}
	for _, h := range hs {
		s.stats.Hints++
		hi := int32(len(s.hints))
		s.hints = append(s.hints, h)
		for i := range s.clients {
			c := &s.clients[i]
			if c.eng == nil {
				continue
			}
			if !s.healed && (s.rng.Float64() < s.cfg.Faults.LostHint || s.loseHints) {
				s.note(c.idx, nHintLost, 0, h.Name)
				continue
			}
			s.q.push(item{at: s.now + s.latency(), kind: kHint, client: c.idx, inc: c.inc, idx: hi})
		}
	}
}

// --- terms and work ---

func (s *Sim) newTerm(c *client, ef *engine.Effect) int32 {
	ti := int32(len(s.terms))
	s.terms = append(s.terms, term{
		client: c.idx, inc: c.inc, name: ef.Name, ni: s.nameIdx[ef.Name], token: ef.Token, session: ef.Session,
		startB: s.now, deadline: ef.At, until: ef.Until, exitAt: never,
	})
	return ti
}

// hasWork reports whether the driver starts work for a new term of name: the election's or
// the group's work function.
func (c *client) hasWork(s *Sim, ef *engine.Effect) bool {
	if ef.Group != "" {
		return c.groupWork
	}
	if i, ok := s.nameIdx[ef.Name]; ok && i < len(c.workFor) {
		return c.workFor[i]
	}
	return false
}

// startWork starts the work of term ti: it may return on its own at a random time.
func (s *Sim) startWork(ti int32) {
	t := &s.terms[ti]
	t.work = true
	ns := &s.byName[t.ni]
	ns.work = append(ns.work, ti)
	if s.rng.Float64() < s.cfg.Faults.WorkSelfExit {
		t.exitAt = s.now + s.between(0, 2*s.shape.TTL)
		s.q.push(item{at: t.exitAt, kind: kWork, client: t.client, inc: t.inc, idx: ti})
	}
}

// stopWork has the work of the revoked term ti notice its cancelled context: it returns after
// a short delay, a long one, or never.
func (s *Sim) stopWork(ti int32) {
	t := &s.terms[ti]
	f := &s.cfg.Faults
	var d time.Duration
	switch u := s.rng.Float64(); {
	case s.healed:
		d = s.between(0, 20*time.Millisecond)
	case u < f.WorkNever:
		return
	case u < f.WorkNever+f.WorkSlow:
		d = s.between(0, 2*s.shape.TTL)
	default:
		d = s.between(0, 20*time.Millisecond)
	}
	if at := s.now + d; at < t.exitAt {
		t.exitAt = at
		s.q.push(item{at: at, kind: kWork, client: t.client, inc: t.inc, idx: ti})
	}
}

func (s *Sim) dropWork(ti int32) {
	ns := &s.byName[s.terms[ti].ni]
	ns.work = removeIdx(ns.work, ti)
}

func removeIdx(list []int32, x int32) []int32 {
	for i, v := range list {
		if v == x {
			list[i] = list[len(list)-1]
			return list[:len(list)-1]
		}
	}
	return list
}

// --- the user ---

func (s *Sim) newFuture(c *client, op, name string) engine.FutureID {
	c.nextFuture++
	c.futures[c.nextFuture] = future{op: op, name: name, at: s.now}
	return c.nextFuture
}

func (s *Sim) onComplete(c *client, ef *engine.Effect) {
	f, ok := c.futures[ef.Future]
	if !ok {
		s.fail("futures", "c%d: future f%d completed twice or never asked for", c.idx, ef.Future)
		return
	}
	delete(c.futures, ef.Future)
	switch f.op {
	case "lock", "trylock":
		if ef.Err == nil && ef.Token != 0 {
			// Hold the lock for a while, then unlock (even after healing: others wait).
			s.q.push(item{at: s.now + s.between(0, s.shape.TTL), kind: kUnlock, client: c.idx, inc: c.inc})
		} else {
			c.lockBusy = false
		}
	case "close":
		if c.eng.Closed() {
			s.closed(c)
		}
	case "leave":
		c.leaving = false
	case "join":
		// The user joins only when not joined and no Leave is outstanding: the engine must
		// take it (a refusal, or a Join that waits for a leave (join above), means that a
		// Leave completed too early).
		if ef.Err != nil && !errors.Is(ef.Err, spi.ErrClosed) {
			s.fail(CheckJoin, "c%d: Join of %s refused: %v", c.idx, f.name, ef.Err)
		}
	}
}

// action is one random thing the user of c does.
func (s *Sim) action(c *client) {
	if next := s.now + time.Duration(s.rng.ExpFloat64()*float64(s.cfg.Faults.ActionMean)); next < s.shape.Heal() {
		s.q.push(item{at: next, kind: kAction, client: c.idx, inc: c.inc})
	}
	if c.closing || s.healed {
		return
	}
	f := &s.cfg.Faults
	switch u := s.rng.Float64(); {
	case u < f.Close:
		c.closing = true
		s.step(c, engine.Event{Kind: engine.EvClose, Future: s.newFuture(c, "close", "")}, -1)
	case u < 0.4:
		i := s.rng.IntN(len(c.started))
		name := s.names[i]
		switch {
		case !c.started[i]:
			s.startElection(c, i)
		case s.rng.IntN(2) == 0:
			c.started[i] = false
			s.step(c, engine.Event{Kind: engine.EvStop, Name: name, Future: s.newFuture(c, "stop", name)}, -1)
		default:
			s.step(c, engine.Event{Kind: engine.EvStepDown, Name: name, Future: s.newFuture(c, "step-down", name)}, -1)
		}
	case u < 0.6:
		if !c.lockBusy {
			c.lockBusy = true
			s.step(c, engine.Event{Kind: engine.EvStart, Name: lockName, Flavor: engine.FlavorLock, Future: s.newFuture(c, "lock", lockName)}, -1)
		}
	case u < 0.7:
		if !c.lockBusy {
			c.lockBusy = true
			s.step(c, engine.Event{Kind: engine.EvStart, Name: lockName, Flavor: engine.FlavorTryLock, Future: s.newFuture(c, "trylock", lockName)}, -1)
		}
	case u < 0.85:
		switch {
		case c.joined:
			c.joined, c.leaving = false, true
			s.step(c, engine.Event{Kind: engine.EvLeave, Name: groupName, Future: s.newFuture(c, "leave", groupName)}, -1)
		case !c.leaving:
			s.join(c)
		}
	default:
		// Step down from an election it leads, if any, else from a random one.
		i := s.rng.IntN(len(c.started))
		for j := range c.started {
			if t, ok := c.open[s.names[j]]; ok && !s.terms[t].revoked {
				i = j
			}
		}
		if c.started[i] {
			s.step(c, engine.Event{Kind: engine.EvStepDown, Name: s.names[i], Future: s.newFuture(c, "step-down", s.names[i])}, -1)
		}
	}
}

func (s *Sim) startElection(c *client, i int) {
	c.started[i] = true
	c.workFor[i] = s.rng.Float64() < s.cfg.Faults.Work
	s.step(c, engine.Event{Kind: engine.EvStart, Name: s.names[i], HasWork: c.workFor[i], Future: s.newFuture(c, "start", s.names[i])}, -1)
}

func (s *Sim) join(c *client) {
	c.joined = true
	c.groupWork = s.rng.Float64() < s.cfg.Faults.Work
	f := s.newFuture(c, "join", groupName)
	s.step(c, engine.Event{Kind: engine.EvJoin, Name: groupName, Partitions: s.shape.Partitions, HasWork: c.groupWork,
		Future: f}, -1)
	// The user joins only once its Leave has completed: the engine must take the Join at once
	// (one that waits for the group's leave means that the Leave completed too early).
	if _, waits := c.futures[f]; waits && c.eng != nil && !c.eng.Closed() {
		s.fail(CheckJoin, "c%d: Join of %s waits for a leave, after its Leave completed", c.idx, groupName)
	}
}

// --- client lifecycle ---

// restart starts a fresh engine for c: boot, its elections and (usually) the group.
func (s *Sim) restart(c *client) {
	if c.eng != nil && !c.eng.Closed() {
		return
	}
	if c.eng != nil {
		s.drop(c) // the closed engine's leftovers
	}
	// The engine's defaults (retry jitter; renewal interval, cooldown and backoff derived from
	// the TTL), with the TTL, drift and margin of this run.
	o := engine.Defaults()
	o.Owner, o.TTL, o.Drift, o.Margin, o.Break = c.owner, s.shape.TTL, s.cfg.Drift, s.cfg.Margin, s.cfg.Break
	o.Queue = true // the model keeps waiter queues (spi.Queuer)
	o.QueueLivesWithSession = s.entriesLiveWithSession()
	o.SteadyHints = s.cfg.Faults.UnknownRemaining // as the model's backend reports (spi.SteadyHints)
	eng, err := engine.New(o)
	if err != nil {
		s.fail("config", "engine options: %v", err)
		return
	}
	s.note(c.idx, nRestart, 0, "")
	c.eng = eng
	s.step(c, engine.Event{Kind: engine.EvBoot}, -1)
	for i := range c.started {
		s.startElection(c, i)
	}
	if s.rng.Float64() < 0.8 {
		s.join(c)
	}
	if !s.healed {
		s.q.push(item{at: s.now + time.Duration(s.rng.ExpFloat64()*float64(s.cfg.Faults.ActionMean)), kind: kAction, client: c.idx, inc: c.inc})
	}
}

// drop forgets c's engine and everything that belonged to it: the process is gone. Its
// session lives on at the backend until it expires.
func (s *Sim) drop(c *client) {
	for name, ti := range c.open {
		t := &s.terms[ti]
		ns := &s.byName[t.ni]
		ns.open = removeIdx(ns.open, ti)
		delete(c.open, name)
	}
	for i := range s.byName {
		ns := &s.byName[i]
		for j := 0; j < len(ns.work); {
			if t := &s.terms[ns.work[j]]; t.client == c.idx {
				t.work = false
				ns.work[j] = ns.work[len(ns.work)-1]
				ns.work = ns.work[:len(ns.work)-1]
				continue
			}
			j++
		}
	}
	c.eng = nil
	c.inc++
	c.paused, c.closing, c.joined, c.leaving, c.lockBusy = false, false, false, false, false
	clear(c.deferred)
	c.deferred = c.deferred[:0]
	clear(c.timers)
	clear(c.futures)
	clear(c.started)
	clear(c.workFor)
	clear(c.withdrawals) // the backend's memory goes with the process
}

// closed: c's Close completed; a fresh client starts later (not after healing).
func (s *Sim) closed(c *client) {
	if s.healed {
		return
	}
	at := s.now + s.between(time.Second, 2*s.shape.TTL)
	s.q.push(item{at: min(at, s.shape.Heal()), kind: kRestart, client: c.idx})
}

func (s *Sim) crash(c *client, i int32) {
	if c.eng == nil {
		return
	}
	s.note(c.idx, nCrash, 0, "")
	s.stats.Crashes++
	s.drop(c)
	if r := s.cfg.Faults.Crashes[i].Restart; r >= 0 {
		s.q.push(item{at: min(max(r, s.now), s.shape.Heal()), kind: kRestart, client: c.idx})
	}
}

func (s *Sim) resume(c *client) {
	if !c.paused {
		return
	}
	c.paused = false
	s.note(c.idx, nResume, 0, "")
	c.disturbed = max(c.disturbed, s.now+c.renewB)
	items := c.deferred
	c.deferred, s.spare = s.spare[:0], items
	inc := c.inc
	for i := range items {
		if c.inc != inc || s.vio != nil {
			break
		}
		s.dispatch(&items[i])
	}
	clear(items)
}

// expire has the backend expire c's current session by force.
func (s *Sim) expire(c *client) {
	if c.eng == nil || s.healed || c.eng.SessionState() != engine.SessionLive {
		return
	}
	id := c.eng.SessionID()
	if s.model.ExpireSession(s.now, id) {
		s.note(c.idx, nExpire, 0, string(id))
		s.stats.Expired++
		r := s.sess[id]
		r.forced = true
		s.sess[id] = r
		c.disturbed = max(c.disturbed, s.now+c.renewB)
		s.sendHints()
	}
}

// heal ends the faults: paused clients resume, crashed ones due to restart do.
func (s *Sim) heal() {
	s.healed = true
	s.note(-1, nHeal, 0, "")
	for i := range s.clients {
		c := &s.clients[i]
		if c.paused {
			s.resume(c)
		}
	}
}

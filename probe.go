package simba

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/spi"
)

// After an outage: once a session call (open or keep-alive) fails with a retryable error, the
// client probes the backend until one succeeds again (and once a group's Join does, until a
// probe or the Join succeeds), and a probe that the backend answers is
// stepped into the engine as engine.EvReachable. The engine then retries the calls that wait
// out a failure's backoff at once (within a jitter of the backoff's first bound, 50 ms), and
// the session call in flight since before the probe — stuck on a connection the outage
// silenced, which would fail only at its timeout — is cut short and retried at once too, as is
// a group's Join (the group and its partitions waited for it); a call in flight for less than
// twice the probe's round trip is only slower than the probe and is left alone, and the
// failure of a call so cut arms no probe (cutStuck, probeCallDone). So a
// session lost to an outage is reopened, and an election or waiting Lock granted, within about
// a probe interval of the backend's return instead of after up to two renewal intervals (the
// stuck call's timeout, then a backoff of up to a renewal interval).
//
// A probe is Members of wire.ProbeGroup (spec/names.yaml): a read of a group no member joins
// and no backend watches, cheap on every backend, that goes over the connections the session's
// calls use. Probes are paced by the client
// (probeFirst, doubling to probeEvery's bound, each drawn with jitter), one at a time, each given at
// most probeTimeout, and only while the session's calls fail; a probe that fails costs the
// backend nothing (the server is unreachable). The engine damps the signs: one acts at most
// once per backoff bound (engine.Engine.reachable), so a link that flaps, or probes that get
// through while the session's calls still fail, cannot make clients hammer their backend, and
// thousands of clients whose server comes back spread their retries by the probes' jitter and
// the engine's.
const (
	// probeFirst bounds the delay of the first probe after a failure; each failed probe
	// doubles the bound up to probeEvery.
	probeFirst = 25 * time.Millisecond
	// probeEveryMin and probeEveryMax bound probeEvery.
	probeEveryMin = 100 * time.Millisecond
	probeEveryMax = time.Second
	// probeTimeout bounds a probe (and at most the call timeout, a renewal interval): a probe
	// stuck on a connection the outage silenced holds the next one back at most that long.
	probeTimeout = 500 * time.Millisecond
)

// probeEvery bounds the delay between two probes once they keep failing, at renewal interval
// renewEvery: the time a backend that came back may go unnoticed, plus a probe's round trip.
// It is a quarter of the renewal interval, at least probeEveryMin and at most probeEveryMax (a
// second at the default TTL), so that clients whose server is overloaded rather than down (it
// fails probes fast: "too many connections") add at most one probe a second each to its load,
// while at a short TTL the server's return is noticed well within a renewal interval.
func probeEvery(renewEvery time.Duration) time.Duration {
	return min(max(renewEvery/4, probeEveryMin), probeEveryMax)
}

// prober is the probe state (loop goroutine).
type prober struct {
	// down: a session call failed with a retryable error and none succeeded since.
	down bool
	// joinDown: a group's Join failed with a retryable error and none succeeded since. It
	// probes too, while the session's calls succeed: a keep-alive in flight across the heal
	// succeeds without being a sign (it was sent before the Join's failure), and the Join
	// would wait out its backoff, up to a renewal interval. A probe that succeeds arms no
	// next one: the next failed Join does, so the probes are paced by the Join's backoff.
	joinDown bool
	// busy: a probe is armed or in flight.
	busy  bool
	bound time.Duration // the delay bound of the next probe
	timer spi.Timer     // the armed probe, if any
	n     uint64        // numbers the probes: their timers' keys on a settling clock
}

// probeCallDone tells the prober how a call of op ended (loop goroutine): a session call's
// (open, keep-alive) or a group Join's retryable failure starts probing; a session call's
// success stops it, a Join's success stops the probing its failures started. A failure that a
// probe's cut caused (cut: cutStuck) arms no probe: that probe has just found the backend
// answering, and the engine retries the call at once. Arming one let the next probe cut the
// retry in turn, should it take longer than a probe (etcd's keep-alive takes two round trips,
// a probe one), and so on: an etcd session at TTL 1 s was lost after a 250 ms outage, its
// keep-alives cut one after another. The retry runs to its end or to its own timeout, whose
// failure probes again.
func (c *Client) probeCallDone(op engine.Op, failed, cut bool) {
	p := &c.probe
	var down *bool
	switch op {
	case engine.OpOpenSession, engine.OpKeepAlive:
		down = &p.down
		if !failed {
			p.bound = 0
		}
	case engine.OpJoin:
		down = &p.joinDown
	default:
		return
	}
	*down = failed
	if failed && !cut && !p.busy {
		p.bound = probeFirst
		c.armProbe()
	}
}

// armProbe arms the next probe after a delay drawn in [bound/2, bound) (loop goroutine).
func (c *Client) armProbe() {
	p := &c.probe
	p.busy = true
	d := p.bound/2 + time.Duration(c.draw(jitterProbe, uint64(p.bound), 0, c.cfg.clock.Now())*float64(p.bound/2))
	p.n++
	p.timer = c.settle.afterFunc(c.cfg.clock, d, keyProbe|p.n&keyMask, func() { c.enqueue(c.sendProbe) })
}

// sendProbe starts a probe, unless the session's calls succeed again or the client closes
// (loop goroutine).
func (c *Client) sendProbe() {
	p := &c.probe
	p.timer = nil
	if !p.down && !p.joinDown || c.isClosed() {
		p.busy = false
		return
	}
	c.settle.begin() // ended once the outcome is posted
	c.calls.Add(1)
	p.n++
	key := keyProbe | p.n&keyMask
	var turn uint64
	if c.settle.turns != nil {
		turn = c.settle.turns.take()
	}
	go func() {
		defer c.calls.Done()
		defer c.settle.end()
		if turn != 0 {
			c.settle.turns.wait(turn)
			defer c.settle.turns.end(turn)
		}
		start := c.cfg.clock.Now()
		ctx, cancel := c.settle.callContext(c.baseCtx, min(probeTimeout, c.cfg.renewEvery), key, turn)
		_, err := c.backend.Members(ctx, wire.ProbeGroup)
		cancel()
		c.post(func() { c.probed(start, err) })
	}()
}

// probed handles a probe's outcome (loop goroutine): one that the backend answered is a sign
// that it answers again (engine.EvReachable), and the session calls sent before the probe
// began and still unanswered are cut short (cutStuck); one that failed arms the next probe.
func (c *Client) probed(start time.Duration, err error) {
	p := &c.probe
	p.busy = false
	if !p.down && !p.joinDown || c.isClosed() {
		return
	}
	if err != nil {
		p.bound = min(2*p.bound, probeEvery(c.cfg.renewEvery))
		c.armProbe()
		return
	}
	c.step(engine.Event{Kind: engine.EvReachable})
	c.cutStuck(start, c.cfg.clock.Now())
}

// stopProbe stops an armed probe (the loop exits).
func (c *Client) stopProbe() {
	if t := c.probe.timer; t != nil {
		t.Stop()
		c.probe.timer = nil
	}
}

// stuckCall is a session call in flight: when it was sent, the cancel of its context, and
// whether cutStuck cut it.
type stuckCall struct {
	sent   time.Duration
	cancel context.CancelFunc
	cut    bool // guarded by Client.mu
}

// errCutStuck is the cause of a session call that cutStuck cut short.
var errCutStuck = errors.New("cut short: a probe found the backend answering while this call still hung")

// watchSessionCall records the session call (open or keep-alive) or Join sent at sent, whose context
// cancel ends, until unwatchSessionCall.
func (c *Client) watchSessionCall(sent time.Duration, cancel context.CancelFunc) *stuckCall {
	sc := &stuckCall{sent: sent, cancel: cancel}
	c.mu.Lock()
	c.sessCalls = append(c.sessCalls, sc)
	c.mu.Unlock()
	return sc
}

// unwatchSessionCall ends what watchSessionCall began, once the call returned with err, and
// returns the error the engine is to see: if cutStuck cut the call and it failed, a retryable
// error that does not wrap the backend's (a cancellation, which spi.Classify takes as
// permanent: the open's failure would end every waiting Lock with it).
func (c *Client) unwatchSessionCall(sc *stuckCall, op engine.Op, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.sessCalls {
		if x == sc {
			c.sessCalls = append(c.sessCalls[:i], c.sessCalls[i+1:]...)
			break
		}
	}
	if sc.cut && err != nil {
		return spi.Unavailable(publicOp(op), fmt.Errorf("%w (%v)", errCutStuck, err))
	}
	return err
}

// cutStuck cuts short the session calls (and Joins) sent before start and still in flight, once a probe
// that began at start was answered at now: such a call waits on a connection the outage
// silenced (the backend answers others), and would fail only at its timeout. Its outcome is
// unknown, as a timed-out call's, and the engine retries it at once. A call in flight for less
// than twice the probe's round trip is left alone: it is not stuck but slower than a probe (a
// keep-alive of two round trips, sent just before the probe began).
func (c *Client) cutStuck(start, now time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rtt := now - start
	for _, sc := range c.sessCalls {
		if sc.sent < start && now-sc.sent >= 2*rtt && !sc.cut {
			sc.cut = true
			sc.cancel()
		}
	}
}

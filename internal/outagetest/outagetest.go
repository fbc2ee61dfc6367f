// Package outagetest checks, from tests of any backend, that a Simba session rides out a short
// outage of its server: a fault proxy (internal/faultproxy) between the backend and the server
// resets every connection and refuses new ones for a while (or, blackholed, goes silent), then
// lets new connections through again, and a client must keep its session (no
// EventSessionExpired, no second session) when the outage leaves it time to renew.
package outagetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/spi"
)

// outageFault is an outage: every connection reset, new ones refused (accepted and reset at
// once, as the trial's proxy did).
var outageFault = faultproxy.Fault{Cut: true, Reset: true}

// Config is a run of outages.
type Config struct {
	// TTL is the client's session TTL (simba.WithTTL; the renewal interval is its default,
	// TTL/3).
	TTL time.Duration
	// Outage is how long each outage lasts.
	Outage time.Duration
	// Phase is when each outage begins, after a keep-alive that succeeded was sent (the
	// instant the client counts the session's deadline from): the later, the less of the
	// session's time is left when the outage ends, at Phase+Outage after that send.
	Phase time.Duration
	// Rounds is the number of outages.
	Rounds int
	// Blackhole makes each outage a blackhole (faultproxy.Fault.Blackhole: the connections go
	// silent for good, new ones are taken and never answered) instead of resets and refused
	// connections.
	Blackhole bool
}

// Slack is how late an outage of Run may begin or end, against its schedule counted from the
// moment the renewal before it was sent, and still count as a round: a round the test itself
// ran later than that (its goroutine descheduled on a loaded machine, a sleep that overslept,
// a keep-alive's reply read late) left the session less time than the Config claims, proves
// nothing about the claim, and is run again.
const Slack = 50 * time.Millisecond

// Run starts a client on backend (whose connections to its servers all go through proxies)
// and, Rounds times, waits for a keep-alive to succeed, takes every proxy down Phase after
// that keep-alive was sent (the instant the session's deadline is counted from), brings them
// up again Phase+Outage after it, and waits one TTL and a second for the session to be renewed
// or to lapse. It returns in how many rounds the session was lost (an EventSessionExpired, or
// another session opened), logging each round.
//
// The schedule is kept against the clock, not by sleeping from when the test saw the
// keep-alive's success: under load that was late, and the outages ended later after the
// renewal than the Config says (less of the session's time left). A round whose outage began
// or ended more than Slack late, or began after the next renewal was due (TTL/3 after the
// last was sent) when it was planned before, is logged and run again, not counted; Run fails
// the test if fewer than Rounds rounds of 3*Rounds ran on schedule.
func Run(t testing.TB, backend spi.Backend, proxies []*faultproxy.Proxy, cfg Config) (lost int) {
	t.Helper()
	kb := &keepAliveBackend{Backend: backend, ok: make(chan time.Time, 1)}
	var expired, opened atomic.Int64
	start := time.Now()
	c, err := simba.New(kb, simba.WithTTL(cfg.TTL), simba.WithCallObserver(kb.observe), simba.WithListener(func(e simba.Event) {
		switch e.Kind {
		case simba.EventSessionExpired:
			expired.Add(1)
			t.Logf("%6.2fs %v", time.Since(start).Seconds(), e)
		case simba.EventSessionOpened:
			opened.Add(1)
			t.Logf("%6.2fs %v", time.Since(start).Seconds(), e)
		case simba.EventBackendError:
			t.Logf("%6.2fs %v", time.Since(start).Seconds(), e)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx) //nolint:errcheck
	}()
	// wait returns when the keep-alive whose success it saw was sent.
	wait := func() time.Time {
		t.Helper()
		select {
		case sent := <-kb.ok:
			return sent
		case <-time.After(time.Minute):
			t.Fatal("no keep-alive succeeded within a minute")
			return time.Time{}
		}
	}
	wait() // the session is open and renewed
	rounds := 0
	for try := 0; rounds < cfg.Rounds; try++ {
		if try == 3*cfg.Rounds {
			t.Fatalf("only %d of %d outages ran on schedule (within %v) in %d tries: the machine is too loaded to test the claim", rounds, cfg.Rounds, Slack, try)
		}
		// Counted from before the round, so that a session lost late in the previous round
		// counts here rather than not at all.
		e0, o0 := expired.Load(), opened.Load()
		select { // a fresh success, not one from before
		case <-kb.ok:
		default:
		}
		sent := wait()
		planDown, planUp := sent.Add(cfg.Phase), sent.Add(cfg.Phase+cfg.Outage)
		time.Sleep(time.Until(planDown))
		down := time.Now()
		for _, p := range proxies {
			if cfg.Blackhole {
				p.Set(faultproxy.Fault{Blackhole: true})
			} else {
				p.Set(outageFault)
			}
		}
		t.Logf("%6.2fs round %d: down (%v after the renewal was sent)", time.Since(start).Seconds(), rounds, down.Sub(sent).Round(time.Millisecond))
		time.Sleep(time.Until(planUp))
		if healLate != nil {
			time.Sleep(healLate(try))
		}
		for _, p := range proxies {
			p.Heal()
		}
		up := time.Now()
		t.Logf("%6.2fs round %d: up (%v after the renewal was sent)", time.Since(start).Seconds(), rounds, up.Sub(sent).Round(time.Millisecond))
		time.Sleep(cfg.TTL + time.Second)
		gone := expired.Load() > e0 || opened.Load() > o0
		// An outage planned to begin before the next renewal is due (TTL/3 after this one was
		// sent) that began after it let that renewal through: a round easier than the Config.
		due := sent.Add(cfg.TTL / 3)
		if lateDown, lateUp := down.Sub(planDown), up.Sub(planUp); lateDown > Slack || lateUp > Slack || planDown.Before(due) && !down.Before(due) {
			t.Logf("%6.2fs round %d not counted: the outage began %v and ended %v late (more than %v, or after the next renewal was due); session lost: %v", time.Since(start).Seconds(), rounds, lateDown.Round(time.Millisecond), lateUp.Round(time.Millisecond), Slack, gone)
		} else {
			t.Logf("%6.2fs round %d: outage of %v, %v after a renewal was sent: session lost: %v", time.Since(start).Seconds(), rounds, cfg.Outage, cfg.Phase, gone)
			rounds++
			if gone {
				lost++
			}
		}
		if gone {
			wait() // a new session is up before the next round
		}
	}
	return lost
}

// healLate, when set (by this package's tests), is how much later than planned Run ends the
// outage of its try'th round: a test goroutine that a loaded machine descheduled.
var healLate func(try int) time.Duration

// keepAliveBackend sends, on ok, when each successful keep-alive of a live session was sent,
// by the client's reckoning: the instant its deadline counts from. (Not when the backend's
// KeepAlive was entered: on a loaded machine the client's call goroutine was once descheduled
// 90 ms between the two, and an outage timed from the later one left the session that much
// less time than the Config says.)
type keepAliveBackend struct {
	spi.Backend
	ok   chan time.Time
	live atomic.Bool // the keep-alive that just returned succeeded on a live session
}

func (b *keepAliveBackend) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	ka, err := b.Backend.KeepAlive(ctx, id, names, groups)
	b.live.Store(err == nil && !ka.Expired)
	return ka, err
}

// observe is the client's call observer: called on the call's goroutine right after the
// backend call returned, with how long it took since the client stamped it sent.
func (b *keepAliveBackend) observe(ci simba.CallInfo) {
	if ci.Op != simba.OpKeepAlive || ci.Err != nil || !b.live.Swap(false) {
		return
	}
	sent := time.Now().Add(-ci.Took)
	select { // the newest success replaces one not yet taken
	case <-b.ok:
	default:
	}
	select {
	case b.ok <- sent:
	default:
	}
}

// Stalls stalls p's link both ways rounds times for stall each (faultproxy.Stall: the bytes
// held back, then delivered, as from a server or a client busy that long), with a second of
// normal traffic after each, and returns how many connections p accepted from the first stall
// to a second after the last: a hint connection that took a stall for a silent link and was
// given up shows as a new connection.
func Stalls(p *faultproxy.Proxy, rounds int, stall time.Duration) (accepted int) {
	before := len(p.Conns())
	for range rounds {
		p.Set(faultproxy.Fault{Up: faultproxy.Stall, Down: faultproxy.Stall})
		time.Sleep(stall)
		p.Heal()
		time.Sleep(time.Second)
	}
	return len(p.Conns()) - before
}

// KeepAliveStalls stalls p's link both ways rounds times for stall each, as Stalls does, and
// sends a keep-alive of session sid on backend as each stall begins, with a deadline of
// timeout (the engine's call timeout, TTL/3 by default) that the stall is shorter than, so
// that its reply comes late but in time. It returns how many connections p accepted from the
// first stall to a second after the last (a session connection that took the stall for a
// silent link and was given up shows as a new connection) and how many keep-alives found the
// session expired.
func KeepAliveStalls(t testing.TB, backend spi.Backend, sid spi.SessionID, p *faultproxy.Proxy, rounds int, stall, timeout time.Duration) (accepted, expired int) {
	t.Helper()
	before := len(p.Conns())
	for i := range rounds {
		p.Set(faultproxy.Fault{Up: faultproxy.Stall, Down: faultproxy.Stall})
		type reply struct {
			ka  spi.KeepAlive
			err error
		}
		done := make(chan reply, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			ka, err := backend.KeepAlive(ctx, sid, nil, nil)
			done <- reply{ka, err}
		}()
		time.Sleep(stall)
		p.Heal()
		r := <-done
		t.Logf("round %d: stall of %v, keep-alive with a deadline of %v: expired %v, error %v", i, stall, timeout, r.ka.Expired, r.err)
		if r.err == nil && r.ka.Expired {
			expired++
		}
		time.Sleep(time.Second)
	}
	return len(p.Conns()) - before, expired
}

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
	// Phase is when each outage begins, after a keep-alive succeeded: the later, the less of
	// the session's time is left when the outage ends.
	Phase time.Duration
	// Rounds is the number of outages.
	Rounds int
	// Blackhole makes each outage a blackhole (faultproxy.Fault.Blackhole: the connections go
	// silent for good, new ones are taken and never answered) instead of resets and refused
	// connections.
	Blackhole bool
}

// Run starts a client on backend (whose connections to its servers all go through proxies)
// and, Rounds times, waits for a keep-alive to succeed, waits Phase, takes every proxy down for
// Outage, brings them up again and waits one TTL and a second for the session to be renewed or
// to lapse. It returns in how many rounds the session was lost (an EventSessionExpired, or
// another session opened), logging each round.
func Run(t testing.TB, backend spi.Backend, proxies []*faultproxy.Proxy, cfg Config) (lost int) {
	t.Helper()
	kb := &keepAliveBackend{Backend: backend, ok: make(chan struct{}, 1)}
	var expired, opened atomic.Int64
	start := time.Now()
	c, err := simba.New(kb, simba.WithTTL(cfg.TTL), simba.WithListener(func(e simba.Event) {
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
	wait := func() {
		t.Helper()
		select {
		case <-kb.ok:
		case <-time.After(time.Minute):
			t.Fatal("no keep-alive succeeded within a minute")
		}
	}
	wait() // the session is open and renewed
	for i := range cfg.Rounds {
		select { // a fresh success, not one from before
		case <-kb.ok:
		default:
		}
		wait()
		time.Sleep(cfg.Phase)
		e0, o0 := expired.Load(), opened.Load()
		t.Logf("%6.2fs round %d: down", time.Since(start).Seconds(), i)
		for _, p := range proxies {
			if cfg.Blackhole {
				p.Set(faultproxy.Fault{Blackhole: true})
			} else {
				p.Set(outageFault)
			}
		}
		time.Sleep(cfg.Outage)
		for _, p := range proxies {
			p.Heal()
		}
		t.Logf("%6.2fs round %d: up", time.Since(start).Seconds(), i)
		time.Sleep(cfg.TTL + time.Second)
		gone := expired.Load() > e0 || opened.Load() > o0
		t.Logf("%6.2fs round %d: outage of %v, %v after a renewal: session lost: %v", time.Since(start).Seconds(), i, cfg.Outage, cfg.Phase, gone)
		if gone {
			lost++
			wait() // a new session is up before the next round
		}
	}
	return lost
}

// keepAliveBackend signals each successful keep-alive of a live session on ok.
type keepAliveBackend struct {
	spi.Backend
	ok chan struct{}
}

func (b *keepAliveBackend) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	ka, err := b.Backend.KeepAlive(ctx, id, names, groups)
	if err == nil && !ka.Expired {
		select {
		case b.ok <- struct{}{}:
		default:
		}
	}
	return ka, err
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

package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	simba "github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// Simba's client gives a session up at its local deadline (EventSessionExpired), before the
// server's own expiry by its safety margin, and never renews it after; go-zookeeper and etcd
// report an expiry their server decided, once they reach it again. The two counts are not the
// same thing, so for Simba the harness also asks the server: a session counts as expired at the
// server when a check straight at the server (not through the proxy: spi.Inspector) no longer
// listed it before the client's first successful backend call begun after the loss had
// returned, i.e. when a client that kept renewing could not have saved it either.

// sessLog counts one client's lost sessions; for Simba it also notes each lost session and
// the client's calls, for the check at the server (see sessChecker).
type sessLog struct {
	lost atomic.Int64

	mu      sync.Mutex
	pending []*lostSession
}

// lostSession is a session the client gave up: when, when the client next got a call through
// (its end; zero: not yet), and when the server was first seen without it (the start of that
// check; zero: not yet).
type lostSession struct {
	id                string
	at, reached, gone time.Time
}

// sessionLost notes a session the client gave up (EventSessionExpired).
func (l *sessLog) sessionLost(id string) {
	l.lost.Add(1)
	l.mu.Lock()
	l.pending = append(l.pending, &lostSession{id: id, at: time.Now()})
	l.mu.Unlock()
}

// called is the client's call observer: the first successful call begun after a loss is when
// the client reached the server again.
func (l *sessLog) called(ci simba.CallInfo) {
	if ci.Err != nil {
		return
	}
	end := time.Now()
	start := end.Add(-ci.Took)
	l.mu.Lock()
	for _, p := range l.pending {
		if p.reached.IsZero() && !start.Before(p.at) {
			p.reached = end
		}
	}
	l.mu.Unlock()
}

// sessChecker checks the sessions the clients of a row gave up against the server, through a
// backend of its own that reaches the server directly.
type sessChecker struct {
	in   spi.Inspector
	logs []*sessLog
}

// sessCheckEvery is the pause between checks while a lost session is still listed.
const sessCheckEvery = 50 * time.Millisecond

// run checks until ctx ends.
func (c *sessChecker) run(ctx context.Context) {
	t := time.NewTicker(sessCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.check(ctx)
		}
	}
}

// check asks the server once for its sessions, if any lost one was still listed at the last
// check, and notes the lost ones it no longer lists; it reports whether any is still listed.
func (c *sessChecker) check(ctx context.Context) bool {
	var open []*lostSession
	for _, l := range c.logs {
		l.mu.Lock()
		for _, p := range l.pending {
			if p.gone.IsZero() {
				open = append(open, p)
			}
		}
		l.mu.Unlock()
	}
	if len(open) == 0 {
		return false
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	snap, err := c.in.Inspect(cctx)
	cancel()
	if err != nil {
		return true
	}
	live := make(map[string]bool, len(snap.Sessions))
	for _, s := range snap.Sessions {
		live[string(s.ID)] = true
	}
	left := false
	for _, l := range c.logs {
		l.mu.Lock()
		for _, p := range l.pending {
			if p.gone.IsZero() && !p.at.After(start) {
				if live[p.id] {
					left = true
				} else {
					p.gone = start
				}
			}
		}
		l.mu.Unlock()
	}
	return left
}

// settle checks until the server lists none of the lost sessions, or for wait at most (a lost
// session expires at the server within its TTL, or etcd's minimum), and returns how many of
// them the server had expired before their client reached it again.
func (c *sessChecker) settle(ctx context.Context, wait time.Duration) int64 {
	end := time.Now().Add(wait)
	for c.check(ctx) && time.Now().Before(end) {
		time.Sleep(sessCheckEvery)
	}
	var n int64
	for _, l := range c.logs {
		l.mu.Lock()
		for _, p := range l.pending {
			if !p.gone.IsZero() && (p.reached.IsZero() || !p.gone.After(p.reached)) {
				n++
			}
		}
		l.mu.Unlock()
	}
	return n
}

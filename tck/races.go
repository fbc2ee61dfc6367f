package tck

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/simba-go/simba/spi"
)

// keepAliveRaceRounds is how many times keepAliveRaces runs each race.
const keepAliveRaceRounds = 25

// together runs a and b at once (released by one signal) and waits for both.
func together(a, b func()) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range []func(){a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f()
		}()
	}
	close(start)
	wg.Wait()
}

// keepAliveRaces checks that a session's keep-alive and its own acquires and releases of a
// lease, sent at once, are atomic steps in some order, as spi.Backend's rules ask: the
// client sends a keep-alive whenever its renewal is due, whatever acquire or release of the
// same session is in flight. Round after round, one session acquires the lease (with Acquire,
// or, on a Queuer, with AcquireQueued every other round) while it keeps alive, asking about
// the lease, then releases it while it keeps alive again. Each racing keep-alive finds the
// session live and lists the lease, if at all, with the token of the tenure it raced with
// (never another); after each grant a keep-alive lists the lease with the grant's token and
// another session finds it held by the session (the racing keep-alive lost no lease); after
// each release a keep-alive does not list the lease and, on a spi.LeaseInspector, another
// client's InspectLease shows it free (the racing keep-alive revived no lease); and each grant's token is greater than the
// one before. What the suites cannot place is a keep-alive racing another session's acquire at
// the instant the session expires (see the package doc).
func (h *harness) keepAliveRaces(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s, o := h.open(t, b, h.long), h.open(t, other, h.long)
	q, queuer := b.Backend.(spi.Queuer)
	in := &increasing{name: h.name("karace")}
	names := []string{in.name}
	// listed returns the token ka lists for the lease, or 0.
	listed := func(ka spi.KeepAlive) int64 {
		for _, held := range ka.Held {
			if held.Name == in.name {
				return held.Token
			}
		}
		return 0
	}
	for round := range keepAliveRaceRounds {
		var (
			r            spi.Acquire
			ka           spi.KeepAlive
			aerr, kaErr  error
			acquireCall  = "Acquire"
			keepAliveRun = func() { ka, kaErr = b.KeepAlive(ctx(t), s, names, nil) }
		)
		acquire := func() { r, aerr = b.Acquire(ctx(t), s, in.name) }
		if queuer && round%2 == 1 {
			acquireCall = "AcquireQueued"
			acquire = func() { r, aerr = q.AcquireQueued(ctx(t), s, in.name) }
		}
		together(acquire, keepAliveRun)
		if aerr != nil || kaErr != nil {
			t.Fatalf("round %d: %s = %v; KeepAlive = %v", round, acquireCall, aerr, kaErr)
		}
		if r.Kind != spi.Granted {
			t.Fatalf("round %d: %s of a free lease beside a keep-alive = %s (holder %q), want granted", round, acquireCall, r.Kind, r.Holder)
		}
		in.add(t, r.Token, "grant beside a keep-alive")
		if ka.Expired {
			t.Fatalf("round %d: KeepAlive beside %s = expired, want live", round, acquireCall)
		}
		if tok := listed(ka); tok != 0 && tok != r.Token {
			t.Fatalf("round %d: KeepAlive beside %s lists %q with token %d, want none or the grant's %d", round, acquireCall, in.name, tok, r.Token)
		}
		if tok := listed(h.keepAlive(t, b, s, names, nil)); tok != r.Token {
			t.Fatalf("round %d: KeepAlive after %s (granted %d) beside a keep-alive lists %q with token %d (0: not at all): the racing keep-alive lost the lease", round, acquireCall, r.Token, in.name, tok)
		}
		h.heldBy(t, other, o, in.name, s)

		var rerr error
		together(func() { rerr = b.Release(ctx(t), s, in.name, r.Token) }, keepAliveRun)
		if rerr != nil || kaErr != nil {
			t.Fatalf("round %d: Release = %v; KeepAlive = %v", round, rerr, kaErr)
		}
		if ka.Expired {
			t.Fatalf("round %d: KeepAlive beside Release = expired, want live", round)
		}
		if tok := listed(ka); tok != 0 && tok != r.Token {
			t.Fatalf("round %d: KeepAlive beside Release lists %q with token %d, want none or the released %d", round, in.name, tok, r.Token)
		}
		if tok := listed(h.keepAlive(t, b, s, names, nil)); tok != 0 {
			t.Fatalf("round %d: KeepAlive after Release(%d) beside a keep-alive lists %q with token %d: the racing keep-alive revived the lease", round, r.Token, in.name, tok)
		}
		if insp, ok := other.Backend.(spi.LeaseInspector); ok {
			c, cancel := context.WithTimeout(context.Background(), callTimeout)
			info, _, err := insp.InspectLease(c, in.name)
			cancel()
			if err != nil {
				t.Fatalf("round %d: InspectLease: %v", round, err)
			}
			if info.Holder != "" {
				t.Fatalf("round %d: InspectLease after Release(%d) beside a keep-alive = held by %s (token %d): the racing keep-alive revived the lease", round, r.Token, info.Holder, info.Token)
			}
		}
	}
}

// keepAliveGroupRaces is keepAliveRaces for groups: round after round, one session joins a
// group while it keeps alive asking about the group, then leaves it while it keeps alive
// again. Each racing keep-alive finds the session live; after each join another client's
// Members lists the session (the racing keep-alive, which refreshes the session's memberships
// on some backends, lost no join), and after each leave neither another client's Members nor
// a keep-alive lists it (the racing keep-alive undid no leave).
func (h *harness) keepAliveGroupRaces(t *testing.T) {
	b, other := h.backend(t), h.backend(t)
	s := h.open(t, b, h.long)
	group := h.name("karaceg")
	groups := []string{group}
	var (
		ka    spi.KeepAlive
		kaErr error
	)
	keepAlive := func() { ka, kaErr = b.KeepAlive(ctx(t), s, nil, groups) }
	for round := range keepAliveRaceRounds {
		for _, step := range []struct {
			call   string
			run    func(context.Context, spi.SessionID, string) (spi.Status, error)
			member bool
		}{{"Join", b.Join, true}, {"Leave", b.Leave, false}} {
			var (
				st  spi.Status
				err error
			)
			together(func() { st, err = step.run(ctx(t), s, group) }, keepAlive)
			if err != nil || st != spi.OK || kaErr != nil {
				t.Fatalf("round %d: %s = %s, %v; KeepAlive = %v", round, step.call, st, err, kaErr)
			}
			if ka.Expired {
				t.Fatalf("round %d: KeepAlive beside %s = expired, want live", round, step.call)
			}
			ms := h.members(t, other, group)
			if slices.Contains(ms, s) != step.member {
				t.Fatalf("round %d: Members after %s beside a keep-alive = %v: the racing keep-alive undid the %s", round, step.call, ms, step.call)
			}
			if !step.member {
				if after := h.keepAlive(t, b, s, nil, groups); slices.Contains(after.Members[group], s) {
					t.Fatalf("round %d: KeepAlive after Leave beside a keep-alive lists the session in %q: %v", round, group, after.Members[group])
				}
			}
		}
	}
}

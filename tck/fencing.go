package tck

import (
	"sync"
	"testing"

	"github.com/simba-go/simba/spi"
)

// FencingSpec checks that fencing tokens strictly increase per name across holders, releases,
// expiries, client restarts and (where the backend persists them) server restarts, that of
// many sessions racing for one lease exactly one is granted it, and that a session's
// keep-alive racing its own acquires and releases neither loses nor revives a lease.
func FencingSpec(t *testing.T, f Factory) {
	h := newHarness(t, f)
	t.Run("TokensIncrease", func(t *testing.T) {
		t.Run("AcrossReleases", h.fenceReleases)
		t.Run("AcrossHolders", h.fenceHolders)
		t.Run("AcrossExpiries", h.fenceExpiries)
		t.Run("AcrossClientRestarts", h.fenceClientRestarts)
		t.Run("PerName", h.fencePerName)
		if f.Restart != nil {
			t.Run("AcrossServerRestarts", h.fenceServerRestarts)
		} else {
			t.Log("tck: Factory.Restart is nil: server restarts are not checked")
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		t.Run("ExactlyOneGrantedOfFreeLease", h.raceFree)
		t.Run("ExactlyOneGrantedOfExpiredHolder", h.raceTakeover)
		t.Run("KeepAliveRacesOwnAcquireAndRelease", h.keepAliveRaces)
	})
}

// increasing records the tokens of one name and fails the test unless each is greater than the
// last.
type increasing struct {
	name string
	last int64
}

func (in *increasing) add(t testing.TB, tok int64, how string) {
	t.Helper()
	if tok <= in.last {
		t.Fatalf("%s: token of %q = %d, want > %d", how, in.name, tok, in.last)
	}
	in.last = tok
}

func (h *harness) fenceReleases(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.long)
	in := &increasing{name: h.name("rel")}
	for range 5 {
		tok := h.grant(t, b, s, in.name)
		in.add(t, tok, "grant after release by the same session")
		h.release(t, b, s, in.name, tok)
	}
}

func (h *harness) fenceHolders(t *testing.T) {
	in := &increasing{name: h.name("holders")}
	var clients []*client
	var sessions []spi.SessionID
	for range 3 {
		c := h.backend(t)
		clients = append(clients, c)
		sessions = append(sessions, h.open(t, c, h.long))
	}
	for round := range 2 {
		for i, c := range clients {
			tok := h.grant(t, c, sessions[i], in.name)
			in.add(t, tok, "grant to the next holder")
			if round == 1 && i == len(clients)-1 {
				// The last holder leaves by closing its session rather than releasing.
				if err := c.CloseSession(ctx(t), sessions[i]); err != nil {
					t.Fatalf("CloseSession: %v", err)
				}
				break
			}
			h.release(t, c, sessions[i], in.name, tok)
		}
	}
	tok := h.grant(t, clients[0], sessions[0], in.name)
	in.add(t, tok, "grant after the holder closed its session")
}

func (h *harness) fenceExpiries(t *testing.T) {
	b := h.backend(t)
	in := &increasing{name: h.name("exp")}
	for range 3 {
		s := h.open(t, b, h.short)
		in.add(t, h.grant(t, b, s, in.name), "takeover after the holder expired")
		h.expire(t, s)
	}
	s := h.open(t, b, h.long)
	in.add(t, h.grant(t, b, s, in.name), "takeover after the holder expired")
}

func (h *harness) fenceClientRestarts(t *testing.T) {
	in := &increasing{name: h.name("restart")}
	// A client that goes away without closing its session: the lease is taken over once the
	// session has expired (or at once, on backends whose Close ends the connection's sessions,
	// like ZooKeeper's).
	crashed := h.backend(t)
	s := h.open(t, crashed, h.short)
	in.add(t, h.grant(t, crashed, s, in.name), "first grant")
	crashed.Close()

	next := h.backend(t)
	s2 := h.open(t, next, h.long)
	r := h.acquire(t, next, s2, in.name)
	switch r.Kind {
	case spi.HeldBy:
		if r.Holder != s {
			t.Fatalf("lease held by %s, want the gone client's session %s", r.Holder, s)
		}
		h.expire(t, s)
		in.add(t, h.grant(t, next, s2, in.name), "grant after the gone client's session expired")
	case spi.Granted:
		in.add(t, r.Token, "grant after the client went away")
	default:
		t.Fatalf("Acquire after the client went away = %s", r.Kind)
	}

	// A client that shuts down cleanly: closing its session frees the lease at once.
	if err := next.CloseSession(ctx(t), s2); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	next.Close()
	restarted := h.backend(t)
	in.add(t, h.grant(t, restarted, h.open(t, restarted, h.long), in.name), "grant after a clean client restart")
}

func (h *harness) fencePerName(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.long)
	a, z := &increasing{name: h.name("a")}, &increasing{name: h.name("z")}
	for range 3 {
		for _, in := range []*increasing{a, z} {
			tok := h.grant(t, b, s, in.name)
			in.add(t, tok, "grant")
			h.release(t, b, s, in.name, tok)
		}
	}
}

func (h *harness) fenceServerRestarts(t *testing.T) {
	in := &increasing{name: h.name("srv")}
	check := func(tok int64, how string) {
		t.Helper()
		if h.f.PersistsTokens {
			in.add(t, tok, how)
		} else {
			in.last = tok
		}
	}
	b := h.backend(t)
	s := h.open(t, b, h.long)
	tok := h.grant(t, b, s, in.name)
	check(tok, "grant before the restart")
	h.release(t, b, s, in.name, tok)

	h.f.Restart(t)
	b = h.backend(t)
	held := h.open(t, b, h.short)
	check(h.grant(t, b, held, in.name), "grant of a released lease after a server restart")

	// Restart while the lease is held: the holder's session may or may not survive the restart,
	// but once it has expired the next grant still has a greater token.
	h.f.Restart(t)
	b = h.backend(t)
	s = h.open(t, b, h.long)
	if r := h.acquire(t, b, s, in.name); r.Kind == spi.HeldBy {
		h.expire(t, held)
	}
	check(h.grant(t, b, s, in.name), "grant of a lease held across a server restart")
}

// race has the sessions, each on its own client, acquire name at once and returns the replies.
func (h *harness) race(t *testing.T, clients []*client, sessions []spi.SessionID, name string) []spi.Acquire {
	t.Helper()
	replies := make([]spi.Acquire, len(clients))
	errs := make([]error, len(clients))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], errs[i] = clients[i].Acquire(ctx(t), sessions[i], name)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Acquire by session %d: %v", i, err)
		}
	}
	return replies
}

// oneGranted fails the test unless exactly one reply is Granted and every other one is HeldBy
// its session; it returns the winner's index and token.
func oneGranted(t *testing.T, replies []spi.Acquire, sessions []spi.SessionID) (int, int64) {
	t.Helper()
	winner := -1
	for i, r := range replies {
		if r.Kind == spi.Granted {
			if winner >= 0 {
				t.Fatalf("sessions %d and %d were both granted the lease (tokens %d, %d)", winner, i, replies[winner].Token, r.Token)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no session was granted the lease: %+v", replies)
	}
	for i, r := range replies {
		if i != winner && (r.Kind != spi.HeldBy || r.Holder != sessions[winner]) {
			t.Fatalf("session %d got %s (holder %q), want held by the winner %s", i, r.Kind, r.Holder, sessions[winner])
		}
	}
	return winner, replies[winner].Token
}

const racers = 16

// racers returns that many clients, each with a session of the long TTL.
func (h *harness) racers(t *testing.T) ([]*client, []spi.SessionID) {
	clients := make([]*client, racers)
	sessions := make([]spi.SessionID, racers)
	for i := range clients {
		clients[i] = h.backend(t)
		sessions[i] = h.open(t, clients[i], h.long)
	}
	return clients, sessions
}

func (h *harness) raceFree(t *testing.T) {
	clients, sessions := h.racers(t)
	in := &increasing{name: h.name("race")}
	for range 3 {
		winner, tok := oneGranted(t, h.race(t, clients, sessions, in.name), sessions)
		in.add(t, tok, "race winner")
		h.release(t, clients[winner], sessions[winner], in.name, tok)
	}
}

func (h *harness) raceTakeover(t *testing.T) {
	clients, sessions := h.racers(t)
	in := &increasing{name: h.name("takeover")}
	holder := h.backend(t)
	s := h.open(t, holder, h.short)
	in.add(t, h.grant(t, holder, s, in.name), "first holder")
	h.expire(t, s)
	_, tok := oneGranted(t, h.race(t, clients, sessions, in.name), sessions)
	in.add(t, tok, "race winner after the holder expired")
}

package sql

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestPgHubWaits: which names the PostgreSQL hint listener LISTENs on. A HeldBy reply starts a
// wait (and a catch-up hint is owed once the LISTEN is in); a grant, a Withdraw, the session's
// close or expiry, or two TTLs without an acquire end it; the channel is UNLISTENed once the
// linger after the last wait is over. Nothing is noted while no listener runs.
func TestPgHubWaits(t *testing.T) {
	h := &pgHub{linger: time.Millisecond}
	held := spi.Acquire{Kind: spi.HeldBy, Holder: "other"}
	h.acquired("s1", "ignored", held) // no listener yet
	gen := h.start()
	defer func() { h.stop(gen) }()
	if len(h.waits) != 0 {
		t.Fatalf("a wait noted while no listener ran: %v", h.waits)
	}
	h.opened("s1", time.Hour)
	h.opened("short", 5*time.Millisecond)
	for _, w := range []struct{ sid, name string }{{"s1", "granted"}, {"s1", "withdrawn"}, {"s1", "closed"}, {"s2", "expired"}, {"short", "unrenewed"}, {"s1", "kept"}} {
		h.acquired(w.sid, w.name, held)
	}
	listened := map[pgChan]bool{}
	var last time.Time
	listen, unlisten, wanted := h.plan(listened, &last)
	if want := []string{"closed", "expired", "granted", "kept", "unrenewed", "withdrawn"}; !slices.Equal(chanNames(listen, false), want) || len(listen) != len(want) || len(unlisten) != 0 || len(wanted) != len(want) {
		t.Fatalf("plan = %v, %v, %v; want to LISTEN on %v, each wanted", listen, unlisten, wanted, want)
	}
	for _, c := range listen {
		listened[c] = true
	}
	h.acquired("s1", "granted", spi.Acquire{Kind: spi.Granted, Token: 1})
	h.endWait("s1", "withdrawn")
	h.acquired("s1", "closed", held) // s1 waits for closed and kept until its close below...
	h.acquired("s2", "expired", spi.Acquire{Kind: spi.SessionExpired})
	h.closed("s1")
	h.acquired("s3", "kept", held)    // ...but s3 still waits for kept
	time.Sleep(20 * time.Millisecond) // past the linger and short's two TTLs
	last = time.Time{}
	listen, unlisten, _ = h.plan(listened, &last)
	if want := []string{"closed", "expired", "granted", "unrenewed", "withdrawn"}; len(listen) != 0 || !slices.Equal(chanNames(unlisten, false), want) || len(unlisten) != len(want) {
		t.Fatalf("plan = %v, %v; want to UNLISTEN from %v", listen, unlisten, want)
	}
	if len(h.waits) != 1 || h.waits["kept"] == nil {
		t.Fatalf("waits left: %v, want kept only", h.waits)
	}
}

// chanNames returns the sorted names of the lease channels (group false) or group channels
// (group true) among cs.
func chanNames(cs []pgChan, group bool) []string {
	var out []string
	for _, c := range cs {
		if c.group == group {
			out = append(out, c.name)
		}
	}
	slices.Sort(out)
	return out
}

// TestPgHubGroups: which groups' own channels the PostgreSQL hint listener LISTENs on. A Join
// in flight starts a group's interest, an OK reply or a keep-alive naming the group renews
// it, a Leave, the session's close or expiry (an Expired Join or Leave reply, a keep-alive
// that found it expired), or two TTLs without a renewal end it; a failed Join keeps it (it may
// have landed); a Members read keeps the channel for a linger. Every group channel LISTENed
// owes a catch-up hint. Nothing is noted while no listener runs, and a backend with no group
// interest LISTENs on no group channel.
func TestPgHubGroups(t *testing.T) {
	h := &pgHub{linger: 10 * time.Millisecond}
	h.joining("s1", "ignored") // no listener yet
	h.read("ignored", nil)
	gen := h.start()
	defer func() { h.stop(gen) }()
	listened := map[pgChan]bool{}
	var last time.Time
	if listen, unlisten, _ := h.plan(listened, &last); len(listen)+len(unlisten) != 0 || len(h.groups) != 0 {
		t.Fatalf("plan = %v, %v with no group interest (groups %v); want nothing", listen, unlisten, h.groups)
	}
	h.opened("s1", time.Hour)
	h.opened("s2", time.Hour)
	h.opened("short", 5*time.Millisecond)
	h.joining("s1", "left")
	h.joined("s1", "left", spi.OK, nil)
	h.joining("s1", "unknown")
	h.joined("s1", "unknown", 0, errors.New("timeout")) // may have landed: kept
	h.joining("s2", "expired")
	h.joined("s2", "expired", spi.Expired, nil)
	h.joining("short", "unrenewed")
	h.joined("short", "unrenewed", spi.OK, nil)
	h.joining("s1", "closed")
	h.members("s2", []string{"kept"}) // a keep-alive naming a group the hub missed the Join of
	h.read("read", nil)
	listen, unlisten, hint := h.plan(listened, &last)
	// expired's Join ended before the plan, yet its channel is LISTENed for the linger after
	// (as a lease's wait that ended so).
	want := []string{"closed", "expired", "kept", "left", "read", "unknown", "unrenewed"}
	if got := chanNames(listen, true); !slices.Equal(got, want) || len(listen) != len(want) || len(unlisten) != 0 || len(hint) != len(want) {
		t.Fatalf("plan = %v, %v, %v; want to LISTEN on groups %v, each hinted", listen, unlisten, hint, want)
	}
	for _, c := range listen {
		listened[c] = true
	}
	h.left("s1", "left", spi.OK, nil)
	h.closed("s1")                           // ends closed and unknown
	h.joining("s2", "kept")                  // still a member...
	h.left("s2", "kept", 0, errors.New("x")) // ...whose Leave failed
	time.Sleep(30 * time.Millisecond)        // past the linger and short's two TTLs
	last = time.Time{}
	listen, unlisten, _ = h.plan(listened, &last)
	want = []string{"closed", "expired", "left", "read", "unknown", "unrenewed"}
	if got := chanNames(unlisten, true); len(listen) != 0 || !slices.Equal(got, want) || len(unlisten) != len(want) {
		t.Fatalf("plan = %v, %v; want to UNLISTEN from groups %v", listen, unlisten, want)
	}
	if len(h.groups) != 1 || h.groups["kept"] == nil {
		t.Fatalf("groups left: %v, want kept only", h.groups)
	}
}

package sql

import (
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
	listened := map[string]bool{}
	var last time.Time
	listen, unlisten, wanted := h.plan(listened, &last)
	slices.Sort(listen)
	if want := []string{"closed", "expired", "granted", "kept", "unrenewed", "withdrawn"}; !slices.Equal(listen, want) || len(unlisten) != 0 || len(wanted) != len(want) {
		t.Fatalf("plan = %v, %v, %v; want to LISTEN on %v, each wanted", listen, unlisten, wanted, want)
	}
	for _, name := range listen {
		listened[name] = true
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
	slices.Sort(unlisten)
	if want := []string{"closed", "expired", "granted", "unrenewed", "withdrawn"}; len(listen) != 0 || !slices.Equal(unlisten, want) {
		t.Fatalf("plan = %v, %v; want to UNLISTEN from %v", listen, unlisten, want)
	}
	if len(h.waits) != 1 || h.waits["kept"] == nil {
		t.Fatalf("waits left: %v, want kept only", h.waits)
	}
}

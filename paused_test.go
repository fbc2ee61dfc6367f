package simba_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/internal/testenv"
)

// TestPauseIsLoggedAsAPause: a client whose process did not run for a while (its session
// timers overdue when it runs again) says so once, at WARN, "simba process paused" with how
// long, when the session's deadline passed in the pause — the lines of the session lost and
// the term revoked then carry paused_for too, and so do their events — or when the pause was
// long (a renewal interval, at least a second) though the session outlived it; a short one
// that cost nothing is not logged; and the virtual clock moved by a long span in one step
// is no pause. Before, only "simba session lost reason=deadline" was logged, which a network
// cut also gives: there was no "simba process paused" line, no EventPaused, no paused_for.
func TestPauseIsLoggedAsAPause(t *testing.T) {
	w := newWorld(t)
	pc := clocktest.NewPausing(w.clock)
	var logs testenv.LogBuffer
	var mu sync.Mutex
	var paused, lost, revoked []simba.Event
	var keepAlives atomic.Int32
	c := w.clientOn(w.srv.Backend(), "a", simba.WithClock(pc), simba.WithLogger(logs.Logger()),
		simba.WithListener(func(ev simba.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Kind {
			case simba.EventPaused:
				paused = append(paused, ev)
			case simba.EventSessionExpired:
				lost = append(lost, ev)
			case simba.EventRevoked:
				revoked = append(revoked, ev)
			}
		}),
		simba.WithCallObserver(func(ci simba.CallInfo) {
			if ci.Op == simba.OpKeepAlive && ci.Err == nil {
				keepAlives.Add(1)
			}
		}))
	e, err := c.NewElection("leader")
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return e.Start(context.Background()) })
	w.until(5*time.Second, "leading", e.IsLeader)
	pauses := func() (lines, events int) {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(logs.String(), `level=WARN msg="simba process paused"`), len(paused)
	}
	// Right after a keep-alive: the next is due in a renewal interval (1 s), the session's
	// local deadline in about 2.9 s (TTL 3 s).
	afterKeepAlive := func() {
		n := keepAlives.Load()
		w.until(5*time.Second, "a keep-alive", func() bool { return keepAlives.Load() > n })
	}

	// The virtual clock moved by ten TTLs at once fires every timer at its time: no pause.
	w.clock.Advance(10 * testTTL)
	if l, n := pauses(); l != 0 || n != 0 {
		t.Fatalf("%d pause lines and %d events for a virtual clock moved on, want 0:\n%s", l, n, logs.String())
	}
	session := c.Session()

	// A short pause (the keep-alive about half a second late) that cost nothing: not logged.
	afterKeepAlive()
	pc.PauseFor(1500 * time.Millisecond)
	w.run(time.Second)
	if l, n := pauses(); l != 0 || n != 0 {
		t.Fatalf("%d pause lines and %d events for a short pause, want 0:\n%s", l, n, logs.String())
	}

	// A long one (the keep-alive 1.3 s late) that the session outlives: one WARN line.
	afterKeepAlive()
	pc.PauseFor(2300 * time.Millisecond)
	w.run(time.Second)
	if l, n := pauses(); l != 1 || n != 1 {
		t.Fatalf("%d pause lines and %d events for a long pause, want 1:\n%s", l, n, logs.String())
	}
	if !strings.Contains(logs.String(), `level=WARN msg="simba process paused" paused_for=1.3`) ||
		!strings.Contains(logs.String(), "session="+string(session)+" session_lost=false") {
		t.Errorf("the long pause's line does not say how long and that the session outlived it:\n%s", logs.String())
	}
	if c.Session() != session || !e.IsLeader() {
		t.Fatalf("session %q (was %q), leader %v: the long pause cost something", c.Session(), session, e.IsLeader())
	}

	// Twice the TTL (SIGSTOP, SIGCONT): the session's deadline passed; one WARN line, and
	// the session lost and the term revoked name the pause.
	afterKeepAlive()
	from := len(logs.String())
	pc.PauseFor(2 * testTTL)
	w.until(10*time.Second, "a new session", func() bool { s := c.Session(); return s != "" && s != session })
	w.until(10*time.Second, "leading again", e.IsLeader)
	w.run(time.Second)
	out := logs.String()[from:]
	if l, n := pauses(); l != 2 || n != 2 {
		t.Fatalf("%d pause lines and %d events after a pause past the deadline, want 2 in all:\n%s", l, n, out)
	}
	for _, want := range []string{
		`level=WARN msg="simba process paused" paused_for=`,
		" session=" + string(session) + " session_lost=true",
		`level=INFO msg="simba session lost" session=` + string(session) + ` reason=deadline paused_for=`,
		`level=INFO msg="simba revoked" name=leader`,
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("%d lines with %q, want 1:\n%s", strings.Count(out, want), want, out)
		}
	}
	if !strings.Contains(out, "reason=deadline session="+string(session)+" paused_for=") {
		t.Errorf("the revoked line does not name the pause:\n%s", out)
	}
	if strings.Index(out, `msg="simba process paused"`) > strings.Index(out, `msg="simba session lost"`) {
		t.Errorf("the pause is logged after the loss it caused:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	p := paused[1].Paused
	if p <= 0 || len(lost) != 1 || lost[0].Paused != p || len(revoked) != 1 || revoked[0].Paused != p {
		t.Errorf("pause %v; lost %v; revoked %v: the loss's events do not carry the pause", paused[1], lost, revoked)
	}
}

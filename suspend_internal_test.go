package simba

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
	"go.uber.org/goleak"
)

// sleepyMachine simulates a machine that can be suspended: suspend(d) moves the clocks that
// count a suspend (wall, boot time, the backend server's) by d at once, while the monotonic
// clock, as on Linux, does not move.
type sleepyMachine struct {
	origin time.Time
	slept  atomic.Int64
}

func (m *sleepyMachine) suspend(d time.Duration) { m.slept.Add(int64(d)) }

func (m *sleepyMachine) mono() time.Duration { return time.Since(m.origin) }

// read is the client clock's monotonic and wall source: the wall clock ran on in a suspend.
func (m *sleepyMachine) read() (mono, wall time.Duration) {
	mono = m.mono()
	return mono, mono + time.Duration(m.slept.Load()) + 7*time.Hour
}

// boot is the client clock's CLOCK_BOOTTIME.
func (m *sleepyMachine) boot() (time.Duration, bool) {
	return m.mono() + time.Duration(m.slept.Load()) + 3*time.Second, true
}

// serverClock is the backend server's clock: real time, suspend included.
type serverClock struct{ m *sleepyMachine }

func (s serverClock) Now() time.Duration { return s.m.mono() + time.Duration(s.m.slept.Load()) }
func (s serverClock) AfterFunc(d time.Duration, f func()) spi.Timer {
	return time.AfterFunc(d, f)
}

// TestSuspendEndsTheTermAtOnce: a machine suspended for twice the TTL (boot time and wall
// clock moved on, the monotonic clock did not) resumes with its term invalid at the first
// IsValid, before any keep-alive is sent; the term is revoked for its deadline (its context
// cancelled with a *RevokedError, reason deadline), the session lost, and the pause logged
// once as a suspend with paused_for at least the suspend. Before, on Go's monotonic clock
// alone, IsValid stayed true until the next keep-alive came back refused, a renewal interval
// (10 s here) after the resume: the first check below failed.
func TestSuspendEndsTheTermAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	const ttl = 30 * time.Second // renewal every 10 s: no keep-alive during the test
	m := &sleepyMachine{origin: time.Now()}
	sc := newSuspendClockWith(m.read, m.boot)
	srv := simbatest.NewServer(simbatest.WithClock(serverClock{m}))
	var logs testenv.LogBuffer
	var mu sync.Mutex
	var paused, lost, revoked []Event
	var keepAlives atomic.Int32
	c, err := New(srv.Backend(), WithClock(sc), WithTTL(ttl), WithOwner("sleeper"), WithLogger(logs.Logger()),
		WithListener(func(ev Event) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Kind {
			case EventPaused:
				paused = append(paused, ev)
			case EventSessionExpired:
				lost = append(lost, ev)
			case EventRevoked:
				revoked = append(revoked, ev)
			}
		}),
		WithCallObserver(func(ci CallInfo) {
			if ci.Op == OpKeepAlive {
				keepAlives.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := c.Lock(ctx, "suspend-lock")
	if err != nil {
		t.Fatal(err)
	}
	session := c.Session()
	if !h.IsValid() || h.Remaining() < ttl/2 {
		t.Fatalf("fresh lock: valid %v, remaining %v", h.IsValid(), h.Remaining())
	}
	termCtx := h.Context()

	m.suspend(2 * ttl)
	if h.IsValid() || h.Remaining() != 0 {
		t.Fatalf("after a suspend of 2×TTL: valid %v, remaining %v; want invalid at once", h.IsValid(), h.Remaining())
	}
	select {
	case <-termCtx.Done():
	case <-ctx.Done():
		t.Fatal("the term's context was not cancelled after the resume")
	}
	var re *RevokedError
	if !errors.As(context.Cause(termCtx), &re) || re.Reason != RevokedDeadline {
		t.Fatalf("term context's cause %v, want a *RevokedError for the deadline", context.Cause(termCtx))
	}
	if n := keepAlives.Load(); n != 0 {
		t.Errorf("%d keep-alives before the revocation, want 0: the suspend alone must end the term", n)
	}
	for done := false; !done; {
		mu.Lock()
		done = len(lost) >= 1 && len(revoked) >= 1 && len(paused) >= 1
		mu.Unlock()
		select {
		case <-ctx.Done():
			t.Fatal("no session lost, revoked and paused events after the resume")
		case <-time.After(time.Millisecond):
		}
	}
	mu.Lock()
	if len(lost) != 1 || len(revoked) != 1 || len(paused) != 1 {
		t.Errorf("%d lost, %d revoked, %d paused events, want 1 each", len(lost), len(revoked), len(paused))
	}
	if lost[0].Session != session || revoked[0].Reason != RevokedDeadline || revoked[0].Name != "suspend-lock" ||
		paused[0].Paused < 2*ttl-suspendTolerance || lost[0].Paused != paused[0].Paused || revoked[0].Paused != paused[0].Paused {
		t.Errorf("paused %v, lost %v, revoked %v: want the session %s lost to its deadline, after a pause of at least %v",
			paused, lost, revoked, session, 2*ttl-suspendTolerance)
	}
	mu.Unlock()
	out := logs.String()
	for _, want := range []string{
		`level=WARN msg="simba process paused" paused_for=`,
		`session_lost=true cause="the machine was suspended (system sleep, VM snapshot or restore) for `,
		`level=INFO msg="simba session lost" session=` + string(session) + ` reason=deadline paused_for=`,
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("%d lines with %q, want 1:\n%s", strings.Count(out, want), want, out)
		}
	}
	if got := sc.suspended(); got < 2*ttl-suspendTolerance || got > 2*ttl {
		t.Errorf("suspended %v, want %v", got, 2*ttl)
	}
	if err := c.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

// TestSuspendClockTellsASuspendFromAWallClockSet: the default clock reads the boot clock only
// when the wall clock moved against the monotonic one (1 read for 1,000 readings of Now with a
// step in between, none without), counts a suspend the boot clock confirms, once, and not a
// wall clock set forward or back (an NTP step); without a boot clock (other OSes), a forward
// jump of the wall clock counts, a backward one does not. Now never decreases.
func TestSuspendClockTellsASuspendFromAWallClockSet(t *testing.T) {
	var mono, wallStep, slept atomic.Int64
	var bootReads atomic.Int32
	read := func() (time.Duration, time.Duration) {
		m := time.Duration(mono.Load())
		return m, m + time.Duration(wallStep.Load()+slept.Load())
	}
	boot := func() (time.Duration, bool) {
		bootReads.Add(1)
		return time.Duration(mono.Load()+slept.Load()) + time.Hour, true
	}
	var reported []time.Duration
	for _, withBoot := range []bool{true, false} {
		bootReads.Store(0)
		mono.Store(0)
		wallStep.Store(0)
		slept.Store(0)
		reported = nil
		var sc *suspendClock
		if withBoot {
			sc = newSuspendClockWith(read, boot)
		} else {
			sc = newSuspendClockWith(read, nil)
		}
		sc.onSuspend = func(d time.Duration) { reported = append(reported, d) }
		bootReads.Store(0)
		last := time.Duration(-1)
		now := func() time.Duration {
			n := sc.Now()
			if n < last {
				t.Fatalf("Now went back: %v after %v", n, last)
			}
			last = n
			return n
		}
		for range 1000 {
			mono.Add(int64(time.Millisecond))
			now()
		}
		if n := bootReads.Load(); n != 0 || sc.suspended() != 0 {
			t.Fatalf("boot %v: %d boot reads, %v suspended for steady clocks, want none", withBoot, n, sc.suspended())
		}
		// The wall clock set back, then forward by as much (an NTP step and its correction).
		wallStep.Store(int64(-time.Minute))
		now()
		wallStep.Store(0)
		now()
		if withBoot && (sc.suspended() != 0 || bootReads.Load() != 2) {
			t.Fatalf("wall clock set back and forth: %v suspended, %d boot reads; want 0 and 2", sc.suspended(), bootReads.Load())
		}
		if !withBoot && (sc.suspended() != time.Minute || len(reported) != 1) {
			t.Fatalf("no boot clock, wall clock set back then forward: %v suspended (%v reported); want the forward minute, once", sc.suspended(), reported)
		}
		base := sc.suspended()
		// The wall clock set forward by an hour: a suspend only without a boot clock.
		wallStep.Store(int64(time.Hour))
		for range 1000 {
			now()
		}
		want := base
		if !withBoot {
			want += time.Hour
		}
		if sc.suspended() != want {
			t.Fatalf("boot %v: wall clock set forward an hour: %v suspended, want %v", withBoot, sc.suspended(), want)
		}
		// A suspend of 90 s: counted once, Now moved by it.
		before := now()
		slept.Store(int64(90 * time.Second))
		for range 1000 {
			now()
		}
		if got := now() - before; got != 90*time.Second {
			t.Fatalf("boot %v: Now moved by %v over a suspend of 90s", withBoot, got)
		}
		if got := reported[len(reported)-1]; got != 90*time.Second {
			t.Fatalf("boot %v: reported %v, want the suspend of 90s last", withBoot, reported)
		}
		if withBoot && (len(reported) != 1 || bootReads.Load() != 4) {
			t.Fatalf("reported %v after %d boot reads, want one suspend after 4 reads", reported, bootReads.Load())
		}
	}
}

var sinkBool bool

// BenchmarkTermIsValid measures Term.IsValid on the default clock (suspend-counting, with its
// boot clock) against spi.SystemClock, Go's monotonic clock alone, in the same run: the
// default clock adds a wall clock reading and an atomic load, the boot clock is not read.
func BenchmarkTermIsValid(b *testing.B) {
	for _, bc := range []struct {
		name  string
		clock spi.Clock
	}{{"monotonic", spi.SystemClock()}, {"suspend-counting", newSuspendClock()}} {
		b.Run(bc.name, func(b *testing.B) {
			var dl atomic.Int64
			dl.Store(int64(time.Hour))
			term := newTerm("x", 1, "o", bc.clock, &dl, time.Hour)
			for b.Loop() {
				sinkBool = term.IsValid()
			}
		})
	}
}

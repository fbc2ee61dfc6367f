package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestOutageReporter: the first retryable failure is logged at once, later ones first
// reportEvery later, then twice as far apart each time up to reportEveryMax, with the count
// left out; a session opening again is logged once, and permanent failures and other events
// are not its business.
func TestOutageReporter(t *testing.T) {
	var logs testenv.LogBuffer
	now := time.Unix(0, 0)
	r := newOutageReporter(logs.Logger())
	r.now = func() time.Time { return now }
	fail := simba.Event{Kind: simba.EventBackendError, Op: simba.OpOpenSession, Class: spi.Retryable, Err: errors.New("dial tcp: connection refused")}
	lines := func() int { return strings.Count(logs.String(), "\n") }

	r.event(simba.Event{Kind: simba.EventSessionOpened}) // no outage yet: nothing to say
	r.event(fail)
	if lines() != 1 || !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "connection refused") || !strings.Contains(logs.String(), "op=open-session") {
		t.Fatalf("the first failure: %q", logs.String())
	}
	for range 5 {
		now = now.Add(time.Second)
		r.event(fail)
	}
	if lines() != 1 {
		t.Fatalf("failures within reportEvery were logged: %q", logs.String())
	}
	now = now.Add(reportEvery)
	r.event(fail)
	if lines() != 2 || !strings.Contains(logs.String(), "failures_since_last_report=5") {
		t.Fatalf("the repeat after reportEvery: %q", logs.String())
	}
	// Then twice as far apart each time, up to reportEveryMax.
	for gap := 2 * reportEvery; gap <= 2*reportEveryMax; gap *= 2 {
		want := lines() + 1
		now = now.Add(min(gap, reportEveryMax) - time.Second)
		r.event(fail)
		if lines() != want-1 {
			t.Fatalf("a failure %v after the last line, whose gap is %v, was logged: %q", min(gap, reportEveryMax)-time.Second, min(gap, reportEveryMax), logs.String())
		}
		now = now.Add(time.Second)
		r.event(fail)
		if lines() != want || !strings.Contains(logs.String(), "failures_since_last_report=1") {
			t.Fatalf("no line %v after the last: %q", min(gap, reportEveryMax), logs.String())
		}
	}
	base := lines()
	r.event(simba.Event{Kind: simba.EventBackendError, Class: spi.Permanent, Err: errors.New("no schema")})
	r.event(simba.Event{Kind: simba.EventElected, Name: "x"})
	if lines() != base {
		t.Fatalf("a permanent failure or another event was logged: %q", logs.String())
	}
	r.event(simba.Event{Kind: simba.EventSessionOpened})
	r.event(simba.Event{Kind: simba.EventSessionOpened})
	if lines() != base+1 || !strings.Contains(logs.String(), "answers again") {
		t.Fatalf("the recovery: %q", logs.String())
	}
	r.event(fail) // a new outage is reported at once, and repeated reportEvery later
	now = now.Add(reportEvery)
	r.event(fail)
	if lines() != base+3 {
		t.Fatalf("the next outage's first failure and its repeat: %q", logs.String())
	}
}

// TestLockAtARefusingBackendSaysSo: simba lock at a Redis port nobody listens on says that its
// calls fail and it retries, instead of waiting without a word, and a SIGTERM then ends it at
// once with 143.
func TestLockAtARefusingBackendSaysSo(t *testing.T) {
	addr := testenv.RefusedAddr(t)
	cmd := exec.Command(simbaBinary(t), "lock", "-dsn", "redis://"+addr+"/0", "-name", "refused", "--", "true")
	var stderr testenv.LogBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), "retrying"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the failing backend within 20 s; stderr: %q", stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), "refused") {
		t.Errorf("the report does not say what failed: %q", stderr.String())
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 143 {
		t.Fatalf("after SIGTERM: %v, want exit status 143; stderr: %q", err, stderr.String())
	}
	if took := time.Since(start); took > signalBound {
		t.Errorf("simba lock exited %v after SIGTERM, want at once (under %v)", took, signalBound)
	}
}

// TestBackendRefusedOptionIsAUsageError: a value of the command line that the backend refuses
// (etcd's TTL under 1s, as ErrInvalidOption) exits 2, as the CLI's own checks do; a missing
// schema keeps its hint and exits 1; a drifted one exits 1 without the advice to run simba
// migrate, which does not repair it (an outside trial dropped simba_waiter at schema version 3:
// simba lock said to run simba migrate, which then failed with the same drift).
func TestBackendRefusedOptionIsAUsageError(t *testing.T) {
	ctx := context.Background()
	refused := fmt.Errorf("%w: etcd: TTL 500ms outside [1s, 2500000h0m0s]", simba.ErrInvalidOption)
	if got := exitStatusOf(ctx, withMigrateHint(refused, "etcd://h/p")); got != 2 {
		t.Errorf("a refused option exits %d, want 2", got)
	}
	missing := fmt.Errorf("acquire: %w", simba.ErrSchemaMissing)
	err := withMigrateHint(missing, "sqlite:///tmp/x.db")
	if got := exitStatusOf(ctx, err); got != 1 || !strings.Contains(err.Error(), "simba migrate") {
		t.Errorf("a missing schema: %v, exit %d; want the migrate hint and 1", err, got)
	}
	// A drifted schema (it matches ErrSchemaMissing too) is not one simba migrate repairs:
	// it applies only the migrations the version table lacks.
	drift := fmt.Errorf("open-session: %w", fmt.Errorf("%w: sql sqlite: table simba_waiter is missing", simba.ErrSchemaDrift))
	err = withMigrateHint(drift, "sqlite:///tmp/x.db")
	if got := exitStatusOf(ctx, err); got != 1 || strings.Contains(err.Error(), "run `simba migrate`") || !strings.Contains(err.Error(), "does not repair") {
		t.Errorf("a drifted schema: %v, exit %d; want 1 and no advice to run simba migrate", err, got)
	}
}

// signalBound is how long simba may take to exit after SIGINT while it waits at a backend that
// refuses connections or never answers: it has nothing to wait for (no session to close, no
// command to stop), so it exits in milliseconds (under 50 ms measured, with a busy loop on its
// CPU). What it must not wait for is a call in flight timing out: 5 s at the default TTL (its
// call timeout, TTL/3, and the Redis hint probe's limit), more at a Redis that accepts
// connections and never answers. The bound is half of that: no latency bound, room for a
// loaded machine, and a simba that waits for the call still fails (4.9 s when Close waits for
// the open in flight).
const signalBound = simba.DefaultTTL / 3 / 2

// mutedAddr serves a server that accepts connections and never answers; accepted gets a value
// for each connection accepted (if it has room).
func mutedAddr(t *testing.T) (addr string, accepted chan struct{}) {
	accepted = make(chan struct{}, 16)
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		select {
		case accepted <- struct{}{}:
		default:
		}
		_, _ = io.Copy(io.Discard, c)
	})
	return ln.Addr().String(), accepted
}

// TestSignalAtADeadBackendExitsAtOnce: simba lock and simba run stopped by SIGINT while they
// wait at a backend that refuses connections or accepts them and never answers exit at once
// with 130, saying so. They used to wait for the call in flight to time out: the session's
// open (Client.Close waited for it), the Redis hint subscription's probe (in simba.New) or a
// pub/sub handshake (the Redis backend's Close waited for it).
func TestSignalAtADeadBackendExitsAtOnce(t *testing.T) {
	bin := simbaBinary(t)
	for _, tc := range []struct {
		name, cmd, scheme string
		muted             bool
		// ready is what shows simba waiting at the phase the case is about: a line on its
		// stderr, or (when "") a connection the muted server accepted.
		ready string
	}{
		// The open in flight (the probe failed at once).
		{"redis refused", "lock", "redis", false, "could not check the permission"},
		// simba.New's probe of the hint subscription.
		{"redis muted probe", "lock", "redis", true, ""},
		// The open in flight, after the probe gave up (5 s).
		{"redis muted open", "run", "redis", true, "did not answer within"},
		{"etcd muted", "lock", "etcd", true, ""},
		{"zk muted", "lock", "zk", true, ""},
		{"zk refused", "run", "zk", false, "without user:password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, accepted := testenv.RefusedAddr(t), chan struct{}(nil)
			if tc.muted {
				addr, accepted = mutedAddr(t)
			}
			cmd := exec.Command(bin, tc.cmd, "-dsn", tc.scheme+"://"+addr, "-name", "dead", "--", "true")
			var stderr testenv.LogBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill() //nolint:errcheck
			ready := func() bool { return strings.Contains(stderr.String(), tc.ready) }
			if tc.ready == "" {
				ready = func() bool { return len(accepted) > 0 }
			}
			for deadline := time.Now().Add(30 * time.Second); !ready(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("simba %s did not get to the phase within 30 s; stderr: %q", tc.cmd, stderr.String())
				}
			}
			time.Sleep(100 * time.Millisecond) // into the call
			start := time.Now()
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			took := time.Since(start)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 130 {
				t.Fatalf("after SIGINT: %v, want exit status 130; stderr: %q", err, stderr.String())
			}
			if took > signalBound {
				t.Errorf("simba %s exited %v after SIGINT, want at once (under %v)", tc.cmd, took, signalBound)
			}
			if !strings.Contains(stderr.String(), "simba: stopped by SIGINT while waiting") {
				t.Errorf("stderr does not say why it stopped: %q", stderr.String())
			}
		})
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestOutageReporter: the first retryable failure is logged at once, later ones at most once
// per reportEvery with the count left out, a session opening again is logged once, and
// permanent failures and other events are not its business.
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
	r.event(simba.Event{Kind: simba.EventBackendError, Class: spi.Permanent, Err: errors.New("no schema")})
	r.event(simba.Event{Kind: simba.EventElected, Name: "x"})
	if lines() != 2 {
		t.Fatalf("a permanent failure or another event was logged: %q", logs.String())
	}
	r.event(simba.Event{Kind: simba.EventSessionOpened})
	r.event(simba.Event{Kind: simba.EventSessionOpened})
	if lines() != 3 || !strings.Contains(logs.String(), "answers again") {
		t.Fatalf("the recovery: %q", logs.String())
	}
	r.event(fail) // a new outage is reported at once
	if lines() != 4 {
		t.Fatalf("the next outage's first failure: %q", logs.String())
	}
}

// TestLockAtARefusingBackendSaysSo: simba lock at a Redis port nobody listens on says that its
// calls fail and it retries, instead of waiting without a word, and a SIGTERM then ends it with
// 143.
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
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 143 {
		t.Fatalf("after SIGTERM: %v, want exit status 143; stderr: %q", err, stderr.String())
	}
}

// TestBackendRefusedOptionIsAUsageError: a value of the command line that the backend refuses
// (etcd's TTL under 1s, as ErrInvalidOption) exits 2, as the CLI's own checks do; a missing
// schema keeps its hint and exits 1.
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
}

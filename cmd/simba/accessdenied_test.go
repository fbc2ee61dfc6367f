package main

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
)

// TestCommandsSayAccessDenied: simba status and simba lock with a DSN whose PostgreSQL role
// does not exist fail with an error matching simba.ErrAccessDenied, printed as one line that
// says "access denied", authentication, and the role; the exit status is 1 (not a usage
// error). On the old code the error matched no such sentinel and did not say so.
func TestCommandsSayAccessDenied(t *testing.T) {
	u, err := url.Parse(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("simba_cli_nosuch")
	dsn := u.String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"status", func() error { return statusTo(ctx, io.Discard, []string{"-dsn", dsn}) }},
		{"lock", func() error { return runCommand(ctx, []string{"-dsn", dsn, "-name", "x", "--", "true"}, true) }},
	} {
		err := tc.run()
		line := ""
		if err != nil {
			line = errorLine(err)
		}
		t.Logf("simba %s: %s", tc.name, line)
		if !errors.Is(err, simba.ErrAccessDenied) || exitStatusOf(ctx, err) != 1 || strings.ContainsAny(line, "\n\r") ||
			!strings.HasPrefix(line, "simba: access denied: ") || !strings.Contains(line, "authentication refused") ||
			!strings.Contains(line, "simba_cli_nosuch") {
			t.Errorf("simba %s: %v (exit %d); want simba.ErrAccessDenied printed on one line as \"simba: access denied: ... authentication refused ...\" naming the role, exit 1",
				tc.name, line, exitStatusOf(ctx, err))
		}
	}
}

// TestLockSaysRedisAccessDenied: simba lock and simba run at a Redis server that refuses the
// DSN's credentials (an unknown ACL user: WRONGPASS, refused at the client's hint subscription,
// before any session) fail with simba.ErrAccessDenied and exit status 1, as every refusal of
// the backend does. They exited 2, the status of a usage error, since every error of
// simba.New was taken for a bad flag.
func TestLockSaysRedisAccessDenied(t *testing.T) {
	dsn := "redis://simba_lockfast_nosuch:wrong@" + testenv.Redis(t) + "/0"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, cmd := range []struct {
		name string
		lock bool
	}{{"lock", true}, {"run", false}} {
		err := runCommand(ctx, []string{"-dsn", dsn, "-name", "x", "--", "true"}, cmd.lock)
		line := ""
		if err != nil {
			line = errorLine(err)
		}
		t.Logf("simba %s: %s", cmd.name, line)
		if !errors.Is(err, simba.ErrAccessDenied) || exitStatusOf(ctx, err) != 1 || strings.Contains(line, "wrong") {
			t.Errorf("simba %s: %v (exit %d); want simba.ErrAccessDenied, exit 1, no password", cmd.name, line, exitStatusOf(ctx, err))
		}
	}
}

// TestEveryCommandSaysRedisAccessDenied: simba status, demo, lock and run at a Redis server that
// refuses the DSN's credentials (an unknown ACL user: WRONGPASS), or with a password for the
// default user at a server that has none configured (the shared server has none), fail with
// an error matching simba.ErrAccessDenied, exit status 1, printed as one line beginning
// "simba: access denied: " without the password. On the old code status's and lock's Redis
// lines began "simba: redis: ..." or "simba: subscribing to hints: ...", status with the
// needless password listed the server unauthenticated (exit 0), lock with it exited 2 (a
// usage error, as the refusal also matches ErrInvalidOption), and demo started its workers,
// each printing its refusal, then waited 30 s to fail with "no new leader in time".
func TestEveryCommandSaysRedisAccessDenied(t *testing.T) {
	addr := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dsn := range []string{
		"redis://simba_small_nosuch:wrongpw@" + addr + "/0",
		"redis://:needlesspw@" + addr + "/0",
	} {
		for _, tc := range []struct {
			name string
			run  func() error
		}{
			{"status", func() error { return statusTo(ctx, io.Discard, []string{"-dsn", dsn}) }},
			{"demo", func() error { return demo(ctx, []string{"-dsn", dsn}) }},
			{"lock", func() error { return runCommand(ctx, []string{"-dsn", dsn, "-name", "small-x", "--", "true"}, true) }},
			{"run", func() error { return runCommand(ctx, []string{"-dsn", dsn, "-name", "small-x", "--", "true"}, false) }},
		} {
			err := tc.run()
			line := ""
			if err != nil {
				line = errorLine(err)
			}
			t.Logf("simba %s (%s): %s", tc.name, strings.Split(dsn, "@")[0], line)
			if !errors.Is(err, simba.ErrAccessDenied) || exitStatusOf(ctx, err) != 1 || strings.ContainsAny(line, "\n\r") ||
				!strings.HasPrefix(line, "simba: access denied: ") || strings.Count(line, "access denied") != 1 ||
				strings.Contains(line, "wrongpw") || strings.Contains(line, "needlesspw") {
				t.Errorf("simba %s with %s: %q (exit %d); want simba.ErrAccessDenied on one line beginning \"simba: access denied: \" (once), no password, exit 1",
					tc.name, strings.Split(dsn, "@")[0], line, exitStatusOf(ctx, err))
			}
		}
	}
}

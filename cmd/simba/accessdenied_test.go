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

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
)

// TestZooKeeperOpenACLWarningCanBeAcknowledged: simba lock on a ZooKeeper DSN without
// user:password warns that Simba's nodes are open, saying how to protect them or to say that
// is intended (?acl=open); with acl=open it logs nothing of it (a job cron starts every
// minute got the WARN every minute), and SIMBA_LOG_LEVEL=debug still shows it. Old code:
// acl=open was an unknown DSN parameter (exit status 2), and only SIMBA_LOG_LEVEL=error,
// which hides every warning, kept the line out.
func TestZooKeeperOpenACLWarningCanBeAcknowledged(t *testing.T) {
	ch := zktest.New(t, testenv.ZooKeeper(t), "simba-cli-acl")
	bin := simbaBinary(t)
	lock := func(dsn string, env ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "lock", "-dsn", dsn, "-name", "job", "--", "true")
		cmd.Env = append(append(os.Environ(), "SIMBA_DSN=", "SIMBA_LOG_LEVEL="), env...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("simba lock -dsn %s: %v", dsn, err)
		}
		return stderr.String(), cmd.ProcessState.ExitCode()
	}

	stderr, status := lock(ch.DSN("", ""))
	if status != 0 || !strings.Contains(stderr, "WARN") || !strings.Contains(stderr, "put a user:password in the DSN") ||
		!strings.Contains(stderr, "add ?acl=open to say the open ACL is intended") {
		t.Errorf("without credentials: exit status %d, stderr %q; want 0 and the WARN saying what to do", status, stderr)
	}
	stderr, status = lock(ch.DSN("", "acl=open"))
	if status != 0 || stderr != "" {
		t.Errorf("with acl=open: exit status %d, stderr %q; want 0 and nothing", status, stderr)
	}
	stderr, status = lock(ch.DSN("", "acl=open"), "SIMBA_LOG_LEVEL=debug")
	if status != 0 || !strings.Contains(stderr, "ZooKeeper DSN with acl=open: Simba's nodes get the open ACL world:anyone") ||
		strings.Contains(stderr, "WARN") {
		t.Errorf("with acl=open at the debug level: exit status %d, stderr %q; want 0 and the open ACL said at DEBUG", status, stderr)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba/internal/testenv"
)

// TestLockOnAClusterNodeFailsFast runs `simba lock -dsn redis://<a Cluster node> -name x --
// true`: a standalone client pointed at a Cluster node gets MOVED (or, for the keys of one
// call that the node holds in different slots, CROSSSLOT), which is a
// misconfiguration, so the command fails at once with a permanent error naming it instead of
// retrying until killed. (The bound is generous for a loaded machine; the time is logged.)
func TestLockOnAClusterNodeFailsFast(t *testing.T) {
	node := testenv.RedisCluster(t)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := runCommand(ctx, []string{"-dsn", "redis://" + node, "-name", "x", "--", "true"}, true)
	took := time.Since(start)
	t.Logf("simba lock -dsn redis://%s failed after %v: %v", node, took, err)
	if err == nil {
		t.Fatal("simba lock on a Cluster node succeeded")
	}
	if ctx.Err() != nil || took > 10*time.Second {
		t.Fatalf("simba lock took %v (ctx %v): not failing fast", took, ctx.Err())
	}
	if spi.Classify(err) != spi.Permanent || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v is not a permanent misconfiguration error", err)
	}
	if msg := err.Error(); !(strings.Contains(msg, "MOVED") || strings.Contains(msg, "CROSSSLOT") || strings.Contains(msg, "cluster-enabled yes")) ||
		!strings.Contains(msg, "redis+cluster://") {
		t.Errorf("error %q does not name the misconfiguration (cluster-enabled, MOVED or CROSSSLOT; use redis+cluster://)", msg)
	}
}

// TestLockCommandOnAClusterNodeExitsAtOnce runs the built simba binary as a user would:
// `simba lock -dsn redis://<a Cluster node> -name x -- true` exits non-zero at once (tens of
// milliseconds; the test allows signalBound, half the 5 s a call or the hint probe would take
// to time out, so that a loaded machine does not fail it and a simba that waits for one
// still does), and its stderr names the misconfiguration.
func TestLockCommandOnAClusterNodeExitsAtOnce(t *testing.T) {
	node := testenv.RedisCluster(t)[0]
	bin := simbaBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "lock", "-dsn", "redis://"+node, "-name", "x", "--", "true")
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	t.Logf("exited after %v: %v\n%s", took, err, stderr.String())
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
		t.Fatalf("simba lock on a Cluster node: %v, want a non-zero exit", err)
	}
	if took > signalBound {
		t.Errorf("simba lock took %v to exit, want at once (under %v)", took, signalBound)
	}
	if msg := stderr.String(); !(strings.Contains(msg, "MOVED") || strings.Contains(msg, "CROSSSLOT") || strings.Contains(msg, "cluster-enabled yes")) ||
		!strings.Contains(msg, "redis+cluster://") {
		t.Errorf("stderr %q does not name the misconfiguration (cluster-enabled, MOVED or CROSSSLOT; use redis+cluster://)", msg)
	}
}

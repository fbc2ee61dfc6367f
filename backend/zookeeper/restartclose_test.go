package zookeeper

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// kill stops the server at once (SIGKILL), as a crash or an OOM kill would, and waits for it.
func (z *privateZK) kill() {
	if z.cmd == nil {
		return
	}
	z.cmd.Process.Signal(syscall.SIGKILL)
	z.cmd.Wait()
	z.cmd = nil
}

// TestLostSessionClosedAfterRestart plays the engine's part in an outage longer than the
// session timeout that ends with the server restarted (trial 25): the session is lost at its
// deadline while the server is down, so its close fails (retryably); once the server is back
// the next session opens and the lost session's close is sent once more (the engine's
// staleClose). The restarted server reloads the old session from its log and would expire it
// only one session timeout after it starts: the close sent again must reach it, so the old
// lease node is gone when that close returns, and the new session's first acquire is granted.
// Before the fix the backend had dropped the lost session (and its password) one session
// timeout after the failed close, taking the server for having expired it, and the second
// close did nothing: the node was still there and the acquire answered HeldBy.
func TestLostSessionClosedAfterRestart(t *testing.T) {
	testenv.Short(t, "starts its own ZooKeeper")
	z := startPrivateZK(t)
	dsn := "zk://" + z.addr + "/restartclose"
	b := openBackend(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	s1, err := b.OpenSession(ctx, "lost", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(ctx, s1.ID, "held"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v; want granted", r, err)
	}
	z.kill()
	// The session's deadline passes with the server down: the engine's best-effort close.
	time.Sleep(ttl)
	cctx, ccancel := context.WithTimeout(ctx, ttl/3)
	err = b.CloseSession(cctx, s1.ID)
	ccancel()
	if spi.Classify(err) != spi.Retryable {
		t.Fatalf("CloseSession with the server down = %v; want a retryable error", err)
	}
	// The outage goes on for more than one session timeout after that close.
	time.Sleep(2 * ttl)
	z.start(t)
	var s2 spi.Session
	for opens := 1; ; opens++ {
		s2, err = b.OpenSession(ctx, "next", ttl)
		if err == nil {
			break
		}
		if spi.Classify(err) != spi.Retryable || opens == 100 {
			t.Fatalf("OpenSession after the restart (attempt %d): %v", opens, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := b.CloseSession(ctx, s1.ID); err != nil {
		t.Fatalf("CloseSession of the lost session after the restart: %v", err)
	}
	// A plain client sees whether the server still has the lost session's lease node.
	c, _, err := zk.Connect([]string{z.addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := b.lay.lease("held")
	ok, stat, err := c.Exists(path)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Errorf("the lost session's lease node %s is still at the restarted server (owner session %x) after its close returned", path, stat.EphemeralOwner)
	}
	if r, err := b.Acquire(ctx, s2.ID, "held"); err != nil || r.Kind != spi.Granted {
		t.Errorf("the new session's first Acquire after the lost session's close = %+v, %v; want granted", r, err)
	}
}

package zookeeper

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
)

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestContendedAcquireIsNoOutage: an acquire whose waiter queue keeps changing under it gives
// up after its attempts ("kept changing") while the server answers every request: contention,
// not an outage. Forced here by changing the queue node's version each time the acquire has
// read it (three acquires' worth, 24 reads), the Lock still succeeds after the retries, every
// failure is still an EventBackendError, and the client's log has no WARN line. It had a WARN
// "simba backend error" per failed acquire's outage and an INFO "reachable again" ms later
// (trial 25, under 12 goroutines locking 20 names).
func TestContendedAcquireIsNoOutage(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	raw := rawClient(t, b, "")
	const name = "contended"
	qp := b.lay.queue(name)
	// A queue node with a child that is no waiter node: the acquire checks its version. (A
	// session's open creates the roots.)
	if err := b.CloseSession(testCtx(t), openSession(t, b, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(qp, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(qp+"/other", nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	const bumps = 24 // three acquires of eight attempts each
	var reads atomic.Int32
	hook := func(n string) {
		if n != name || reads.Add(1) > bumps {
			return
		}
		if _, err := raw.Set(qp, nil, -1); err != nil {
			t.Errorf("changing the queue: %v", err)
		}
	}
	testHookQueueRead.Store(&hook)
	defer testHookQueueRead.Store(nil)

	logs := &lockedBuffer{}
	var contended atomic.Int32
	c, err := simba.New(b, simba.WithOwner("contender"), simba.WithTTL(6*time.Second),
		simba.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		simba.WithListener(func(ev simba.Event) {
			if ev.Kind == simba.EventBackendError && ev.Err != nil && strings.Contains(ev.Err.Error(), "kept changing") {
				contended.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatalf("Lock: %v\nlog:\n%s", err, logs)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := contended.Load(); n < 1 {
		t.Fatalf("%d backend error events of a queue that kept changing, want at least one (%d queue reads changed)\nlog:\n%s", n, reads.Load(), logs)
	}
	var warns []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "ZooKeeper DSN without user:password") {
			continue // the backend's own warning, handed the client's logger (spi.LoggerAdopter): no outage
		}
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "reachable again") {
			warns = append(warns, line)
		}
	}
	if len(warns) > 0 {
		t.Errorf("%d WARN/ERROR or \"reachable again\" lines after %d contended acquires, want none (contention is no outage):\n%s", len(warns), contended.Load(), strings.Join(warns, "\n"))
	}
}

package simba_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// pausedServer is a connection on which, once paused, the session's keep-alives hang until
// their context ends and the close of a session fails (retryably), as a ZooKeeper server that
// has expired the session ends the connection under the close.
type pausedServer struct {
	spi.Backend
	paused    atomic.Bool
	mu        sync.Mutex
	hung      int           // keep-alives hanging
	resume    chan struct{} // closed when the process "resumes": the hung keep-alives return
	old       spi.SessionID // the session the faults hit
	closeFail int           // closes of old failed
}

func (b *pausedServer) KeepAlive(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	b.mu.Lock()
	hang, resume := b.paused.Load() && sid == b.old, b.resume
	if hang {
		b.hung++
	}
	b.mu.Unlock()
	if hang && resume != nil {
		// Stuck past its own timeout, as in a stopped process: it returns, timed out, only
		// once the session is lost. Idle meanwhile for the virtual clock's settling.
		_ = spi.Await(context.WithoutCancel(ctx), resume)
		return spi.KeepAlive{}, spi.Unavailable("KeepAlive", context.DeadlineExceeded)
	}
	if hang { // an outage: the call times out
		return spi.KeepAlive{}, spi.Unavailable("KeepAlive", spi.Await(ctx, nil))
	}
	return b.Backend.KeepAlive(ctx, sid, names, groups)
}

func (b *pausedServer) CloseSession(ctx context.Context, sid spi.SessionID) error {
	if b.paused.Load() && sid == b.old {
		b.mu.Lock()
		b.closeFail++
		b.mu.Unlock()
		return spi.Unavailable("CloseSession", errors.New("the connection ended before the server answered the close request: EOF"))
	}
	return b.Backend.CloseSession(ctx, sid)
}

func (b *pausedServer) counts() (hung, closeFail int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hung, b.closeFail
}

// TestPauseLogsTheSessionLostNotAnOutage: a process paused past its session's deadline (SIGSTOP,
// a VM or GC stall) resumes with a keep-alive in flight that times out and a lost session
// whose close fails: the log says the session was lost (INFO) and nothing else above DEBUG.
// It said "simba backend error … backend unavailable" at WARN and "simba backend reachable
// again" at INFO a few milliseconds later (seen on ZooKeeper and etcd after SIGSTOP/SIGCONT
// of a leader), an outage that never was. A real outage still is a WARN line: the keep-alive
// that fails while the session lives.
func TestPauseLogsTheSessionLostNotAnOutage(t *testing.T) {
	w := newWorld(t)
	var logs testenv.LogBuffer
	b := &pausedServer{Backend: w.srv.Backend(), resume: make(chan struct{})}
	var lost atomic.Int32
	c := w.clientOn(b, "a", simba.WithLogger(logs.Logger()), simba.WithListener(func(ev simba.Event) {
		if ev.Kind == simba.EventSessionExpired && lost.Add(1) == 1 {
			close(b.resume)
		}
	}))
	w.until(5*time.Second, "a session", func() bool { return c.Session() != "" })
	e, err := c.NewElection("leader")
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return e.Start(context.Background()) })
	w.until(5*time.Second, "leading", e.IsLeader)
	old := c.Session()
	b.mu.Lock()
	b.old = old
	b.mu.Unlock()
	b.paused.Store(true)
	// The next keep-alive goes out and hangs: the process is paused with it in flight.
	w.until(5*time.Second, "a keep-alive in flight", func() bool { h, _ := b.counts(); return h > 0 })
	w.until(10*time.Second, "a new session", func() bool { s := c.Session(); return s != "" && s != old })
	w.until(10*time.Second, "leading again", e.IsLeader)
	w.run(2 * time.Second)
	if _, n := b.counts(); n == 0 {
		t.Fatal("the lost session's close was never tried")
	}
	if lost.Load() != 1 {
		t.Errorf("%d sessions lost, want 1", lost.Load())
	}
	out := logs.String()
	if !strings.Contains(out, `level=INFO msg="simba session lost" session=`+string(old)+` reason=deadline`) {
		t.Errorf("the session's loss is not logged at INFO:\n%s", out)
	}
	for _, bad := range []string{"level=WARN", "level=ERROR", `msg="simba backend reachable again"`} {
		if n := strings.Count(out, bad); n != 0 {
			t.Errorf("%d lines with %s after a pause, want 0:\n%s", n, bad, out)
		}
	}
	if n := strings.Count(out, `level=DEBUG msg="simba call on a lost session failed"`); n == 0 {
		t.Errorf("the failed calls on the lost session are not at DEBUG:\n%s", out)
	}

	// A real outage of the live session: its keep-alive times out before the deadline, WARN.
	from := len(logs.String())
	b.mu.Lock()
	b.old, b.hung, b.resume = c.Session(), 0, nil
	b.mu.Unlock()
	w.until(10*time.Second, "the outage's WARN line", func() bool {
		return strings.Contains(logs.String()[from:], `level=WARN msg="simba backend error" op=keep-alive`)
	})
	// The outage ends before the test's Close, whose failed close call Close reports
	// (*SessionCloseError) since the session's close became an error of Close's.
	b.paused.Store(false)
}

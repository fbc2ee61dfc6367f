package simba_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// outageWatch counts a client's backend-error events and its log lines.
type outageWatch struct {
	logs     testenv.LogBuffer
	failures atomic.Int64
}

func (o *outageWatch) options() []simba.Option {
	return []simba.Option{simba.WithLogger(o.logs.Logger()), simba.WithListener(func(ev simba.Event) {
		if ev.Kind == simba.EventBackendError {
			o.failures.Add(1)
		}
	})}
}

// startElections starts n elections of c, named e-0 … e-<n-1>.
func startElections(t *testing.T, ctx context.Context, c *simba.Client, n int) []*simba.Election {
	t.Helper()
	var elections []*simba.Election
	for i := range n {
		e, err := c.NewElection(fmt.Sprintf("e-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		elections = append(elections, e)
	}
	return elections
}

// outageClient starts, on its own connection, a client with 50 elections it leads, a group of
// 8 partitions it leads and 5 Locks waiting for locks a second client holds; it returns the
// client's connection and a check that it leads every election and partition.
func outageClient(t *testing.T, w *world, ow *outageWatch) (*simbatest.Backend, func() bool) {
	holder, _ := w.client("holder")
	for i := range 5 {
		w.async(func() error {
			_, err := holder.Lock(context.Background(), fmt.Sprintf("lock-%d", i))
			return err
		})
	}
	c, b := w.client("a", ow.options()...)
	elections := startElections(t, context.Background(), c, 50)
	g, err := c.JoinGroup(context.Background(), "g", 8)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Lock(ctx, fmt.Sprintf("lock-%d", i)) //nolint:errcheck // ends with ctx
		}()
	}
	leadsAll := func() bool {
		for _, e := range elections {
			if !e.IsLeader() {
				return false
			}
		}
		return len(g.Held()) == 8
	}
	w.until(30*time.Second, "leading every election and partition", leadsAll)
	return b, leadsAll
}

// TestOutageIsLoggedInFewLines: a client with a session, 50 elections, 5 waiting Locks and a
// partition group is cut off from its server (calls refused) for three minutes, its session
// lost: each failed call is an event, but the log has one WARN line when the outage begins,
// then one a minute summarising it, and one INFO line when the backend is reachable again
// (the old log: a WARN line per failed call, 371 in these three minutes; now 3).
func TestOutageIsLoggedInFewLines(t *testing.T) {
	w := newWorld(t)
	ow := &outageWatch{}
	b, leadsAll := outageClient(t, w, ow)
	mark := len(ow.logs.String())
	b.CutOff(simbatest.Refuse)
	const minutes = 3
	w.run(minutes * time.Minute)
	b.Restore()
	w.until(30*time.Second, "leading every election and partition again", leadsAll)
	log := ow.logs.String()[mark:]
	n, fails := levelCount(log), ow.failures.Load()
	warns := linesWith(log, "level=WARN")
	t.Logf("%d failed calls in %d minutes: %v", fails, minutes, n)
	if fails < minutes*30 {
		t.Fatalf("%d failed calls in %d minutes: the outage did not happen", fails, minutes)
	}
	if len(warns) < 2 || len(warns) > minutes+2 {
		t.Errorf("%d WARN lines, want the first failure, the session's and one a minute after (at most %d):\n%s", len(warns), minutes+2, strings.Join(warns, "\n"))
	} else {
		// The first failure may be a waiting Lock's retry or the keep-alive; the session's
		// first failure says what it affects either way.
		if !strings.Contains(warns[0], "backend=*simbatest.Backend") || !strings.Contains(warns[0], simbatest.ErrCutOff.Error()) {
			t.Errorf("the first line does not name the backend and the error: %s", warns[0])
		}
		if a := linesWith(log, "level=WARN", "affects=", "elections_and_locks=55 groups=1"); len(a) != 1 {
			t.Errorf("%d lines say what the session's failure affects, want 1:\n%s", len(a), strings.Join(warns, "\n"))
		}
		if sum := linesWith(log, "level=WARN", `msg="simba backend still failing"`, "outage_failures="); len(sum) < minutes-1 {
			t.Errorf("%d lines summarise the outage, want one a minute:\n%s", len(sum), strings.Join(warns, "\n"))
		}
	}
	if up := linesWith(log, "level=INFO", `msg="simba backend reachable again"`); len(up) != 1 || !strings.Contains(up[0], fmt.Sprintf("failures=%d ", fails)) {
		t.Errorf("want one recovery line counting the %d failures, got:\n%s", fails, strings.Join(up, "\n"))
	}
}

// TestRepeatedCallFailureIsLoggedOnceAMinute: while the session is fine, every election's
// acquire fails with a retryable error for three minutes (the retries go on: each is an event):
// the first failure is a WARN line, the others are at DEBUG but for one WARN a minute, and the
// recovery of the last one is one INFO line (the old log: a WARN line per failure, 9,927; now 4);
// a different error is logged at once.
func TestRepeatedCallFailureIsLoggedOnceAMinute(t *testing.T) {
	w := newWorld(t)
	ow := &outageWatch{}
	c, b := w.client("a", ow.options()...)
	w.until(10*time.Second, "a session", func() bool { return c.Session() != "" })
	b.FailOp("Acquire", spi.Unavailable("acquire", errors.New("TRYAGAIN multiple keys request during rehashing of slot 1234")))
	elections := startElections(t, context.Background(), c, 20)
	const minutes = 3
	w.run(minutes * time.Minute)
	b.FailOp("Acquire", spi.Unavailable("acquire", errors.New("LOADING Redis is loading the dataset in memory")))
	w.run(5 * time.Second)
	b.FailOp("Acquire", nil)
	w.until(30*time.Second, "leading every election", func() bool {
		for _, e := range elections {
			if !e.IsLeader() {
				return false
			}
		}
		return true
	})
	log := ow.logs.String()
	n, fails := levelCount(log), ow.failures.Load()
	warns := linesWith(log, "level=WARN")
	t.Logf("%d failed acquires in %d minutes: %v", fails, minutes, n)
	if fails < minutes*30 {
		t.Fatalf("%d failed calls: the acquires were not retried", fails)
	}
	if len(warns) < 3 || len(warns) > minutes+2 {
		t.Errorf("%d WARN lines, want the first failure, one a minute and the new error (at most %d):\n%s", len(warns), minutes+2, strings.Join(warns, "\n"))
	}
	if sum := linesWith(log, "level=WARN", `msg="simba backend still failing"`); len(sum) == 0 || !strings.Contains(sum[0], `names="[e-0 e-1 e-10 e-11 e-12 …]"`) ||
		!strings.Contains(sum[0], "failing_calls=20 ") {
		t.Errorf("no summary naming the failing calls:\n%s", strings.Join(sum, "\n"))
	}
	if len(linesWith(log, "level=WARN", "LOADING")) != 1 {
		t.Errorf("the different error is not logged once at WARN:\n%s", strings.Join(warns, "\n"))
	}
	if up := linesWith(log, "level=INFO", `msg="simba backend reachable again"`); len(up) != 1 {
		t.Errorf("want one recovery line, got:\n%s", strings.Join(up, "\n"))
	}
}

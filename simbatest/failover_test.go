package simbatest_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
)

var failoverRuns = flag.Int("failover.runs", 50, "runs of TestCronSingletonFailover (make failover runs 1000 under -race)")

// TestCronSingletonFailover is a cron singleton tested the way simbatest's docs say, with
// public packages only, no sleeps and no timer counts: three clients on one Server and one
// VirtualClock each run an Election with Schedule; one leads and runs the job; its link is cut;
// the clock advances; another client leads within TTL + one renewal interval of the cut, never
// while an earlier term is still valid, with a greater token, and the job runs only under a
// valid term. Each run uses its own seeds; -failover.runs sets the number of runs.
func TestCronSingletonFailover(t *testing.T) {
	for run := range *failoverRuns {
		if err := cronSingletonFailover(run); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
}

const (
	failoverTTL   = 3 * time.Second
	failoverRenew = failoverTTL / 3 // the default renewal interval
	cronEvery     = 500 * time.Millisecond
	failoverStep  = 100 * time.Millisecond
)

// cronNode is one client of the cron singleton.
type cronNode struct {
	owner string
	link  *simbatest.Link
	c     *simba.Client
	e     *simba.Election
}

// cronWorld records what the nodes' callbacks and jobs saw. Callbacks and jobs run while the
// clock stands still (Advance waits for them), so a check of every node's term there is a
// check at one instant.
type cronWorld struct {
	mu        sync.Mutex
	nodes     []*cronNode
	lastToken int64
	elected   []string // owners, in the order they were elected
	jobRuns   map[string]int
	problems  []string
}

func (w *cronWorld) problem(format string, args ...any) {
	w.problems = append(w.problems, fmt.Sprintf(format, args...))
}

// leaders lists the nodes that hold a valid term now.
func (w *cronWorld) leaders() []string {
	var ls []string
	for _, n := range w.nodes {
		if n.e.IsLeader() {
			ls = append(ls, n.owner)
		}
	}
	return ls
}

func (w *cronWorld) check(clock *simbatest.VirtualClock) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ls := w.leaders(); len(ls) > 1 {
		w.problem("at %v: %v all hold a valid term", clock.Now(), ls)
	}
	if len(w.problems) > 0 {
		return fmt.Errorf("%v", w.problems)
	}
	return nil
}

func cronSingletonFailover(run int) (err error) {
	ctx := context.Background()
	srv := simbatest.NewServer()
	clock := srv.VirtualClock()
	w := &cronWorld{jobRuns: make(map[string]int)}
	defer func() {
		if cerr := closeNodes(w.nodes); err == nil {
			err = cerr
		}
	}()
	for i, owner := range []string{"a", "b", "c"} {
		n := &cronNode{owner: owner, link: simbatest.NewLink(srv.Backend())}
		n.c, err = simba.New(n.link.Backend(), simba.WithClock(clock), simba.WithTTL(failoverTTL),
			simba.WithOwner(owner), simba.WithSeed(uint64(run*3+i+1)))
		if err != nil {
			return err
		}
		n.e, err = n.c.NewElection("cron",
			simba.OnElected(func(_ context.Context, t simba.Term) {
				w.mu.Lock()
				defer w.mu.Unlock()
				if t.Token() <= w.lastToken {
					w.problem("%s elected with token %d after token %d", owner, t.Token(), w.lastToken)
				}
				w.lastToken = t.Token()
				w.elected = append(w.elected, owner)
				if ls := w.leaders(); len(ls) > 1 {
					w.problem("%s elected at %v while %v hold valid terms", owner, clock.Now(), ls)
				}
			}),
			simba.Schedule(cronEvery, func(_ context.Context, t simba.Term) {
				if !t.IsValid() {
					return // fenced: never act under a term that has ended
				}
				w.mu.Lock()
				defer w.mu.Unlock()
				w.jobRuns[owner]++
				if ls := w.leaders(); len(ls) != 1 || ls[0] != owner {
					w.problem("%s ran the job at %v under %v while %v hold valid terms", owner, clock.Now(), t, ls)
				}
			}))
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.nodes = append(w.nodes, n)
		w.mu.Unlock()
	}
	for _, n := range w.nodes {
		if err := n.e.Start(ctx); err != nil {
			return err
		}
	}

	// Electing needs no time: once the clock has settled, exactly one node leads and has run
	// the job once.
	clock.Settle()
	if err := w.check(clock); err != nil {
		return err
	}
	w.mu.Lock()
	ls, elected := w.leaders(), append([]string(nil), w.elected...)
	w.mu.Unlock()
	if len(ls) != 1 || len(elected) != 1 || elected[0] != ls[0] {
		return fmt.Errorf("after settling: leaders %v, elected %v; want one", ls, elected)
	}
	first := ls[0]
	if got := runsOf(w, first); got != 1 {
		return fmt.Errorf("leader %s ran the job %d times at once, want 1", first, got)
	}

	// A few seconds of steady leadership: the job runs every cronEvery, on the leader only.
	for range 20 {
		clock.Advance(failoverStep)
		if err := w.check(clock); err != nil {
			return err
		}
	}
	if got, want := runsOf(w, first), 1+int(20*failoverStep/cronEvery); got != want {
		return fmt.Errorf("leader %s ran the job %d times in %v, want %d", first, got, 20*failoverStep, want)
	}

	// The leader's network fails. Within TTL + one renewal interval, another node leads.
	var leader *cronNode
	for _, n := range w.nodes {
		if n.owner == first {
			leader = n
		}
	}
	leader.link.CutOff()
	cutAt := clock.Now()
	runsAtCut := runsOf(w, first)
	var next string
	for next == "" {
		if clock.Now()-cutAt > failoverTTL+failoverRenew {
			return fmt.Errorf("no new leader %v after the cut (elected %v)", clock.Now()-cutAt, w.elected)
		}
		clock.Advance(failoverStep)
		if err := w.check(clock); err != nil {
			return err
		}
		w.mu.Lock()
		if ls := w.leaders(); len(ls) == 1 && ls[0] != first {
			next = ls[0]
		}
		w.mu.Unlock()
	}
	// The job moved with the leadership: the new leader ran it at once, the old one ran it at
	// most until its term ended (within one TTL of the cut).
	if got := runsOf(w, next); got < 1 {
		return fmt.Errorf("new leader %s has not run the job", next)
	}
	if extra := runsOf(w, first) - runsAtCut; extra > int(failoverTTL/cronEvery) {
		return fmt.Errorf("cut-off leader %s ran the job %d more times", first, extra)
	}

	// The old leader comes back: its session has expired, so it stays a follower.
	leader.link.Restore()
	oldRuns := runsOf(w, first)
	for range 20 {
		clock.Advance(failoverStep)
		if err := w.check(clock); err != nil {
			return err
		}
	}
	w.mu.Lock()
	ls = w.leaders()
	w.mu.Unlock()
	if len(ls) != 1 || ls[0] != next {
		return fmt.Errorf("after the old leader returned: leaders %v, want [%s]", ls, next)
	}
	if runsOf(w, first) != oldRuns {
		return fmt.Errorf("old leader %s ran the job after it came back", first)
	}
	return nil
}

func runsOf(w *cronWorld, owner string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.jobRuns[owner]
}

// closeNodes closes every client; none waits on the clock once its link is up.
func closeNodes(nodes []*cronNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range nodes {
		n.link.Restore()
		if err := n.c.Close(ctx); err != nil {
			return fmt.Errorf("close %s: %w", n.owner, err)
		}
	}
	return nil
}

package simba_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// serialWork is leader work whose first term's work ignores the end of its term until the
// test releases it, as work still finishing a write does; it records the work of each later
// term as it starts, and whether the first work had returned by then.
type serialWork struct {
	submitted atomic.Int32 // runs handed to the work executor
	first     atomic.Int64 // the first term's token
	firstDone atomic.Bool  // the first term's work has returned
	release   chan struct{}
	panics    bool         // the first term's work panics rather than return
	recovered atomic.Int32 // panics the executor recovered

	mu       sync.Mutex
	started  []int64 // tokens of the later terms whose work started, in order
	overlaps []int64 // of those, the ones that started while the first work still ran
}

// unsettled is a clock that is not a spi.Settler: a client on it reports no activity.
type unsettled struct{ spi.Clock }

func newSerialWork() *serialWork { return &serialWork{release: make(chan struct{})} }

// executor hands each run to a goroutine of its own, counting the handoffs; it recovers a
// panic of the work.
func (s *serialWork) executor(f func()) {
	s.submitted.Add(1)
	go func() {
		defer func() {
			if recover() != nil {
				s.recovered.Add(1)
			}
		}()
		f()
	}()
}

// run is the work of term t (Schedule calls it again every interval: a term counts once).
func (s *serialWork) run(ctx context.Context, t simba.Term) {
	if s.first.CompareAndSwap(0, t.Token()) {
		<-ctx.Done()
		<-s.release // the term is over, the work is not: it ignores its ctx a while
		s.firstDone.Store(true)
		if s.panics {
			panic("the first term's work panics")
		}
		return
	}
	if t.Token() == s.first.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tok := range s.started {
		if tok == t.Token() {
			return
		}
	}
	s.started = append(s.started, t.Token())
	if !s.firstDone.Load() {
		s.overlaps = append(s.overlaps, t.Token())
	}
}

func (s *serialWork) startedTokens() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.started...)
}

// syncLoop makes a request of c that the client's loop takes after every step before it (a
// Start of an election of its own), so that what those steps handed to the work executor has
// been handed.
func syncLoop(w *world, c *simba.Client, name string) {
	w.t.Helper()
	e, err := c.NewElection(name)
	if err != nil {
		w.t.Fatal(err)
	}
	w.async(func() error { return e.Start(context.Background()) })
}

// checkSerialWork drives the client through a lost term while its work ignores its ctx, and
// a new term of the same name, and checks that the new term's work started only after the
// old one's returned. term reports the current term of the name.
func checkSerialWork(w *world, c *simba.Client, s *serialWork, term func() (simba.Term, bool)) {
	t := w.t
	t.Helper()
	w.until(5*time.Second, "leadership", func() bool { _, ok := term(); return ok })
	w.until(5*time.Second, "the first term's work", func() bool { return s.first.Load() != 0 })
	first := s.first.Load()
	w.srv.ExpireSession(c.Session())
	w.until(10*time.Second, "a new term", func() bool { tm, ok := term(); return ok && tm.Token() > first })
	syncLoop(w, c, "ws-sync")
	if s.submitted.Load() > 1 {
		// The client has handed the new term's work over while the first one runs: let it
		// start before the first returns.
		w.until(5*time.Second, "the new term's work", func() bool { return len(s.startedTokens()) > 0 })
	}
	if got := s.startedTokens(); len(got) > 0 && !s.firstDone.Load() {
		t.Errorf("the work of term %d started while the work of term %d ran", got[0], first)
	}
	close(s.release)
	w.until(5*time.Second, "the new term's work", func() bool { return len(s.startedTokens()) > 0 })
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.overlaps) > 0 {
		t.Fatalf("the work of terms %v started before the work of term %d returned", s.overlaps, first)
	}
	if s.started[0] <= first {
		t.Fatalf("work of term %d started after term %d", s.started[0], first)
	}
}

func TestWorkSerialRunWhileLeader(t *testing.T) {
	w := newWorld(t)
	s := newSerialWork()
	c, _ := w.client("a", simba.WithWorkExecutor(s.executor))
	e, err := c.NewElection("ws-e", simba.RunWhileLeader(func(ctx context.Context, tm simba.Term) error {
		s.run(ctx, tm)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return e.Start(context.Background()) })
	checkSerialWork(w, c, s, e.Term)
}

func TestWorkSerialSchedule(t *testing.T) {
	w := newWorld(t)
	s := newSerialWork()
	// Schedule's function is busy for a settling clock while it runs, and the first one runs
	// until released: the client's clock does not wait for the client (the server's does).
	c, _ := w.client("a", simba.WithWorkExecutor(s.executor), simba.WithClock(unsettled{w.clock}))
	e, err := c.NewElection("ws-s", simba.Schedule(time.Second, s.run))
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return e.Start(context.Background()) })
	checkSerialWork(w, c, s, e.Term)
}

func TestWorkSerialRunPartition(t *testing.T) {
	w := newWorld(t)
	s := newSerialWork()
	c, _ := w.client("a", simba.WithWorkExecutor(s.executor))
	var g atomic.Pointer[simba.PartitionGroup]
	w.async(func() error {
		pg, err := c.JoinGroup(context.Background(), "ws-g", 1, simba.RunPartition(func(ctx context.Context, _ int, tm simba.Term) error {
			s.run(ctx, tm)
			return nil
		}))
		g.Store(pg)
		return err
	})
	checkSerialWork(w, c, s, func() (simba.Term, bool) {
		tm, ok := g.Load().Held()[0]
		return tm, ok && tm.IsValid()
	})
}

// A term that ends while its work waits for the previous term's work never runs its work, but
// its exit is told: a Stop handing it over returns once the previous work has returned.
func TestWorkSerialEndedTermNotRun(t *testing.T) {
	w := newWorld(t)
	s := newSerialWork()
	c, _ := w.client("a", simba.WithWorkExecutor(s.executor))
	e, err := c.NewElection("ws-x", simba.RunWhileLeader(func(ctx context.Context, tm simba.Term) error {
		s.run(ctx, tm)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return e.Start(context.Background()) })
	w.until(5*time.Second, "the first term's work", func() bool { return s.first.Load() != 0 })
	first := s.first.Load()
	w.srv.ExpireSession(c.Session())
	var second simba.Term
	w.until(10*time.Second, "a new term", func() bool {
		tm, ok := e.Term()
		second = tm
		return ok && tm.Token() > first
	})
	syncLoop(w, c, "ws-sync")
	if s.submitted.Load() > 1 {
		w.until(5*time.Second, "the new term's work", func() bool { return len(s.startedTokens()) > 0 })
	}
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(context.Background()) }()
	w.until(5*time.Second, "the second term's end", func() bool { return second.Context().Err() != nil })
	close(s.release)
	w.until(10*time.Second, "the Stop", func() bool { return len(stopped) > 0 })
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if !s.firstDone.Load() {
		t.Fatal("the first term's work has not returned")
	}
	if got := s.startedTokens(); len(got) > 0 {
		t.Fatalf("the work of terms %v ran; term %d ended before the work of term %d returned", got, second.Token(), first)
	}
}

// A work that panics after its term ended still lets the name's next work start (the
// executor recovers the panic; the next work runs in a new run of the executor).
func TestWorkSerialAfterPanic(t *testing.T) {
	w := newWorld(t)
	s := newSerialWork()
	s.panics = true
	c, _ := w.client("a", simba.WithWorkExecutor(s.executor))
	e, err := c.NewElection("ws-p", simba.RunWhileLeader(func(ctx context.Context, tm simba.Term) error {
		s.run(ctx, tm)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return e.Start(context.Background()) })
	checkSerialWork(w, c, s, e.Term)
	// The panic reaches the executor's recover after runOne's deferred calls, which start the
	// next term's work: the check above can see that work before the recovery is counted.
	w.until(5*time.Second, "the executor's recovery of the panic", func() bool { return s.recovered.Load() > 0 })
	if n := s.recovered.Load(); n != 1 {
		t.Fatalf("the executor recovered %d panics, want 1", n)
	}
	if n := s.submitted.Load(); n != 2 {
		t.Fatalf("%d runs handed to the executor, want 2 (the first term's, the second's after the panic)", n)
	}
}

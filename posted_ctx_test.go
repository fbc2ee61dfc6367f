package simba_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestJoinGroupWhoseCtxEndsBeforeTheLoopTakesIt: a JoinGroup whose ctx ends while its event
// waits for the busy loop returns ctx's error, and the engine takes the join later. The client
// forgot the group while the engine joined it: the member led its partitions with no
// *PartitionGroup to work them or Leave, and every later JoinGroup of the name failed with
// "already joined". A join the caller gave up on is now left right after the step that takes
// it.
func TestJoinGroupWhoseCtxEndsBeforeTheLoopTakesIt(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, loop := newBusyLoopClient(t, srv)
	defer a.Close(ctx)
	loop.hold()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if g, err := a.JoinGroup(cancelled, "g", 1); !errors.Is(err, context.Canceled) || g != nil {
		t.Fatalf("JoinGroup with the loop busy and ctx cancelled = %v, %v; want context.Canceled", g, err)
	}
	loop.resume()
	// The abandoned join is left by the time a new one is taken, so the name can be joined
	// again (the engine refuses "still leaving" until the leave is done: retry until then).
	var g *simba.PartitionGroup
	for g == nil {
		var err error
		g, err = a.JoinGroup(ctx, "g", 1)
		switch {
		case err == nil:
		case errors.Is(err, simba.ErrInvalidOption) && strings.Contains(err.Error(), "still leaving"):
			time.Sleep(10 * time.Millisecond)
		default:
			t.Fatalf("JoinGroup after an abandoned join = %v", err)
		}
	}
	if err := g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStartWhoseCtxEndsBeforeTheLoopTakesIt: a Start whose ctx ends while its event waits for
// the busy loop returned ctx's error, and the engine started the election later anyway: it
// could lead after Start had failed, and a second Start failed with "already running". The
// start is now stopped again right after the step that takes it.
func TestStartWhoseCtxEndsBeforeTheLoopTakesIt(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, loop := newBusyLoopClient(t, srv)
	defer a.Close(ctx)
	e, err := a.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	loop.hold()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.Start(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with the loop busy and ctx cancelled = %v, want context.Canceled", err)
	}
	loop.resume()
	// The failed Start left the election stopped: starting it again works.
	if err := e.Start(ctx); err != nil {
		t.Fatalf("Start after a Start that failed with ctx's error = %v", err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUnlockWhoseCtxEndsBeforeTheLoopTakesItStillRevokes: an Unlock whose ctx ends while its
// event waits for the busy loop handed the turn on at once, which forgot the name's queue when
// no goroutine waited; the stop, taken later, found no lock to revoke, so the released lock's
// Held kept a live Context (and IsValid) while another client held the lock.
func TestUnlockWhoseCtxEndsBeforeTheLoopTakesItStillRevokes(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, loop := newBusyLoopClient(t, srv)
	defer a.Close(ctx)
	b, err := simba.New(srv.Backend(), simba.WithTTL(1500*time.Millisecond), simba.WithOwner("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	h, err := a.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	loop.hold()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := h.Unlock(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Unlock with the loop busy and ctx cancelled = %v, want context.Canceled", err)
	}
	loop.resume()
	hb, err := b.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Unlock(ctx)
	select {
	case <-h.Context().Done():
	default:
		t.Errorf("b holds x with %v, and a's unlocked %v still has a live Context", hb.Term, h.Term)
	}
	if h.IsValid() {
		t.Errorf("b holds x with %v, and a's unlocked %v is still valid", hb.Term, h.Term)
	}
}

// TestLeaveWhoseCtxEndsBeforeTheLoopTakesItStillRevokes: a Leave whose ctx ended while its
// event waited for the busy loop forgot the group at once; the leave, taken later, revoked
// partitions the client could no longer find, so their RunPartition work kept a live ctx while
// another member led them.
func TestLeaveWhoseCtxEndsBeforeTheLoopTakesItStillRevokes(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, loop := newBusyLoopClient(t, srv)
	testDone := make(chan struct{})
	workCtx := make(chan context.Context, 1)
	g, err := a.JoinGroup(ctx, "g", 1, simba.RunPartition(func(ctx context.Context, p int, tm simba.Term) error {
		workCtx <- ctx
		select {
		case <-ctx.Done():
		case <-testDone: // without the fix the ctx never ends: let Close finish
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	wctx := <-workCtx
	loop.hold()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.Leave(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Leave with the loop busy and ctx cancelled = %v, want context.Canceled", err)
	}
	loop.resume()
	b, err := simba.New(srv.Backend(), simba.WithTTL(1500*time.Millisecond), simba.WithOwner("b"))
	if err != nil {
		t.Fatal(err)
	}
	bLeads := make(chan simba.Term, 1)
	if _, err := b.JoinGroup(ctx, "g", 1, simba.OnAssigned(func(_ context.Context, _ int, tm simba.Term) { bLeads <- tm })); err != nil {
		t.Fatal(err)
	}
	bt := <-bLeads
	select {
	case <-wctx.Done():
	default:
		t.Errorf("b leads partition 0 with %v, and a's partition work still has a live ctx", bt)
	}
	close(testDone)
	for _, c := range []*simba.Client{a, b} {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.Close(cctx); err != nil {
			t.Errorf("close: %v", err)
		}
		cancel()
	}
}

// TestStopWhoseCtxEndsBeforeTheLoopTakesItStillRevokes: a Stop whose ctx ends while its event
// waits for the busy loop returns ctx's error before the engine has taken it. Stop then let the
// name go at once, so when the loop stepped the Stop, the revocation found no election for the
// name: the leader work's ctx was never cancelled and its Term stayed valid (its session kept
// being renewed) while the lease, released after the handover deadline, went to another
// client — two leaders by IsValid, and a Close that waited for the work for ever. The name is
// now let go right after the step that takes the Stop.
func TestStopWhoseCtxEndsBeforeTheLoopTakesItStillRevokes(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, loop := newBusyLoopClient(t, srv)
	testDone := make(chan struct{})
	terms := make(chan simba.Term, 1)
	workCtx := make(chan context.Context, 1)
	e, err := a.NewElection("e", simba.RunWhileLeader(func(ctx context.Context, tm simba.Term) error {
		terms <- tm
		workCtx <- ctx
		select {
		case <-ctx.Done():
		case <-testDone: // without the fix the ctx never ends: let Close finish
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	term, wctx := <-terms, <-workCtx

	loop.hold()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.Stop(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with the loop busy and ctx cancelled = %v, want context.Canceled", err)
	}
	loop.resume()

	b, err := simba.New(srv.Backend(), simba.WithTTL(1500*time.Millisecond), simba.WithOwner("b"))
	if err != nil {
		t.Fatal(err)
	}
	bElected := make(chan simba.Term, 1)
	eb, err := b.NewElection("e", simba.OnElected(func(_ context.Context, tm simba.Term) { bElected <- tm }))
	if err != nil {
		t.Fatal(err)
	}
	if err := eb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	bt := <-bElected
	select {
	case <-wctx.Done():
	default:
		t.Errorf("b leads with %v, and a's leader work for %v still has a live ctx", bt, term)
	}
	if term.IsValid() {
		t.Errorf("b leads with %v, and a's term %v is still valid", bt, term)
	}
	close(testDone)
	for _, c := range []*simba.Client{a, b} {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.Close(cctx); err != nil {
			t.Errorf("close: %v", err)
		}
		cancel()
	}
}

// TestStartAndJoinWithEndedCtx: a Start or JoinGroup given a ctx that had already ended, on a
// client whose loop is idle, returned nil: the engine, stepped inline, took the request at
// once, so a program passing its cancelled shutdown ctx got a running election or a joined
// group (found by an outside trial). Lock and TryLock refuse such a ctx; so do these now, and
// nothing is started or joined.
func TestStartAndJoinWithEndedCtx(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, err := simba.New(srv.Backend(), simba.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	e, err := a.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled ctx = %v, want context.Canceled", err)
	}
	if g, err := a.JoinGroup(cancelled, "g", 2); !errors.Is(err, context.Canceled) || g != nil {
		t.Errorf("JoinGroup with a cancelled ctx = %v, %v, want context.Canceled", g, err)
	}
	// Nothing was started or joined: both can be taken afresh, and the election leads only
	// once started.
	if err := e.Start(ctx); err != nil {
		t.Fatalf("Start after the refused Start = %v", err)
	}
	g, err := a.JoinGroup(ctx, "g", 2)
	if err != nil {
		t.Fatalf("JoinGroup after the refused JoinGroup = %v", err)
	}
	if err := g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

package simba_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

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

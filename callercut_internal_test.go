package simba

import (
	"context"
	"testing"
	"time"
)

// TestCallerCutSharedAndRetired: the calls of Locks and Unlocks with one context that can end
// share one cut (callerCut) while the shared timeout lasts; a call with another context
// replaces it, and the replaced one, with no call left using it, is retired: its context
// cancelled and its registration with the caller's context removed, so a client holds on to
// one caller's context at most. The caller's context ending cancels its cut, and a later call
// with another context gets a live one; the client's close retires the last.
func TestCallerCutSharedAndRetired(t *testing.T) {
	c, err := New(&grantAll{held: map[string]int64{}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close(context.Background())
		}
	}()
	cycle := func(ctx context.Context) {
		t.Helper()
		h, err := c.Lock(ctx, "cut")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Only a call that runs on its caller's goroutine (the loop idle: stepped inline) is made
	// for the caller's context; one handed to a call worker (the loop busy, as while it opens
	// the first session, or on a loaded machine) is not, and leaves the cut as it was. So each
	// context's first cycle is repeated until one of its calls ran inline.
	cycleInline := func(ctx context.Context) {
		t.Helper()
		for range 1000 {
			cycle(ctx)
			if cur := c.cuts.cur.Load(); cur != nil && cur.done == ctx.Done() {
				return
			}
		}
		t.Fatalf("after 1000 cycles with a cancellable context the client keeps cut %+v; want one for it", c.cuts.cur.Load())
	}
	cycle(context.Background()) // the first session open
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	cycleInline(ctxA)
	a := c.cuts.cur.Load()
	if a == nil || a.done != ctxA.Done() {
		t.Fatalf("after a cycle with a cancellable context the client keeps cut %+v; want one for it", a)
	}
	if n := a.refs.Load(); n != 1 || a.ctx.Err() != nil {
		t.Fatalf("idle cut: %d references, context error %v; want 1 (the client's), none", n, a.ctx.Err())
	}
	cycle(ctxA)
	if a2 := c.cuts.cur.Load(); a2 != a && a2.timeout == a.timeout {
		t.Fatal("a second cycle with the same context within the same shared timeout made a cut of its own")
	}
	a = c.cuts.cur.Load()

	ctxB, cancelB := context.WithTimeout(context.Background(), time.Hour)
	defer cancelB()
	cycleInline(ctxB)
	b := c.cuts.cur.Load()
	if b == a || b.done != ctxB.Done() || !b.dl.Equal(deadlineOf(ctxB)) {
		t.Fatal("a cycle with another context kept the first one's cut")
	}
	if n := a.refs.Load(); n != 0 || a.ctx.Err() == nil {
		t.Fatalf("replaced cut: %d references, context error %v; want 0, cancelled", n, a.ctx.Err())
	}
	if a.stop() {
		t.Fatal("the replaced cut was still registered with its caller's context")
	}
	cancelA() // no longer anything of the client's
	if err := b.ctx.Err(); err != nil {
		t.Fatalf("the current cut ended with another caller's context: %v", err)
	}

	cancelB()
	<-b.ctx.Done() // cut with its caller's context
	ctxC, cancelC := context.WithCancel(context.Background())
	defer cancelC()
	cycleInline(ctxC)
	cc := c.cuts.cur.Load()
	if cc == b || cc.ctx.Err() != nil {
		t.Fatalf("a cycle after the caller's context ended: cut %p (the ended one %p), error %v", cc, b, cc.ctx.Err())
	}

	closed = true
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cur := c.cuts.cur.Load(); cur != nil || cc.refs.Load() != 0 || cc.ctx.Err() == nil {
		t.Fatalf("after Close: current cut %p, the last one's references %d, context error %v; want none, 0, cancelled",
			cur, cc.refs.Load(), cc.ctx.Err())
	}
}

// deadlineOf is ctx's deadline (zero: none).
func deadlineOf(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

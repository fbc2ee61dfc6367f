package simba_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
)

// A panic in leader work is not swallowed: it goes up the work's goroutine, here to a work
// executor that recovers it, as it would crash a program with the default executor. It was
// recovered inside the client and logged on the client's logger only (discarded by default),
// and the election went on leading with no work, for good: no other candidate could lead.
// The client stays consistent (its Close does not wait for the panicked work).
func TestLeaderWorkPanicIsNotSwallowed(t *testing.T) {
	for _, kind := range []string{"election", "partition"} {
		t.Run(kind, func(t *testing.T) {
			w := newWorld(t)
			ctx := context.Background()
			panics := make(chan any, 4)
			executor := func(f func()) {
				go func() {
					defer func() {
						if r := recover(); r != nil {
							panics <- r
						}
					}()
					f()
				}()
			}
			c, _ := w.client("a", simba.WithWorkExecutor(executor))
			if kind == "election" {
				e, err := c.NewElection("jobs", simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
					panic("boom in leader work")
				}))
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Start(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				_, err := c.JoinGroup(ctx, "orders", 1, simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
					panic("boom in leader work")
				}))
				if err != nil {
					t.Fatal(err)
				}
			}
			var got any
			w.until(5*time.Second, "the work's panic at the executor", func() bool {
				select {
				case got = <-panics:
					return true
				default:
					return false
				}
			})
			if fmt.Sprint(got) != "boom in leader work" {
				t.Fatalf("the executor recovered %v", got)
			}
		})
	}
}

// Stop, StepDown and Leave called from inside the leader work they end return once the term
// is revoked (the work's ctx cancelled), and the lease is released when the work returns. They
// waited for the handover, which waits for that very work to return, so each returned only at
// the term's local deadline (up to a TTL later: on the virtual clock here, never), holding the
// lease with no work meanwhile.
func TestStopFromInsideOwnWork(t *testing.T) {
	for _, call := range []string{"Stop", "StepDown", "Leave"} {
		t.Run(call, func(t *testing.T) {
			w := newWorld(t)
			ctx := context.Background()
			c, _ := w.client("a")
			type result struct {
				err    error
				ctxErr error
			}
			res := make(chan result, 1)
			var calls atomic.Int32
			var e *simba.Election
			var g *simba.PartitionGroup
			// The partition's work may start before JoinGroup has returned g: it waits for it.
			ready := make(chan struct{})
			work := func(wctx context.Context) {
				if calls.Add(1) != 1 {
					return
				}
				<-ready
				var err error
				switch call {
				case "Stop":
					err = e.Stop(ctx)
				case "StepDown":
					err = e.StepDown(ctx)
				case "Leave":
					err = g.Leave(ctx)
				}
				res <- result{err, wctx.Err()}
			}
			var err error
			if call == "Leave" {
				g, err = c.JoinGroup(ctx, "orders", 1, simba.RunPartition(func(wctx context.Context, p int, t simba.Term) error {
					work(wctx)
					return nil
				}))
			} else {
				e, err = c.NewElection("jobs", simba.RunWhileLeader(func(wctx context.Context, t simba.Term) error {
					work(wctx)
					return nil
				}))
				if err == nil {
					err = e.Start(ctx)
				}
			}
			close(ready)
			if err != nil {
				t.Fatal(err)
			}
			w.until(5*time.Second, "the work's first run", func() bool { return calls.Load() > 0 })
			// Virtual time stands still from here: the call must not need the deadline.
			select {
			case r := <-res:
				if r.err != nil {
					t.Fatalf("%s from inside the work: %v", call, r.err)
				}
				if r.ctxErr == nil {
					t.Fatalf("%s returned to the work with its ctx still live", call)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s from inside its own work did not return in 10 s (virtual time stopped)", call)
			}
			// The lease is free once the work returned: another client takes it.
			other, _ := w.client("b")
			name := "jobs"
			if call == "Leave" {
				name = "orders.0"
			}
			var h *simba.Held
			w.until(5*time.Second, "another client's lock on "+name, func() bool {
				tctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				h, err = other.TryLock(tctx, name)
				return err == nil
			})
			if err := h.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

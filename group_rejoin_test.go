package simba_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// leaveGate is a connection to the simbatest server whose Leave calls wait until the test
// opens the gate (or the call's ctx ends, as a timeout: the client retries), so that a Leave
// stays under way as long as the test needs.
type leaveGate struct {
	*simbatest.Backend
	gate    chan struct{}
	entered atomic.Int32
	joins   atomic.Int32
}

func (b *leaveGate) Leave(ctx context.Context, session spi.SessionID, group string) (spi.Status, error) {
	b.entered.Add(1)
	// spi.Await: the virtual clock does not wait for a call held here.
	if err := spi.Await(ctx, b.gate); err != nil {
		return 0, spi.Unavailable("Leave", err)
	}
	return b.Backend.Leave(ctx, session, group)
}

func (b *leaveGate) Join(ctx context.Context, session spi.SessionID, group string) (spi.Status, error) {
	b.joins.Add(1)
	return b.Backend.Join(ctx, session, group)
}

// joinResult is what a JoinGroup run in the background returned.
type joinResult struct {
	g   *simba.PartitionGroup
	err error
}

// rejoinWorld is a client on a leaveGate that has joined group "g" of 4 partitions, leads
// them all, and has a Leave of it under way (its Leave call held at the gate): leaveErr gets
// what that Leave, called with leaveCtx, returns.
type rejoinWorld struct {
	*world
	c        *simba.Client
	b        *leaveGate
	old      *simba.PartitionGroup
	leaveErr chan error
}

func newRejoinWorld(t *testing.T, leaveCtx context.Context) *rejoinWorld {
	w := newWorld(t)
	b := &leaveGate{Backend: w.srv.Backend(), gate: make(chan struct{})}
	c := w.clientOn(b, "a")
	old, err := c.JoinGroup(context.Background(), "g", 4)
	if err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "the first join to lead every partition", func() bool { return len(old.Held()) == 4 })
	r := &rejoinWorld{world: w, c: c, b: b, old: old, leaveErr: make(chan error, 1)}
	go func() { r.leaveErr <- old.Leave(leaveCtx) }()
	w.until(time.Second, "the Leave call to be sent", func() bool { return b.entered.Load() > 0 })
	return r
}

// join runs JoinGroup of "g" in the background.
func (r *rejoinWorld) join(ctx context.Context) chan joinResult {
	ch := make(chan joinResult, 1)
	go func() {
		g, err := r.c.JoinGroup(ctx, "g", 4)
		ch <- joinResult{g, err}
	}()
	return ch
}

// waiting lets the client run for a while (less than a call timeout, so that the held Leave
// call is not retried) and fails the test if the JoinGroup of ch has returned.
func (r *rejoinWorld) waiting(ch chan joinResult, what string) {
	r.t.Helper()
	for range 20 {
		r.clock.Advance(10 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
	}
	select {
	case res := <-ch:
		r.t.Fatalf("%s returned while the group's Leave was under way: %v", what, res.err)
	default:
	}
}

// result waits (advancing virtual time) for the JoinGroup of ch to return.
func (r *rejoinWorld) result(ch chan joinResult, what string) joinResult {
	r.t.Helper()
	var res joinResult
	r.until(10*time.Second, what+" to return", func() bool {
		select {
		case res = <-ch:
			return true
		default:
			return false
		}
	})
	return res
}

// leaveDone opens the gate and waits for the Leave to return, expecting want (errors.Is).
func (r *rejoinWorld) leaveDone(want error) {
	r.t.Helper()
	close(r.b.gate)
	var err error
	r.until(10*time.Second, "the Leave to return", func() bool {
		select {
		case err = <-r.leaveErr:
			return true
		default:
			return false
		}
	})
	if !errors.Is(err, want) {
		r.t.Fatalf("Leave: %v, want %v", err, want)
	}
}

// TestJoinGroupRightAfterLeaveWaitsForIt: a JoinGroup of a group whose Leave is under way
// waits for the leave and then joins, rather than fail with the engine's "still leaving"
// (ErrInvalidOption), which a program had to retry by hand (found by an outside trial).
func TestJoinGroupRightAfterLeaveWaitsForIt(t *testing.T) {
	r := newRejoinWorld(t, context.Background())
	ch := r.join(context.Background())
	r.waiting(ch, "JoinGroup")
	r.leaveDone(nil)
	res := r.result(ch, "JoinGroup")
	if res.err != nil {
		t.Fatalf("JoinGroup right after a Leave: %v", res.err)
	}
	r.until(10*time.Second, "the new join to lead every partition", func() bool { return len(res.g.Held()) == 4 })
	if m := res.g.Members(); len(m) != 1 || m[0] != r.c.Session() {
		t.Fatalf("members %v, want this client's session", m)
	}
}

// TestJoinGroupAfterCancelledLeave: a Leave whose ctx ended goes on in the background; a
// JoinGroup made then, from the same goroutine, waits for it and joins.
func TestJoinGroupAfterCancelledLeave(t *testing.T) {
	lctx, cancel := context.WithCancel(context.Background())
	r := newRejoinWorld(t, lctx)
	cancel()
	var err error
	r.until(time.Second, "the cancelled Leave to return", func() bool {
		select {
		case err = <-r.leaveErr:
			return true
		default:
			return false
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Leave: %v, want context.Canceled", err)
	}
	ch := r.join(context.Background())
	r.waiting(ch, "JoinGroup")
	close(r.b.gate)
	res := r.result(ch, "JoinGroup")
	if res.err != nil {
		t.Fatalf("JoinGroup after a cancelled Leave: %v", res.err)
	}
	r.until(10*time.Second, "the new join to lead every partition", func() bool { return len(res.g.Held()) == 4 })
}

// TestJoinGroupCtxEndsWhileWaitingForLeave: a JoinGroup whose ctx ends while it waits for the
// group's leave returns ctx's error and leaves nothing joined: once the leave is over the
// client sends no Join, and a later JoinGroup joins.
func TestJoinGroupCtxEndsWhileWaitingForLeave(t *testing.T) {
	r := newRejoinWorld(t, context.Background())
	jctx, cancel := context.WithCancel(context.Background())
	ch := r.join(jctx)
	r.waiting(ch, "JoinGroup")
	cancel()
	res := r.result(ch, "JoinGroup")
	if !errors.Is(res.err, context.Canceled) || res.g != nil {
		t.Fatalf("JoinGroup whose ctx ended while waiting: %v, %v; want context.Canceled", res.g, res.err)
	}
	joins := r.b.joins.Load()
	r.leaveDone(nil)
	for range 100 {
		r.clock.Advance(10 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
	}
	if n := r.b.joins.Load() - joins; n != 0 {
		t.Fatalf("the given-up JoinGroup sent %d Join calls after the leave", n)
	}
	g, err := r.c.JoinGroup(context.Background(), "g", 4)
	if err != nil {
		t.Fatalf("JoinGroup after the given-up one: %v", err)
	}
	r.until(10*time.Second, "the new join to lead every partition", func() bool { return len(g.Held()) == 4 })
}

// TestCloseWhileJoinGroupWaitsForLeave: a Close while a JoinGroup waits for the group's leave
// makes the JoinGroup return ErrClosed.
func TestCloseWhileJoinGroupWaitsForLeave(t *testing.T) {
	r := newRejoinWorld(t, context.Background())
	ch := r.join(context.Background())
	r.waiting(ch, "JoinGroup")
	closed := make(chan error, 1)
	go func() { closed <- r.c.Close(context.Background()) }()
	res := r.result(ch, "JoinGroup")
	if !errors.Is(res.err, simba.ErrClosed) || res.g != nil {
		t.Fatalf("JoinGroup during Close: %v, %v; want ErrClosed", res.g, res.err)
	}
	close(r.b.gate)
	r.until(10*time.Second, "Close to return", func() bool {
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
			return true
		default:
			return false
		}
	})
}

// TestRacingJoinGroupsWaitingForLeave: two JoinGroups of a group being left, from two
// goroutines: one joins once the leave is over, the other is refused (ErrInvalidOption), and
// the group has one membership of this client.
func TestRacingJoinGroupsWaitingForLeave(t *testing.T) {
	r := newRejoinWorld(t, context.Background())
	joins := r.b.joins.Load()
	ch1, ch2 := r.join(context.Background()), r.join(context.Background())
	// One of them is refused at once (the other has the group); the other waits.
	var first joinResult
	r.until(time.Second, "one JoinGroup to be refused", func() bool {
		select {
		case first = <-ch1:
			ch1 = ch2
			return true
		case first = <-ch2:
			return true
		default:
			return false
		}
	})
	if !errors.Is(first.err, simba.ErrInvalidOption) {
		t.Fatalf("the JoinGroup that returned first: %v, %v; want ErrInvalidOption", first.g, first.err)
	}
	r.waiting(ch1, "the other JoinGroup")
	r.leaveDone(nil)
	res := r.result(ch1, "the other JoinGroup")
	if res.err != nil {
		t.Fatalf("the other JoinGroup: %v", res.err)
	}
	r.until(10*time.Second, "the new join to lead every partition", func() bool { return len(res.g.Held()) == 4 })
	if n := r.b.joins.Load() - joins; n != 1 {
		t.Fatalf("%d Join calls after the leave, want 1", n)
	}
	if m := res.g.Members(); len(m) != 1 {
		t.Fatalf("members %v, want one", m)
	}
}

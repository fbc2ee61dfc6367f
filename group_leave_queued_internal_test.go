package simba

import (
	"context"
	"errors"
	"testing"
	"time"
)

// holdLoop makes c's loop goroutine busy until release is closed, so that requests are queued
// rather than stepped inline, and returns a ctx (of parent) that has ended.
func holdLoop(t *testing.T, c *Client, parent context.Context) (release chan struct{}, ended context.Context) {
	t.Helper()
	running, release := make(chan struct{}), make(chan struct{})
	if !c.enqueue(func() { close(running); <-release }) {
		t.Fatal("loop exited")
	}
	<-running
	ended, end := context.WithCancel(parent)
	end()
	return release, ended
}

// TestJoinGroupAfterALeaveNotYetTaken: a Leave whose ctx had ended returns at once, its event
// queued behind a busy loop; a JoinGroup of the group right then waits for that Leave and
// joins, rather than fail with "already joined on this client" (found by an outside program:
// a Leave on a shutdown ctx, then a JoinGroup, failed whenever the loop was busy). A JoinGroup
// whose ctx ends while it waits returns ctx's error.
func TestJoinGroupAfterALeaveNotYetTaken(t *testing.T) {
	w := newInlineWorld(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old, err := w.c.JoinGroup(ctx, "g", 2)
	if err != nil {
		t.Fatal(err)
	}
	for len(old.Held()) != 2 {
		if ctx.Err() != nil {
			t.Fatal("the first join never led its partitions")
		}
		time.Sleep(time.Millisecond)
	}

	// Hold the loop, so that the Leave cannot be stepped inline.
	release, ended := holdLoop(t, w.c, ctx)
	if err := old.Leave(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Leave with an ended ctx = %v, want context.Canceled", err)
	}

	// While the Leave waits for the loop, a JoinGroup whose ctx ends gives up with ctx's error.
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = w.c.JoinGroup(short, "g", 2)
	stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("JoinGroup while the Leave waits, ctx ending = %v, want context.DeadlineExceeded", err)
	}

	type joined struct {
		g   *PartitionGroup
		err error
	}
	done := make(chan joined, 1)
	go func() {
		g, err := w.c.JoinGroup(ctx, "g", 2)
		done <- joined{g, err}
	}()
	time.Sleep(20 * time.Millisecond) // let the JoinGroup find the old handle, if it is to
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatalf("JoinGroup right after a Leave not yet taken = %v, want it to wait and join", r.err)
	}
	for len(r.g.Held()) != 2 {
		if ctx.Err() != nil {
			t.Fatalf("the new membership leads %d partitions, want 2", len(r.g.Held()))
		}
		time.Sleep(time.Millisecond)
	}
	if err := r.g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNewElectionAfterAStopNotYetTaken: a Stop whose ctx had ended returns at once, its event
// queued behind a busy loop; a NewElection or a Lock of the name right then waits until the
// loop takes that Stop, rather than fail with "already has an election on this client"; a
// Lock whose ctx ends meanwhile returns ctx's error.
func TestNewElectionAfterAStopNotYetTaken(t *testing.T) {
	w := newInlineWorld(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, next := range []string{"election", "lock"} {
		t.Run(next, func(t *testing.T) {
			name := "e-" + next
			old, err := w.c.NewElection(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := old.Start(ctx); err != nil {
				t.Fatal(err)
			}
			release, ended := holdLoop(t, w.c, ctx)
			if err := old.Stop(ended); !errors.Is(err, context.Canceled) {
				t.Fatalf("Stop with an ended ctx = %v, want context.Canceled", err)
			}
			if next == "lock" {
				short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
				_, err := w.c.Lock(short, name)
				stop()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Lock while the Stop waits, ctx ending = %v, want context.DeadlineExceeded", err)
				}
			}
			done := make(chan error, 1)
			go func() {
				switch next {
				case "election":
					e, err := w.c.NewElection(name)
					if err == nil {
						err = e.Start(ctx)
						if err == nil {
							err = e.Stop(ctx)
						}
					}
					done <- err
				case "lock":
					h, err := w.c.Lock(ctx, name)
					if err == nil {
						err = h.Unlock(ctx)
					}
					done <- err
				}
			}()
			time.Sleep(20 * time.Millisecond) // let it find the old election, if it is to
			close(release)
			if err := <-done; err != nil {
				t.Fatalf("%s right after a Stop not yet taken = %v, want it to wait for the Stop", next, err)
			}
		})
	}
}

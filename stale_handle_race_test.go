package simba_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
)

// The tests below make the race between an old handle's Leave, Stop or StepDown and a new
// JoinGroup, Start or Lock of the same name deterministic: simba.OnRequest runs a hook on the
// old handle's goroutine as its request starts, before its event reaches the loop, and the hook
// makes the new handle there, so the loop takes the new handle's request first. The old
// handle's request must then do nothing: not leave the new membership, nor stop, step down or
// unlock the new election or lock.

// onFirstRequest makes c run f, once, at the start of the first request of that kind and name.
func onFirstRequest(t *testing.T, c *simba.Client, kind, name string, f func()) {
	t.Helper()
	var fired atomic.Bool
	simba.OnRequest(c, func(k, n string) {
		if k == kind && n == name && fired.CompareAndSwap(false, true) {
			f()
		}
	})
	t.Cleanup(func() { simba.OnRequest(c, nil) })
}

// settleFor moves virtual time by d in small steps, letting the client act on the way.
func (w *world) settleFor(d time.Duration) {
	for end := w.clock.Now() + d; w.clock.Now() < end; {
		w.clock.Advance(10 * time.Millisecond)
		time.Sleep(200 * time.Microsecond)
	}
}

// TestOldLeaveRacingARejoin: a group left and joined again, the first handle's Leave (a second
// one, or deferred) reaching the loop only after the new JoinGroup, must leave the new
// membership alone. leftFirst: the old handle had left when its Leave began (the check it
// passed: no current handle); otherwise its first Leave was still to come, the handle current.
func TestOldLeaveRacingARejoin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		leftFirst bool
	}{{"left before", true}, {"current at the call", false}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			c, b := w.client("a")
			ctx := context.Background()
			old, err := c.JoinGroup(ctx, "g", 4)
			if err != nil {
				t.Fatal(err)
			}
			w.until(10*time.Second, "the first join to lead every partition", func() bool { return len(old.Held()) == 4 })
			if tc.leftFirst {
				w.async(func() error { return old.Leave(ctx) })
			}
			var cur *simba.PartitionGroup
			var leaves int
			hookErr := make(chan error, 1)
			onFirstRequest(t, c, "leave", "g", func() {
				hookErr <- func() error {
					if !tc.leftFirst {
						if err := old.Leave(ctx); err != nil {
							return err
						}
					}
					leaves = b.Calls("Leave")
					var err error
					cur, err = c.JoinGroup(ctx, "g", 4)
					return err
				}()
			})
			w.async(func() error { return old.Leave(ctx) })
			if err := <-hookErr; err != nil {
				t.Fatal(err)
			}
			w.until(10*time.Second, "the new join to lead every partition", func() bool { return len(cur.Held()) == 4 })
			w.settleFor(time.Second)
			if n := b.Calls("Leave"); n != leaves {
				t.Errorf("the old handle's Leave sent %d Leave calls for the new membership", n-leaves)
			}
			if n := len(cur.Held()); n != 4 {
				t.Errorf("after the old handle's Leave the new membership leads %d partitions, want 4", n)
			}
			if len(cur.Members()) != 1 {
				t.Errorf("after the old handle's Leave the members are %v, want this client's session", cur.Members())
			}
			if err := old.Leave(ctx); err != nil {
				t.Errorf("a third Leave of the old handle: %v", err)
			}
		})
	}
}

// TestOldStopRacingANewStart: an election stopped and another of the same name started, the
// first one's Stop or StepDown reaching the loop only after the new Start, must leave the new
// election alone (leading, its lease not released). stoppedFirst: the old election had been
// stopped when its request began; otherwise its Stop was still to come, the name still its.
func TestOldStopRacingANewStart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		kind         string
		stoppedFirst bool
	}{
		{"stop, stopped before", "stop", true},
		{"stop, current at the call", "stop", false},
		{"step-down, stopped before", "step-down", true},
		{"step-down, current at the call", "step-down", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			c, b := w.client("a")
			ctx := context.Background()
			old, err := c.NewElection("e")
			if err != nil {
				t.Fatal(err)
			}
			w.async(func() error { return old.Start(ctx) })
			w.until(10*time.Second, "the first election to lead", old.IsLeader)
			if tc.stoppedFirst {
				w.async(func() error { return old.Stop(ctx) })
			}
			var cur *simba.Election
			var releases int
			hookErr := make(chan error, 1)
			onFirstRequest(t, c, tc.kind, "e", func() {
				hookErr <- func() error {
					if !tc.stoppedFirst {
						if err := old.Stop(ctx); err != nil {
							return err
						}
					}
					releases = b.Calls("Release")
					var err error
					if cur, err = c.NewElection("e"); err != nil {
						return err
					}
					return cur.Start(ctx)
				}()
			})
			stale := old.Stop
			if tc.kind == "step-down" {
				stale = old.StepDown
			}
			w.async(func() error { return stale(ctx) })
			if err := <-hookErr; err != nil {
				t.Fatal(err)
			}
			// A new election stopped or stepped down would not lead within a second: stopped,
			// never; stepped down, after its cooldown (one TTL).
			w.until(time.Second, "the new election to lead", cur.IsLeader)
			w.settleFor(time.Second)
			if n := b.Calls("Release"); n != releases {
				t.Errorf("the old election's %s released the new one's lease %d times", tc.kind, n-releases)
			}
			if !cur.IsLeader() {
				t.Errorf("the new election no longer leads after the old one's %s", tc.kind)
			}
		})
	}
}

// TestOldStopRacingALock: a stopped election's Stop that reaches the loop after a Lock of the
// same name has been granted must leave the lock held.
func TestOldStopRacingALock(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ctx := context.Background()
	old, err := c.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return old.Start(ctx) })
	w.until(10*time.Second, "the election to lead", old.IsLeader)
	w.async(func() error { return old.Stop(ctx) })
	var held *simba.Held
	hookErr := make(chan error, 1)
	onFirstRequest(t, c, "stop", "e", func() {
		var err error
		held, err = c.Lock(ctx, "e")
		hookErr <- err
	})
	w.async(func() error { return old.Stop(ctx) })
	if err := <-hookErr; err != nil {
		t.Fatal(err)
	}
	w.settleFor(time.Second)
	if !held.IsValid() {
		t.Fatalf("the lock is lost after the old election's Stop: %v", context.Cause(held.Context()))
	}
	if err := held.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// TestStopRacingItsOwnStart: a Stop of an election that has not been started, taken before a
// Start of the same election that was already under way, finds nothing to stop and leaves the
// name to the election: the Start then runs it, and its terms reach it.
func TestStopRacingItsOwnStart(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ctx := context.Background()
	e, err := c.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	hookErr := make(chan error, 1)
	onFirstRequest(t, c, "start", "e", func() { hookErr <- e.Stop(ctx) })
	w.async(func() error { return e.Start(ctx) })
	if err := <-hookErr; err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "the election to lead", e.IsLeader)
	if _, err := c.NewElection("e"); !errors.Is(err, simba.ErrInvalidOption) {
		t.Errorf("a second election of the running election's name: %v, want ErrInvalidOption", err)
	}
	w.async(func() error { return e.Stop(ctx) })
	if e.IsLeader() {
		t.Error("the election still leads after its Stop")
	}
}

// TestOldStopOfAPartitionName: an election named as a partition ("g.0"), stopped, whose Stop is
// taken after this client has joined the group, must return nil and leave the partition alone
// (the engine refuses a Stop of a partition: leave the group instead).
func TestOldStopOfAPartitionName(t *testing.T) {
	w := newWorld(t)
	c, _ := w.client("a")
	ctx := context.Background()
	old, err := c.NewElection("g.0")
	if err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return old.Start(ctx) })
	w.until(10*time.Second, "the election to lead", old.IsLeader)
	w.async(func() error { return old.Stop(ctx) })
	var g *simba.PartitionGroup
	hookErr := make(chan error, 1)
	onFirstRequest(t, c, "stop", "g.0", func() {
		var err error
		g, err = c.JoinGroup(ctx, "g", 4)
		hookErr <- err
	})
	w.async(func() error { return old.Stop(ctx) })
	if err := <-hookErr; err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "the group to lead every partition", func() bool { return len(g.Held()) == 4 })
}

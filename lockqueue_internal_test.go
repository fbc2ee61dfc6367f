package simba

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// waiters returns how many goroutines wait behind the turn of name (-1: no queue).
func (c *Client) waiters(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.handles[name].(*lockQueue)
	if !ok {
		return -1
	}
	return len(q.waiters)
}

// TestLockQueueIsFIFO: goroutines of one client that ask for a held name get it in the order
// they asked, each with a new term and a greater token; a waiter whose ctx ends leaves the
// queue without disturbing the order; the name is forgotten when the last one unlocks.
func TestLockQueueIsFIFO(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	c, err := New(srv.Backend(), WithOwner("fifo"), WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	first, err := c.Lock(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); c.waiters("q") != n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters, want %d", c.waiters("q"), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	const n = 5
	type grant struct {
		i int
		h *Held
		e error
	}
	grants := make(chan grant, n)
	leaving, leave := context.WithCancel(ctx)
	defer leave()
	left := make(chan error, 1)
	for i := range n {
		go func() { h, err := c.Lock(ctx, "q"); grants <- grant{i, h, err} }()
		waitFor(i + 1) // goroutine i has queued
		if i == 2 {
			go func() { _, err := c.Lock(leaving, "q"); left <- err }()
			waitFor(i + 2)
			leave()
			if err := <-left; err != context.Canceled {
				t.Fatalf("a waiter whose ctx ended: %v", err)
			}
			waitFor(i + 1)
		}
	}
	prev := first
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for want := range n {
		g := <-grants
		if g.e != nil || g.i != want {
			t.Fatalf("grant %d went to goroutine %d (%v), want FIFO", want, g.i, g.e)
		}
		if !g.h.IsValid() || prev.IsValid() || g.h.Token() <= prev.Token() {
			t.Fatalf("goroutine %d got %v after %v: want a new valid term with a greater token", g.i, g.h.Term, prev.Term)
		}
		prev = g.h
		if err := g.h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w := c.waiters("q"); w != -1 {
		t.Fatalf("the name is still queued (%d waiters) after the last unlock", w)
	}
}

// TestCloseEndsLocalWaiters: goroutines waiting behind a lock that is never unlocked end with
// ErrClosed when the client closes.
func TestCloseEndsLocalWaiters(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	c, err := New(srv.Backend(), WithOwner("closing"), WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Lock(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	for range 3 {
		go func() { _, err := c.Lock(ctx, "q"); errs <- err }()
	}
	for deadline := time.Now().Add(10 * time.Second); c.waiters("q") != 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want 3", c.waiters("q"))
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("a waiter ended with %v, want ErrClosed", err)
		}
	}
}

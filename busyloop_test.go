package simba_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
)

// busyLoop holds a client's stepping goroutine busy on request, so a test can post a call to
// a loop that will not take it until the test lets go. While held, the loop sits inside the
// listener of the EventElected of lock "blocker", taken by a TryLock the helper runs.
type busyLoop struct {
	t        *testing.T
	c        *simba.Client
	armed    atomic.Bool
	blocked  chan struct{}
	release  chan struct{}
	lockDone chan error
}

// newBusyLoopClient returns a client with owner "a" and TTL 1.5 s on srv, whose loop the
// returned busyLoop can hold. opts are applied after those (so they may override them); a
// WithListener among them adds a listener beside the one that holds the loop. The caller
// closes the client.
func newBusyLoopClient(t *testing.T, srv *simbatest.Server, opts ...simba.Option) (*simba.Client, *busyLoop) {
	t.Helper()
	bl := &busyLoop{t: t, blocked: make(chan struct{}), release: make(chan struct{}), lockDone: make(chan error, 1)}
	all := append([]simba.Option{
		simba.WithTTL(1500 * time.Millisecond), simba.WithOwner("a"),
		simba.WithListener(func(ev simba.Event) {
			// Hold the stepping goroutine while the test posts its call.
			if ev.Kind == simba.EventElected && ev.Name == "blocker" && bl.armed.CompareAndSwap(true, false) {
				close(bl.blocked)
				<-bl.release
			}
		}),
	}, opts...)
	c, err := simba.New(srv.Backend(), all...)
	if err != nil {
		t.Fatal(err)
	}
	bl.c = c
	return c, bl
}

// hold returns once the client's loop is held: it runs TryLock("blocker") and Unlock in a
// goroutine and waits until the loop is inside the EventElected listener. Call it once.
func (bl *busyLoop) hold() {
	ctx := context.Background()
	bl.armed.Store(true)
	go func() {
		h, err := bl.c.TryLock(ctx, "blocker")
		if err == nil {
			err = h.Unlock(ctx)
		}
		bl.lockDone <- err
	}()
	<-bl.blocked
}

// resume lets the held loop go and fails the test if the blocker's TryLock or Unlock failed.
func (bl *busyLoop) resume() {
	bl.t.Helper()
	close(bl.release)
	if err := <-bl.lockDone; err != nil {
		bl.t.Fatal(err)
	}
}

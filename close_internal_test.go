package simba

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/simbatest"
)

// TestLoopNeverBlocksPostingToItself: a Listener (on the loop goroutine) that calls Close while
// the loop's channel is full must not deadlock the loop: the close is queued on the loop's own
// queue, the listener's Close returns, and a Close from outside then sees the client finish.
func TestLoopNeverBlocksPostingToItself(t *testing.T) {
	clock := simbatest.NewVirtualClock()
	srv := simbatest.NewServer(simbatest.WithClock(clock))
	ready := make(chan *Client, 1)
	closedFromListener := make(chan error, 1)
	filled := false // loop goroutine only
	listener := func(ev Event) {
		if ev.Kind != EventSessionOpened || filled {
			return
		}
		filled = true
		c := <-ready
		// Fill the channel: nobody drains it while the loop runs this listener.
		for full := false; !full; {
			select {
			case c.in <- func() {}:
			default:
				full = true
			}
		}
		closedFromListener <- c.Close(context.Background())
	}
	c, err := New(srv.Backend(), WithClock(clock), WithTTL(3*time.Second), WithOwner("self"), WithListener(listener))
	if err != nil {
		t.Fatal(err)
	}
	ready <- c
	select {
	case err := <-closedFromListener:
		if err != nil {
			t.Fatalf("Close from a listener: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the session never opened")
	}
	if err := clocktest.Close(clock, 5*time.Second, c.Close); err != nil {
		t.Fatalf("Close after the loop's channel filled up: %v", err)
	}
	if _, err := c.NewElection("later"); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewElection after Close: %v, want ErrClosed", err)
	}
}

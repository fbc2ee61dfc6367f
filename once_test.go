package simba_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
)

// onceKey is a key only this test can make, as a package wrapping its options in Once would.
type onceKey struct{ id int }

// Options wrapped in Once with one key and passed to New twice apply once: the listener sees
// each event once. Without Once (the second case) the same listener passed twice sees each
// twice, which is what a metrics collector's Options passed twice did to its counts.
func TestOnceAppliesOptionsOnce(t *testing.T) {
	w := newWorld(t)
	var onceOpened, twiceOpened atomic.Int32
	count := func(n *atomic.Int32) simba.Listener {
		return func(ev simba.Event) {
			if ev.Kind == simba.EventSessionOpened {
				n.Add(1)
			}
		}
	}
	l := count(&onceOpened)
	opt := func() simba.Option { return simba.Once(onceKey{1}, simba.WithListener(l)) }
	w.client("once", opt(), opt())
	plain := simba.WithListener(count(&twiceOpened))
	w.client("twice", plain, plain)
	w.until(10*time.Second, "both sessions open", func() bool { return onceOpened.Load() > 0 && twiceOpened.Load() > 0 })
	if got := onceOpened.Load(); got != 1 {
		t.Fatalf("Once's listener saw the session open %d times, want 1", got)
	}
	if got := twiceOpened.Load(); got != 2 {
		t.Fatalf("a listener passed twice saw the session open %d times: the control case expects 2", got)
	}
}

// Once with different keys applies each; a key that cannot be compared, or none, is refused by
// New; a failing option inside Once fails New.
func TestOnceKeys(t *testing.T) {
	w := newWorld(t)
	var n atomic.Int32
	l := simba.WithListener(func(ev simba.Event) {
		if ev.Kind == simba.EventSessionOpened {
			n.Add(1)
		}
	})
	w.client("two-keys", simba.Once(onceKey{1}, l), simba.Once(onceKey{2}, l))
	w.until(10*time.Second, "session open", func() bool { return n.Load() > 0 })
	if got := n.Load(); got != 2 {
		t.Fatalf("two keys: listener saw %d opens, want 2", got)
	}
	for _, tc := range []struct {
		what string
		opt  simba.Option
	}{
		{"nil key", simba.Once(nil, l)},
		{"slice key", simba.Once([]int{1}, l)},
		{"interface holding a map", simba.Once(any(struct{ m any }{map[int]int{}}), l)},
		{"bad option inside", simba.Once(onceKey{3}, simba.WithTTL(-1))},
		{"zero option inside", simba.Once(onceKey{4}, simba.Option{})},
	} {
		_, err := simba.New(w.srv.Backend(), tc.opt)
		if !errors.Is(err, simba.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", tc.what, err)
		} else {
			t.Logf("%s: %v", tc.what, err)
		}
	}
}

// SessionRemaining is the live session's time to its local deadline: near the TTL after a
// keep-alive, running down while keep-alives fail, 0 once the session is lost.
func TestSessionRemaining(t *testing.T) {
	w := newWorld(t)
	c, b := w.client("a")
	if got := c.SessionRemaining(); got != 0 {
		t.Fatalf("before the session opened: %v, want 0", got)
	}
	w.until(10*time.Second, "session open", func() bool { return c.Session() != "" })
	left := c.SessionRemaining()
	if left <= testTTL/2 || left > testTTL {
		t.Fatalf("just opened: %v left, want in (TTL/2, TTL]", left)
	}
	b.FailOp("KeepAlive", errors.New("keep-alive refused"))
	w.clock.Advance(testTTL / 2)
	w.until(time.Second, "time to pass", func() bool { return true })
	if got := c.SessionRemaining(); got >= left-testTTL/2+10*time.Millisecond || got <= 0 {
		t.Fatalf("after TTL/2 of failing keep-alives: %v left, want about %v", got, left-testTTL/2)
	}
	b.FailOp("OpenSession", errors.New("open refused")) // no new session to read after the loss
	w.until(testTTL, "session lost", func() bool { return c.Session() == "" })
	if got := c.SessionRemaining(); got != 0 {
		t.Fatalf("session lost: %v left, want 0", got)
	}
}

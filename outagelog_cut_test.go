package simba_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// silencedLink is a backend whose link goes silent while down is set: a session call (open,
// keep-alive) sent then hangs until its context ends, even once the link is back (it waits
// on a connection the outage silenced: a server stopped with SIGSTOP and resumed, a dropped
// route), and every other call fails at once.
type silencedLink struct {
	spi.Backend
	down    atomic.Bool
	hanging atomic.Int32 // session calls hanging now
}

var errSilenced = errors.New("connection refused")

// hang waits until ctx ends, idle for a VirtualClock (spi.Await).
func (b *silencedLink) hang(ctx context.Context, op string) error {
	b.hanging.Add(1)
	defer b.hanging.Add(-1)
	return spi.Unavailable(op, spi.Await(ctx, make(chan struct{})))
}

func (b *silencedLink) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	if b.down.Load() {
		return spi.Session{}, b.hang(ctx, "open-session")
	}
	return b.Backend.OpenSession(ctx, owner, ttl)
}

func (b *silencedLink) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	if b.down.Load() {
		return spi.KeepAlive{}, b.hang(ctx, "keep-alive")
	}
	return b.Backend.KeepAlive(ctx, id, names, groups)
}

func (b *silencedLink) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	if b.down.Load() {
		return nil, spi.Unavailable("members", errSilenced)
	}
	return b.Backend.Members(ctx, group)
}

func (b *silencedLink) Acquire(ctx context.Context, id spi.SessionID, name string) (spi.Acquire, error) {
	if b.down.Load() {
		return spi.Acquire{}, spi.Unavailable("acquire", errSilenced)
	}
	return b.Backend.Acquire(ctx, id, name)
}

// TestCutShortCallIsNotLoggedAsNews: a client's link goes silent for a minute; when it is
// back, the probe that finds the backend answering cuts short the session call still hanging
// on the silenced connection. That failure is the outage ending, not news: the log has the
// outage's WARN lines, then one INFO "reachable again" and no WARN line after the link is back.
// On the old code the cut call was a WARN line of its own ("cut short: a probe found the
// backend answering…", a new error in the outage) just before "reachable again", one per
// client at every resume of a stopped PostgreSQL or MariaDB in trial 25.
func TestCutShortCallIsNotLoggedAsNews(t *testing.T) {
	w := newWorld(t)
	ow := &outageWatch{}
	b := &silencedLink{Backend: w.srv.Backend()}
	c := w.clientOn(b, "a", ow.options()...)
	e := startElections(t, context.Background(), c, 1)[0]
	w.until(30*time.Second, "leading", e.IsLeader)
	b.down.Store(true)
	w.run(time.Minute)
	w.until(10*time.Second, "a session call hanging", func() bool { return b.hanging.Load() > 0 })
	mark := len(ow.logs.String())
	b.down.Store(false)
	w.until(30*time.Second, "leading again", e.IsLeader)
	w.run(5 * time.Second)
	all := ow.logs.String()
	after := all[mark:]
	if cut := linesWith(all, "cut short: a probe found the backend answering"); len(cut) == 0 {
		t.Fatalf("no call was cut short: nothing checked; log:\n%s", all)
	}
	if warns := linesWith(after, "level=WARN"); len(warns) != 0 {
		t.Errorf("%d WARN lines after the link was back, want none:\n%s", len(warns), strings.Join(warns, "\n"))
	}
	if up := linesWith(after, "level=INFO", `msg="simba backend reachable again"`); len(up) != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", len(up), after)
	}
	if warns := linesWith(all[:mark], "level=WARN"); len(warns) == 0 {
		t.Errorf("no WARN line for the outage:\n%s", all)
	}
}

package simbahttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// stoppableClock is a virtual clock whose timers, while the client is stopped, run nothing
// until it resumes: then they run late, as in a process resumed after SIGSTOP.
type stoppableClock struct {
	*simbatest.VirtualClock
	mu      sync.Mutex
	stopped bool
	held    []func()
}

func (c *stoppableClock) AfterFunc(d time.Duration, f func()) spi.Timer {
	return c.VirtualClock.AfterFunc(d, func() {
		c.mu.Lock()
		if c.stopped {
			c.held = append(c.held, f)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		f()
	})
}

// /healthz of a client whose process was stopped past its session's deadline says the session
// was lost after a pause, where a network cut (TestHealthzFollowsTheSessionAcrossACut) says
// only "lost (deadline)"; before, both read the same.
func TestHealthzNamesAPause(t *testing.T) {
	const ttl = 3 * time.Second
	vc := simbatest.NewVirtualClock()
	clock := &stoppableClock{VirtualClock: vc}
	srv := simbatest.NewServer(simbatest.WithClock(vc))
	h := simbahttp.New(simbahttp.Opts{Backend: srv.Backend()})
	// A backend the client reaches only while it runs: the open of a new session is refused
	// after the pause, so /healthz keeps the loss to read.
	b := &refusing{Backend: srv.Backend()}
	c, err := simba.New(b, append(h.Options(), simba.WithOwner("node-a"), simba.WithTTL(ttl), simba.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	h.Attach(c)
	defer clocktest.Close(vc, 10*time.Second, c.Close)
	hs := httptest.NewServer(h)
	defer hs.Close()
	for code := 0; code != http.StatusOK; vc.Advance(10 * time.Millisecond) {
		code, _ = get(t, hs.URL+"/healthz")
	}

	clock.mu.Lock()
	clock.stopped = true
	clock.mu.Unlock()
	b.refuse(true)
	vc.Advance(2 * ttl)
	clock.mu.Lock()
	held := clock.held
	clock.held, clock.stopped = nil, false
	clock.mu.Unlock()
	for _, f := range held {
		f()
	}
	vc.Settle()
	code, body := get(t, hs.URL+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "lost (deadline) after the process paused for ") {
		t.Fatalf("/healthz %d %q after a pause past the deadline, want 503 naming the pause", code, body)
	}
	b.refuse(false)
}

// refusing is a backend whose OpenSession fails (retryably) while refuse is on.
type refusing struct {
	spi.Backend
	mu  sync.Mutex
	off bool
}

func (b *refusing) refuse(on bool) {
	b.mu.Lock()
	b.off = on
	b.mu.Unlock()
}

func (b *refusing) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	b.mu.Lock()
	off := b.off
	b.mu.Unlock()
	if off {
		return spi.Session{}, spi.Unavailable("OpenSession", errors.New("refused"))
	}
	return b.Backend.OpenSession(ctx, owner, ttl)
}

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

// /healthz of a client whose process was stopped past its session's deadline says the session
// was lost after a pause, where a network cut (TestHealthzFollowsTheSessionAcrossACut) says
// only "lost (deadline)"; before, both read the same.
func TestHealthzNamesAPause(t *testing.T) {
	const ttl = 3 * time.Second
	vc := simbatest.NewVirtualClock()
	clock := clocktest.NewPausing(vc)
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

	clock.Stop()
	b.refuse(true)
	vc.Advance(2 * ttl)
	clock.Resume()
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

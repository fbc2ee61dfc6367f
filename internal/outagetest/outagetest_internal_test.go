package outagetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// proxiedBackend is a backend whose server is reachable only while its proxy has no fault: a
// keep-alive then renews at once, and fails at once (unavailable) while the proxy is down.
// Sessions never expire at the server: whether one is lost is the client's own deadline.
type proxiedBackend struct {
	spi.Backend // nil: Run's client makes session calls and probes only
	p           *faultproxy.Proxy
	ttl         time.Duration
	mu          sync.Mutex
	n           int
}

func (b *proxiedBackend) down() bool { return b.p.Fault() != (faultproxy.Fault{}) }

func (b *proxiedBackend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	if b.down() {
		return spi.Session{}, fmt.Errorf("proxy down: %w", spi.ErrUnavailable)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	return spi.Session{ID: spi.SessionID(fmt.Sprintf("s%d", b.n)), Remaining: ttl}, nil
}

func (b *proxiedBackend) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	if b.down() {
		return spi.KeepAlive{}, fmt.Errorf("proxy down: %w", spi.ErrUnavailable)
	}
	return spi.KeepAlive{Remaining: b.ttl}, nil
}

// Members is the client's probe of the server after a failed call.
func (b *proxiedBackend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	if b.down() {
		return nil, fmt.Errorf("proxy down: %w", spi.ErrUnavailable)
	}
	return nil, nil
}

func (b *proxiedBackend) CloseSession(ctx context.Context, id spi.SessionID) error { return nil }

func (b *proxiedBackend) Close() error { return nil }

func newProxiedBackend(t *testing.T, ttl time.Duration) (*proxiedBackend, *faultproxy.Proxy) {
	t.Helper()
	p := faultproxy.StartTest(t, testenv.RefusedAddr(t))
	return &proxiedBackend{p: p, ttl: ttl}, p
}

// TestRunRedoesRoundsHealedLate: a round whose outage the test itself ended late (its
// goroutine descheduled on a loaded machine, here 400 ms in the first try) left the session
// less time than the Config claims: Run ran it again instead of counting the session's loss
// against the backend. Before, Run slept Outage from when it took the proxies down and
// counted every round: the first round's loss (the outage of 250 ms ended 950 ms after the
// renewal, past the client's deadline at 940 ms) made it return 1.
func TestRunRedoesRoundsHealedLate(t *testing.T) {
	ms := time.Millisecond
	cfg := Config{TTL: time.Second, Outage: 250 * ms, Phase: 300 * ms, Rounds: 2}
	b, p := newProxiedBackend(t, cfg.TTL)
	healLate = func(try int) time.Duration {
		if try == 0 {
			return 400 * ms
		}
		return 0
	}
	t.Cleanup(func() { healLate = nil })
	if lost := Run(t, b, []*faultproxy.Proxy{p}, cfg); lost != 0 {
		t.Errorf("Run = %d sessions lost, want 0: the only outage that outlasted the session was one the test ended %v late", lost, 400*ms)
	}
}

// TestRunCountsLostSessions: outages that leave the session no time (1.2 s at TTL 1 s) are
// each counted as lost, on schedule as they are: redoing late rounds hides no loss.
func TestRunCountsLostSessions(t *testing.T) {
	ms := time.Millisecond
	cfg := Config{TTL: time.Second, Outage: 1200 * ms, Phase: 300 * ms, Rounds: 2}
	b, p := newProxiedBackend(t, cfg.TTL)
	if lost := Run(t, b, []*faultproxy.Proxy{p}, cfg); lost != cfg.Rounds {
		t.Errorf("Run = %d sessions lost, want %d: every outage of %v at TTL %v outlasts the session", lost, cfg.Rounds, cfg.Outage, cfg.TTL)
	}
}

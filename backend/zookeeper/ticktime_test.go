package zookeeper

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// sharedTick is the tickTime of the shared test server (.ci/zoo.cfg) and of startPrivateZK's.
const sharedTick = 200 * time.Millisecond

// requireTick200 skips the test unless b's server grants the session timeout bounds of
// .ci/zoo.cfg (minSessionTimeout 400 ms = 2 × tickTime 200 ms), which the test's figures assume.
func requireTick200(t *testing.T, b *Backend) (hi time.Duration) {
	t.Helper()
	lo, hi := ttlBounds(t, b)
	if lo != 2*sharedTick {
		testenv.Unavailable(t, "ZooKeeper with .ci/zoo.cfg's tickTime (200 ms)", fmt.Sprintf("the server grants at least %v, not 400 ms", lo))
	}
	return hi
}

// negotiated returns the session timeout the server granted session sid of b.
func negotiated(t *testing.T, b *Backend, sid spi.SessionID) time.Duration {
	t.Helper()
	b.mu.Lock()
	s := b.sessions[sid]
	b.mu.Unlock()
	if s == nil {
		t.Fatalf("session %s is not open", sid)
	}
	return s.tap.sessionTimeout()
}

// TestTickTimeShortensSessionTimeout: with tickTime=200ms a session of TTL 2 s asks for, and
// gets, a session timeout of 1.8 s, and every remaining time it reports (the open, a grant, a
// keep-alive) is at most that; without the option it still asks for the TTL itself.
func TestTickTimeShortensSessionTimeout(t *testing.T) {
	b := openBackend(t, serverDSN(t, "tickTime=200ms"))
	requireTick200(t, b)
	const ttl = 2 * time.Second
	const want = ttl - sharedTick
	s, err := b.OpenSession(testCtx(t), "tick-owner", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if neg := negotiated(t, b, s.ID); neg != want {
		t.Fatalf("negotiated session timeout %v, want %v", neg, want)
	}
	if s.Remaining <= 0 || s.Remaining > want {
		t.Errorf("OpenSession's Remaining %v, want in (0, %v]", s.Remaining, want)
	}
	r, err := b.Acquire(testCtx(t), s.ID, "tick-lease")
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v; want granted", r, err)
	}
	if r.Remaining <= 0 || r.Remaining > want {
		t.Errorf("grant's Remaining %v, want in (0, %v]", r.Remaining, want)
	}
	time.Sleep(300 * time.Millisecond)
	ka, err := b.KeepAlive(testCtx(t), s.ID, []string{"tick-lease"}, nil)
	if err != nil || ka.Expired || len(ka.Held) != 1 {
		t.Fatalf("KeepAlive = %+v, %v", ka, err)
	}
	if ka.Remaining <= 0 || ka.Remaining > want {
		t.Errorf("keep-alive's Remaining %v, want in (0, %v]", ka.Remaining, want)
	}
	if err := b.CloseSession(testCtx(t), s.ID); err != nil {
		t.Fatal(err)
	}

	plain := openBackend(t, serverDSN(t, ""))
	p := openSession(t, plain, ttl)
	if neg := negotiated(t, plain, p); neg != ttl {
		t.Errorf("without tickTime: negotiated %v, want the TTL %v", neg, ttl)
	}
	if err := plain.CloseSession(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
}

// TestTickTimeClamps: the server clamps the timeout asked for (TTL − tick) into its
// [minSessionTimeout, maxSessionTimeout]. Below the minimum it grants the minimum: the session
// opens, reports remaining times on what was granted, and the backend warns once that a crashed
// holder's leases may outlive the TTL. The maxSessionTimeout check compares the grant with what
// was asked: a TTL of max + tick is granted the max (without the option that TTL is refused),
// one beyond it is refused with spi.ErrInvalidOption.
func TestTickTimeClamps(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	b := openBackend(t, serverDSN(t, "tickTime=200ms"), WithSlog(log))
	hi := requireTick200(t, b)
	ctx := testCtx(t)

	// Below the minimum: ttl 500 ms asks for 300 ms, the server grants 400 ms (2 × tick).
	const ttl = 500 * time.Millisecond
	for i := range 2 {
		s, err := b.OpenSession(ctx, "clamped", ttl)
		if err != nil {
			t.Fatalf("OpenSession(%v): %v", ttl, err)
		}
		if neg := negotiated(t, b, s.ID); neg != 2*sharedTick {
			t.Errorf("negotiated %v, want the server's minimum %v", neg, 2*sharedTick)
		}
		if s.Remaining <= 0 || s.Remaining > 2*sharedTick {
			t.Errorf("Remaining %v, want in (0, %v]", s.Remaining, 2*sharedTick)
		}
		if n := strings.Count(logs.String(), "minSessionTimeout"); n != 1 {
			t.Errorf("after session %d: %d warnings about minSessionTimeout, want 1:\n%s", i+1, n, logs.String())
		}
		if err := b.CloseSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"level=WARN", "asked=300ms", "granted=400ms", "goneBy=600ms"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("warning lacks %q:\n%s", want, logs.String())
		}
	}

	// At the maximum: ttl = max + tick asks for the max.
	s, err := b.OpenSession(ctx, "at-max", hi+sharedTick)
	if err != nil {
		t.Fatalf("OpenSession(maxSessionTimeout %v + tick): %v", hi, err)
	}
	if neg := negotiated(t, b, s.ID); neg != hi {
		t.Errorf("negotiated %v, want %v", neg, hi)
	}
	if err := b.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	_, err = b.OpenSession(ctx, "above-max", hi+sharedTick+time.Second)
	if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), "maxSessionTimeout") ||
		!strings.Contains(err.Error(), "tickTime 200ms") {
		t.Errorf("OpenSession(max + tick + 1s) = %v; want spi.ErrInvalidOption naming maxSessionTimeout and the tickTime", err)
	}
	plain := openBackend(t, serverDSN(t, ""))
	if _, err := plain.OpenSession(ctx, "plain", hi+sharedTick); !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("without tickTime, OpenSession(max + tick) = %v; want spi.ErrInvalidOption", err)
	}
}

// TestTickTimeCrashedHolderGoesByTTL: holders that stop without closing their sessions (Close
// drops the connections and the close request, as a crash does) lose their lease nodes no
// sooner than their last request + the negotiated timeout (so never before their own view of
// the lease ends) and no later than their last request + TTL + a little slack for the server's
// expirer thread and the watch event: the tick the server rounds expiry up by is inside the TTL.
// The holders stop a quarter tick apart, so their expiries fall at different points of the tick;
// without the option (asking for the TTL), one of them would lose its node up to a tick late.
// On a private server, whose expirer no other test loads.
func TestTickTimeCrashedHolderGoesByTTL(t *testing.T) {
	z := startPrivateZK(t)
	const (
		ttl     = 2 * time.Second
		holders = 4
		slack   = 100 * time.Millisecond // below the tick (200 ms) the option removes
	)
	dsn := "zk://" + z.addr + "/crash?tickTime=200ms"
	quiet := slog.New(slog.DiscardHandler)
	watcher, _, err := zk.Connect([]string{z.addr}, 10*time.Second, zk.WithLogger(quietLogger{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	ctx := testCtx(t)

	type holder struct {
		b      *Backend
		sid    spi.SessionID
		name   string
		neg    time.Duration
		t0, t1 time.Time      // before and after the last request (a keep-alive)
		gone   chan time.Time // when the watcher saw the node deleted
	}
	hs := make([]*holder, holders)
	for i := range hs {
		h := &holder{name: "crash-" + string(rune('a'+i)), gone: make(chan time.Time, 1)}
		h.b = openBackend(t, dsn, WithSlog(quiet))
		s, err := h.b.OpenSession(ctx, "crasher", ttl)
		if err != nil {
			t.Fatal(err)
		}
		h.sid = s.ID
		h.neg = negotiated(t, h.b, s.ID)
		if h.neg != ttl-sharedTick {
			t.Fatalf("negotiated %v, want %v", h.neg, ttl-sharedTick)
		}
		mustGrant(t, h.b, h.sid, h.name)
		ok, _, ev, err := watcher.ExistsW(h.b.lay.lease(h.name))
		if err != nil || !ok {
			t.Fatalf("exists %s: %v, %v", h.name, ok, err)
		}
		go func() {
			e := <-ev
			if e.Type == zk.EventNodeDeleted {
				h.gone <- time.Now()
			}
			close(h.gone)
		}()
		hs[i] = h
	}
	var closing sync.WaitGroup
	defer closing.Wait()
	for _, h := range hs {
		h.t0 = time.Now()
		// The keep-alive waits for the held node's watch, so nothing of the session follows it.
		ka, err := h.b.KeepAlive(ctx, h.sid, []string{h.name}, nil)
		h.t1 = time.Now()
		if err != nil || ka.Expired || len(ka.Held) != 1 {
			t.Fatalf("KeepAlive = %+v, %v", ka, err)
		}
		// Close drops the connections at once but may then wait up to a second for
		// go-zookeeper's goroutines; the next holders, whose sessions nothing keeps alive
		// meanwhile, must not wait for that, so it ends in the background.
		closing.Go(func() { h.b.Close() })
		time.Sleep(sharedTick / 4)
	}
	for _, h := range hs {
		var at time.Time
		select {
		case g, ok := <-h.gone:
			if !ok {
				t.Fatalf("%s: the watch fired without a deletion", h.name)
			}
			at = g
		case <-time.After(ttl + 10*time.Second):
			t.Fatalf("%s: the lease node is still there %v after the holder's last request", h.name, time.Since(h.t1))
		}
		if earliest := h.t0.Add(h.neg); at.Before(earliest) {
			t.Errorf("%s: the node went %v after the last request was sent, before the holder's own view (%v) ended",
				h.name, at.Sub(h.t0), h.neg)
		}
		if latest := h.t1.Add(ttl + slack); at.After(latest) {
			t.Errorf("%s: the node went %v after the last request was answered, more than TTL %v + %v",
				h.name, at.Sub(h.t1), ttl, slack)
		}
		t.Logf("%s: gone %v after the last request (sent–answered %v)", h.name, at.Sub(h.t1), h.t1.Sub(h.t0))
	}
}

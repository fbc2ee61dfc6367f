package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// TestWaitTimeoutBeyondRenewalIntervalRefused: a WAIT timeout (WithWaitReplicas, the DSN's
// wait_timeout) of at least TTL/3, the longest renewal interval and so the longest call
// timeout a client gives a grant or renewal, is refused by CheckTTL, by simba.New and by
// OpenSession, before any I/O (the server at port 1 is never dialled). Trial 28 ran
// wait_timeout=2s at TTL 2 s behind a lagging replica: simba.New accepted it and no grant
// succeeded in 16 s, each failure a bare "context deadline exceeded".
func TestWaitTimeoutBeyondRenewalIntervalRefused(t *testing.T) {
	b, err := Open("redis://127.0.0.1:1/0?wait_replicas=1&wait_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, ttl := range []time.Duration{2 * time.Second, 6 * time.Second} {
		err := b.CheckTTL(ttl)
		if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), "wait_timeout 2s") {
			t.Errorf("CheckTTL(%v) = %v, want spi.ErrInvalidOption naming wait_timeout 2s", ttl, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := b.OpenSession(ctx, "test:wait-timeout", ttl)
		cancel()
		if !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("OpenSession(%v) = %+v, %v; want spi.ErrInvalidOption before any I/O", ttl, s, err)
		}
	}
	c, err := simba.New(b, simba.WithTTL(2*time.Second))
	if err == nil {
		c.Close(context.Background())
		t.Fatal("simba.New accepted wait_timeout=2s with TTL 2s")
	}
	if !errors.Is(err, simba.ErrInvalidOption) {
		t.Fatalf("simba.New = %v, want simba.ErrInvalidOption", err)
	}
	// Below a third of the TTL it serves: 2 s < 7 s / 3.
	if err := b.CheckTTL(7 * time.Second); err != nil {
		t.Errorf("CheckTTL(7s) with wait_timeout 2s = %v, want nil", err)
	}
	// Without WAIT the timeout is not checked at all.
	plain, err := Open("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.CheckTTL(time.Millisecond); err != nil {
		t.Errorf("CheckTTL(1ms) without WAIT = %v, want nil", err)
	}
}

// TestDefaultWaitTimeoutFitsEveryTTL: wait_replicas without wait_timeout (WithWaitReplicas
// with a zero timeout) is accepted at every TTL, and its WAIT gets min(1s, TTL/6, half the
// call's time): at TTL 600 ms against the shared server (no replica) an open fails with the
// shortfall within 100 ms, not with ErrInvalidOption nor by running out its deadline. On the
// old code the DSN's default was 1 s, refused by CheckTTL, simba.New and OpenSession for
// every TTL up to 3 s: wait_replicas=1 alone failed simba.New at TTL 2 s.
func TestDefaultWaitTimeoutFitsEveryTTL(t *testing.T) {
	b, err := Open("redis://127.0.0.1:1/0?wait_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, ttl := range []time.Duration{10 * time.Millisecond, 600 * time.Millisecond, 2 * time.Second, 3 * time.Second, time.Minute} {
		if err := b.CheckTTL(ttl); err != nil {
			t.Errorf("CheckTTL(%v) with the default WAIT timeout = %v, want nil", ttl, err)
		}
		if err := b.CheckRenewal(ttl, ttl/30); err != nil {
			t.Errorf("CheckRenewal(%v, %v) with the default WAIT timeout = %v, want nil", ttl, ttl/30, err)
		}
	}
	c, err := simba.New(b, simba.WithTTL(2*time.Second))
	if err != nil {
		t.Fatalf("simba.New(TTL 2s) with wait_replicas=1 and no wait_timeout = %v, want a client", err)
	}
	c.Close(context.Background())

	live := newBackend(t, standaloneClient(t), WithWaitReplicas(1, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := live.OpenSession(ctx, "test:wait-default", 600*time.Millisecond)
	if err == nil {
		live.CloseSession(ctx, s.ID)
		t.Fatal("OpenSession succeeded with WAIT 1 on a server without replicas")
	}
	t.Logf("OpenSession(TTL 600ms): %v", err)
	if errors.Is(err, spi.ErrInvalidOption) || errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, spi.ErrUnavailable) ||
		!strings.Contains(err.Error(), "0 of 1 replicas acknowledged within 100ms") {
		t.Errorf("OpenSession(TTL 600ms) = %v; want the retryable WAIT shortfall within 100ms (TTL/6)", err)
	}
	// The default never takes more than half of what is left of the call.
	dctx, dcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer dcancel()
	if ms := live.waitMS(dctx, time.Hour); ms > 150 || ms < 1 {
		t.Errorf("default WAIT timeout with 300ms left = %dms, want in [1, 150]", ms)
	}
	if ms := live.waitMS(context.Background(), time.Hour); ms != DefaultWaitTimeout.Milliseconds() {
		t.Errorf("default WAIT timeout at TTL 1h without a deadline = %dms, want %v", ms, DefaultWaitTimeout)
	}
	if ms := live.waitMS(context.Background(), 3*time.Millisecond); ms != 1 {
		t.Errorf("default WAIT timeout at TTL 3ms = %dms, want 1 (WAIT n 0 would block)", ms)
	}
}

// TestWaitTimeoutNotBelowRenewEveryRefused: an explicit WAIT timeout at or above the client's
// renewal interval (simba.WithRenewEvery, each call's timeout) is refused by simba.New with
// ErrInvalidOption naming WithRenewEvery (spi.RenewalChecker); below it the client is made.
// On the old code CheckTTL saw only the TTL: 500ms < 6s/3 passed, and every grant and renewal
// whose WAIT fell short would have failed as its 400 ms call timeout.
func TestWaitTimeoutNotBelowRenewEveryRefused(t *testing.T) {
	b, err := Open("redis://127.0.0.1:1/0?wait_replicas=1&wait_timeout=500ms")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithTTL(6*time.Second), simba.WithRenewEvery(400*time.Millisecond))
	if err == nil {
		c.Close(context.Background())
		t.Fatal("simba.New accepted wait_timeout=500ms with WithRenewEvery(400ms)")
	}
	if !errors.Is(err, simba.ErrInvalidOption) || !strings.Contains(err.Error(), "WithRenewEvery") || !strings.Contains(err.Error(), "wait_timeout 500ms") {
		t.Errorf("simba.New = %v, want simba.ErrInvalidOption naming wait_timeout 500ms and WithRenewEvery", err)
	}
	c, err = simba.New(b, simba.WithTTL(6*time.Second), simba.WithRenewEvery(time.Second))
	if err != nil {
		t.Fatalf("simba.New(TTL 6s, renew every 1s) with wait_timeout=500ms = %v, want a client", err)
	}
	c.Close(context.Background())
}

// TestSubMillisecondWaitTimeoutRefused: a WAIT timeout under 1 ms is refused by
// WithWaitReplicas and the DSN (ErrInvalidOption), and a WAIT is never sent with a timeout of
// 0, which Redis reads as "block until n replicas acknowledge": a backend whose timeout is
// 500µs anyway (set here behind the option's back) fails its open with the shortfall at once.
// On the old code both were accepted and sent as WAIT 1 0: the open held its call until its
// 2 s deadline and failed with "context deadline exceeded".
func TestSubMillisecondWaitTimeoutRefused(t *testing.T) {
	if _, err := ParseDSN("redis://h?wait_replicas=1&wait_timeout=500us"); !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), "below 1ms") {
		t.Errorf("ParseDSN(wait_timeout=500us) = %v, want spi.ErrInvalidOption saying below 1ms", err)
	}
	rc := standaloneClient(t)
	if b, err := New(rc, WithWaitReplicas(1, 500*time.Microsecond)); err == nil {
		b.Close()
		t.Error("WithWaitReplicas(1, 500µs) accepted")
	} else if !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("WithWaitReplicas(1, 500µs) = %v, want spi.ErrInvalidOption", err)
	}
	b := newBackend(t, rc)
	b.waitN, b.waitTO = 1, 500*time.Microsecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := b.OpenSession(ctx, "test:wait-submilli", 10*time.Second)
	if err == nil {
		b.CloseSession(context.Background(), s.ID)
		t.Fatal("OpenSession succeeded with WAIT 1 on a server without replicas")
	}
	t.Logf("OpenSession with a 500µs WAIT timeout: %v", err)
	if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "0 of 1 replicas acknowledged within 1ms") {
		t.Errorf("OpenSession = %v; want the WAIT shortfall within 1ms, not the call's deadline (WAIT 1 0 blocks)", err)
	}
}

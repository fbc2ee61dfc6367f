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

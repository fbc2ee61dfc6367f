//go:build trial28_failing

// The defect trial28 found and left to the library's owners: run with
// `go test -tags trial28_failing ./trials/trial28` in chaos/. It fails on the code of
// 2026-12-07 (simba.New accepts the pair); it passes once the check exists.
package main

import (
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
)

// TestWaitTimeoutBeyondCallTimeoutRefused: WithWaitReplicas's doc says the WAIT timeout "should
// be well below … the engine's call timeout (the renewal interval), since the WAIT's time is
// part of each grant's and renewal's". A timeout of at least TTL/3 (no renewal interval can be
// longer) makes every grant and keep-alive that waits out its WAIT time out as a call instead:
// trial28 saw 0 grants in 16 s (`wait_timeout=2s`, TTL 2 s, a replica 1 s behind), the WARN
// lines saying `context deadline exceeded`, not the "WAIT: 0 of 1 replicas acknowledged" that
// names the cause. simba.New
// checks the TTL against the backend's bounds before any I/O (spi.TTLChecker); this pair it
// does not check.
func TestWaitTimeoutBeyondCallTimeoutRefused(t *testing.T) {
	b, err := redis.Open("redis://127.0.0.1:1/0?wait_replicas=1&wait_timeout=2s") // no I/O
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithTTL(2*time.Second))
	if err == nil {
		c.Close(t.Context())
		t.Fatal("simba.New accepted wait_timeout=2s with TTL 2s (renewal interval 667ms): every WAIT that times out outlasts its call")
	}
	if !errors.Is(err, simba.ErrInvalidOption) {
		t.Fatalf("err = %v, want ErrInvalidOption", err)
	}
}

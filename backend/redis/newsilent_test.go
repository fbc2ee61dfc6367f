//go:build unix

package redis

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestNewAtAStoppedServer: simba.New on a backend whose server accepts connections but does
// not answer (a private redis-server stopped with SIGSTOP: the kernel still accepts) returns
// without waiting for the server, which the hint subscription takes as down, as it takes one
// that refuses connections. It used to wait, on New's caller's goroutine, for the probe
// subscription's replies: 15 s at go-redis's default read timeout of 5 s. The DSN's read
// timeout is 2 minutes here, so such a New would still be waiting when the guard gives up; the
// probe now waits the read timeout at most hintCallTimeout (5 s).
//
// Once the server runs again, hints work: a waiter whose client runs on a virtual clock that
// stands still (its retry timer never fires) takes the lock when another backend's session
// releases it. Only the release hint, published once the waiter's subscription is confirmed,
// can wake it.
func TestNewAtAStoppedServer(t *testing.T) {
	noLeaks(t)
	addr, proc := startPlainRedisProc(t)
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	resume := func() {
		if stopped {
			if err := proc.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			stopped = false
		}
	}
	defer resume()
	b, err := Open("redis://"+addr+"?read_timeout=2m", WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	clock := simbatest.NewVirtualClock()
	type result struct {
		c   *simba.Client
		err error
	}
	made := make(chan result, 1)
	go func() {
		c, err := simba.New(b, simba.WithClock(clock), simba.WithTTL(time.Minute), simba.WithOwner("waiter"))
		made <- result{c, err}
	}()
	var r result
	select {
	case r = <-made:
	case <-time.After(time.Minute): // a guard: New waits for a server that is stopped
		t.Errorf("simba.New still waiting a minute into a stopped server (its read timeout: 2 minutes)")
		resume()
		r = <-made
	}
	if r.err != nil {
		t.Fatalf("simba.New at a stopped server: %v; want a client (the server is taken as down)", r.err)
	}
	c := r.c
	defer func() {
		if err := clocktest.Close(clock, time.Minute, c.Close); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	resume()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder, err := Open("redis://"+addr, WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	name := uniq(t, "stopped-at-new")
	hs := open(t, holder, time.Minute)
	got, err := holder.Acquire(ctx, hs, name)
	if err != nil || got.Kind != spi.Granted {
		t.Fatalf("holder's acquire: %+v, %v", got, err)
	}
	locked := make(chan error, 1)
	go func() {
		h, err := c.Lock(ctx, name)
		if err == nil {
			defer h.Unlock(context.Background())
		}
		locked <- err
	}()
	// The waiter's acquire found the lease held and its backend subscribed to the released
	// channel, on the pub/sub connection it made once the server answered.
	awaitNumsub(t, holder.Client(), wire.ReleasedChannel(name), 1)
	at := clock.Now()
	if err := holder.Release(ctx, hs, name, got.Token); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("the waiter's Lock: %v", err)
	}
	if now := clock.Now(); now != at {
		t.Errorf("the waiter took the lock after %v of virtual time; want none (woken by the hint)", now-at)
	}
	if n := b.hub.received.Load(); n == 0 {
		t.Error("the waiter's backend received no message on its pub/sub connection")
	}
}

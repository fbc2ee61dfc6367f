package outagetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// virtualClient is a client on a virtual clock over a backend whose calls wait through
// spi.Await (awaitBackend), as Reopen and GroupReopen run it: lost says the session was lost
// (EventSessionExpired), healedAt is the client time of the heal + 1 once the test sets it
// (the calls after it are logged, for a failure's report).
type virtualClient struct {
	clock    *simbatest.VirtualClock
	ab       *awaitBackend
	c        *simba.Client
	lost     atomic.Bool
	healedAt atomic.Int64
	// step moves the client's time by d and gives the client's calls over the real network a
	// moment to complete (the clock waits for what the client does, not for the network);
	// waitFor steps by d until cond holds, failing the test after two minutes; close closes
	// the client, moving its time meanwhile.
	step    func(d time.Duration)
	waitFor func(what string, cond func() bool, d time.Duration)
	close   func()
}

// newVirtualClient starts a client with ttl and owner on a virtual clock over backend.
func newVirtualClient(t testing.TB, backend spi.Backend, ttl time.Duration, owner string) *virtualClient {
	t.Helper()
	clock := simbatest.NewVirtualClock()
	v := &virtualClient{clock: clock, ab: &awaitBackend{Backend: backend, clock: clock}}
	c, err := simba.New(v.ab, simba.WithClock(clock), simba.WithTTL(ttl), simba.WithOwner(owner),
		simba.WithCallObserver(func(ci simba.CallInfo) {
			if h := v.healedAt.Load(); h != 0 { // the calls after the heal, for a failure's report
				t.Logf("%v after the heal: %s %s took %v, err %v", clock.Now()-time.Duration(h-1), ci.Op, ci.Name, ci.Took, ci.Err)
			}
		}),
		simba.WithListener(func(e simba.Event) {
			if e.Kind == simba.EventSessionExpired {
				v.lost.Store(true)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	v.c = c
	v.close = func() {
		done := make(chan error, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		go func() { done <- c.Close(ctx) }()
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("close: %v", err)
				}
				return
			case <-time.After(5 * time.Millisecond):
				clock.Advance(10 * time.Millisecond)
			}
		}
	}
	v.step = func(d time.Duration) {
		clock.Advance(d)
		time.Sleep(10 * time.Millisecond)
	}
	v.waitFor = func(what string, cond func() bool, d time.Duration) {
		t.Helper()
		guard := time.Now().Add(2 * time.Minute)
		for !cond() {
			if time.Now().After(guard) {
				t.Fatalf("%s: not within two minutes", what)
			}
			v.step(d)
		}
	}
	return v
}

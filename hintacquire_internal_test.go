package simba

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// hintingProbe is a probeBackend that forwards its backend's hints.
type hintingProbe struct {
	*probeBackend
	hinter spi.Hinter
}

func (p hintingProbe) Hints(ctx context.Context) (<-chan spi.Hint, error) { return p.hinter.Hints(ctx) }

// TestHintedAcquireRunsOnTheHintReader: the acquire that a Released hint's step asks for runs
// on the goroutine that read the hint (Client.stepHint), not on a call worker it would wake:
// one goroutine hand-off less between the holder's release and the waiter's grant.
func TestHintedAcquireRunsOnTheHintReader(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	be := srv.Backend()
	probe := hintingProbe{probeBackend: newProbe(be), hinter: be}
	// A TTL of a minute: no retry timer fires during the test, only the hint wakes the waiter.
	waiter, err := New(probe, WithTTL(time.Minute), WithOwner("waiter"))
	if err != nil {
		t.Fatal(err)
	}
	holder, err := New(srv.Backend(), WithTTL(time.Minute), WithOwner("holder"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range []*Client{waiter, holder} {
			if err := c.Close(context.Background()); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	})
	var mu sync.Mutex
	var reader uint64
	name := ""
	replies := 0 // the waiter's acquire replies whose step has begun
	h := func(p hop, n string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p == hopHint && n == name:
			reader = goid()
		case p == hopReply && n == name:
			replies++
		}
	}
	waiter.testHookHop.Store(&h)
	for round := range 3 {
		mu.Lock()
		name = fmt.Sprintf("job-%d", round) // no hint of an earlier round's Unlock is for it
		mu.Unlock()
		held, err := holder.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		before, _ := probe.calls()
		mu.Lock()
		seen := replies
		mu.Unlock()
		got := make(chan error, 1)
		go func() {
			w, err := waiter.Lock(ctx, name)
			if err == nil {
				err = w.Unlock(ctx)
			}
			got <- err
		}()
		// The waiter has tried once (HeldBy) and, that reply stepped, waits for the hint.
		for {
			mu.Lock()
			n := replies
			mu.Unlock()
			if n > seen {
				break
			}
			time.Sleep(time.Millisecond)
		}
		waiter.stepper.Lock() // held by the reply's step until it ends
		waiter.stepper.Unlock()
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		n, _ := probe.calls()
		acq, _ := probe.goroutines(n-1, -1)
		mu.Lock()
		r := reader
		mu.Unlock()
		if n-before != 2 {
			t.Fatalf("round %d: %d acquires by the waiter, want 2 (a HeldBy, then the grant the hint woke)", round, n-before)
		}
		if r == 0 || acq != r {
			t.Fatalf("round %d: the hinted acquire ran on goroutine %d, the hint was read on %d: want the reader's", round, acq, r)
		}
	}
}

package simba_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// A call observer sees every backend call once it returns: the session's open and keep-alives,
// an acquire that granted the lease with its token, one that found the lease held, and a
// failed call with its class.
func TestCallObserverSeesEveryCall(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	var mu sync.Mutex
	var calls []simba.CallInfo
	observe := simba.WithCallObserver(func(ci simba.CallInfo) {
		mu.Lock()
		calls = append(calls, ci)
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := simba.New(srv.Backend(), simba.WithTTL(3*time.Second), simba.WithOwner("a"), observe)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	bBackend := srv.Backend()
	b, err := simba.New(bBackend, simba.WithTTL(3*time.Second), simba.WithOwner("b"), observe)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)

	held, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "job"); !errors.Is(err, simba.ErrLockHeld) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	// The next call of b fails (whichever it is: the acquire below, or a keep-alive first).
	bBackend.FailNext(1, errors.New("boom"))
	_, _ = b.TryLock(ctx, "job2")
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	var opened, granted, busy, failed int
	for _, ci := range calls {
		if ci.Took < 0 {
			t.Errorf("negative duration: %+v", ci)
		}
		switch {
		case ci.Err != nil:
			failed++
			if ci.Class != spi.Classify(ci.Err) {
				t.Errorf("class %v of %v", ci.Class, ci.Err)
			}
		case ci.Op == "open-session":
			opened++
		case ci.Op == "acquire" && ci.Name == "job" && ci.Token == held.Token():
			granted++
		case ci.Op == "acquire" && ci.Name == "job" && ci.Token == 0:
			busy++
		}
	}
	if opened != 2 || granted != 1 || busy < 1 || failed != 1 {
		t.Fatalf("opened %d granted %d busy %d failed %d in %+v", opened, granted, busy, failed, calls)
	}
}

package fencehttp_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/fence/fencehttp"
)

// TestVerifyDoesNotHoldResource: while Verify checks a new token (the lock service slow or
// blackholed: a PostgreSQL verifier's read waited for minutes), the holder's writes with its
// admitted token go on. The verifier of token 6 here confirms it only once the holder's write
// with token 5 has run; the old guard verified while holding the resource, so that write
// waited behind the check, the verifier gave up at its watchdog (a bound on the test, not a
// measurement) and token 6 got 503. Fails on the old guard.
func TestVerifyDoesNotHoldResource(t *testing.T) {
	holderWrote := make(chan struct{})
	verifying := make(chan struct{})
	g := &fencehttp.Guard{Verify: func(ctx context.Context, _ string, token int64) error {
		if token != 6 {
			return nil
		}
		close(verifying)
		select {
		case <-holderWrote:
			return nil
		case <-time.After(20 * time.Second):
			return errors.New("the holder's write never ran while token 6 was being verified")
		}
	}}
	h := g.Wrap(noContent)
	if rec := serve(h, "/r", 5); rec.Code != http.StatusNoContent {
		t.Fatalf("token 5: %d %s", rec.Code, rec.Body)
	}
	six := make(chan int)
	go func() { six <- serve(h, "/r", 6).Code }()
	<-verifying
	done := make(chan int)
	go func() {
		code := serve(h, "/r", 5).Code
		close(holderWrote)
		done <- code
	}()
	if code := <-done; code != http.StatusNoContent {
		t.Fatalf("holder's token 5 during token 6's check: %d", code)
	}
	if code := <-six; code != http.StatusNoContent {
		t.Fatalf("token 6: %d, want 204", code)
	}
	if got, _ := g.Highest("/r"); got != 6 {
		t.Fatalf("highest %d, want 6", got)
	}
	// Once 6 is in, the old holder is stale, and so is a token 6 passed while it was checked.
	if rec := serve(h, "/r", 5); rec.Code != http.StatusConflict {
		t.Fatalf("token 5 after 6: %d, want 409", rec.Code)
	}
}

// TestOneCheckPerResourceAtATime: while one request's token is being checked, other new
// tokens of the resource wait for that check rather than asking the lock service too, so a
// flood of made-up tokens costs it one read at a time; the highest ends at the greatest
// token, and a token the winner passed is refused as stale. The guard that verified holding
// the resource had this by its lock; the first version that let the lock go asked once per
// request at the same time (this test failed on it: up to 20 checks at once). The 100 ms
// before the first check is released only gives the others time to arrive: a correct guard
// passes whatever they do.
func TestOneCheckPerResourceAtATime(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var inFlight, most, calls atomic.Int64
	g := &fencehttp.Guard{Verify: func(ctx context.Context, _ string, token int64) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		calls.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if token == 7 {
			entered <- struct{}{}
			<-release
		}
		return nil
	}}
	h := g.Wrap(noContent)
	codes := make(chan int, 21)
	go func() { codes <- serve(h, "/r", 7).Code }()
	<-entered
	for tok := int64(8); tok < 28; tok++ {
		go func() { codes <- serve(h, "/r", tok).Code }()
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	counts := map[int]int{}
	for range 21 {
		counts[<-codes]++
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d checks of one resource at once, want 1", m)
	}
	if got, _ := g.Highest("/r"); got != 27 {
		t.Errorf("highest %d, want 27", got)
	}
	if counts[http.StatusNoContent]+counts[http.StatusConflict] != 21 || counts[http.StatusNoContent] == 0 {
		t.Errorf("answers %v, want only 204 and 409", counts)
	}
	t.Logf("answers %v, %d checks", counts, calls.Load())
}

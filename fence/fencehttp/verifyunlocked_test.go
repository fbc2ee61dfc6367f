package fencehttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestVerifiedTokenPassedMeanwhileIsStale: a token verified while a higher one was admitted
// is refused as stale once the guard reads the highest again; the check is no licence to go
// below it. On the old guard, which verified holding the resource, token 8 waited for 7's
// check, gave up at its watchdog (a bound on the test, not a measurement) and 7 got 503.
func TestVerifiedTokenPassedMeanwhileIsStale(t *testing.T) {
	var h http.Handler
	g := &fencehttp.Guard{}
	g.Verify = func(ctx context.Context, _ string, token int64) error {
		if token == 7 { // a newer tenure's write lands while 7 is checked
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodPut, "/r", strings.NewReader("x"))
			fencehttp.SetToken(req, 8)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				return errors.New("token 8 refused")
			}
		}
		return nil
	}
	h = g.Wrap(noContent)
	if rec := serve(h, "/r", 5); rec.Code != http.StatusNoContent {
		t.Fatalf("token 5: %d", rec.Code)
	}
	rec := serve(h, "/r", 7)
	if rec.Code != http.StatusConflict || rec.Header().Get(fencehttp.HighestHeader) != "8" {
		t.Fatalf("token 7 verified while 8 landed: %d (highest %q), want 409 with 8", rec.Code, rec.Header().Get(fencehttp.HighestHeader))
	}
}

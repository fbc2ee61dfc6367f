package simba

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestTermContextMadeOnDemand: a term's context is made when it is first asked for (not with
// the term) and is cancelled with the first revocation's RevokedError as its cause whether it
// was asked for before the revocation or after; a second revocation changes nothing.
func TestTermContextMadeOnDemand(t *testing.T) {
	var deadline atomic.Int64
	deadline.Store(int64(time.Hour))
	for _, askFirst := range []bool{true, false} {
		term := newTerm("job", 7, "me", spi.SystemClock(), &deadline, time.Hour)
		if term.s.ctx != nil {
			t.Fatal("newTerm made the term's context")
		}
		var ctx context.Context
		if askFirst {
			ctx = term.Context()
			if ctx.Err() != nil {
				t.Fatalf("context of a live term: %v", ctx.Err())
			}
		}
		term.revoke(RevokedStopped)
		term.revoke(RevokedClosed)
		if !askFirst {
			ctx = term.Context()
		}
		select {
		case <-ctx.Done():
		default:
			t.Fatalf("asked for before the revocation %v: the context is not done", askFirst)
		}
		var re *RevokedError
		if cause := context.Cause(ctx); !errors.As(cause, &re) || *re != (RevokedError{Name: "job", Token: 7, Reason: RevokedStopped}) {
			t.Fatalf("asked for before the revocation %v: cause %v, want the first revocation's RevokedError", askFirst, cause)
		}
		if term.Context() != ctx {
			t.Fatal("a second Context returned another context")
		}
	}
}

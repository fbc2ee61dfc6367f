package sql

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestHeldLeaseWithNegativeTokenIsCorrupt: a lease row of a live session whose token another
// program set negative is not reported held with that token (the client read the mismatch as a
// takeover: "revoked: taken-over") but named Corrupt, with one warning, and the client revokes
// the term as corrupt-record, matching ErrCorruptRecord, while its other lock stays held. On
// the old code KeepAlive listed the lease in Held with token -5 and Corrupt was empty.
func TestHeldLeaseWithNegativeTokenIsCorrupt(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			b := migrated(t, d.dsn(t), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			ctx := testCtx(t)
			s := openSession(t, b, longTTL)
			bad, good := "negtok-"+unique(t), "negtok-"+unique(t)
			var tok int64
			for _, n := range []string{bad, good} {
				r, err := b.Acquire(ctx, s, n)
				if err != nil || r.Kind != spi.Granted {
					t.Fatalf("Acquire(%s) = %+v, %v", n, r, err)
				}
				tok = r.Token
			}
			exec(t, b, "UPDATE simba_lease SET token = -5 WHERE name = ?", bad)
			for range 2 {
				ka, err := b.KeepAlive(ctx, s, []string{bad, good}, nil)
				if err != nil || ka.Expired {
					t.Fatalf("KeepAlive = %+v, %v", ka, err)
				}
				if want := []spi.Held{{Name: good, Token: tok}}; !slices.Equal(ka.Held, want) || !slices.Equal(ka.Corrupt, []string{bad}) {
					t.Fatalf("KeepAlive held %v, corrupt %q; want held %v, corrupt [%s]", ka.Held, ka.Corrupt, want, bad)
				}
			}
			if n := strings.Count(logs.String(), "negative token"); n != 1 {
				t.Errorf("want one warning naming the lease, got %d; log:\n%s", n, logs.String())
			}
		})
	}
	t.Run("client", func(t *testing.T) {
		b := migrated(t, liteDSN(t))
		cl, err := simba.New(b, simba.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close(context.Background()) })
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lost, err := cl.Lock(lctx, "overwritten")
		if err != nil {
			t.Fatal(err)
		}
		kept, err := cl.Lock(lctx, "kept")
		if err != nil {
			t.Fatal(err)
		}
		exec(t, b, "UPDATE simba_lease SET token = -5 WHERE name = 'overwritten'")
		select {
		case <-lost.Term.Context().Done():
		case <-lctx.Done():
			t.Fatal("the overwritten lock's term did not end within 30 s")
		}
		var re *simba.RevokedError
		if cause := context.Cause(lost.Term.Context()); !errors.As(cause, &re) || re.Reason != simba.RevokedCorruptRecord || !errors.Is(cause, simba.ErrCorruptRecord) {
			t.Errorf("the overwritten lock's term ended with %v; want RevokedCorruptRecord, matching ErrCorruptRecord", cause)
		}
		if !kept.Term.IsValid() {
			t.Errorf("the other lock's term ended too: %v", context.Cause(kept.Term.Context()))
		}
		if err := kept.Unlock(lctx); err != nil {
			t.Errorf("Unlock of the other lock: %v", err)
		}
	})
}

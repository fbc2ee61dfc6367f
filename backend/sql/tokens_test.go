package sql

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// leaseToken reads a lease row's token with test-only SQL (found false: no row).
func leaseToken(t testing.TB, b *Backend, name string) (token int64, holder string, found bool) {
	t.Helper()
	snap, err := b.Inspect(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range snap.Leases {
		if l.Name == name {
			return l.Token, string(l.Holder), true
		}
	}
	return 0, "", false
}

// TestTokensSurviveADeletedRow: an operator deletes a lease row by hand (free, and held by a
// live session); the next grant's token is still greater than every token granted before, and
// at least the database clock in µs (a new tenure's token is max(last + 1, now_us)).
func TestTokensSurviveADeletedRow(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			s1, s2 := openSession(t, b, time.Minute), openSession(t, b, time.Minute)
			var last int64
			for i := range 4 {
				s := s1
				if i%2 == 1 {
					s = s2
				}
				nowMs, err := b.DatabaseNow(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tok := grant(t, b, s, "deleted")
				if tok <= last || tok < (nowMs-1)*1000 {
					t.Fatalf("grant %d: token %d, want > %d and >= the clock floor %d", i, tok, last, (nowMs-1)*1000)
				}
				last = tok
				if i%2 == 0 {
					if err := b.Release(ctx, s, "deleted", tok); err != nil {
						t.Fatal(err)
					}
				}
				// The operator deletes the row (free after a release, or held by s).
				exec(t, b, "DELETE FROM simba_lease WHERE name = ?", "deleted")
			}
			// A stored token ahead of the clock continues from it: last + 1.
			grant(t, b, s1, "ahead")
			nowMs, err := b.DatabaseNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ahead := nowMs*1000 + 3_600_000_000
			exec(t, b, "UPDATE simba_lease SET token = ?, session_id = NULL WHERE name = ?", ahead, "ahead")
			if tok := grant(t, b, s2, "ahead"); tok != ahead+1 {
				t.Fatalf("after a token ahead of the clock: %d, want %d", tok, ahead+1)
			}
		})
	}
}

// TestTokenOverflowAndCorruptTokens: a lease row whose token has no successor (the int64
// maximum) or is negative gives the named permanent error, ErrTokenOverflow or ErrCorruptToken,
// and nothing is written; a row at the maximum still answers HeldBy while its holder is live,
// and the holder's re-acquire keeps its token.
func TestTokenOverflowAndCorruptTokens(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			s1, s2 := openSession(t, b, time.Minute), openSession(t, b, time.Minute)
			cases := []struct {
				name   string
				token  int64
				holder spi.SessionID // "" free; s1 a live holder; expired: held by an expired session
				want   error
			}{
				{"max-free", math.MaxInt64, "", spi.ErrTokenOverflow},
				{"neg-free", -5, "", spi.ErrCorruptToken},
				{"neg-held", -1, s2, spi.ErrCorruptToken}, // even the holder's re-acquire
				{"min-free", math.MinInt64, "", spi.ErrCorruptToken},
			}
			for _, c := range cases {
				grant(t, b, s1, c.name)
				exec(t, b, "UPDATE simba_lease SET token = ?, session_id = NULL WHERE name = ?", c.token, c.name)
				if c.holder != "" {
					exec(t, b, "UPDATE simba_lease SET session_id = ? WHERE name = ?", string(c.holder), c.name)
				}
				r, err := b.Acquire(ctx, s2, c.name)
				if !errors.Is(err, c.want) || spi.Classify(err) != spi.Permanent {
					t.Fatalf("%s: %+v, %v; want a permanent %v", c.name, r, err, c.want)
				}
				tok, holder, _ := leaseToken(t, b, c.name)
				if tok != c.token || holder != string(c.holder) {
					t.Fatalf("%s: the refused acquire wrote: token %d holder %q", c.name, tok, holder)
				}
			}
			// At the maximum, held by a live session: HeldBy for others, the same token for it.
			grant(t, b, s1, "max-held")
			exec(t, b, "UPDATE simba_lease SET token = ? WHERE name = ?", int64(math.MaxInt64), "max-held")
			if r, err := b.Acquire(ctx, s2, "max-held"); err != nil || r.Kind != spi.HeldBy || r.Holder != s1 {
				t.Fatalf("max-held by another: %+v, %v; want HeldBy %s", r, err, s1)
			}
			if r, err := b.Acquire(ctx, s1, "max-held"); err != nil || r.Kind != spi.Granted || r.Token != math.MaxInt64 {
				t.Fatalf("max-held re-acquired by its holder: %+v, %v; want the same token", r, err)
			}
			// The holder expires: the next tenure has no token left.
			expire(t, b, s1)
			if r, err := b.Acquire(ctx, s2, "max-held"); !errors.Is(err, spi.ErrTokenOverflow) || spi.Classify(err) != spi.Permanent {
				t.Fatalf("max-held after its holder expired: %+v, %v; want a permanent ErrTokenOverflow", r, err)
			}
			// (Inspect shows it unreadable, not free: TestInspectForgedLeaseRows.)
			if tok, holder, _ := leaseToken(t, b, "max-held"); tok != math.MaxInt64 || holder == string(s2) {
				t.Fatalf("max-held: the refused takeover wrote: token %d holder %q", tok, holder)
			}
		})
	}
}

package sql

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/spi"
)

// TestInspectForgedLeaseRows: a lease row no client could have written is never shown free,
// nor its token verified, by Inspect and InspectLease; each comes with Unreadable saying why,
// as the Redis backend shows its forged hashes, and an acquire does what the reason says. Found
// by trial19, failing on the old code on every dialect: a row whose holder is not a client
// session id showed held for 87,600 h and fence.LeaseVerifier verified its token while the next
// acquire took the name; a holder session whose expiry lies years away showed 87,600 h left; a
// negative token showed free, while every acquire fails on it with ErrCorruptToken. A row at
// the int64 maximum, free or left by an expired holder, showed free too (mends5), while every
// acquire fails on it with ErrTokenOverflow; held by a live session it is shown held, as it is.
func TestInspectForgedLeaseRows(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			now, err := b.DatabaseNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			far, sound, gone := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "00112233445566778899aabbccddeeff"
			exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'forger', 1000, ?)", "intruder", now+1e12)
			exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'forger', 1000, ?)", far, now+1e12)
			exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'forger', 1000, ?)", sound, now+60000)
			exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'forger', 1000, ?)", gone, now-60000)
			cases := []struct {
				name, holder string
				token        int64
				unreadable   string // substring of Unreadable; "" for a sound row
				acquire      string // corrupt, overflow, granted or held
				shownFree    bool   // the record's holder (expired) is not shown
			}{
				{"foreign", "intruder", 7, `holder "intruder" is not a client session id`, "granted", false},
				{"far", far, 7, "beyond the longest session TTL (24h0m0s)", "held", false},
				{"negative", "", -5, "token -5 is negative", "corrupt", false},
				{"sound", sound, 7, "", "held", false},
				{"max-free", "", math.MaxInt64, "is the int64 maximum, which has no successor", "overflow", false},
				{"max-expired", gone, math.MaxInt64, "is the int64 maximum, which has no successor", "overflow", true},
				{"max-held", sound, math.MaxInt64, "", "held", false},
			}
			verify := fence.LeaseVerifier(b, nil)
			for _, tc := range cases {
				name := fmt.Sprintf("forged-%s.%s", unique(t), tc.name)
				if tc.holder == "" {
					exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, NULL, ?)", name, tc.token)
				} else {
					exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, ?, ?)", name, tc.holder, tc.token)
				}
				snap, err := b.Inspect(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var l spi.LeaseInfo
				for _, x := range snap.Leases {
					if x.Name == name {
						l = x
					}
				}
				one, found, err := b.InspectLease(ctx, name)
				switch {
				case err != nil || !found || one.Unreadable != l.Unreadable || one.Holder != l.Holder || one.Token != l.Token:
					t.Errorf("%s: InspectLease = %+v, %v, %v; Inspect listed %+v", tc.name, one, found, err, l)
				case tc.unreadable == "" && (l.Unreadable != "" || l.Holder != spi.SessionID(tc.holder) || l.Remaining <= 0):
					t.Errorf("%s: %+v, want held by %s with time left", tc.name, l, tc.holder)
				case tc.unreadable != "" && (!strings.Contains(l.Unreadable, tc.unreadable) || !l.RemainingUnknown || l.Remaining != 0 || (string(l.Holder) != tc.holder) != tc.shownFree):
					t.Errorf("%s: %+v, want Unreadable naming %q, holder %q, time left unknown", tc.name, l, tc.unreadable, tc.holder)
				}
				err = verify(ctx, name, tc.token)
				var refused *fence.UnverifiedTokenError
				switch {
				case tc.unreadable == "" && err != nil:
					t.Errorf("%s: the sound row's token refused: %v", tc.name, err)
				case tc.unreadable != "" && (!errors.As(err, &refused) || refused.Unreadable == ""):
					t.Errorf("%s: token %d of a forged row: %v, want an *UnverifiedTokenError naming the record unreadable", tc.name, tc.token, err)
				}
				r, err := b.Acquire(ctx, openSession(t, b, longTTL), name)
				var ok bool
				switch tc.acquire {
				case "corrupt":
					ok = errors.Is(err, spi.ErrCorruptToken)
				case "overflow":
					ok = errors.Is(err, spi.ErrTokenOverflow)
				case "granted":
					ok = err == nil && r.Kind == spi.Granted && r.Token > tc.token
				case "held":
					ok = err == nil && r.Kind == spi.HeldBy && r.Holder == spi.SessionID(tc.holder)
				}
				if !ok {
					t.Errorf("%s: Acquire = %+v, %v; want %s", tc.name, r, err, tc.acquire)
				}
			}
		})
	}
}

package sql

import (
	"math"
	"testing"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// FuzzLeaseInfo: the decoder of an inspected lease row (Inspect, InspectLease: simba status,
// the status page, fence.LeaseVerifier) shows a row as held only as a client could have
// written it (a client session id, a token some tenure has, a time left within the longest
// TTL), as free only when an acquire could take it, and otherwise as unreadable with no time
// left, whatever the row holds. testdata/fuzz/FuzzLeaseInfo holds the inputs CI replays.
func FuzzLeaseInfo(f *testing.F) {
	for _, c := range []struct {
		holder, owner    string
		token, remaining int64
	}{
		{"", "", 0, 0}, {"", "", 7, -5}, {"0123456789abcdef0123456789abcdef", "o", 7, 1000},
		{"0123456789abcdef0123456789abcdef", "o", 0, 1000}, {"0123456789abcdef0123456789abcdef", "o", -1, 1000},
		{"0123456789abcdef0123456789abcdef", "o", math.MaxInt64, 1000}, {"", "", math.MaxInt64, 0},
		{"intruder", "x", 7, 1e12}, {"0123456789abcdef0123456789abcdef", "o", 7, 1e12},
		{"0123456789abcdef0123456789abcdef", "o", 7, math.MinInt64}, {"", "", math.MinInt64, math.MaxInt64},
	} {
		f.Add(c.holder, c.owner, c.token, c.remaining)
	}
	f.Fuzz(func(t *testing.T, holder, owner string, token, remainingMs int64) {
		l := leaseInfo("n", holder, owner, token, remainingMs)
		switch {
		case l.Unreadable != "":
			if !l.RemainingUnknown || l.Remaining != 0 {
				t.Fatalf("%+v: unreadable with a time left", l)
			}
		case l.Holder != "":
			if !wire.IsClientSessionID(string(l.Holder)) || l.Token <= 0 || l.Remaining <= 0 || l.Remaining > spi.MaxSessionTTL || l.RemainingUnknown {
				t.Fatalf("leaseInfo(%q, %q, %d, %d) = %+v: shown held as no client holds a lease", holder, owner, token, remainingMs, l)
			}
		default:
			if l.Token < 0 || l.Token == math.MaxInt64 || l.Remaining != 0 {
				t.Fatalf("leaseInfo(%q, %q, %d, %d) = %+v: shown free while no acquire can take it", holder, owner, token, remainingMs, l)
			}
		}
	})
}

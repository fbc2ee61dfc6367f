package tck

import (
	"fmt"
	"testing"

	"github.com/simba-go/simba/spi"
)

// boundedSizes are the leases and groups of the small and the large session boundedCalls
// compares; both are large enough that on a partitioned server (Redis Cluster) each reaches
// every shard, so that only a call that grows with them makes more round trips for the large.
var boundedSizes = [2]struct{ leases, groups int }{{16, 4}, {64, 16}}

// boundedTries is how many times boundedCalls measures before it reports a call unbounded:
// background work of the backend (housekeeping, a hint subscription) counted in a measure of
// the large session can make it look larger once, never every time.
const boundedTries = 3

// boundedCalls checks the SPI's "bounded round trips" with Factory.RoundTrips: a KeepAlive
// that asks about every lease a session holds and every group it is a member of, and a
// CloseSession of that session, make no more round trips for a session with 64 leases and 16
// groups than for one with 16 and 4 (a backend that reads or renews each lease or group in a
// round trip of its own fails).
func (h *harness) boundedCalls(t *testing.T) {
	b := h.backend(t)
	type session struct {
		id            spi.SessionID
		names, groups []string
	}
	var measured [2]struct{ keepAlive, close int64 }
	for try := 1; ; try++ {
		var sessions [2]session
		for i, size := range boundedSizes {
			s := session{id: h.open(t, b, h.long)}
			for range size.leases {
				n := h.name("bounded")
				h.grant(t, b, s.id, n)
				s.names = append(s.names, n)
			}
			for range size.groups {
				g := h.name("boundedg")
				h.join(t, b, s.id, g)
				s.groups = append(s.groups, g)
			}
			sessions[i] = s
		}
		for i, s := range sessions {
			before := h.f.RoundTrips(b.Backend)
			if ka := h.keepAlive(t, b, s.id, s.names, s.groups); ka.Expired || len(ka.Held) < len(s.names) {
				t.Fatalf("KeepAlive of a session with %d leases = expired %v, %d held", len(s.names), ka.Expired, len(ka.Held))
			}
			mid := h.f.RoundTrips(b.Backend)
			if err := b.CloseSession(ctx(t), s.id); err != nil {
				t.Fatalf("CloseSession: %v", err)
			}
			measured[i].keepAlive, measured[i].close = mid-before, h.f.RoundTrips(b.Backend)-mid
		}
		small, large := measured[0], measured[1]
		describe := func(i int) string {
			return fmt.Sprintf("%d leases and %d groups: KeepAlive %d, CloseSession %d", boundedSizes[i].leases, boundedSizes[i].groups, measured[i].keepAlive, measured[i].close)
		}
		if small.keepAlive <= 0 {
			t.Fatalf("tck: Factory.RoundTrips counted %d round trips for a KeepAlive: it counts nothing", small.keepAlive)
		}
		if large.keepAlive <= small.keepAlive && large.close <= small.close {
			t.Logf("round trips: %s; %s", describe(0), describe(1))
			return
		}
		if try == boundedTries {
			t.Fatalf("round trips grow with the session's leases and groups (%s; %s), in each of %d tries", describe(0), describe(1), boundedTries)
		}
	}
}

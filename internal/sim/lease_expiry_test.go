package sim

import (
	"slices"
	"testing"
)

// leaseExpirySeeds are the seeds on which the lease-expiry model (simbatest.WithLeaseExpiry,
// Redis) caught the engine giving a term its session's deadline (chaos finding
// 2026-12-03-redis-seed-32405): a keep-alive sent before an acquire, and so not naming the
// lease, ran at the backend after the grant and extended the term past the lease's own
// expiry; the next keep-alives failed and the lease lapsed while the term was believed valid.
// All of seeds 1..2000 that failed on it (check named), and the three of 1..10,000 it failed
// through a handover.
var leaseExpirySeeds = []struct {
	seed  uint64
	check string
}{
	{91, CheckTermLease}, {140, CheckTermLease}, {175, CheckOneValid}, {209, CheckOneValid},
	{337, CheckOneValid}, {486, CheckTermLease}, {568, CheckTermLease}, {1016, CheckTermLease},
	{1032, CheckTermLease}, {1073, CheckTermLease}, {1121, CheckTermLease}, {1154, CheckOneValid},
	{1276, CheckTermLease}, {1341, CheckTermLease}, {1554, CheckOneValid}, {1727, CheckTermLease},
	{1774, CheckOneValid}, {1822, CheckTermLease}, {1828, CheckTermLease},
	{2796, CheckHandover}, {2929, CheckHandover}, {9610, CheckHandover},
}

// TestLeaseExpirySeeds replays the seeds that found the bug of finding 32405: each runs the
// lease-expiry model and passes because the engine bounds a term's deadline by its grant's own
// time left (rule 6); without the rule each fails with the check listed.
func TestLeaseExpirySeeds(t *testing.T) {
	s := New(DefaultShape())
	for _, tc := range leaseExpirySeeds {
		res := s.Run(tc.seed, 0)
		if !res.Config.Faults.LeaseExpiry {
			t.Errorf("seed %d no longer runs the lease-expiry model: the seed list is stale", tc.seed)
			continue
		}
		if res.Violation != nil {
			t.Errorf("seed %d (found by %s): %v (replay: %s)", tc.seed, tc.check, res.Violation, ReplayCommand(tc.seed))
		}
	}
}

// TestLeaseExpirySeedsConfig: the listed seeds are distinct, and the lease-expiry model runs
// on about half the seeds.
func TestLeaseExpirySeedsConfig(t *testing.T) {
	var seen []uint64
	for _, tc := range leaseExpirySeeds {
		if slices.Contains(seen, tc.seed) {
			t.Fatalf("seed %d listed twice", tc.seed)
		}
		seen = append(seen, tc.seed)
	}
	n := 0
	for seed := uint64(1); seed <= 2000; seed++ {
		if Derive(seed, DefaultShape(), 0, newRand(seed)).Faults.LeaseExpiry {
			n++
		}
	}
	if n < 800 || n > 1200 {
		t.Fatalf("%d of seeds 1..2000 run the lease-expiry model, want about half", n)
	}
}

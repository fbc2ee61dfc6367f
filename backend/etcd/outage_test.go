package etcd

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/internal/testenv"
)

// TestSessionRidesOutShortOutage takes the server away for 1.2 s (every connection reset, new
// ones refused: an etcd restart, a proxy's failover) from a client of TTL 3 s, 0.95 s after a
// renewal, four times: its session has a second left after each outage, and must survive them
// all. With gRPC's default reconnect backoff (a redial at once, then after 1 s ±20%, then
// 1.6 s later) the client was back only about 2.6 s after the outage began, its session
// lapsed (its deadline 2.92 s after the renewal was sent) and nearly every round lost it.
func TestSessionRidesOutShortOutage(t *testing.T) {
	testenv.Short(t, "four outages of a second and more")
	p := faultproxy.StartTest(t, testenv.Etcd(t)[0])
	b := openBackend(t, "etcd://"+p.Addr()+testPrefix(t))
	lost := outagetest.Run(t, b, []*faultproxy.Proxy{p}, outagetest.Config{
		TTL:    3 * time.Second,
		Outage: 1200 * time.Millisecond,
		Phase:  950 * time.Millisecond,
		Rounds: 4,
	})
	if lost > 0 {
		t.Errorf("the session was lost in %d of 4 outages of 1.2 s at TTL 3 s; want none", lost)
	}
}

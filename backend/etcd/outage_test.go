package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/internal/testenv"
)

// TestSessionRidesOutShortOutage takes the server away from a client, four times per case,
// each outage ending with at least one renewal interval (TTL/3) of the session's time left;
// the session must survive them all. Refused: every connection reset, new ones refused (an
// etcd restart, a proxy's failover). Blackhole: the connections go silent for good and new
// ones are swallowed (a failover or a partition that sends no reset).
//
// Each outage is timed from when the renewal before it was sent (outagetest.Run; a round the
// test ran more than outagetest.Slack late is run again). Refused at TTL 3 s: 1.2 s, 0.95 s
// after a renewal, leaving about a second. With gRPC's
// default reconnect backoff (a redial at once, then after 1 s ±20%, then 1.6 s later) the
// client was back only about 2.6 s after the outage began, its session lapsed (its deadline
// 2.92 s after the renewal was sent) and nearly every round lost it. At TTL 2 s (deadline
// 1.93 s after the renewal) 0.6 s from 0.6 s, just before the next renewal is due, and at
// 1 s (deadline 0.94 s) 0.25 s from 0.3 s: 390 ms left, of which gRPC's redial may take up to
// 300 ms (ReconnectMaxDelay and its jitter), leaving the keep-alive itself 90 ms. That is the
// margin this case has; an outage leaving exactly TTL/3 (333 ms) would leave the keep-alive
// 33 ms, which a loaded machine under -race does not always give (see "Outages" in the
// package doc).
//
// Blackholed, every round lost the session at every TTL: gRPC took the silent connection for
// a live one until its keep-alive ping failed (10 s + 2 s), and so did the keep-alives sent on
// it; now a keep-alive that timed out closes it (connWatch.dropSilent).
func TestSessionRidesOutShortOutage(t *testing.T) {
	testenv.Short(t, "four outages per TTL")
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		cfg  outagetest.Config
	}{
		{"Refused/TTL3s", outagetest.Config{TTL: 3 * time.Second, Outage: 1200 * ms, Phase: 950 * ms, Rounds: 4}},
		{"Refused/TTL2s", outagetest.Config{TTL: 2 * time.Second, Outage: 600 * ms, Phase: 600 * ms, Rounds: 4}},
		{"Refused/TTL1s", outagetest.Config{TTL: 1 * time.Second, Outage: 250 * ms, Phase: 300 * ms, Rounds: 4}},
		{"Blackhole/TTL3s", outagetest.Config{TTL: 3 * time.Second, Outage: 1200 * ms, Phase: 650 * ms, Rounds: 4, Blackhole: true}},
		{"Blackhole/TTL2s", outagetest.Config{TTL: 2 * time.Second, Outage: 600 * ms, Phase: 600 * ms, Rounds: 4, Blackhole: true}},
		{"Blackhole/TTL1s", outagetest.Config{TTL: 1 * time.Second, Outage: 250 * ms, Phase: 300 * ms, Rounds: 4, Blackhole: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := faultproxy.StartTest(t, testenv.Etcd(t)[0])
			b := openBackend(t, "etcd://"+p.Addr()+testPrefix(t))
			if lost := outagetest.Run(t, b, []*faultproxy.Proxy{p}, c.cfg); lost > 0 {
				t.Errorf("the session was lost in %d of %d outages of %v at TTL %v; want none", lost, c.cfg.Rounds, c.cfg.Outage, c.cfg.TTL)
			}
		})
	}
}

// TestSessionRidesOutStalls: the client's connection stalled both ways (the bytes held back,
// then delivered, as from a server or a client busy that long) for longer than half a
// keep-alive's time but less than all of it is kept: the keep-alive's reply comes late but in
// time, and a fresh connection would have been stalled as well. A keep-alive still unanswered
// halfway to its deadline closed every connection that had waited since (TTL/6 after it was
// sent, 333 ms at TTL 2 s), so each of these stalls cost a reconnect and the calls in flight;
// a client renewing at TTL 1 s through stalls of 100-400 ms every 1-3 s reconnected 5 times a
// minute. Now only a session call that timed out closes silent connections (timedOut).
func TestSessionRidesOutStalls(t *testing.T) {
	p := faultproxy.StartTest(t, testenv.Etcd(t)[0])
	b := openBackend(t, "etcd://"+p.Addr()+testPrefix(t))
	s, err := b.OpenSession(context.Background(), "stalled", 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The engine's keep-alive at TTL 2 s: a deadline of 667 ms; stalls of 450 ms.
	accepted, expired := outagetest.KeepAliveStalls(t, b, s.ID, p, 4, 450*time.Millisecond, 2*time.Second/3)
	if accepted != 0 || expired != 0 {
		t.Fatalf("four stalls of 450 ms, each under a keep-alive with a deadline of 667 ms: %d new connections, %d keep-alives found the session expired; want none", accepted, expired)
	}
}

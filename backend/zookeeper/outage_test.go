package zookeeper

import (
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/internal/testenv"
)

// outageConfig: a client of TTL 3 s (renewals every second) loses its server for 1.2 s, 0.95 s
// after a renewal was sent, four times: about one second of its session is left after each
// outage (0.77 s before its deadline; a round the test itself ran more than
// outagetest.Slack late is run again, not counted).
// go-zookeeper alone redials a single server 1 s after losing it and 1 s after each failed
// round, so it was back 2 s after the outage began, past the session's deadline (2.92 s after
// the renewal was sent), and every round lost the session.
var outageConfig = outagetest.Config{
	TTL:    3 * time.Second,
	Outage: 1200 * time.Millisecond,
	Phase:  950 * time.Millisecond,
	Rounds: 4,
}

// TestSessionRidesOutShortOutage: the session survives outages of the server that leave it
// time to renew, four per case (two at TTL 6 s). Refused: connections reset, new ones refused (see pacer).
// Blackhole: the open connection goes silent for good (no bytes, no reset) and new ones are
// taken and never answered until the outage ends, as the etcd test's cases (a failover or a
// partition that sends no reset); each leaves at least a renewal interval of the session.
//
// Blackholed, every round lost the session: the keep-alive's request waited on the silent
// connection for the tap's reply timeout (2/3 of the session timeout), and so did the
// retries queued behind it, until the session's deadline had passed; now a keep-alive that
// timed out closes the connection if it has read nothing since (tap.dropIfTimedOut), and
// go-zookeeper redials at once.
func TestSessionRidesOutShortOutage(t *testing.T) {
	testenv.Short(t, "four outages of a second and more per case")
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		cfg  outagetest.Config
	}{
		{"Refused/TTL3s", outageConfig},
		{"Blackhole/TTL3s", outagetest.Config{TTL: 3 * time.Second, Outage: 1200 * ms, Phase: 650 * ms, Rounds: 4, Blackhole: true}},
		{"Blackhole/TTL3s/300ms", outagetest.Config{TTL: 3 * time.Second, Outage: 300 * ms, Phase: 900 * ms, Rounds: 4, Blackhole: true}},
		{"Blackhole/TTL6s", outagetest.Config{TTL: 6 * time.Second, Outage: 2400 * ms, Phase: 1300 * ms, Rounds: 2, Blackhole: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := faultproxy.StartTest(t, testenv.ZooKeeper(t)[0])
			b := openBackend(t, "zk://"+p.Addr())
			if lost := outagetest.Run(t, b, []*faultproxy.Proxy{p}, c.cfg); lost > 0 {
				t.Errorf("the session was lost in %d of %d outages of %v at TTL %v; want none", lost, c.cfg.Rounds, c.cfg.Outage, c.cfg.TTL)
			}
		})
	}
}

// TestEnsembleSessionRidesOutShortOutage: the same with an ensemble that the client loses
// whole (a partition of the client): every round of the three servers fails, and the pacer's
// backoff applies between rounds as for one server. The ensemble is the test's own (three
// servers on spare ports): CI does not start the shared one on 2191-2193.
func TestEnsembleSessionRidesOutShortOutage(t *testing.T) {
	testenv.Short(t, "four outages of a second and more")
	var ps []*faultproxy.Proxy
	var addrs []string
	for _, a := range startPrivateEnsemble(t, 3).addrs() {
		p := faultproxy.StartTest(t, a)
		ps = append(ps, p)
		addrs = append(addrs, p.Addr())
	}
	b := openBackend(t, "zk://"+strings.Join(addrs, ","))
	if lost := outagetest.Run(t, b, ps, outageConfig); lost > 0 {
		t.Errorf("the session was lost in %d of %d outages of the whole ensemble of %v at TTL %v; want none", lost, outageConfig.Rounds, outageConfig.Outage, outageConfig.TTL)
	}
}

// TestPacerDelay: 50 ms before the first redial, doubling up to a twelfth of the session
// timeout, within [50 ms, 1 s].
func TestPacerDelay(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		timeout time.Duration
		want    []time.Duration
	}{
		{3 * time.Second, []time.Duration{50 * ms, 100 * ms, 200 * ms, 250 * ms, 250 * ms}},
		{60 * time.Second, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{400 * ms, []time.Duration{50 * ms, 50 * ms}},
	} {
		for rounds, want := range c.want {
			if got := pacerDelay(rounds, c.timeout); got != want {
				t.Errorf("pacerDelay(%d, %v) = %v, want %v", rounds, c.timeout, got, want)
			}
		}
	}
}

// newTestPacer returns a pacer of servers with a session timeout of timeout; *stop and *giveUp
// are its stop and giveUp answers.
func newTestPacer(t *testing.T, timeout time.Duration, stop, giveUp *bool, servers ...string) *pacer {
	t.Helper()
	p := &pacer{
		timeout: func() time.Duration { return timeout },
		stop:    func() bool { return *stop },
		giveUp:  func() bool { return *giveUp },
	}
	if err := p.Init(servers); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPacerRounds: with one server every Next ends a round; the pacer keeps go-zookeeper's
// round end (its ErrNoServer flush and one-second sleep) to itself while the session may still
// be saved, counting the rounds, and hands it back when the session ended (go-zookeeper must
// see its Close), on a TLS failure, or once the outage outlasted the session timeout.
func TestPacerRounds(t *testing.T) {
	var stop, giveUp bool
	p := newTestPacer(t, time.Hour, &stop, &giveUp, "127.0.0.1:1")
	p.Next()
	p.Connected()
	p.connectedAt = time.Now().Add(-time.Minute) // a connection that lasted
	for i := range 3 {
		if srv, retry := p.Next(); srv != "127.0.0.1:1" || retry {
			t.Fatalf("Next #%d = %q, %v; want the server, not a round's end", i, srv, retry)
		}
	}
	if p.rounds != 3 {
		t.Fatalf("rounds = %d after three failed rounds, want 3", p.rounds)
	}
	stop = true
	if _, retry := p.Next(); !retry {
		t.Fatal("Next once the session ended: not a round's end (go-zookeeper would never see its Close)")
	}
	stop, giveUp = false, true
	if _, retry := p.Next(); !retry {
		t.Fatal("Next after a TLS failure: not a round's end")
	}
	giveUp = false
	q := newTestPacer(t, time.Millisecond, &stop, &giveUp, "127.0.0.1:1")
	q.Next()
	time.Sleep(2 * time.Millisecond)
	if _, retry := q.Next(); !retry {
		t.Fatal("Next after an outage longer than the session timeout: not a round's end")
	}
}

// TestPacerResets: a disconnection after a connection that lasted starts over (the shortest
// wait); one after a connection dropped at once keeps the backoff growing, so a server that
// takes connections and drops them is not redialled in a loop.
func TestPacerResets(t *testing.T) {
	var stop, giveUp bool
	p := newTestPacer(t, time.Hour, &stop, &giveUp, "127.0.0.1:1")
	p.Next()
	p.Connected()
	p.connectedAt = time.Now().Add(-time.Minute)
	p.Next()
	p.Next()
	p.Connected() // just now: the next disconnection keeps the count
	p.Next()
	if p.rounds != 3 {
		t.Fatalf("rounds = %d after a connection dropped at once, want 3 (still growing)", p.rounds)
	}
	p.Connected()
	p.connectedAt = time.Now().Add(-time.Minute)
	p.Next()
	if p.rounds != 1 {
		t.Fatalf("rounds = %d after a connection that lasted, want 1 (started over)", p.rounds)
	}
}

// TestPacerEnsemble: with three servers a round is three dials; only its end waits.
func TestPacerEnsemble(t *testing.T) {
	var stop, giveUp bool
	p := newTestPacer(t, time.Hour, &stop, &giveUp, "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
	p.Next()
	p.Connected()
	p.connectedAt = time.Now().Add(-time.Minute)
	seen := map[string]int{}
	for range 6 {
		srv, retry := p.Next()
		if retry {
			t.Fatal("Next ended a round while the session may be saved")
		}
		seen[srv]++
	}
	if len(seen) != 3 || seen["127.0.0.1:1"] != 2 || seen["127.0.0.1:2"] != 2 || seen["127.0.0.1:3"] != 2 {
		t.Fatalf("servers dialled in two rounds: %v, want each twice", seen)
	}
	if p.rounds != 2 {
		t.Fatalf("rounds = %d after six dials of three servers, want 2", p.rounds)
	}
}

// TestSessionRidesOutStalls: a session's connection stalled both ways (the bytes held back,
// then delivered, as from a server or a client busy that long) for longer than half a
// keep-alive's time but less than all of it is kept: the keep-alive's reply comes late but in
// time, and a fresh connection would have been stalled as well. A keep-alive still unanswered
// halfway to its deadline closed the connection (TTL/6 after it was sent, 333 ms at TTL 2 s),
// so each of these stalls cost a reconnect and the requests in flight; a client renewing at
// TTL 1 s through stalls of 100-400 ms every 1-3 s reconnected 10 times a minute. Now only a
// keep-alive that timed out closes a silent connection (tap.dropIfTimedOut).
func TestSessionRidesOutStalls(t *testing.T) {
	p := faultproxy.StartTest(t, testenv.ZooKeeper(t)[0])
	b := openBackend(t, "zk://"+p.Addr())
	sid := openSession(t, b, 6*time.Second)
	// The engine's keep-alive at TTL 2 s: a deadline of 667 ms; stalls of 450 ms.
	accepted, expired := outagetest.KeepAliveStalls(t, b, sid, p, 4, 450*time.Millisecond, 2*time.Second/3)
	if accepted != 0 || expired != 0 {
		t.Fatalf("four stalls of 450 ms, each under a keep-alive with a deadline of 667 ms: %d new connections, %d keep-alives found the session expired; want none", accepted, expired)
	}
}

package zookeeper

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Reconnect pacing of a session's connection (see pacer). reconnectBaseDelay is the most the
// pacer waits after the second round of failed dials; it doubles with each further round up
// to the session timeout / reconnectCapDivisor, never more than reconnectMaxDelay
// (go-zookeeper's own wait).
const (
	reconnectBaseDelay  = 50 * time.Millisecond
	reconnectMaxDelay   = time.Second
	reconnectCapDivisor = 12
	// reconnectResetAfter is how long a connection must have lasted for the next disconnection
	// to start the pacing over (an immediate redial): a server that takes connections and drops
	// them at once is redialled at a growing pace, not in a loop.
	reconnectResetAfter = time.Second
	// reconnectPoll is how often a wait checks whether the session has ended.
	reconnectPoll = 20 * time.Millisecond
)

// pacer is the zk.HostProvider of a session's connection: go-zookeeper's DNSHostProvider (the
// servers resolved once, in random order) with another pace between rounds of failed dials.
//
// go-zookeeper's connect loop asks its host provider for the next server and, when the
// provider says a round is complete (every server tried since the last successful connection,
// which with a single server is every time), fails the requests queued meanwhile with
// ErrNoServer and sleeps one second before dialling. So after a single server's connection is
// lost the first redial comes one second later, the next after two: a server that refused
// connections for 1.5 s was reached again 2 s after the outage began, when a session of TTL
// 3 s had often lapsed (its last renewal up to one renewal interval, TTL/3, earlier), although
// the server still had it.
//
// The pacer answers "round complete" only when go-zookeeper must stop or may pace itself, and
// otherwise waits itself: reconnectBaseDelay before redialling a connection that lasted, then
// twice as long after each failed round up to the session timeout / reconnectCapDivisor
// (250 ms for 3 s) and at most go-zookeeper's second, each wait drawn in [d/2, d] (so that
// the clients of a restarted server do not all redial at the same instant; nor, at once, does
// a session whose server moved it to another connection: that is how a session is taken over
// with its credentials, see killSession in the tests). It hands the round's end back to
// go-zookeeper (its one-second wait, and queued requests failed with ErrNoServer) after a
// round that took a second or more (dials or handshakes that hung: the wait costs little
// then, and the requests queued meanwhile have waited long enough), once the outage has
// lasted a session timeout, since the session has expired at the server by then, on a TLS
// failure, and once stop reports that the session has ended or its connection is being closed
// (go-zookeeper then sees its Close; it checks for it only between rounds). Otherwise requests
// queued while the pacer waits stay queued until the connection is back, or their callers'
// contexts end.
type pacer struct {
	dns     zk.DNSHostProvider
	timeout func() time.Duration // the session timeout
	stop    func() bool          // the session has ended: go-zookeeper must see its Close
	// abandoned: Close dropped the session; the dialer hands out stand-ins (see standIn)
	abandoned func() bool
	giveUp    func() bool // retrying fast is pointless (a TLS failure)

	mu          sync.Mutex
	rounds      int       // failed rounds since the pacing last started over
	down        time.Time // when the current disconnection began (zero while connected)
	roundStart  time.Time // when the current round of dials began
	connectedAt time.Time // when the last connection was established
}

var _ zk.HostProvider = (*pacer)(nil)

// Init resolves the servers (go-zookeeper's DNSHostProvider).
func (p *pacer) Init(servers []string) error { return p.dns.Init(servers) }

// Len is the number of resolved servers.
func (p *pacer) Len() int { return p.dns.Len() }

// Connected records a successful connection (after the session handshake).
func (p *pacer) Connected() {
	p.dns.Connected()
	p.mu.Lock()
	p.down, p.connectedAt = time.Time{}, time.Now()
	p.mu.Unlock()
}

// Next returns the next server to dial, waiting first as the type's doc says when a round of
// servers has failed; retryStart set hands go-zookeeper the round's end (its ErrNoServer
// flush and one-second wait, or its Close).
func (p *pacer) Next() (server string, retryStart bool) {
	server, retryStart = p.dns.Next()
	now := time.Now()
	p.mu.Lock()
	if p.down.IsZero() {
		p.down, p.roundStart = now, now
		if !p.connectedAt.IsZero() && now.Sub(p.connectedAt) >= reconnectResetAfter {
			p.rounds = 0
		}
	}
	if !retryStart {
		p.mu.Unlock()
		return server, false
	}
	if p.standIn() {
		// Dialled at once: the tap's dialer hands go-zookeeper a stand-in, which its Close
		// ends at once (see standIn), where its wait between rounds could cost Close a second.
		p.mu.Unlock()
		return server, false
	}
	timeout := p.timeout()
	long := now.Sub(p.roundStart) >= reconnectMaxDelay
	p.roundStart = now
	if p.stop() || p.giveUp() || long || now.Sub(p.down) >= timeout {
		p.mu.Unlock()
		return server, true
	}
	d := pacerDelay(p.rounds, timeout)
	p.rounds++
	p.mu.Unlock()
	d = d/2 + rand.N(d/2+1) + time.Duration(testPacerHold.Load())
	for end := now.Add(d); ; {
		if p.stop() {
			return server, !p.standIn() // abandoned: see above
		}
		left := time.Until(end)
		if left <= 0 {
			return server, false
		}
		time.Sleep(min(left, reconnectPoll))
	}
}

// testPacerHold, in nanoseconds, lengthens every wait of every pacer: a test that needs the
// moment between a lost connection and its redial (go-zookeeper's own second) holds it open.
var testPacerHold atomic.Int64

// pacerDelay is the most the pacer waits before the round after rounds failed ones, for a
// session timeout: reconnectBaseDelay before the first, then doubling up to the cap.
func pacerDelay(rounds int, timeout time.Duration) time.Duration {
	limit := min(max(timeout/reconnectCapDivisor, reconnectBaseDelay), reconnectMaxDelay)
	d := reconnectBaseDelay
	for i := 0; i < rounds && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// newPacer returns the pacer of session s's connection, asking for a session timeout of ttl.
func (s *session) newPacer(ttl time.Duration) *pacer {
	return &pacer{
		timeout: func() time.Duration {
			if d := s.tap.sessionTimeout(); d > 0 {
				return d
			}
			return ttl
		},
		stop:      s.stopReconnecting,
		abandoned: s.tap.abandoned.Load,
		giveUp:    func() bool { return s.tap.tlsFailed.Load() != nil },
	}
}

// stopReconnecting reports whether s's connection is closed or about to be: s ended (closed,
// abandoned or expired), or connect failed (it then closes the connection).
func (s *session) stopReconnecting() bool {
	select {
	case <-s.setUp:
		if s.id == "" { // set by connect before it returns the session
			return true
		}
	default:
	}
	return s.ended.Load() || s.tap.gone.Load() || s.tap.closing.Load() || s.tap.abandoned.Load()
}

// standIn reports whether the session's connection is abandoned, so that the dialer hands out
// stand-ins (see standIn): dialled at once.
func (p *pacer) standIn() bool { return p.abandoned != nil && p.abandoned() }

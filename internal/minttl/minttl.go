// Package minttl keeps the shortest session TTL a backend was asked for, which paces the
// probes its hint connections use to find a link gone silent (ZooKeeper's watcher,
// PostgreSQL's listener, Redis's pub/sub connections), and says how they are paced, the same
// on every backend: a probe (a ping) goes out once the connection has read nothing for Probe
// of the TTL, and the connection is given up when that probe has had Reply without an answer.
//
// A hint connection that stays on a silent link (a blackhole) hears no release, and each
// hand-over to the backend's waiters waits for their one-TTL retry, so the link must be given
// up well within a TTL; but giving up a link that is only slow costs a reconnect (a new
// connection, LISTEN, SUBSCRIBE or watches again, and a lease read per waited lease). Through
// a proxy that stalled the link both ways for 100-400 ms every 1-3 s (about 26 stalls a
// minute), a reply allowance of two probe intervals (333 ms at TTL 1 s) reconnected
// ZooKeeper's watcher 11 times a minute and Redis's pub/sub connection 15 (PostgreSQL's
// listener, which pinged after 167 ms of quiet and gave the ping 333 ms, none), and with
// both CPUs busy as well 9, 18 and 2 times; at TTL 2 s (667 ms) ZooKeeper's 1-2 times. A
// server busy that long (a checkpoint's fsync, a snapshot, a fork for persistence) or a
// loaded client is ordinary, so the allowance is at least MinReply: with it, none of the
// three reconnected at TTL 1 s without load, and at TTL 1 s with both CPUs busy Redis's 2
// times in 4 minutes, the others never. A silent link is still given up within half a TTL from
// TTL 1.5 s up, and at TTL 1 s within two thirds of it (ZooKeeper's watcher, which looks at
// its pings, within five sixths).
package minttl

import (
	"sync/atomic"
	"time"
)

const (
	// ProbeDivisor divides the TTL into the probe interval: a sixth, the interval at which a
	// session's own keep-alive (every TTL/3) would find a silent connection.
	ProbeDivisor = 6
	// MinProbe bounds the probe interval below (a TTL of a few hundred milliseconds or less).
	MinProbe = 50 * time.Millisecond
	// MinReply is the least time a probe is given for its answer: a stall of the server or of
	// a loaded client shorter than that never costs a reconnect (see the package doc).
	MinReply = 500 * time.Millisecond
)

// Probe returns the probe interval for the shortest TTL ttl (positive): ttl/ProbeDivisor, at
// least MinProbe.
func Probe(ttl time.Duration) time.Duration { return max(ttl/ProbeDivisor, MinProbe) }

// Reply returns how long a probe sent by a connection probed every probe may go unanswered
// before the connection is given up as silent: two probe intervals, at least MinReply. A
// connection that pings only after probe of silence is given up after probe + Reply(probe)
// of silence.
func Reply(probe time.Duration) time.Duration { return max(2*probe, MinReply) }

// Shortest is the shortest TTL noted so far; its zero value has none. It is safe for
// concurrent use.
type Shortest struct{ ns atomic.Int64 }

// Note records ttl if it is shorter than every TTL noted before (non-positive TTLs are ignored).
func (s *Shortest) Note(ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	for old := s.ns.Load(); old == 0 || int64(ttl) < old; old = s.ns.Load() {
		if s.ns.CompareAndSwap(old, int64(ttl)) {
			return
		}
	}
}

// Get returns the shortest TTL noted, or 0 if none was.
func (s *Shortest) Get() time.Duration { return time.Duration(s.ns.Load()) }

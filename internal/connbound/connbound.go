// Package connbound is how long the etcd and ZooKeeper backends let one connection attempt go
// unanswered (a dial, and for ZooKeeper its session handshake) before giving it up and trying
// again, so that a server that swallows connections (a dropped SYN, a blackhole, a hung
// server) does not hold a short-lived session on it.
package connbound

import "time"

const (
	// Divisor: an attempt is given up after the session's timeout (its TTL) / 6, so that a
	// session that has a renewal interval (TTL/3) left when its connection is lost still has
	// half of it after one swallowed attempt, for the next attempt, the keep-alive and its
	// reply.
	Divisor = 6
	// Min is the least time an attempt is given: a TCP, TLS and session handshake within a
	// region takes milliseconds; 100 ms leaves room for a loaded machine and a longer link,
	// and the bound doubles after rounds of attempts given up, so a slower network still
	// connects, a few attempts later.
	Min = 100 * time.Millisecond
)

// Bound is how long an attempt may go unanswered: timeout / Divisor, at least Min, doubled
// for each whole round of the servers (cut attempts given up in a row, of servers) in which
// every attempt was given up, at most limit. With no timeout (0) it is limit.
func Bound(timeout, limit time.Duration, cut, servers int) time.Duration {
	d := limit
	if timeout > 0 {
		d = min(limit, max(timeout/Divisor, Min))
	}
	for i := 0; i < cut/max(servers, 1) && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

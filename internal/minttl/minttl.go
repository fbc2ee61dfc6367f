// Package minttl keeps the shortest session TTL a backend was asked for, which paces the
// probes its hint connections use to find a link gone silent (ZooKeeper's watcher,
// PostgreSQL's listener, Redis's pub/sub connections).
package minttl

import (
	"sync/atomic"
	"time"
)

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

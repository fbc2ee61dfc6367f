// Package spareconn keeps one connection of a bounded pool free for keep-alives: the calls
// that are not keep-alives take a slot each, for their whole run, before they ask the pool
// for a connection, and there are one fewer slots than connections. The SQL (PostgreSQL, and
// MySQL/MariaDB on a user's bounded pool) and Redis backends use it, each deciding which of
// its calls are keep-alives.
package spareconn

import "context"

// Slots are the slots of a pool's calls other than keep-alives. The zero Slots (a pool that is
// unbounded or has one connection) takes none.
type Slots struct {
	c chan struct{}
}

// New returns the slots of a pool of size connections: size-1 of them, none below 2.
func New(size int) Slots {
	if size < 2 {
		return Slots{}
	}
	return Slots{c: make(chan struct{}, size-1)}
}

// Enter takes a slot, waiting for one or for ctx's end; it reports whether it took one (not
// for the zero Slots), to be let go with Leave once the call has ended.
func (s Slots) Enter(ctx context.Context) (bool, error) {
	if s.c == nil {
		return false, nil
	}
	select {
	case s.c <- struct{}{}:
		return true, nil
	default:
	}
	select {
	case s.c <- struct{}{}:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Leave lets go of a slot Enter took (took: what Enter reported).
func (s Slots) Leave(took bool) {
	if took {
		<-s.c
	}
}

// Cap is the number of slots (0 for the zero Slots).
func (s Slots) Cap() int { return cap(s.c) }

// InUse is the number of slots taken now.
func (s Slots) InUse() int { return len(s.c) }

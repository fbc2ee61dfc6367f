package sql

import (
	"context"
	"sync"
	"time"

	"github.com/simba-go/simba/spi"
)

// waker delivers wake-up hints to the Hints subscribers of a backend whose server pushes none
// (SQLite: sqlitewake.go; MySQL/MariaDB: mysqlwake.go). The Backend tells it what its sessions
// open, acquire, renew, release and close; each waker uses what it needs.
type waker interface {
	// opened notes a session's TTL.
	opened(ttl time.Duration)
	// acquired notes an acquire's reply: a held name is waited for, a granted one is held.
	acquired(sid, name string, r spi.Acquire)
	// keptAlive notes a keep-alive's reply: the leases the session still holds.
	keptAlive(sid string, ka spi.KeepAlive)
	// released notes a release by session sid (whether or not it held the lease).
	released(sid, name string)
	// closed notes that session sid was closed: it holds nothing.
	closed(sid string)
	// hints subscribes to the waker (Backend.Hints has checked that the backend is open).
	hints(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) (<-chan spi.Hint, error)
	// local is the hub of the waker's subscribers.
	local() *hintHub
}

// releasedLocally wakes the backend's own waiters at once after a release by this backend:
// two clients of one process sharing a backend hand a lease over without waiting for the
// server's hint (PostgreSQL), the change-counter poll (SQLite) or the named lock (MySQL). A
// waiter that gets the same hint again from the server pays at most one acquire for it (the
// engine damps hints that prove false).
func (b *Backend) releasedLocally(sid, name string) {
	var hub *hintHub
	switch {
	case b.waker != nil:
		b.waker.released(sid, name)
		hub = b.waker.local()
	default:
		if l, ok := b.d.(interface{ localHub() *hintHub }); ok {
			hub = l.localHub()
		}
	}
	if hub != nil {
		hub.deliver(spi.Hint{Kind: spi.Released, Name: name})
	}
}

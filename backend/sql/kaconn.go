package sql

import (
	"context"

	"github.com/simba-go/simba/internal/spareconn"
)

// keepAliveConn keeps one connection of a bounded pool free for the sessions' keep-alives: the
// backend's other calls (acquires, releases, withdrawals, joins …) run at most size-1 at a
// time, each holding a slot for its whole run, and wait for a slot before they ask the pool
// for a connection; a keep-alive (urgentCtx) takes no slot. So a keep-alive never queues at
// the pool behind the other calls: a client keeps up to 32 calls in flight
// (simba.MaxCallsInFlight), a pgxpool has max(4, CPUs) connections by default, and a
// keep-alive asked the pool for a connection behind up to 28 acquires of its own client, and
// behind those of every other client on the same backend value, each waiting for its turn at
// the server (row locks of contended leases included), past its timeout.
//
// The PostgreSQL backend keeps one on its pgxpool, the MySQL/MariaDB backend on a user's pool
// with SetMaxOpenConns (NewMySQL), where its waker's connections take slots too (mysqlWaker.conn).
// The slots count this backend's calls only: a pool the application shares with the backend
// (NewPostgres, NewMySQL) can still have its connections taken by the application's own
// queries, and two backends made on one pool each keep a slot of their own, not one between
// them.
type keepAliveConn struct {
	slots spareconn.Slots
	free  func() // lets a slot go
}

// newKeepAliveConn returns the keepAliveConn of a pool of size connections (0: unbounded).
func newKeepAliveConn(size int) keepAliveConn {
	slots := spareconn.New(size)
	return keepAliveConn{slots: slots, free: func() { slots.Leave(true) }}
}

// enter takes a slot for a call with ctx (none for a keep-alive, urgentCtx), waiting for one
// or for ctx's end, and returns its leave.
func (s keepAliveConn) enter(ctx context.Context) (func(), error) {
	if urgent(ctx) {
		return noLeave, nil
	}
	took, err := s.slots.Enter(ctx)
	switch {
	case err != nil:
		return nil, err
	case took:
		return s.free, nil
	}
	return noLeave, nil
}

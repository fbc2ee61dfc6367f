package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/spareconn"
)

// keepAliveConn keeps one connection of the go-redis pool free for the sessions' keep-alives:
// the backend's other calls (acquires, releases, withdrawals, joins, leaves, members, closes,
// inspections) run at most PoolSize-1 at a time, each holding a slot for its whole run, and
// wait for a slot before they ask the pool for a connection; a keep-alive takes none. So a
// keep-alive never queues at the pool behind the other calls: a client keeps up to 32 calls in
// flight (simba.MaxCallsInFlight), a go-redis pool has 10 connections per CPU by default, and
// every client made on the same backend value shares that pool (a trial: a client taking a
// group of 65,536 partitions beside another leaving one lost its session at a TTL of 15 s,
// and an idle client on the same backend lost its own twice at 3 s).
//
// The slots count this backend's calls only: a client passed to New that the application uses
// too can still have its connections taken by the application's own commands, and two backends
// made on one go-redis client each keep a connection of their own, not one between them. On a
// Cluster client PoolSize bounds each node's pool, and the slots bound the calls to all nodes
// together. A client type New does not know (neither *redis.Client nor *redis.ClusterClient)
// has no slots: nothing is kept.
type keepAliveConn struct {
	slots spareconn.Slots
}

// newKeepAliveConn returns the keepAliveConn of c's pool.
func newKeepAliveConn(c goredis.UniversalClient) keepAliveConn {
	var size int
	switch c := c.(type) {
	case *goredis.Client:
		size = c.Options().PoolSize
	case *goredis.ClusterClient:
		size = c.Options().PoolSize
	}
	return keepAliveConn{slots: spareconn.New(size)}
}

// enter takes a slot for a call of op (none for a keep-alive), waiting for one or for ctx's
// end; it reports whether it took one, to be let go (leave) once the call has ended.
func (k keepAliveConn) enter(ctx context.Context, op string) (bool, error) {
	if op == opKeepAlive {
		return false, nil
	}
	return k.slots.Enter(ctx)
}

// leave lets go of a slot enter took (took: what enter reported).
func (k keepAliveConn) leave(took bool) { k.slots.Leave(took) }

// opKeepAlive is the op bounded names a keep-alive by.
const opKeepAlive = "keep-alive"

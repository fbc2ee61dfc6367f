package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// lastDial records the last failed dial of a client Open made (a go-redis hook), so that a
// call that runs out of time while go-redis retries its dials says why (fail): go-redis
// returns the context's "deadline exceeded" then, and a server that refuses connections read
// as one that is slow. A dial that succeeds clears it.
type lastDial struct{ err atomic.Pointer[error] }

// watch adds the hook to c, and to each node of a Cluster client as it is made.
func (l *lastDial) watch(c goredis.UniversalClient) {
	switch c := c.(type) {
	case *goredis.ClusterClient:
		c.OnNewNode(func(n *goredis.Client) { n.AddHook(l) })
	case *goredis.Client:
		c.AddHook(l)
	}
}

// explain returns err with the last failed dial added when err is the deadline of a call
// that may have spent it dialling, and a dial failed since the last one that succeeded.
func (l *lastDial) explain(err error) error {
	if l == nil {
		return err
	}
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		return err
	}
	if last := l.err.Load(); last != nil {
		return fmt.Errorf("%w (last connection attempt: %v)", err, *last)
	}
	return err
}

// DialHook implements goredis.Hook.
func (l *lastDial) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			l.err.Store(&err)
		} else {
			l.err.Store(nil)
		}
		return c, err
	}
}

// ProcessHook implements goredis.Hook.
func (l *lastDial) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

// ProcessPipelineHook implements goredis.Hook.
func (l *lastDial) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

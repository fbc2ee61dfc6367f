package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/internal/testenv"
)

// TestSharedRedisStartsNoGoroutines: the helpers' shared clients (sharedRedis), which no test
// closes, leave no goroutine running once they have done their work (a SCAN of the standalone
// server and of each Cluster master). go-redis's maintenance notifications, on by default,
// left a circuit-breaker cleanup goroutine per never-dialed Cluster node client (the
// replicas), which the goleak check of hintModes reported when one of its subtests was the
// first to delete its keys.
func TestSharedRedisStartsNoGoroutines(t *testing.T) {
	testenv.Redis(t)
	testenv.RedisCluster(t)
	leaks := goleak.IgnoreCurrent()
	s, c := newSharedRedis()
	if s == nil || c == nil {
		t.Fatalf("the shared servers do not answer: standalone %v, Cluster %v", s != nil, c != nil)
	}
	defer c.Close()
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Scan(ctx, 0, tagPattern("rb.none."), 10).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		return m.Scan(ctx, 0, tagPattern("rb.none."), 10).Err()
	}); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, leaks)
}

// TestOpenedBackendsCloseTheirGoroutines: a backend that Open made (its client is Simba's own,
// with go-redis's default options: maintenance notifications in "auto" mode) leaves no
// goroutine running after Close, on the standalone server and on the Cluster, whose node
// clients for the replicas are made but never dialed.
func TestOpenedBackendsCloseTheirGoroutines(t *testing.T) {
	for _, dsn := range []string{
		"redis://" + testenv.Redis(t),
		"redis+cluster://" + strings.Join(testenv.RedisCluster(t), ","),
	} {
		t.Run(strings.SplitN(dsn, ":", 2)[0], func(t *testing.T) {
			leaks := goleak.IgnoreCurrent()
			b, err := Open(dsn, WithLogger(discard))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := b.OpenSession(ctx, "goroutines", 2*time.Second)
			if err != nil {
				b.Close()
				t.Fatal(err)
			}
			if err := b.CloseSession(ctx, s.ID); err != nil {
				t.Error(err)
			}
			if err := b.Close(); err != nil {
				t.Error(err)
			}
			goleak.VerifyNone(t, leaks)
		})
	}
}

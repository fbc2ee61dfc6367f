package simba_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// holdKeepAlive holds one keep-alive (the next one after hold is set) until release is
// closed, so that an acquire sent after it runs at the server first.
type holdKeepAlive struct {
	spi.Backend
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (h *holdKeepAlive) KeepAlive(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	if h.hold.CompareAndSwap(true, false) {
		close(h.entered)
		<-h.release
	}
	return h.Backend.KeepAlive(ctx, sid, names, groups)
}

// TestTermNotPastRedisLease is the regression test of chaos finding 2026-12-03 (seed 32405):
// Redis copies the session's expiry into a lease at grant time and moves it only with
// keep-alives that name the lease, so a keep-alive sent before the acquire and applied after
// it renews the session but not the lease. The term must never be valid past the lease's own
// expiry (engine rule 6): before the fix it outlived the lease by most of a renewal interval
// (919 ms at a 3 s TTL), and a new holder could be granted the lease while the old term was
// still valid. Once a later keep-alive has renewed the lease with the session, the term's
// deadline is the session's again.
func TestTermNotPastRedisLease(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		addr := testenv.Redis(t)
		rc := goredis.NewClient(&goredis.Options{Addr: addr})
		defer rc.Close()
		checkTermNotPastLease(t, "redis://"+addr, rc)
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := testenv.RedisCluster(t)
		rc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
		defer rc.Close()
		checkTermNotPastLease(t, "redis+cluster://"+strings.Join(addrs, ","), rc)
	})
}

func checkTermNotPastLease(t *testing.T, dsn string, rc goredis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, err := redis.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	h := &holdKeepAlive{Backend: be, entered: make(chan struct{}), release: make(chan struct{})}
	const ttl = 3 * time.Second
	c, err := simba.New(h, simba.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	name := "grant-bound-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	// Open the session with a first lock, then hold the next keep-alive and take the lease
	// while it is held: the acquire runs at the server before that keep-alive.
	warm, err := c.Lock(ctx, name+"-warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h.hold.Store(true)
	select {
	case <-h.entered:
	case <-ctx.Done():
		t.Fatal("no keep-alive within 30 s")
	}
	held, err := c.Lock(ctx, name)
	if err != nil {
		close(h.release)
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	granted := held.Term.Remaining()
	close(h.release)

	// leaseLeft reads the lease's own expiry against Redis's clock. A lease with no expiry is
	// not held: a release, or the close of the session, deletes the field. The client does
	// that only once the term has ended, which on a starved machine can come within the
	// sampling (seen: "HGET simba:lease:{…} expires: redis: nil"); such a lease has no time
	// left, so a term still valid then fails the check below, as it should.
	key := wire.LeaseKey(name)
	leaseLeft := func() time.Duration {
		exp, err := rc.HGet(ctx, key, wire.LeaseFieldExpires).Int64()
		if errors.Is(err, goredis.Nil) {
			return 0
		}
		if err != nil {
			t.Fatalf("HGET %s expires: %v", key, err)
		}
		now, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(exp-now.UnixMilli()) * time.Millisecond
	}
	// Sample through the held keep-alive's reply and the renewals after it until one has
	// confirmed the term (a few more samples after that; 2 × TTL at most): at no time may the
	// term be valid past the lease. Redis reports whole milliseconds, hence the 2 ms of slack.
	confirmed, after := false, 0
	for end := time.Now().Add(2 * ttl); time.Now().Before(end) && after < 5; time.Sleep(20 * time.Millisecond) {
		// start is taken before the term is read: the time from here to the server's reading
		// of its clock bounds how much of the term was used up before the lease was read, so
		// a pause between the two readings cannot count against the term.
		start := time.Now()
		term := held.Term.Remaining()
		lease := leaseLeft()
		if over := term - time.Since(start) - lease; over > 2*time.Millisecond {
			t.Fatalf("the term has %v left but its lease expires in %v at the server: %v over (rule 6)", term, lease, over)
		}
		if term > granted {
			confirmed = true // a keep-alive that named the lease renewed it, and the term with it
		}
		if confirmed {
			after++
		}
	}
	if !confirmed {
		t.Fatalf("the term's deadline never moved past its grant's (%v left when granted): no keep-alive confirmed it", granted)
	}
}

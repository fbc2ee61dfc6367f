package redis

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/spi"
)

// TestOpenSessionAtARefusingServerDialsOnce: at an address where nothing listens (every dial
// refused), OpenSession on a client made from a DSN fails with a retryable error naming the
// refused connection after the durability check's attempts, one dial each. go-redis's pool dialled 5 times, 100 ms apart, per attempt, and OpenSession
// went on to the session's script after the durability check could not reach the server: 60
// dials, about 5 s, so that a client (simba lock at a Redis that is down) heard of it at the
// call's timeout (5 s by default).
func TestOpenSessionAtARefusingServerDialsOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg, err := ParseDSN("redis://" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	var d net.Dialer
	cfg.Options.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	c := goredis.NewClient(cfg.Options)
	defer c.Close()
	b, err := New(c, WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = b.OpenSession(ctx, "refused", 15*time.Second)
	if ctx.Err() != nil || !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("OpenSession at a refusing address: %v (context: %v), want a retryable error naming the refused connection", err, ctx.Err())
	}
	// The durability check, a pipeline, is all OpenSession sends: go-redis dials for it twice
	// per attempt (8 dials at max_retries 3, where a PING makes 4), one dial each time.
	if n, most := dials.Load(), int32(2*(c.Options().MaxRetries+1)); n > most {
		t.Errorf("OpenSession dialled %d times, want at most %d (the durability check's attempts, one dial each)", n, most)
	}
}

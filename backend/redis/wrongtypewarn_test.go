package redis

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestForeignLeaseKeyWarnedOnce: a lease key written over with another type, which every
// keep-alive naming it meets (an election whose key stays so retries its acquire once per
// renewal interval, and the client names the lease in the next keep-alive), is warned about
// once, then at DEBUG until a minute has passed; another such key gets a warning of its own.
// Before, every keep-alive logged the WARN line: one a second at TTL 3 s, for as long as the
// key stayed (trial23: 60 WARN lines in a minute from one election on a string key).
func TestForeignLeaseKeyWarnedOnce(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: testenv.PrivateRedis(t)})
	t.Cleanup(func() { c.Close() })
	var logs testenv.LogBuffer
	b := newBackend(t, c, WithLogger(logs.Logger()))
	sid := open(t, b, privTestTTL)
	ctx := context.Background()
	for _, n := range []string{"stringly", "listy"} {
		if err := c.Set(ctx, wire.LeaseKey(n), "hello", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := b.Acquire(ctx, sid, "sound"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	warns := func() int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "holds another type than a hash") {
				n++
			}
		}
		return n
	}
	for i := range 5 {
		ka, err := b.KeepAlive(ctx, sid, []string{"stringly", "sound"}, nil)
		if err != nil || len(ka.Held) != 1 || ka.Held[0].Name != "sound" {
			t.Fatalf("keep-alive %d = %+v, %v; want the session renewed, holding sound alone", i, ka, err)
		}
	}
	if n := warns(); n != 1 {
		t.Errorf("5 keep-alives meeting one string lease key logged %d WARN lines; want 1 (the rest at DEBUG):\n%s", n, logs.String())
	}
	if _, err := b.KeepAlive(ctx, sid, []string{"stringly", "listy", "sound"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := warns(); n != 2 {
		t.Errorf("a second lease key of another type: %d WARN lines in all; want 2:\n%s", n, logs.String())
	}
}

package redis

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
)

// TestRedisKeepAliveAfterSilentOutage: once a link that went silent (a blackhole: the open
// connections get no byte, close or reset, for good) heals, the first keep-alive succeeds. A
// call that ran out of time during the outage closes the pool's connections that have been
// silent since it began, so the keep-alive after the heal goes out on a new connection.
// Before, go-redis handed each of the silenced pooled connections out again, each failing
// one call at its timeout: the keep-alive's round trip and its retries alike, so that a client
// lost its session to every outage, even one of 200 ms at a TTL of 3 s (an outside trial: 12
// of 12; PostgreSQL 1 of 12, ZooKeeper none).
func TestRedisKeepAliveAfterSilentOutage(t *testing.T) {
	noLeaks(t)
	direct := testenv.Redis(t)
	p := faultproxy.StartTest(t, direct)
	b, err := Open("redis://"+p.Addr(), WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	keepAliveAfterSilentOutage(t, b, p)
}

// TestNewWithDropSilentKeepAliveAfterSilentOutage is TestRedisKeepAliveAfterSilentOutage on a
// client of the user's own, passed to New WithDropSilent. Without it such a client was left as
// it was, and lost its session to every blackhole of 0.2 to 1.2 s at TTL 3 s after a burst of
// calls (an outside trial: 10 of 10).
func TestNewWithDropSilentKeepAliveAfterSilentOutage(t *testing.T) {
	noLeaks(t)
	p := faultproxy.StartTest(t, testenv.Redis(t))
	c := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	b, err := New(c, WithLogger(discard), WithDropSilent())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	keepAliveAfterSilentOutage(t, b, p)
}

// TestNewWithoutDropSilentWarns: a backend on a client of the user's own passed to New without
// WithDropSilent cannot drop the connections a silent link left, and says so once, when a call
// first runs out of time. Nothing said so before.
func TestNewWithoutDropSilentWarns(t *testing.T) {
	noLeaks(t)
	p := faultproxy.StartTest(t, testenv.Redis(t))
	c := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	var logs strings.Builder
	var mu sync.Mutex
	b, err := New(c, WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := b.OpenSession(ctx, "undropped", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.Set(faultproxy.Fault{Blackhole: true})
	kctx, kcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.KeepAlive(kctx, s.ID, nil, nil)
	kcancel()
	p.Heal()
	if err == nil {
		t.Fatal("a keep-alive through a blackhole succeeded")
	}
	mu.Lock()
	got := logs.String()
	mu.Unlock()
	if !strings.Contains(got, "pass WithDropSilent to New") {
		t.Fatalf("the backend logged %q; want a warning naming WithDropSilent", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// keepAliveAfterSilentOutage fills b's pool with several connections (calls at once), takes
// p's link silent, runs a keep-alive that runs out of time in it, heals the link and checks
// that the next keep-alive succeeds with every lease held.
func keepAliveAfterSilentOutage(t *testing.T, b *Backend, p *faultproxy.Proxy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := b.OpenSession(ctx, "silentpool", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Calls at once: the pool keeps a connection for each.
	prefix := "silentpool-" + time.Now().Format("150405.000000")
	dropKeys(t, prefix)
	names := make([]string, 8)
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("%s.%d", prefix, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Acquire(ctx, s.ID, names[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(p.Conns()); n < 3 {
		t.Fatalf("the pool holds %d connections; the test needs several", n)
	}
	p.Set(faultproxy.Fault{Blackhole: true})
	kctx, kcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	ka, err := b.KeepAlive(kctx, s.ID, names, nil)
	kcancel()
	if err == nil {
		t.Fatal("a keep-alive through a blackhole succeeded")
	}
	p.Heal()
	kctx, kcancel = context.WithTimeout(ctx, 5*time.Second)
	ka, err = b.KeepAlive(kctx, s.ID, names, nil)
	kcancel()
	if err != nil {
		t.Fatalf("the first keep-alive after the link healed: %v", err)
	}
	if ka.Expired || len(ka.Held) != len(names) {
		t.Fatalf("keep-alive after the heal: expired %v, %d of %d leases held", ka.Expired, len(ka.Held), len(names))
	}
	if err := b.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
}

package redis

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// stallConns makes the connections of a go-redis client hold every write that carries marker
// until released: the call that wrote it keeps its pooled connection meanwhile.
type stallConns struct {
	marker  []byte
	release chan struct{}
	stalled atomic.Int64 // writes held now
}

func (s *stallConns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return stallConn{Conn: c, s: s}, nil
}

type stallConn struct {
	net.Conn
	s *stallConns
}

func (c stallConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.s.marker) {
		c.s.stalled.Add(1)
		<-c.s.release
		c.s.stalled.Add(-1)
	}
	return c.Conn.Write(p)
}

// TestKeepAliveGetsAConnection: on a go-redis pool of 3 connections whose other calls are all
// stuck (six acquires whose writes the connections hold), a keep-alive still gets a
// connection and is answered: the backend's other calls take at most 2 of them
// (keepAliveConn). Before, the acquires took all 3 and the keep-alive waited for the pool
// until go-redis gave up ("connection pool timeout"): a session lost behind its own client's
// backlog, or a neighbour's on the same backend value (a client keeps 32 calls in flight, a
// go-redis pool has 10 connections per CPU).
//
// Counted, not timed: the keep-alive is sent once the pool holds every connection it will
// give the acquires (3 before, the 2 slots now).
func TestKeepAliveGetsAConnection(t *testing.T) {
	const size = 3
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	name := "kastuck" + hex.EncodeToString(rnd[:])
	st := &stallConns{marker: []byte(name), release: make(chan struct{})}
	c := goredis.NewClient(&goredis.Options{Addr: testenv.Redis(t), PoolSize: size, Dialer: st.dial, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(t, "Redis", err.Error())
	}
	t.Cleanup(func() { // the lease's keys on the shared server (sessions are closed below)
		plain := standaloneClient(t)
		_ = plain.Unlink(context.Background(), wire.LeaseKey(name), wire.WaitersKey(name), wire.WaitingKey(name)).Err()
	})
	b := newBackend(t, c, WithLogger(discard))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := b.OpenSession(ctx, "first", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var waiters []spi.SessionID
	for range 6 {
		s, err := b.OpenSession(ctx, "waiter", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		waiters = append(waiters, s.ID)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	released := false
	release := func() {
		if !released {
			released = true
			close(st.release)
		}
	}
	defer release() // before the acquires are waited for
	for _, sid := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Acquire(ctx, sid, name); err != nil {
				t.Errorf("acquire: %v", err)
			}
		}()
	}
	slots := b.spare.slots
	saturated := func() bool {
		n := st.stalled.Load()
		return n == size || (slots.Cap() > 0 && slots.InUse() == slots.Cap() && n == int64(slots.Cap()))
	}
	for end := time.Now().Add(time.Minute); !saturated(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the acquires did not get stuck in a minute (%d stuck)", st.stalled.Load())
		}
	}
	kctx, kcancel := context.WithTimeout(ctx, time.Minute)
	defer kcancel()
	ka, err := b.KeepAlive(kctx, first.ID, nil, nil)
	if err != nil {
		t.Fatalf("keep-alive with 6 acquires stuck on %d of the pool's %d connections: %v", st.stalled.Load(), size, err)
	}
	if ka.Expired {
		t.Fatal("the session expired")
	}
	t.Logf("keep-alive answered with 6 acquires stuck on %d of %d connections", st.stalled.Load(), size)
	release()
	wg.Wait()
	for _, sid := range append(waiters, first.ID) {
		if err := b.CloseSession(ctx, sid); err != nil {
			t.Error(err)
		}
	}
}

package zookeeper

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/spi"
)

// TestConnector: NewFromConnector makes every session's *zk.Conn with the caller's own
// go-zookeeper set-up, called again for the session that follows an expiry; a connection that
// bypasses the backend's dialer or event callback is refused with a permanent
// ErrInvalidOption instead of running without the guarantees they give.
func TestConnector(t *testing.T) {
	cfg, err := ParseDSN(serverDSN(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	good := func(timeout time.Duration, dial zk.Dialer, cb zk.EventCallback) (*zk.Conn, error) {
		calls.Add(1)
		c, _, err := zk.Connect(cfg.Servers, timeout, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}),
			zk.WithMaxBufferSize(1<<20), zk.WithDialer(dial), zk.WithEventCallback(cb))
		return c, err
	}
	b, err := NewFromConnector(cfg, good)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	rec := newRecorder()
	rb := recorded{Backend: b, r: rec}
	sess, err := rb.OpenSession(testCtx(t), "o", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tok := mustGrant(t, b, sess.ID, "via-connector")
	if err := b.Release(testCtx(t), sess.ID, "via-connector", tok); err != nil {
		t.Fatal(err)
	}
	rec.expire(t, sess.ID)
	if r, err := b.Acquire(testCtx(t), sess.ID, "via-connector"); err != nil || r.Kind != spi.SessionExpired {
		t.Fatalf("Acquire on the expired session = %+v, %v", r, err)
	}
	next := openSession(t, b, 5*time.Second)
	if next == sess.ID || calls.Load() != 2 {
		t.Fatalf("after the expiry: session %s (was %s), %d Connector calls; want a new session from a second call", next, sess.ID, calls.Load())
	}
	if next := mustGrant(t, b, next, "via-connector"); next <= tok {
		t.Fatalf("token %d, want > %d", next, tok)
	}

	for name, connect := range map[string]Connector{
		"own dialer": func(timeout time.Duration, dial zk.Dialer, cb zk.EventCallback) (*zk.Conn, error) {
			c, _, err := zk.Connect(cfg.Servers, timeout, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}),
				zk.WithDialer(dial), zk.WithEventCallback(cb), zk.WithDialer(net.DialTimeout))
			return c, err
		},
		"no callback": func(timeout time.Duration, dial zk.Dialer, cb zk.EventCallback) (*zk.Conn, error) {
			c, _, err := zk.Connect(cfg.Servers, timeout, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}), zk.WithDialer(dial))
			return c, err
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := NewFromConnector(cfg, connect)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, err = b.OpenSession(testCtx(t), "o", 5*time.Second)
			if !errors.Is(err, spi.ErrInvalidOption) || spi.Classify(err) != spi.Permanent {
				t.Fatalf("OpenSession = %v; want a permanent ErrInvalidOption", err)
			}
		})
	}
	if _, err := NewFromConnector(cfg, nil); !errors.Is(err, spi.ErrInvalidOption) {
		t.Fatalf("NewFromConnector(nil) = %v", err)
	}
}

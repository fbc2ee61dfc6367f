package zookeeper

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// factory describes the shared test server (127.0.0.1:2181 by default) to the TCK, every
// backend under one fresh chroot.
func factory(t *testing.T) tck.Factory {
	dsn := serverDSN(t, "")
	probe := openBackend(t, dsn)
	lo, hi := ttlBounds(t, probe)
	rec := newRecorder()
	return tck.Factory{
		NewBackend: func(t testing.TB, _ tck.BackendConfig) spi.Backend {
			b, err := New(dsn) // the backend keeps its own monotonic clock: cfg.Clock is client time
			if err != nil {
				t.Fatal(err)
			}
			return recorded{Backend: b, r: rec}
		},
		ExpireSession: rec.expire,
		// Not the server's minimum (400 ms here): a session's remaining time runs from the
		// send of its connect request, and on a loaded machine the open alone can take
		// 400 ms ("OpenSession(400ms) remaining = 0s, want in (0, 400ms]"). A second leaves
		// room for a loaded CI machine, as on Redis.
		MinTTL: max(lo, time.Second),
		MaxTTL: hi,
		// ZooKeeper checks expiries on its ticks (half the minimum session timeout by
		// default) and the client learns of it when it reconnects.
		ExpiryLag:  lo,
		Hints:      true,
		GroupHints: true,
		// A backend through a fault proxy of its own, on the first server: cut closes its
		// connections (the session's and the hint watch's) and refuses new ones until heal.
		NewCuttableBackend: func(t testing.TB, _ tck.BackendConfig) (spi.Backend, func() func()) {
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			p := faultproxy.StartTest(t, strings.Split(u.Host, ",")[0])
			u.Host = p.Addr()
			b, err := New(u.String())
			if err != nil {
				t.Fatal(err)
			}
			return recorded{Backend: b, r: rec}, func() func() {
				p.Set(faultproxy.Fault{Cut: true})
				return p.Heal
			}
		},
	}
}

func TestLeaseBackendSpec(t *testing.T) {
	tck.LeaseBackendSpec(t, factory(t))
}

func TestFencingSpec(t *testing.T) {
	tck.FencingSpec(t, factory(t))
}

func TestClientSpec(t *testing.T) {
	tck.ClientSpec(t, factory(t))
}

func TestFairnessSpec(t *testing.T) {
	tck.FairnessSpec(t, factory(t))
}

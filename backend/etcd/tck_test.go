package etcd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// factory describes the shared etcd test server to the TCK, every backend under one fresh
// prefix.
func factory(t *testing.T) tck.Factory {
	prefix := testPrefix(t)
	dsn := "etcd://" + strings.Join(testenv.Etcd(t), ",") + prefix
	raw := rawClient(t, testenv.Etcd(t))
	lo := minTTL(t, raw)
	return tck.Factory{
		NewBackend: func(t testing.TB, _ tck.BackendConfig) spi.Backend {
			b, err := New(dsn) // etcd's lessor decides expiry: the client clock is unused
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		// As if the TTL had run out: etcd revokes an expired lease exactly as Revoke does,
		// deleting every key attached to it in one revision.
		ExpireSession: func(t testing.TB, id spi.SessionID) {
			lease, ok := leaseOf(id)
			if !ok {
				t.Fatalf("ExpireSession: %q is not an etcd session id", id)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := raw.Revoke(ctx, lease); err != nil {
				t.Fatalf("ExpireSession(%s): %v", id, err)
			}
		},
		MinTTL: lo,
		MaxTTL: MaxTTL,
		// etcd revokes expired leases on a 500 ms timer of the leader's, then commits the
		// revocation through raft.
		ExpiryLag:  time.Second,
		Hints:      true,
		GroupHints: true,
		// A backend through a fault proxy of its own: cut closes its connection and refuses
		// new ones until heal.
		NewCuttableBackend: func(t testing.TB, _ tck.BackendConfig) (spi.Backend, func() func()) {
			p := faultproxy.StartTest(t, testenv.Etcd(t)[0])
			b, err := New("etcd://" + p.Addr() + prefix)
			if err != nil {
				t.Fatal(err)
			}
			return b, func() func() {
				p.Set(faultproxy.Fault{Cut: true})
				return p.Heal
			}
		},
	}
}

func TestLeaseBackendSpec(t *testing.T) { tck.LeaseBackendSpec(t, factory(t)) }
func TestFencingSpec(t *testing.T)      { tck.FencingSpec(t, factory(t)) }
func TestClientSpec(t *testing.T)       { tck.ClientSpec(t, factory(t)) }

// TestFairnessSpec: the waiter queue (spi.Queuer) and the starvation scenario.
func TestFairnessSpec(t *testing.T) { tck.FairnessSpec(t, factory(t)) }

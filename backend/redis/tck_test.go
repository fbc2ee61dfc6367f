package redis

import (
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// registry finds the backend that opened a session, for the ExpireSession hook.
type registry struct {
	mu       sync.Mutex
	backends []*Backend
}

func (r *registry) add(b *Backend) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backends = append(r.backends, b)
}

func (r *registry) owner(id spi.SessionID) *Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.backends {
		b.mu.Lock()
		_, ok := b.sessions[id]
		b.mu.Unlock()
		if ok {
			return b
		}
	}
	return nil
}

// factory describes a backend kind to the TCK: every backend a new client of the server that
// c reaches (each with a client of its own, as a separate process would have).
func factory(t *testing.T, newClient func(testing.TB) goredis.UniversalClient, opts ...Option) tck.Factory {
	probe := newClient(t)
	reg := &registry{}
	return tck.Factory{
		NewBackend: func(t testing.TB, _ tck.BackendConfig) spi.Backend {
			b, err := New(newClient(t), opts...) // Redis TIME decides: the client clock is unused
			if err != nil {
				t.Fatal(err)
			}
			reg.add(b)
			return b
		},
		// As if the TTL had run out: the session's keys go, and the leases and memberships it
		// held carry an expiry in the past (on Redis they carry the session's expiry).
		ExpireSession: func(t testing.TB, id spi.SessionID) {
			b := reg.owner(id) // routeBySlot: the backend that tracks the session
			names, groups := tracked(t, probe, b, id)
			expireSession(t, probe, id, names, groups, b)
		},
		MinTTL: time.Second, // Redis has ms precision; a second leaves room for a loaded CI machine
		Hints:  true,
	}
}

func standaloneFactory(t *testing.T, opts ...Option) tck.Factory {
	return factory(t, func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }, opts...)
}

func clusterFactory(t *testing.T, opts ...Option) tck.Factory {
	return factory(t, func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }, opts...)
}

func TestLeaseBackendSpecStandalone(t *testing.T) { tck.LeaseBackendSpec(t, standaloneFactory(t)) }
func TestFencingSpecStandalone(t *testing.T)      { tck.FencingSpec(t, standaloneFactory(t)) }
func TestLeaseBackendSpecCluster(t *testing.T)    { tck.LeaseBackendSpec(t, clusterFactory(t)) }
func TestFencingSpecCluster(t *testing.T)         { tck.FencingSpec(t, clusterFactory(t)) }

// The suites again with WAIT on (the shared Cluster has a replica per master; the standalone
// server has none, so WAIT 0 there only checks the pipelined path). The WAIT timeout must be
// below a third of every TTL the suites open (CheckTTL), hence MinTTL 2 s: the replicas are
// local and acknowledge in well under a millisecond, so 600 ms leaves a margin for a loaded
// host.
func clusterWaitFactory(t *testing.T) tck.Factory {
	f := clusterFactory(t, WithWaitReplicas(1, 600*time.Millisecond))
	f.MinTTL = 2 * time.Second
	return f
}
func TestLeaseBackendSpecClusterWait(t *testing.T) { tck.LeaseBackendSpec(t, clusterWaitFactory(t)) }
func TestFencingSpecClusterWait(t *testing.T)      { tck.FencingSpec(t, clusterWaitFactory(t)) }

package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
//
// The keys the suites' runs wrote (their names begin with the run's tck.BackendConfig.Prefix)
// are deleted when t ends, after the subtests' backends have closed: a lease hash is never
// deleted by design, so each run otherwise left a few hundred on the shared servers.
func factory(t *testing.T, newClient func(testing.TB) goredis.UniversalClient, opts ...Option) tck.Factory {
	probe := newClient(t)
	reg := &registry{}
	var trips sync.Map // *Backend -> *counter of its client's commands and pipelines
	var runs sync.Map  // the runs' prefixes
	t.Cleanup(func() {
		runs.Range(func(p, _ any) bool {
			n, err := deleteTagged(p.(string))
			if err != nil {
				t.Errorf("deleting the suite run's keys simba:*:{%s…}: %v", p, err)
			}
			t.Logf("deleted the %d keys of the suite run %s", n, p)
			return true
		})
	})
	return tck.Factory{
		NewBackend: func(t testing.TB, cfg tck.BackendConfig) spi.Backend {
			if cfg.Prefix == "" { // deleting by an empty prefix would take every lease's keys
				t.Fatal("tck.BackendConfig.Prefix is empty")
			}
			runs.Store(cfg.Prefix, nil)
			c := newClient(t)
			cnt := &counter{}
			if cc, ok := c.(*goredis.ClusterClient); ok {
				onMasters(t, cc, cnt) // where every command runs, also those sent to each master
			} else {
				c.AddHook(cnt)
			}
			b, err := New(c, opts...) // Redis TIME decides: the client clock is unused
			if err != nil {
				t.Fatal(err)
			}
			reg.add(b)
			trips.Store(b, cnt)
			return b
		},
		// Every command and pipeline the backend's client sends (on a Cluster, to each master:
		// the bound there is per master).
		RoundTrips: func(b spi.Backend) int64 {
			cnt, ok := trips.Load(b)
			if !ok {
				panic("RoundTrips: not a backend of this factory")
			}
			return cnt.(*counter).n.Load()
		},
		// As if the TTL had run out: the session's keys go, and the leases and memberships it
		// held carry an expiry in the past (on Redis they carry the session's expiry).
		ExpireSession: func(t testing.TB, id spi.SessionID) {
			b := reg.owner(id) // routeBySlot: the backend that tracks the session
			names, groups := tracked(t, probe, b, id)
			expireSession(t, probe, id, names, groups, b)
		},
		MinTTL:     time.Second, // Redis has ms precision; a second leaves room for a loaded CI machine
		Hints:      true,
		GroupHints: true,
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

// TestTCKFactoryDeletesItsKeys: what a suite run wrote through the factory (here a lease
// granted and released, whose hash stays by design) is gone from the shared servers once the
// test that made the factory ends, on the standalone server and on the Cluster; before, each
// run of the package's suites left a few hundred tck… lease hashes behind.
func TestTCKFactoryDeletesItsKeys(t *testing.T) {
	for _, mode := range []struct {
		name    string
		factory func(*testing.T, ...Option) tck.Factory
	}{{"standalone", standaloneFactory}, {"cluster", clusterFactory}} {
		var rnd [4]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			t.Fatal(err)
		}
		prefix := "tck" + hex.EncodeToString(rnd[:]) // as tck's own runs name theirs
		t.Run(mode.name, func(t *testing.T) {
			f := mode.factory(t)
			b := f.NewBackend(t, tck.BackendConfig{Clock: spi.SystemClock(), Prefix: prefix})
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := b.OpenSession(ctx, "tck:"+prefix, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			a, err := b.Acquire(ctx, s.ID, prefix+"-1-lease")
			if err != nil || a.Kind != spi.Granted {
				t.Fatalf("Acquire = %+v, %v; want granted", a, err)
			}
			if err := b.Release(ctx, s.ID, prefix+"-1-lease", a.Token); err != nil {
				t.Fatal(err)
			}
			if err := b.CloseSession(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			if n := countTagged(t, prefix); n == 0 {
				t.Fatalf("no keys of %s… while the test runs: the check below would prove nothing", prefix)
			}
		})
		if n := countTagged(t, prefix); n != 0 {
			t.Errorf("%s: %d keys of the run %s… left after the test", mode.name, n, prefix)
		}
	}
}

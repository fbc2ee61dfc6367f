package tck_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// memoryFactory runs the suites on one simbatest server on its virtual clock: waiting advances
// the clock, so the suites take no wall time. wrap, if not nil, wraps each client's backend.
func memoryFactory(wrap func(*simbatest.Backend, tck.BackendConfig) spi.Backend) (tck.Factory, *simbatest.Server) {
	srv := simbatest.NewServer()
	clock := srv.VirtualClock()
	return tck.Factory{
		NewBackend: func(_ testing.TB, cfg tck.BackendConfig) spi.Backend {
			if wrap != nil {
				return wrap(srv.Backend(), cfg)
			}
			return srv.Backend()
		},
		ExpireSession: func(t testing.TB, id spi.SessionID) {
			srv.ExpireSession(id)
		},
		Restart:        func(testing.TB) { srv.Restart() },
		PersistsTokens: true,
		MinTTL:         time.Second,
		Hints:          true,
		GroupHints:     true,
		Wait:           func(_ testing.TB, d time.Duration) { clock.Advance(d) },
		RoundTrips:     memoryRoundTrips,
	}, srv
}

// memoryRoundTrips counts the calls b, a simbatest client (or a wrapper embedding one), made
// that reached the server: one round trip each.
func memoryRoundTrips(b spi.Backend) int64 {
	c, ok := b.(interface{ Calls(op string) int })
	if !ok {
		panic("memoryRoundTrips: not a simbatest backend")
	}
	var n int64
	for _, op := range []string{"OpenSession", "KeepAlive", "CloseSession", "Acquire", "AcquireQueued", "Release", "Withdraw", "Join", "Leave", "Members", "Inspect", "InspectLease"} {
		n += int64(c.Calls(op))
	}
	return n
}

func TestMemoryLeaseBackendSpec(t *testing.T) {
	f, _ := memoryFactory(nil)
	tck.LeaseBackendSpec(t, f)
}

func TestMemoryFencingSpec(t *testing.T) {
	f, _ := memoryFactory(nil)
	tck.FencingSpec(t, f)
}

// Without the expiry hook the suites let sessions expire by waiting out their TTL, and without
// the restart hook they skip server restarts; simbatest passes that way too.
func TestMemoryWithoutOptionalHooks(t *testing.T) {
	f, _ := memoryFactory(nil)
	f.ExpireSession, f.Restart, f.Hints, f.GroupHints, f.RoundTrips = nil, nil, false, false, nil
	t.Run("LeaseBackendSpec", func(t *testing.T) { tck.LeaseBackendSpec(t, f) })
	t.Run("FencingSpec", func(t *testing.T) { tck.FencingSpec(t, f) })
}

// A model that reports every held lease on keep-alive and sends no expiry hints is as
// conformant as the default, and so is one whose leases expire on their own as on Redis.
func TestMemoryModelVariants(t *testing.T) {
	for _, v := range []struct {
		name string
		opts []simbatest.ModelOption
	}{
		{"ReportAllHeld", []simbatest.ModelOption{simbatest.WithReportAllHeld(), simbatest.WithoutExpiryHints()}},
		{"LeaseExpiry", []simbatest.ModelOption{simbatest.WithLeaseExpiry(), simbatest.WithoutExpiryHints()}},
	} {
		t.Run(v.name, func(t *testing.T) {
			srv := simbatest.NewServer(simbatest.WithModelOptions(v.opts...))
			clock := srv.VirtualClock()
			f := tck.Factory{
				NewBackend:     func(testing.TB, tck.BackendConfig) spi.Backend { return srv.Backend() },
				ExpireSession:  func(_ testing.TB, id spi.SessionID) { srv.ExpireSession(id) },
				PersistsTokens: true,
				Hints:          true,
				GroupHints:     true,
				Wait:           func(_ testing.TB, d time.Duration) { clock.Advance(d) },
			}
			t.Run("LeaseBackendSpec", func(t *testing.T) { tck.LeaseBackendSpec(t, f) })
			t.Run("FencingSpec", func(t *testing.T) { tck.FencingSpec(t, f) })
		})
	}
}

// realClock is the real monotonic clock.
type realClock struct{ origin time.Time }

func (c realClock) Now() time.Duration { return time.Since(c.origin) }
func (c realClock) AfterFunc(d time.Duration, f func()) spi.Timer {
	return time.AfterFunc(d, f)
}

// On the real clock, with no hooks, the suites wait out TTLs with time.Sleep as they do for
// real backends: this checks their timing margins.
func TestMemoryOnRealTime(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(realClock{origin: time.Now()}))
	f := tck.Factory{
		NewBackend: func(testing.TB, tck.BackendConfig) spi.Backend { return srv.Backend() },
		MinTTL:     300 * time.Millisecond,
		Hints:      true,
		GroupHints: true,
	}
	t.Run("LeaseBackendSpec", func(t *testing.T) { tck.LeaseBackendSpec(t, f) })
	t.Run("FencingSpec", func(t *testing.T) { tck.FencingSpec(t, f) })
}

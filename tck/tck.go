// Package tck holds Simba's conformance suites: the same tests every Backend implementation
// runs, so that PostgreSQL, MySQL/MariaDB, SQLite, Redis, ZooKeeper, etcd, the in-memory
// simbatest backend and any third-party backend agree on the wire semantics (the contract
// package spi documents).
//
// A backend author describes the backend once, in a Factory, and runs each suite in one line:
//
//	func TestConformance(t *testing.T) {
//		f := tck.Factory{
//			NewBackend: func(t testing.TB, _ tck.BackendConfig) spi.Backend {
//				b, err := mybackend.Open(dsn) // a new client of the shared server
//				if err != nil {
//					t.Fatal(err)
//				}
//				return b
//			},
//			MinTTL: time.Second,
//		}
//		tck.LeaseBackendSpec(t, f)
//		tck.FencingSpec(t, f)
//		tck.ClientSpec(t, f)
//		tck.FairnessSpec(t, f) // if the backend has waiter queues (spi.Queuer)
//	}
//
// The Factory names only types of the public package github.com/simba-go/simba/spi, the way a
// database/sql driver names database/sql/driver: code outside this module writes them the same.
// The directory examples/backend of the Simba repository is such a backend, in a module of its
// own, with the test above (TestConformance).
//
// LeaseBackendSpec and FencingSpec call the SPI directly; ClientSpec runs the Election, Lock,
// PartitionGroup and Close scenarios through real simba.Clients on the backend, on real time
// (see ClientSpec); FairnessSpec checks a spi.Queuer's waiter queue, through the SPI and with a
// starvation scenario of two clients (a backend without waiter queues leaves it out).
//
// Everything else in Factory is optional and makes the suites faster or stricter: a hook that
// forces a session's expiry at the server (otherwise the suites wait out the TTL), a hook that
// restarts the server (and whether tokens survive it), whether the backend pushes hints, and how
// to wait out server time (real backends sleep; simbatest advances its virtual clock).
//
// What the suites require beyond the SPI's doc comments: a session is only ever used through
// the backend (client) that opened it, as on ZooKeeper where a session is a connection;
// OpenSession rejects a TTL ≤ 0 with an error matching spi.ErrInvalidOption, and of the TTLs
// 1ns, 999µs, 1ms, 999ms and 1s (those up to MaxTTL) refuses with one exactly those
// spi.CheckTTL refuses (spi.TTLChecker), which accepts the suites' TTLs and simba.DefaultTTL;
// Acquire, Release
// and Join reject names outside the wire grammar with one matching spi.ErrInvalidName before
// any I/O; tokens are positive; Members and KeepAlive list members sorted ascending.
//
// Beyond single calls, the suites check what a backend author most easily gets wrong at the
// edges: calls on a backend after its Close (Closed/CallsFailWithErrBackendClosed: every SPI
// method, and every method of the optional interfaces the backend implements, fails with an
// error matching spi.ErrBackendClosed — not spi.ErrClosed alone, nor a timeout — before its
// context ends; Close twice is not an error; a hint channel subscribed before Close closes);
// GroupChanged hints, for a backend that sends them (Factory.GroupHints: a subscriber whose
// session is a member of a group hears another client's session join it and leave it,
// Hints/GroupChangedOnJoinAndLeave); and a session's keep-alive racing its own Acquire,
// AcquireQueued and Release (FencingSpec's Concurrent/KeepAliveRacesOwnAcquireAndRelease:
// the keep-alive stays live and lists the lease with the racing tenure's token or not at all,
// loses no lease granted beside it, revives none released beside it, and tokens keep growing),
// and its own Join and Leave (Groups/KeepAliveRacesJoinAndLeave: it loses no join and undoes
// no leave). With Factory.RoundTrips, the SPI's bounded round trips for KeepAlive and
// CloseSession (Bounded/KeepAliveAndCloseDoNotGrow).
//
// What the suites do not check, so that a backend passing them may still break the SPI there:
// the number of round trips a call makes, unless Factory.RoundTrips counts them (without it a
// KeepAlive that reads each name it is asked about passes) — the suites see only the SPI's
// replies, and a backend's link to its server (a pool, a multiplexed client, a ZooKeeper
// session) is its own, so nothing the suites could wrap around the SPI counts round trips, and
// comparing the time of a KeepAlive over many names with one over a few would be a timing
// assertion a loaded machine breaks; only a hook on the backend's driver counts them (the
// Redis backend's tests set RoundTrips so; backend/sql's count_test.go counts statements
// outside the suites), and with it the suites check only KeepAlive and CloseSession.
// Nor races the suites cannot time: a keep-alive landing just as another session's acquire
// decides its session expired — a late keep-alive that revives an expired session is caught
// (Sessions/ExpiresAfterTTLWithoutKeepAlive), one racing that acquire at the instant of expiry
// is not; nor GroupChanged hints of expiries (welcome, not required). Each suite logs
// (go test -v) what it leaves out for the backend at hand: hints without Factory.Hints,
// GroupChanged hints without Factory.GroupHints, InspectLease without spi.LeaseInspector, a
// SessionQueue's claim without spi.SessionQueue.
//
// The suites run their subtests one after another on one server, each on lease and group names
// no other subtest or earlier run uses (a random prefix per run), so they can share a database
// with other tests. No call they make carries client time: every remaining time they check
// comes from the backend.
package tck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// Factory describes a backend under test and the hooks the suites need. New fields are only ever
// added with a zero value that keeps the current behaviour, so a Factory written today keeps
// working as suites are added. ClientSpec (Election, Lock and PartitionGroup through real
// simba.Clients) runs its clients over NewBackend on the real clock and uses ExpireSession,
// MinTTL, MaxTTL and ExpiryLag; it does not use Wait, so the server must keep real time.
type Factory struct {
	// NewBackend returns a new client of the server under test, as a separate process would
	// open it: every backend it returns shares the same server (database, Redis, ensemble).
	// cfg carries what the client side would pass to the backend. The suites close every
	// backend they get. Required.
	NewBackend func(t testing.TB, cfg BackendConfig) spi.Backend

	// ExpireSession makes the session expire at the server now, as if its TTL had run out
	// (SQL: set its expiry to the database clock; Redis: delete its key; simbatest:
	// Server.ExpireSession). Optional: when nil, the suites wait for expiries (see ExpiryLag),
	// and ClientSpec leaves out its scenario of a leader whose session is expired at the server.
	ExpireSession func(t testing.TB, id spi.SessionID)

	// Restart restarts the server; backends obtained before may fail afterwards (the suites
	// get new ones). Optional: nil when the backend cannot be restarted from a test.
	Restart func(t testing.TB)

	// PersistsTokens says that lease tokens survive Restart, so tokens keep growing across
	// server restarts (SQL databases; simbatest).
	PersistsTokens bool

	// MinTTL is the shortest session TTL the backend supports (ZooKeeper: twice its tick time);
	// the suites use it for sessions they let expire. Zero means one second.
	MinTTL time.Duration
	// MaxTTL is the longest TTL the backend supports; zero means no bound.
	MaxTTL time.Duration
	// ExpiryLag is how long after its TTL a session may still be live at the server
	// (ZooKeeper notices expiry on its ticks); zero for backends that compare clocks exactly.
	ExpiryLag time.Duration

	// Hints says that the backends implement spi.Hinter and deliver a Released hint when a
	// lease is released that an acquire of the subscribing backend found held just before (the
	// least spi.Hinter asks of every hinting backend).
	Hints bool

	// GroupHints says that the backends' hints (Hints must be set too) include GroupChanged
	// hints as spi.Hinter describes them: a subscriber one of whose sessions is a member of a
	// group gets a GroupChanged hint for the group when another client's session joins or
	// leaves it (PostgreSQL, Redis, ZooKeeper, etcd, simbatest; not MySQL/MariaDB or SQLite,
	// whose hints cover releases alone). LeaseBackendSpec then checks that
	// (Hints/GroupChangedOnJoinAndLeave); without it that check is left out.
	GroupHints bool

	// NewCuttableBackend is NewBackend for a backend whose link to the server the test can cut
	// (a fault proxy of its own, say): cut closes every connection the backend has to the
	// server and refuses new ones until heal is called; then the backend reconnects. The
	// suites cut for well under a TTL, so sessions survive. Optional, and only for a backend
	// that reports spi.SteadyHints (with Hints set): LeaseBackendSpec then checks that a
	// Released hint of a release made while the link was cut arrives once it heals, with no
	// further release (Hints/SurvivesReconnect). Without it that check is left out.
	NewCuttableBackend func(t testing.TB, cfg BackendConfig) (b spi.Backend, cut func() (heal func()))

	// RoundTrips returns how many round trips to the server b, a backend NewBackend returned,
	// has made so far (a counter on a hook of the backend's driver, say; background work of the
	// backend may add to it). Optional: with it, LeaseBackendSpec checks the SPI's "bounded
	// round trips" for KeepAlive and CloseSession (Bounded/KeepAliveAndCloseDoNotGrow: a
	// session with 64 leases and 16 groups costs no more round trips than one with 16 and 4);
	// without it that check is left out.
	RoundTrips func(b spi.Backend) int64

	// Wait waits until d has passed on the server's clock. Optional: nil means time.Sleep;
	// simbatest advances its virtual clock instead. ClientSpec does not use it.
	Wait func(t testing.TB, d time.Duration)
}

// BackendConfig is what the client side passes to NewBackend.
type BackendConfig struct {
	// Clock is the client's clock. A backend that takes a clock (for its own timeouts, or to
	// count a remaining time from a request's send time, as ZooKeeper's does) may use it, but
	// the backend's clock decides: the suites jump this clock by +1 h and −1 h between calls and
	// check that replies stay the same (no spurious expiry, a remaining time within the TTL,
	// the same holder and token). Backends that take no clock ignore it. ClientSpec passes
	// the real monotonic clock its simba.Clients run on, and never jumps it.
	Clock spi.Clock
	// Prefix begins every lease and group name of the suite run that asks for the backend
	// ("tck" and 8 hex digits, one per run), so that a factory for a shared server can delete
	// what the run left there, and nothing else: a lease's record outlives its sessions by
	// design on some backends (Redis keeps the lease hash for its fencing token).
	Prefix string
}

// callTimeout bounds every backend call the suites make.
const callTimeout = 15 * time.Second

// harness is one suite run: the factory with defaults applied, and the run's name prefix.
type harness struct {
	f      Factory
	prefix string
	n      atomic.Int64
	short  time.Duration // TTL of sessions the suites let expire
	long   time.Duration // TTL of sessions that must outlive the subtest
}

func newHarness(t *testing.T, f Factory) *harness {
	t.Helper()
	if f.NewBackend == nil {
		t.Fatal("tck: Factory.NewBackend is required")
	}
	if f.MinTTL <= 0 {
		f.MinTTL = time.Second
	}
	if f.GroupHints && !f.Hints {
		t.Fatal("tck: Factory.GroupHints is set but Hints is not")
	}
	if f.MaxTTL > 0 && f.MaxTTL < f.MinTTL {
		t.Fatalf("tck: Factory.MaxTTL %v is shorter than MinTTL %v", f.MaxTTL, f.MinTTL)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	h := &harness{f: f, prefix: "tck" + hex.EncodeToString(b[:]), short: f.MinTTL}
	h.long = max(30*time.Second, 20*f.MinTTL+2*f.ExpiryLag)
	if f.MaxTTL > 0 && h.long > f.MaxTTL {
		h.long = f.MaxTTL
	}
	return h
}

// name returns a lease or group name no other subtest of any run uses.
func (h *harness) name(suffix string) string {
	return fmt.Sprintf("%s-%d-%s", h.prefix, h.n.Add(1), suffix)
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return c
}

// client is one backend with the client clock it was made with.
type client struct {
	spi.Backend
	clock *jumpClock
}

// backend returns a new client of the server, closed when the test ends.
func (h *harness) backend(t testing.TB) *client {
	t.Helper()
	c := newJumpClock()
	b := h.f.NewBackend(t, BackendConfig{Clock: c, Prefix: h.prefix})
	if b == nil {
		t.Fatal("tck: Factory.NewBackend returned nil")
	}
	t.Cleanup(func() { b.Close() })
	return &client{Backend: b, clock: c}
}

// owner is the owner string of the suites' sessions.
func (h *harness) owner() string { return "tck:" + h.prefix }

// open opens a session with ttl, closed when the test ends.
func (h *harness) open(t testing.TB, b spi.Backend, ttl time.Duration) spi.SessionID {
	t.Helper()
	return h.openOwner(t, b, ttl, h.owner())
}

func (h *harness) openOwner(t testing.TB, b spi.Backend, ttl time.Duration, owner string) spi.SessionID {
	t.Helper()
	s, err := b.OpenSession(ctx(t), owner, ttl)
	if err != nil {
		t.Fatalf("OpenSession(%q, %v): %v", owner, ttl, err)
	}
	if s.ID == "" {
		t.Fatalf("OpenSession(%v) returned an empty session id", ttl)
	}
	if s.Remaining <= 0 || s.Remaining > ttl {
		t.Fatalf("OpenSession(%v) remaining = %v, want in (0, %v]", ttl, s.Remaining, ttl)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		b.CloseSession(c, s.ID) // best effort: the session may have expired or b be closed
	})
	return s.ID
}

func (h *harness) acquire(t testing.TB, b spi.Backend, s spi.SessionID, name string) spi.Acquire {
	t.Helper()
	r, err := b.Acquire(ctx(t), s, name)
	if err != nil {
		t.Fatalf("Acquire(%s, %q): %v", s, name, err)
	}
	return r
}

// grant acquires name and fails the test unless it is granted with a positive token.
func (h *harness) grant(t testing.TB, b spi.Backend, s spi.SessionID, name string) int64 {
	t.Helper()
	r := h.acquire(t, b, s, name)
	if r.Kind != spi.Granted {
		t.Fatalf("Acquire(%s, %q) = %s (holder %s), want granted", s, name, r.Kind, r.Holder)
	}
	if r.Token <= 0 {
		t.Fatalf("Acquire(%s, %q) granted token %d, want > 0", s, name, r.Token)
	}
	return r.Token
}

// heldBy acquires name and fails the test unless it is held by holder.
func (h *harness) heldBy(t testing.TB, b spi.Backend, s spi.SessionID, name string, holder spi.SessionID) spi.Acquire {
	t.Helper()
	r := h.acquire(t, b, s, name)
	if r.Kind != spi.HeldBy || r.Holder != holder {
		t.Fatalf("Acquire(%s, %q) = %s (holder %q), want held by %s", s, name, r.Kind, r.Holder, holder)
	}
	return r
}

func (h *harness) release(t testing.TB, b spi.Backend, s spi.SessionID, name string, token int64) {
	t.Helper()
	if err := b.Release(ctx(t), s, name, token); err != nil {
		t.Fatalf("Release(%s, %q, %d): %v", s, name, token, err)
	}
}

func (h *harness) keepAlive(t testing.TB, b spi.Backend, s spi.SessionID, names, groups []string) spi.KeepAlive {
	t.Helper()
	ka, err := b.KeepAlive(ctx(t), s, names, groups)
	if err != nil {
		t.Fatalf("KeepAlive(%s): %v", s, err)
	}
	return ka
}

// live keeps s alive and fails the test if it has expired.
func (h *harness) live(t testing.TB, b spi.Backend, s spi.SessionID, ttl time.Duration) spi.KeepAlive {
	t.Helper()
	ka := h.keepAlive(t, b, s, nil, nil)
	if ka.Expired {
		t.Fatalf("KeepAlive(%s) = expired, want live", s)
	}
	if ka.Remaining <= 0 || ka.Remaining > ttl {
		t.Fatalf("KeepAlive(%s) remaining = %v, want in (0, %v]", s, ka.Remaining, ttl)
	}
	return ka
}

func (h *harness) members(t testing.TB, b spi.Backend, group string) []spi.SessionID {
	t.Helper()
	ms, err := b.Members(ctx(t), group)
	if err != nil {
		t.Fatalf("Members(%q): %v", group, err)
	}
	return ms
}

// wait waits until d has passed on the server's clock.
func (h *harness) wait(t testing.TB, d time.Duration) {
	t.Helper()
	if h.f.Wait != nil {
		h.f.Wait(t, d)
		return
	}
	time.Sleep(d)
}

// expiryWait is how long to wait for a session of TTL ttl, not kept alive, to expire.
func (h *harness) expiryWait(ttl time.Duration) time.Duration {
	return ttl + h.f.ExpiryLag + ttl/10 + 10*time.Millisecond
}

// expire ends the given sessions at the server, all opened with TTL h.short: through the
// factory's hook, or by waiting out their TTL (so every other session of the test must have the
// long TTL).
func (h *harness) expire(t testing.TB, ids ...spi.SessionID) {
	t.Helper()
	if h.f.ExpireSession != nil {
		for _, id := range ids {
			h.f.ExpireSession(t, id)
		}
		return
	}
	h.wait(t, h.expiryWait(h.short))
}

// jumpClock is the client clock the suites hand to backends: the real monotonic clock plus an
// offset that Jump moves, to show that a backend's replies do not depend on the client's clock.
type jumpClock struct {
	origin time.Time
	mu     sync.Mutex
	offset time.Duration
}

func newJumpClock() *jumpClock { return &jumpClock{origin: time.Now()} }

// Now implements spi.Clock.
func (c *jumpClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.origin) + c.offset
}

// AfterFunc implements spi.Clock. Timers run on real time; a jump does not move them.
func (c *jumpClock) AfterFunc(d time.Duration, f func()) spi.Timer {
	return time.AfterFunc(d, f)
}

// Jump moves the clock by d (forward or back).
func (c *jumpClock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

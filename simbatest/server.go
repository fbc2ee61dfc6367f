package simbatest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/spi"
)

// Server is an in-memory Simba server: one Model behind a lock, with backend time read from a
// clock, shared by every client of a test like a real database. Each client gets its own
// connection from Backend, so faults can target one client; faults set on the Server itself
// (through its embedded Faults) hit every client.
//
// Expiries are observed when the next call (or Tick) reaches the server, so expiry hints are
// delivered then; clients renew at least every TTL/3, so that is never much later. A Server
// arms no timers of its own on its clock (only delay faults do). Calls that a fault holds (a
// delay, a Hang cut-off) wait idle for a VirtualClock's settling, and each hint sent to a
// client counts as that client's work until the client has handled it (see VirtualClock).
type Server struct {
	// Faults apply to every call of every client of this server.
	*Faults

	clock spi.Clock

	mu      sync.Mutex
	model   *Model
	subs    map[*subscriber]struct{}
	changed chan struct{} // closed and replaced after every state change
	calls   map[string]int
}

type serverConfig struct {
	clock spi.Clock
	model []ModelOption
}

// ServerOption configures a Server.
type ServerOption func(*serverConfig)

// WithClock makes the server read backend time from c. The default is a new VirtualClock, which
// VirtualClock returns; pass a real clock for tests that run on wall time.
func WithClock(c spi.Clock) ServerOption {
	return func(cfg *serverConfig) { cfg.clock = c }
}

// WithModelOptions configures the server's model (session id seed, reporting of held leases,
// expiry hints).
func WithModelOptions(opts ...ModelOption) ServerOption {
	return func(cfg *serverConfig) { cfg.model = append(cfg.model, opts...) }
}

// NewServer returns a server with an empty model.
func NewServer(opts ...ServerOption) *Server {
	var cfg serverConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.clock == nil {
		cfg.clock = NewVirtualClock()
	}
	return &Server{
		Faults:  newFaults(),
		clock:   cfg.clock,
		model:   NewModel(cfg.model...),
		subs:    make(map[*subscriber]struct{}),
		changed: make(chan struct{}),
		calls:   make(map[string]int),
	}
}

// Clock returns the clock the server reads backend time from.
func (s *Server) Clock() spi.Clock { return s.clock }

// VirtualClock returns the server's clock if it is a VirtualClock (the default), else nil.
func (s *Server) VirtualClock() *VirtualClock {
	c, _ := s.clock.(*VirtualClock)
	return c
}

// Backend returns a new client connection to the server: an spi.Backend (also spi.Hinter,
// spi.Inspector, spi.LeaseInspector, spi.Queuer, spi.SessionQueue and spi.CutSafe) with its own
// faults.
func (s *Server) Backend() *Backend {
	return &Backend{Faults: newFaults(), srv: s, calls: make(map[string]int)}
}

// update runs f on the model at the current backend time, then delivers the hints it queued and
// wakes WaitFor callers. It is the only place that changes the model.
func (s *Server) update(f func(m *Model, now time.Duration)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.model, s.clock.Now())
	for _, h := range s.model.TakeHints() {
		for sub := range s.subs {
			sub.deliver(h)
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// ExpireSession expires the session now, as if its TTL had run out, and reports whether it was
// live: its leases are released and it leaves its groups (with hints), and every later call on
// it replies SessionExpired.
func (s *Server) ExpireSession(id spi.SessionID) bool {
	var live bool
	s.update(func(m *Model, now time.Duration) { live = m.ExpireSession(now, id) })
	return live
}

// Restart models a server restart: every session and membership is lost, lease rows and their
// tokens survive (so tokens keep growing). Clients find their sessions expired.
func (s *Server) Restart() {
	s.update(func(m *Model, now time.Duration) { m.Restart(now) })
}

// Tick makes the server observe the expiries due by the current backend time now instead of at
// the next call, delivering their hints.
func (s *Server) Tick() {
	s.update(func(m *Model, now time.Duration) { m.Tick(now) })
}

// Snapshot returns the server's state at the current backend time (see Model.Inspect).
func (s *Server) Snapshot() spi.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model.Inspect(s.clock.Now())
}

// Lease returns the state of the lease name at the current backend time (see Model.Lease).
func (s *Server) Lease(name string) (spi.LeaseInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model.Lease(s.clock.Now(), name)
}

// Calls returns how many calls of the SPI method op ("KeepAlive", "Acquire", ...) reached the
// server from all clients, including calls whose reply was dropped but not calls that failed
// before taking effect.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// WaitFor waits until cond holds for the server's state and returns that state. cond is checked
// now and after every change a call makes; the passing of time alone does not wake it (an
// expiry is noticed at the next call or Tick).
func (s *Server) WaitFor(ctx context.Context, cond func(spi.Snapshot) bool) (spi.Snapshot, error) {
	for {
		s.mu.Lock()
		snap, changed := s.model.Inspect(s.clock.Now()), s.changed
		s.mu.Unlock()
		if cond(snap) {
			return snap, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return snap, ctx.Err()
		}
	}
}

// WaitHolder waits until some live session holds the lease name (the leader of an election or
// the owner of a lock) and returns the lease.
func (s *Server) WaitHolder(ctx context.Context, name string) (spi.LeaseInfo, error) {
	var info spi.LeaseInfo
	_, err := s.WaitFor(ctx, func(snap spi.Snapshot) bool {
		for _, l := range snap.Leases {
			if l.Name == name && l.Holder != "" {
				info = l
				return true
			}
		}
		return false
	})
	if err != nil {
		return info, fmt.Errorf("simbatest: waiting for a holder of %q: %w", name, err)
	}
	return info, nil
}

type subscriber struct {
	b    *Backend
	ch   chan spi.Hint
	stop chan struct{} // closed when the subscription ends through Backend.Close
	act  spi.Activity  // of the subscriber's client, or nil: a unit per hint sent
}

// deliver sends h unless the subscriber's buffer is full or its client is cut off: hints may be
// lost. Called with the server's lock held.
func (sub *subscriber) deliver(h spi.Hint) {
	if sub.b.srv.Faults.isCut() || sub.b.Faults.isCut() {
		return
	}
	if len(sub.ch) == cap(sub.ch) {
		return // only deliver sends on the channel, under the server's lock: it stays full
	}
	if sub.act != nil {
		sub.act.Begin()
	}
	sub.ch <- h
}

// hintBuffer is the number of undelivered hints a subscriber buffers before new ones are dropped.
const hintBuffer = 1024

package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/simba-go/simba/internal/engine"
)

// Shape is the size of one run: how many clients, elections and partitions, and how long. The
// zero value is not useful: start from DefaultShape.
type Shape struct {
	// Clients is the number of client processes (engines).
	Clients int
	// Elections is the number of election names every client runs (e0, e1, ...).
	Elections int
	// Partitions is the number of partitions of the one group (g) clients join.
	Partitions int
	// TTL is the session TTL of every client; the renewal interval and call timeout are TTL/3.
	TTL time.Duration
	// Duration is the virtual time of one run (backend time).
	Duration time.Duration
	// Liveness is the length of the final, fault-free phase; it must be at least
	// LivenessBound.
	Liveness time.Duration
	// LivenessBound is how long after healing every wanted lease must have a leader and every
	// partition its rendezvous owner.
	LivenessBound time.Duration
}

// DefaultShape is the run of issue 4: 60 s of virtual time with a 3 s TTL, 5 clients × 3
// elections × 1 group of 8 partitions; the last 15 s (5 TTLs) are fault-free and must settle
// within 3 TTLs.
func DefaultShape() Shape {
	return Shape{
		Clients:       5,
		Elections:     3,
		Partitions:    8,
		TTL:           3 * time.Second,
		Duration:      60 * time.Second,
		Liveness:      15 * time.Second,
		LivenessBound: 9 * time.Second,
	}
}

// Heal is the backend time at which faults stop.
func (sh Shape) Heal() time.Duration { return sh.Duration - sh.Liveness }

// Faults is the fault mix of one run, derived from its seed. Probabilities are per call (or per
// hint); counts are over the safety phase.
type Faults struct {
	// LatencyMin and LatencyMax bound the one-way latency of a normal call, each way.
	LatencyMin, LatencyMax time.Duration
	// LostRequest: the request never reaches the backend; the client sees a timeout.
	LostRequest float64
	// LostReply: the call takes effect, the reply is lost; the client sees a timeout.
	LostReply float64
	// Timeout: the request is so slow that the client gives up (timeout error after one
	// renewal interval); it still reaches the backend, possibly after the timeout.
	Timeout float64
	// Late: the reply arrives late, up to twice the call timeout after the request (a backend
	// that ignores the call's context), often past the session's deadline.
	Late float64
	// Slow: one leg of a normal call is slow (up to 90% of the call timeout).
	Slow float64
	// SlowKeepAlive: a keep-alive's request is slow (up to 90% of the call timeout), so that
	// calls the client sends after it (an acquire) may reach the backend first — with
	// LeaseExpiry, the order in which a keep-alive that does not name a lease runs after its
	// grant (chaos finding 32405). Drawn only with LeaseExpiry.
	SlowKeepAlive float64
	// LostHint: a hint is lost on its way to one client.
	LostHint float64
	// Hints says whether the backend's hints are delivered at all (a backend without hints).
	Hints bool
	// ExpiryHints says whether the model queues hints for expired sessions (ZooKeeper) or not
	// (SQL, Redis).
	ExpiryHints bool
	// ReportAllHeld makes keep-alives list every lease the session holds (Redis).
	ReportAllHeld bool
	// LeaseExpiry gives each lease an expiry of its own (simbatest.WithLeaseExpiry, Redis):
	// copied from the session at the grant, moved only by keep-alives that report the lease
	// held, free for others once passed even while the holder's session lives.
	LeaseExpiry bool
	// SessionWaiters makes the model's waiter entries live as long as their session
	// (simbatest.WithSessionWaiters: ZooKeeper's ephemeral nodes, etcd's keys on the
	// session's lease) rather than until the session's expiry as of the waiter's latest
	// queued acquire, and tells the engines so (engine.Options.QueueLivesWithSession): a
	// waiter no longer re-attempts before that expiry. Like those backends, a client's
	// backend runs a withdrawal that failed again with the session's next keep-alive. Drawn
	// only without LeaseExpiry (Redis' entries lapse).
	SessionWaiters bool
	// UnknownRemaining makes the model's HeldBy leave the time left unknown, and hint the end of
	// a waiter entry (simbatest.WithUnknownRemaining: ZooKeeper, etcd), and tells the engines
	// that hints are steady (engine.Options.SteadyHints): a waiter that hears no hint tries
	// again two TTLs after a HeldBy. Steady does not mean never lost: LostHint still drops
	// hints before healing, standing for those a real backend loses anyway (a slow reader, a
	// bug), and the liveness check holds the fallback retry to its bound. Drawn only with
	// SessionWaiters, Hints and ExpiryHints, as those backends have all three.
	UnknownRemaining bool
	// Expiries is how many sessions the backend expires by force (ExpireSession) at random.
	Expiries int
	// Outages are windows of backend time in which every call fails (half of them with a
	// quick error, half with a timeout).
	Outages []Window
	// Probes are the signs that the backend answers again (engine.EvReachable) that the
	// clients' drivers step, as the shell's probe does once the backend answers it: one per
	// client shortly after each outage ends, and, standing for a link that flaps (or a probe
	// that got through while the calls still fail), a few while an outage lasts. Drawn for
	// half the seeds with outages, from a stream of their own.
	Probes []Probe
	// Refusals makes the outages' quick errors permanent (errRefused): a backend that refuses
	// every call for good until an operator mends it (a dropped schema, keys of the wrong
	// type), so that the engine's permanent-error paths (a retry after BackoffMax/2 to
	// BackoffMax, no sign of the backend answering shortens it; a keep-alive's retry no later
	// than halfway to the deadline; refused calls that did not land) meet every fault. Drawn
	// for half the seeds with outages, from a stream of its own.
	Refusals bool
	// Pauses are client pauses (the GC-pause case): the client processes nothing during the
	// window, then everything queued at once with the late time.
	Pauses []Pause
	// Crashes are client crashes: the engine is dropped (its session expires at the
	// backend); Restart says when a fresh engine starts (never if negative; at the latest
	// when the faults heal otherwise).
	Crashes []Crash
	// ActionMean is the mean time between two user actions of one client (Start, Stop,
	// StepDown, Lock, TryLock, Join, Leave, Close).
	ActionMean time.Duration
	// Close is the probability that a user action is Close (followed by a restart).
	Close float64
	// Work is the probability that an election (or the group) is started with work.
	Work float64
	// WorkSelfExit is the probability that a term's work returns on its own, at a random
	// time, rather than when its term is revoked.
	WorkSelfExit float64
	// WorkSlow and WorkNever are the probabilities that revoked work takes up to two TTLs to
	// exit, or never exits.
	WorkSlow, WorkNever float64
}

// Window is an interval of backend time.
type Window struct{ From, To time.Duration }

// Pause pauses client Client during Window.
type Pause struct {
	Client int
	Window
}

// Probe steps engine.EvReachable at client Client at backend time At.
type Probe struct {
	Client int
	At     time.Duration
}

// Crash crashes client Client at At and restarts it at Restart (never if negative).
type Crash struct {
	Client      int
	At, Restart time.Duration
}

// Config is everything one run depends on besides its seed's random stream: derived from the
// seed by Derive.
type Config struct {
	Seed  uint64
	Shape Shape
	// Drift is the engine's Options.Drift: the clock-rate drift its deadlines allow for.
	Drift float64
	// Margin is the engine's Options.Margin (zero is no margin).
	Margin time.Duration
	// Rates and Origins define each client's clock: client time = origin + rate × backend
	// time, with |rate − 1| below Drift.
	Rates   []float64
	Origins []time.Duration
	// Break disables one engine rule (mutation tests); zero in normal runs.
	Break  engine.Rule
	Faults Faults
}

// RenewInterval is the engine's renewal interval and call timeout (client time): the engine's
// default for the TTL, since the simulator sets none.
func (c *Config) RenewInterval() time.Duration { return engine.DefaultRenewInterval(c.Shape.TTL) }

// newRand returns the one random stream of seed: the configuration and then the run draw from
// it, in that order.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x53494d4241)) // "SIMBA"
}

// newAuxRand returns seed's second stream, for options added after the seeds of the first
// stream were recorded (doc.go): drawing them from it leaves every earlier option, and the run
// of a seed that does not enable them, exactly as they were.
func newAuxRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x4c45415345)) // "LEASE"
}

// newProbeRand is the stream Faults.Probes are drawn from, so that adding them changed no
// other option of any seed.
func newProbeRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x50524f4245)) // "PROBE"
}

// Derive returns the configuration of seed (with rule brk broken, if non-zero), drawing it from
// rng, the seed's stream.
func Derive(seed uint64, shape Shape, brk engine.Rule, rng *rand.Rand) Config {
	c := Config{Seed: seed, Shape: shape, Break: brk}
	ttl := shape.TTL
	heal := shape.Heal()
	pick := func(p float64) bool { return rng.Float64() < p }
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}

	c.Drift = []float64{0.01, 0.01, 0.05, 0.2}[rng.IntN(4)]
	c.Margin = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 10 * time.Millisecond, 0}[rng.IntN(4)]
	for i := 0; i < shape.Clients; i++ {
		rate := 1.0
		if pick(0.8) {
			// Strictly inside the bound: the engine's allowance covers it.
			rate = 1 + c.Drift*0.999*(2*rng.Float64()-1)
			if pick(0.3) { // at the edges, where it matters
				rate = 1 - c.Drift*0.999
				if pick(0.5) {
					rate = 1 + c.Drift*0.999
				}
			}
		}
		c.Rates = append(c.Rates, rate)
		c.Origins = append(c.Origins, between(0, time.Hour))
	}

	f := &c.Faults
	f.LatencyMin = between(100*time.Microsecond, 2*time.Millisecond)
	f.LatencyMax = f.LatencyMin + between(0, 30*time.Millisecond)
	if pick(0.7) {
		f.LostRequest = 0.05 * rng.Float64()
		f.LostReply = 0.05 * rng.Float64()
	}
	if pick(0.5) {
		f.Timeout = 0.03 * rng.Float64()
	}
	if pick(0.5) {
		f.Late = 0.03 * rng.Float64()
	}
	if pick(0.5) {
		f.Slow = 0.1 * rng.Float64()
	}
	f.Hints = pick(0.8)
	if f.Hints && pick(0.5) {
		f.LostHint = 0.2 * rng.Float64()
	}
	f.ExpiryHints = pick(0.5)
	f.ReportAllHeld = pick(0.3)
	if pick(0.6) {
		f.Expiries = 1 + rng.IntN(4)
	}
	if pick(0.5) {
		for n := 1 + rng.IntN(2); n > 0; n-- {
			from := between(0, heal)
			f.Outages = append(f.Outages, Window{from, min(from+between(100*time.Millisecond, 2*ttl), heal)})
		}
	}
	if pick(0.6) {
		for n := 1 + rng.IntN(3); n > 0; n-- {
			from := between(0, heal)
			// Mostly longer than the TTL: the GC-pause case.
			d := between(ttl/4, 3*ttl)
			f.Pauses = append(f.Pauses, Pause{rng.IntN(shape.Clients), Window{from, min(from+d, heal)}})
		}
	}
	if pick(0.5) {
		for n := 1 + rng.IntN(2); n > 0; n-- {
			at := between(0, heal)
			restart := time.Duration(-1)
			if pick(0.8) {
				restart = at + between(0, 3*ttl)
			}
			f.Crashes = append(f.Crashes, Crash{rng.IntN(shape.Clients), at, restart})
		}
	}
	f.ActionMean = between(ttl/2, 4*ttl)
	if pick(0.3) {
		f.Close = 0.05
	}
	f.Work = []float64{0, 0.5, 0.9}[rng.IntN(3)]
	f.WorkSelfExit = 0.3 * rng.Float64()
	f.WorkSlow = 0.4 * rng.Float64()
	f.WorkNever = 0.2 * rng.Float64()

	aux := newAuxRand(seed)
	f.LeaseExpiry = aux.Float64() < 0.5
	if f.LeaseExpiry && aux.Float64() < 0.7 {
		f.SlowKeepAlive = 0.3 * aux.Float64()
	}
	if !f.LeaseExpiry {
		f.SessionWaiters = aux.Float64() < 0.5
	}
	// Drawn last from the aux stream, so no earlier option of any seed changes.
	if f.SessionWaiters && f.Hints && f.ExpiryHints {
		f.UnknownRemaining = aux.Float64() < 0.5
	}
	if probe := newProbeRand(seed); len(f.Outages) > 0 && probe.Float64() < 0.5 {
		for _, w := range f.Outages {
			for n := probe.IntN(4); n > 0; n-- { // during the outage: false signs
				f.Probes = append(f.Probes, Probe{probe.IntN(shape.Clients), w.From + time.Duration(probe.Int64N(int64(w.To-w.From)+1))})
			}
			for i := range shape.Clients { // after it: each client's probe gets through
				f.Probes = append(f.Probes, Probe{i, w.To + time.Duration(probe.Int64N(int64(50*time.Millisecond)))})
			}
		}
	}
	if refuse := newRefuseRand(seed); len(f.Outages) > 0 {
		f.Refusals = refuse.Float64() < 0.5
	}
	return c
}

// newRefuseRand is the stream Faults.Refusals is drawn from, so that adding it changed no
// other option of any seed.
func newRefuseRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x524546555345)) // "REFUSE"
}

// String prints the configuration for a failure report.
func (c *Config) String() string {
	var b strings.Builder
	f := &c.Faults
	fmt.Fprintf(&b, "seed=%d clients=%d elections=%d partitions=%d ttl=%v duration=%v heal=%v\n",
		c.Seed, c.Shape.Clients, c.Shape.Elections, c.Shape.Partitions, c.Shape.TTL, c.Shape.Duration, c.Shape.Heal())
	fmt.Fprintf(&b, "engine: drift=%v margin=%v break=%d\n", c.Drift, c.Margin, c.Break)
	for i := range c.Rates {
		fmt.Fprintf(&b, "clock c%d: rate=%.6f origin=%v\n", i, c.Rates[i], c.Origins[i])
	}
	fmt.Fprintf(&b, "latency=[%v,%v] lost-request=%.3f lost-reply=%.3f timeout=%.3f late=%.3f slow=%.3f slow-keep-alive=%.3f\n",
		f.LatencyMin, f.LatencyMax, f.LostRequest, f.LostReply, f.Timeout, f.Late, f.Slow, f.SlowKeepAlive)
	fmt.Fprintf(&b, "hints=%v lost-hint=%.3f expiry-hints=%v report-all-held=%v lease-expiry=%v session-waiters=%v unknown-remaining=%v forced-expiries=%d\n",
		f.Hints, f.LostHint, f.ExpiryHints, f.ReportAllHeld, f.LeaseExpiry, f.SessionWaiters, f.UnknownRemaining, f.Expiries)
	fmt.Fprintf(&b, "outages=%v refusals=%v probes=%v pauses=%v crashes=%v\n", f.Outages, f.Refusals, f.Probes, f.Pauses, f.Crashes)
	fmt.Fprintf(&b, "actions every %v (close %.2f); work=%.2f self-exit=%.2f slow=%.2f never=%.2f",
		f.ActionMean, f.Close, f.Work, f.WorkSelfExit, f.WorkSlow, f.WorkNever)
	return b.String()
}

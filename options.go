package simba

import (
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
)

// Defaults. A Client made without options runs with exactly these, and the
// renewal interval TTL/3, the cooldown one TTL and backoffs from DefaultMinBackoff up to the
// renewal interval. (The engine under the client defines each default once; these constants
// restate them for this documentation, and the compiler checks that they agree.)
//
// Each With... option says what its zero value means: zero is the default for WithCooldown, a
// literal zero for WithDrift, WithMargin and WithJitter, and rejected by WithTTL and
// WithRenewEvery (leave them out for the default).
const (
	// DefaultTTL is the session TTL (WithTTL).
	DefaultTTL = 15 * time.Second
	// DefaultDrift is the assumed clock-rate drift (WithDrift): 1%.
	DefaultDrift = 0.01
	// DefaultMargin is the safety margin of every local deadline (WithMargin).
	DefaultMargin = 50 * time.Millisecond
	// DefaultMaxJitter bounds the jitter a candidate adds to the holder's remaining time
	// (WithJitter).
	DefaultMaxJitter = 25 * time.Millisecond
	// DefaultMinBackoff is the first backoff bound after a failed call, capped at the renewal
	// interval; it doubles up to the renewal interval, and each delay is drawn below it (full
	// jitter).
	DefaultMinBackoff = 50 * time.Millisecond
	// MaxTTL bounds the TTL and every other duration option (cooldown, jitter): 24 hours. A
	// lease that must outlive a day without a keep-alive is not a lease, and the bound keeps
	// every time sum the client makes (a monotonic time plus a few option values) far below the
	// ~292 years that int64 nanoseconds hold, so no option value can make a deadline wrap
	// around into the far future. (The engine's time sums also saturate.)
	MaxTTL = 24 * time.Hour
	// MaxDrift bounds the drift option: drift is in [0, MaxDrift).
	MaxDrift = 0.5
)

// The compiler checks that the constants above restate the engine's: an array length must be
// a non-negative integer, so each pair of lengths compiles only if the two values are equal.
var (
	_ [DefaultTTL - engine.DefaultTTL]struct{}
	_ [engine.DefaultTTL - DefaultTTL]struct{}
	_ [(DefaultDrift - engine.DefaultDrift) * 1e9]struct{}
	_ [(engine.DefaultDrift - DefaultDrift) * 1e9]struct{}
	_ [DefaultMargin - engine.DefaultMargin]struct{}
	_ [engine.DefaultMargin - DefaultMargin]struct{}
	_ [DefaultMaxJitter - engine.DefaultRetryJitter]struct{}
	_ [engine.DefaultRetryJitter - DefaultMaxJitter]struct{}
	_ [DefaultMinBackoff - engine.DefaultBackoffMin]struct{}
	_ [engine.DefaultBackoffMin - DefaultMinBackoff]struct{}
	_ [MaxTTL - engine.MaxDuration]struct{}
	_ [engine.MaxDuration - MaxTTL]struct{}
	_ [MaxTTL - spi.MaxSessionTTL]struct{}
	_ [spi.MaxSessionTTL - MaxTTL]struct{}
	_ [(MaxDrift - engine.MaxDrift) * 1e9]struct{}
	_ [(engine.MaxDrift - MaxDrift) * 1e9]struct{}
)

// ErrInvalidOwner is matched (errors.Is), together with ErrInvalidOption, by the error of an
// owner string that breaks the wire rule (WithOwner, or a backend's OpenSession): 1 to
// wire.MaxOwnerLen bytes of valid UTF-8 without control, format or line-separator characters
// (wire.OwnerRefuses).
var ErrInvalidOwner = wire.ErrInvalidOwner

// Executor runs a function asynchronously: callbacks (OnElected / OnRevoked) and leader work.
// The default starts a goroutine per call (for callbacks, see WithCallbackExecutor). An
// executor must not run f on the calling goroutine.
type Executor func(f func())

// Listener receives every Event the client publishes, each once (a session's backend error,
// which every election's and group's Events channel carries, included). It runs on the goroutine stepping the
// client's engine (the loop goroutine, or a caller stepping in its place while it is idle), one
// event at a time, and must return quickly.
type Listener func(Event)

// Option configures a Client (the With... functions). The zero Option is invalid.
type Option struct{ apply func(*config) error }

// config holds the options as given; finish resolves them with the engine's rules
// (engine.Options.Resolve), so that New hands the engine exactly the values it runs with.
type config struct {
	ttl        time.Duration
	renewEvery time.Duration // 0 until finish: the engine's default (TTL/3)
	drift      float64
	margin     time.Duration
	cooldown   time.Duration // 0 until finish: the engine's default (one TTL)
	maxJitter  time.Duration
	owner      string
	clock      spi.Clock
	logger     *slog.Logger
	loggerSet  bool // WithLogger was given: New hands the logger to the backend (spi.LoggerAdopter)
	callbacks  Executor
	// callbacksDefault: callbacks is the default (no WithCallbackExecutor), which a call
	// worker may stand in for (Client.dispatch).
	callbacksDefault bool
	work             Executor
	listeners        []Listener
	observers        []func(CallInfo)
	once             map[any]struct{} // the keys of the Once options applied
	seed             uint64
	seeded           bool
}

// defaultConfig starts from the engine's defaults (engine.Defaults: the one place they are
// defined).
func defaultConfig() config {
	host, _ := os.Hostname()
	d := engine.Defaults()
	return config{
		ttl:              d.TTL,
		renewEvery:       d.RenewInterval,
		drift:            d.Drift,
		margin:           d.Margin,
		cooldown:         d.Cooldown,
		maxJitter:        d.RetryJitter,
		owner:            defaultOwner(host, os.Getpid()),
		logger:           slog.New(slog.DiscardHandler),
		callbacks:        func(f func()) { go f() },
		callbacksDefault: true,
		work:             func(f func()) { go f() },
	}
}

// defaultOwner is host:pid made a valid owner (wire.ValidateOwner) whatever the host name:
// invalid UTF-8 and every character an owner refuses (wire.OwnerRefuses: control, format and
// line-separator characters) become '?', and the host name is cut (at a rune boundary) so that
// the whole fits wire.MaxOwnerLen bytes.
func defaultOwner(host string, pid int) string {
	suffix := ":" + strconv.Itoa(pid)
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(host, "?") {
		if wire.OwnerRefuses(r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r)+len(suffix) > wire.MaxOwnerLen {
			break
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		b.WriteString("unknown")
	}
	return b.String() + suffix
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}

// WithTTL sets the session TTL (default DefaultTTL, 15 s): how long the backend keeps the
// session, and so every lease it holds, without a keep-alive. It must be in (0, MaxTTL] (24 h)
// and at least three renewal intervals; zero is rejected (leave the option out for the
// default). New also checks it against the bounds the backend knows without I/O
// (spi.TTLChecker), and fails with an error matching ErrInvalidOption that names the bound:
// etcd leases count whole seconds (at least 1 s), the SQL backend and ZooKeeper milliseconds
// (at least 1 ms), and a ZooKeeper DSN's tickTime must be less than half the TTL. Bounds only
// the server knows (ZooKeeper's maxSessionTimeout) show at the first session open. The margin
// must also stay below half the TTL: with the default margin (DefaultMargin, 50 ms) a TTL of
// 100 ms or less is refused whatever the backend; a shorter TTL needs a smaller WithMargin.
//
// Each renewal interval's keep-alive has that interval as its timeout, and it waits behind no
// other call of the client (the client's other calls wait for one of its 32 call slots, the
// keep-alive for none), nor behind them for a connection where the backend bounds its own
// (PostgreSQL and Redis leave one connection of their pool to keep-alives; SQLite runs them
// first): this holds for every client made on one backend value, which share its pool. It does
// not hold against the application's own use of a pool or go-redis client passed to the
// backend, nor against the server's time for other work: a Redis server runs one script at a
// time, and a keep-alive of tens of thousands of leases runs for a good part of a second there
// (see README, partition groups). Keep the TTL well above that, and above the network's share:
// a call of k round trips needs k × RTT of its interval (k per backend and call in the README's
// "Choosing a TTL": up to 6 on MySQL/MariaDB, 2 on Redis), so a TTL of at least 9 × k × RTT at
// the default renewal; more on MySQL/MariaDB for a client that locks much, whose keep-alive
// waits for its acquires' transactions on the session row.
func WithTTL(ttl time.Duration) Option {
	return Option{func(c *config) error {
		if ttl <= 0 || ttl > MaxTTL {
			return invalid("TTL %v must be in (0, %v]", ttl, MaxTTL)
		}
		c.ttl = ttl
		return nil
	}}
}

// WithRenewEvery sets the keep-alive interval (default TTL/3). It is also each backend call's
// timeout. The TTL must exceed it by at least twice the call timeout, that is TTL ≥ 3 × renewEvery;
// so it is in (0, MaxTTL/3]. Zero is rejected (leave the option out for the default TTL/3).
func WithRenewEvery(d time.Duration) Option {
	return Option{func(c *config) error {
		if d <= 0 || d > MaxTTL/3 {
			return invalid("renewal interval %v must be in (0, %v]", d, MaxTTL/3)
		}
		c.renewEvery = d
		return nil
	}}
}

// WithDrift sets the assumed maximum clock-rate difference between client and backend (default
// DefaultDrift, 0.01): the local deadline is sentAt + remaining × (1 − drift) − margin. It must
// be a finite number in [0, MaxDrift): NaN and ±Inf are rejected. Zero is taken literally: no
// drift allowance (not the default).
func WithDrift(drift float64) Option {
	return Option{func(c *config) error {
		if !(drift >= 0 && drift < MaxDrift) { // also NaN
			return invalid("drift %v must be a number in [0, %v)", drift, MaxDrift)
		}
		c.drift = drift
		return nil
	}}
}

// WithMargin sets the safety margin subtracted from every local deadline (default
// DefaultMargin, 50 ms). It must be in [0, TTL/2) (New checks it against the TTL). Zero is
// taken literally: no margin (not the default).
func WithMargin(d time.Duration) Option {
	return Option{func(c *config) error {
		if d < 0 || d >= MaxTTL/2 {
			return invalid("margin %v must be in [0, %v)", d, MaxTTL/2)
		}
		c.margin = d
		return nil
	}}
}

// WithCooldown sets how long an election stays out of the race after StepDown (default one
// TTL), in [0, MaxTTL]. Zero means the default, one TTL (a cooldown cannot be zero: use a
// small positive value for a near-immediate return to the race).
func WithCooldown(d time.Duration) Option {
	return Option{func(c *config) error {
		if d < 0 || d > MaxTTL {
			return invalid("cooldown %v must be in [0, %v]", d, MaxTTL)
		}
		c.cooldown = d
		return nil
	}}
}

// WithOwner sets the owner string shown as the leader by status tools (default host:pid). It
// must pass wire.ValidateOwner: 1 to wire.MaxOwnerLen (255) bytes of valid UTF-8 without a
// control character (Cc: ESC, NUL...), a format character (Cf: a bidirectional override such
// as U+202E, a zero-width space, U+FEFF) or a line or paragraph separator (U+2028, U+2029):
// an owner is an identity operators read, and these would hide or disguise it. Cf includes the
// zero-width joiner and non-joiner (U+200D, U+200C), so an emoji sequence joined by them (woman
// + U+200D + laptop, the rainbow flag) and Persian or Indic spellings that need them are
// refused too; accents, every script written without them, single emoji and skin-tone
// modifiers pass. The error names the first such character's byte offset and code point, and
// matches both ErrInvalidOption and ErrInvalidOwner.
func WithOwner(owner string) Option {
	return Option{func(c *config) error {
		if err := wire.ValidateOwner(owner); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		c.owner = owner
		return nil
	}}
}

// WithClock sets the monotonic clock. Tests use simbatest's virtual clock. The default is
// the real monotonic clock plus the time the machine was suspended (package doc, Time), which
// spi.SystemClock does not count: a clock given here is used as it is.
func WithClock(clock spi.Clock) Option {
	return Option{func(c *config) error {
		if clock == nil {
			return invalid("clock is nil")
		}
		c.clock = clock
		return nil
	}}
}

// WithLogger sets the logger (default: discard). Every failed backend call is logged at WARN
// (ERROR when the error is permanent), damped while failures repeat; elected, revoked and
// session opened/lost at INFO, but a lock's own cycle (its grant and its Unlock) at DEBUG,
// and each engine step at DEBUG.
//
// The damping keeps an outage readable; the listeners, Events, Err and simbaprom still see
// every failure. A permanent error is logged at ERROR once per operation, name and error, then
// once a minute counting the repeats ("repeats"), the rest at DEBUG. A retryable one starts an
// outage: one WARN line naming the backend, the call, the error and, for the session's open or
// keep-alive, what it affects (one more line says so if the session's call fails in an outage
// that began with another); in it, a failure whose root cause (numbers aside) is new is a
// WARN line at once, the others are at DEBUG but for one WARN line a minute, "simba backend
// still failing", counting them; calls of elections, locks and groups failing while the
// session's fail are folded in. It ends with one INFO line, "simba backend reachable again",
// with its failures and length, when the session's call succeeds after failing in it, or every
// call that failed in it has succeeded. A call that failed on a session the client had sent the close of
// (at Close, or after losing it) is logged at DEBUG: the close subsumes it (ZooKeeper fails
// every request in flight on a session being closed), and the close's own failure is logged
// at Close. A call on a session the client has lost, or whose local deadline has passed, the
// lost session's close included, is at DEBUG too: "simba session lost" says what happened
// (after a pause of the process past the deadline — SIGSTOP, a VM or GC stall — the
// keep-alive in flight times out and the close fails on a server that has expired the
// session, which read as an outage of a few milliseconds: a WARN line and "reachable again").
//
// A pause of the process is told from a network cut: when the client runs again and finds its
// session's timers (keep-alive, deadline) overdue by max(renewal interval/2, 1 s) or more —
// the process was stopped (SIGSTOP), frozen with its VM or container, starved of CPU, or a
// listener blocked the client's loop — and the session's local deadline passed meanwhile, it
// logs one WARN line "simba process paused" with paused_for (how long, at least: from when the
// earliest overdue timer was due), session and session_lost=true before the session's loss,
// and the "simba session lost" and "simba revoked" lines that follow carry paused_for too (a
// loss to a network cut or a backend down has none). A pause the session outlived is logged
// (session_lost=false) only if it reached a renewal interval (and a second): it left the
// session one pause from lost. A GC pause or a loaded machine delays timers by far less than a
// second; on a virtual clock (simbatest) timers are never late. EventPaused reports the same to
// listeners. A system suspend (laptop sleep) is reported the same way on the default clock
// (package doc, Time): paused_for is at least the time slept and the cause says "the machine
// was suspended (…) for …"; the timers, on Go's monotonic clock, which stopped, are not late,
// but the first reading of the clock after the resume counts the time slept, and the loop
// steps at once.
//
// It is the client's logger, not the drivers': go-redis (failed dials, pool events) writes to
// stderr through a process-wide logger that only redis.SetLogger changes, which Simba leaves to
// the program; go-sql-driver/mysql's lines (bad idle connections) go, at DEBUG, to the logger of
// the MySQL backend that Open made (its WithLogger), unless the program set its own with
// mysql.SetLogger first. What they report reaches this logger too, as failed backend calls.
//
// The backends' own warnings (foreign records, a Redis server without durable persistence, a
// ZooKeeper DSN without credentials, an etcd server raising the TTL, ...) go to this logger
// too when the backend was made without a logger of its own: New hands it to the backend
// (spi.LoggerAdopter; the SQL, Redis, ZooKeeper and etcd backends take it), so that
// simba.New(open.Open(dsn), simba.WithLogger(l)) logs everything to l. A backend given its
// own logger (open.WithLogger, the backend's WithLogger or WithSlog) keeps it; one made
// without, and given to a client without WithLogger, logs to slog.Default().
func WithLogger(l *slog.Logger) Option {
	return Option{func(c *config) error {
		if l == nil {
			return invalid("logger is nil")
		}
		c.logger, c.loggerSet = l, true
		return nil
	}}
}

// WithCallbackExecutor sets what runs OnElected / OnRevoked callbacks (and a group's
// OnAssigned / OnUnassigned). Callbacks of one election are still delivered one at a time, in
// order. The default runs them on a goroutine of the client's: the one that received the
// backend reply that brought them (a grant's), once it has stepped it and has no other call to
// run (see OnElected), or else one started for them. With an executor, every callback goes through it.
func WithCallbackExecutor(e Executor) Option {
	return Option{func(c *config) error {
		if e == nil {
			return invalid("callback executor is nil")
		}
		c.callbacks, c.callbacksDefault = e, false
		return nil
	}}
}

// WithWorkExecutor sets what runs leader work (RunWhileLeader, Schedule, partition handlers);
// default: a goroutine per term. A term whose name's earlier work still runs is not handed to
// the executor: it runs after that work, on the same run of the executor (after a panic
// there, in a new run, handed over from a goroutine of its own). A panic in the work goes up
// to the executor's goroutine: one that recovers it keeps the program running, the client
// having seen the work exit.
func WithWorkExecutor(e Executor) Option {
	return Option{func(c *config) error {
		if e == nil {
			return invalid("work executor is nil")
		}
		c.work = e
		return nil
	}}
}

// WithListener adds an event listener. Listeners run where the engine is stepped, one event at
// a time, and must be cheap.
func WithListener(l Listener) Option {
	return Option{func(c *config) error {
		if l == nil {
			return invalid("listener is nil")
		}
		c.listeners = append(c.listeners, l)
		return nil
	}}
}

// Once makes the options opts apply once per client: the first Once with key that New applies
// applies them, and a later Once with an equal key (==) is ignored. A package that hands out
// options feeding an object of its own (a listener and a call observer counting into a metrics
// collector, as simbaprom's Metrics.Options) wraps them in Once with a key only it can make,
// so that a program passing those options twice, by a slip of an append, gets them once: a
// listener added twice sees every event twice (New cannot compare functions), and its counts
// would double. The key must be a non-nil comparable value (a pointer, or a value of an
// unexported type of the package wrapping the options, so that no other package can make an
// equal one); New refuses any other with ErrInvalidOption. opts are applied in order, as if
// given in Once's place; an error of one fails New.
func Once(key any, opts ...Option) Option {
	return Option{func(c *config) error {
		if key == nil || !reflect.ValueOf(key).Comparable() {
			return invalid("the key of Once (%T) is not a non-nil comparable value", key)
		}
		if _, done := c.once[key]; done {
			return nil
		}
		if c.once == nil {
			c.once = make(map[any]struct{})
		}
		c.once[key] = struct{}{}
		for _, o := range opts {
			if o.apply == nil {
				return invalid("zero option in Once")
			}
			if err := o.apply(c); err != nil {
				return err
			}
		}
		return nil
	}}
}

// CallInfo describes one backend call that returned (WithCallObserver).
type CallInfo struct {
	// Op is the operation: OpOpenSession, OpKeepAlive, OpCloseSession, OpAcquire, OpRelease,
	// OpJoin, OpLeave, OpMembers or OpWithdraw.
	Op string
	// Name is the lease or group the call concerned (empty for session calls).
	Name string
	// Took is how long the call took, by the client's clock.
	Took time.Duration
	// Token is, for an acquire that granted the lease, its fencing token (zero otherwise).
	Token int64
	// Err is the call's failure (nil on success; a call that timed out is Unavailable).
	Err error
	// Class is Err's class (spi.Classify; meaningful only when Err is set).
	Class spi.Class
	// Abandoned reports a call cut short because the Lock, TryLock or Unlock that ran it on
	// its own goroutine stopped waiting (its context ended): Err (retryable) says so, and is
	// not a failure of the backend. A release cut so goes on as a second call. A deadline
	// cuts calls so only on a backend whose calls are cut-safe (spi.CutSafe).
	Abandoned bool
	// Closing reports a call ended by a close, not by the backend: it failed on a session
	// whose close the client had sent (Close, or the end of a lost session; the close
	// subsumes the call, and the close's own outcome is reported), or it was an open cut
	// short by Close. Err says what the call saw (often context.Canceled: a release still in
	// flight when Close finished); the client logs it at DEBUG and sends it to no listener.
	Closing bool
}

// WithCallObserver adds an observer of backend calls, for metrics: it is called on the call's
// goroutine after every backend call returns, before the client sees the reply, so it must be
// cheap and must not block.
func WithCallObserver(f func(CallInfo)) Option {
	return Option{func(c *config) error {
		if f == nil {
			return invalid("call observer is nil")
		}
		c.observers = append(c.observers, f)
		return nil
	}}
}

// WithJitter bounds the random delay a candidate adds to the holder's remaining time before
// retrying (default DefaultMaxJitter, 25 ms), in [0, MaxTTL]. Zero is taken literally: no
// jitter, the candidate retries exactly at the holder's remaining time (not the default).
func WithJitter(max time.Duration) Option {
	return Option{func(c *config) error {
		if max < 0 || max > MaxTTL {
			return invalid("jitter %v must be in [0, %v]", max, MaxTTL)
		}
		c.maxJitter = max
		return nil
	}}
}

// WithSeed makes the client's jitter deterministic (for tests); by default it is random. Each
// draw (a retry's backoff, the jitter added to a candidate's retry) is a hash of the seed, the
// event it is drawn for and the clock's reading, not the next number of a stream, so on a
// virtual clock (simbatest) events that reach the client at one instant in either order get
// the same delays.
//
// On such a clock (an spi.Settler) a seeded client's course repeats from run to run, to the
// nanosecond: it orders its own timers that fall due at one instant (the engine's, its calls'
// timeouts, its probes, Schedule's ticks) by keys that do not depend on goroutine scheduling,
// whatever order the clock fires them in; it steps a timer due at once right after the step
// that armed it; and its backend calls take turns, in the order it started them, each once
// the calls before it have replied or wait idle on the clock (a fault's delay, a cut link).
// What stays a race of goroutines, and may differ between runs:
//   - which of several clients that contend at one instant wins (each client's goroutines
//     run on their own): a test that needs one winner lets each settle before the next
//     starts, and gives each client its own seed;
//   - the order in which a client takes another client's doing (a hint of a release) and
//     its own reply or timer of the same instant;
//   - requests made at one instant from several goroutines (the test's, callbacks', leader
//     work's), which reach the client in either order, and a request the test makes while
//     the client still works (before Settle: a Start right after New, while the session's
//     open is in flight), which it takes before or after that work's replies;
//   - timers of code that is not the client (a backend's or a test server's own: simbatest's
//     DelayRequests and DelayReplies of calls made at one instant).
func WithSeed(seed uint64) Option {
	return Option{func(c *config) error {
		c.seed, c.seeded = seed, true
		return nil
	}}
}

// finish resolves the options with the engine's rules (engine.Options.Resolve fills the
// derived defaults — renewal interval TTL/3, cooldown one TTL — and checks the combination:
// TTL ≥ 3 × renewal interval, margin < TTL/2, every bound), so the client and its engine agree
// on every value; New hands the engine the result (engineOptions).
func (c *config) finish() error {
	if c.clock == nil {
		c.clock = newSuspendClock()
	}
	o, err := c.engineOptions().Resolve()
	if err != nil {
		return err
	}
	c.renewEvery, c.cooldown = o.RenewInterval, o.Cooldown
	return nil
}

// engineOptions maps the options to the engine's, value for value: a zero drift, margin or
// jitter is a literal zero there too, and a zero renewal interval or cooldown (before finish)
// is the engine's derived default. The backoff bounds are the engine's defaults (no option
// sets them).
func (c *config) engineOptions() engine.Options {
	return engine.Options{
		Owner:         c.owner,
		TTL:           c.ttl,
		RenewInterval: c.renewEvery,
		Drift:         c.drift,
		Margin:        c.margin,
		Cooldown:      c.cooldown,
		RetryJitter:   c.maxJitter,
	}
}

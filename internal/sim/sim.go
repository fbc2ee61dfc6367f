package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// The names every run uses: elections e0.., the lock lk and the group g.
const (
	lockName  = "lk"
	groupName = "g"
)

// checkEvery is the period of the checks that poll the model (rule 3).
const checkEvery = 100 * time.Millisecond

// never is a time after every run.
const never = time.Duration(math.MaxInt64)

var (
	// errTimeout is what a client sees when a call times out: retryable, outcome unknown.
	errTimeout = spi.Unavailable("call", context.DeadlineExceeded)
	// errDown is what a call to an unavailable backend fails with at once.
	errDown = spi.Unavailable("call", errors.New("connection refused"))
	// errRefused is what a call fails with at once during an outage of a seed with
	// Faults.Refusals: permanent, without effect.
	errRefused = spi.AsPermanent(errors.New("refused for good (simulated)"))
)

// Violation is an invariant a run broke: which check, when (backend time), and what.
type Violation struct {
	Check string
	At    time.Duration
	Msg   string
}

// Error prints the violation as "<check> at <time>: <what>".
func (v *Violation) Error() string {
	return fmt.Sprintf("%s at %v: %s", v.Check, v.At, v.Msg)
}

// Stats counts what a run did, and how often the faults that matter most struck.
type Stats struct {
	Steps, Calls, Elected, Revoked, Hints int
	// PastDeadline counts replies that reached a live session at or after its local deadline
	// (late replies, pauses).
	PastDeadline int
	// Expired counts sessions the backend expired by force; Pauses and Crashes count the
	// client pauses and crashes that struck a running engine.
	Expired, Pauses, Crashes int
	// Dropped counts acquires dropped unsent on an EfCancel (a partition stopped while its
	// request was on its way).
	Dropped int
}

// Add adds o to st.
func (st *Stats) Add(o Stats) {
	st.Steps += o.Steps
	st.Calls += o.Calls
	st.Elected += o.Elected
	st.Revoked += o.Revoked
	st.Hints += o.Hints
	st.PastDeadline += o.PastDeadline
	st.Expired += o.Expired
	st.Pauses += o.Pauses
	st.Crashes += o.Crashes
	st.Dropped += o.Dropped
}

// Result is the outcome of one run.
type Result struct {
	Config Config
	// Violation is the first invariant broken, or nil.
	Violation *Violation
	// Transcript is the last lines of events, effects and driver notes before the violation
	// (empty when the run passed).
	Transcript string
	Stats      Stats
}

// Sim runs seeds. A Sim reuses its buffers from run to run, so one per goroutine: it is not safe
// for concurrent use.
type Sim struct {
	// Lines is how many transcript lines a failure report shows (default DefaultTranscript).
	Lines int
	// LandAfterTimeout lets a timed-out request reach the backend after the client gave up
	// on it (up to half a call timeout later), as a request stuck in a queue does (default
	// true). Setting it false avoids two engine issues found with it (see doc.go) while they
	// are open.
	LandAfterTimeout bool

	shape Shape
	// driftScale multiplies every client's clock-rate deviation (tests: beyond the bound the
	// engine allows for, the one-valid-term check must fire).
	driftScale float64

	cfg    Config
	rng    *rand.Rand
	now    time.Duration
	healed bool
	model  *simbatest.Model
	// unfair runs the model without waiter queues (simbatest.WithoutFairness): the mutation
	// that the fair-queue check must catch.
	unfair bool
	// falseSessionWaiters tells the engines and the fair-queue check that waiter entries live
	// with their session (as Faults.SessionWaiters does) while the model's lapse with the
	// session's expiry as of the latest queued acquire: a backend that claims
	// spi.SessionQueue falsely, the mutation that the fair-queue check must catch.
	falseSessionWaiters bool
	// noWithdrawRetry runs the session-waiter model (Faults.SessionWaiters) without the
	// backend's retry of failed withdrawals (spi.SessionQueue requires it): the mutation that
	// the liveness check must catch.
	noWithdrawRetry bool
	// loseHints loses every hint before healing (as Faults.LostHint of 1 would): each release
	// then reaches a waiter only through its retries, the fallback one two TTLs after a HeldBy
	// with Faults.UnknownRemaining.
	loseHints bool
	// fairQ is the fair-queue check's own record of each name's waiters (see checkFair).
	fairQ   map[string][]shadowWaiter
	q       queue
	tr      ring
	clients []client
	calls   []call
	terms   []term
	hints   []spi.Hint
	names   []string
	nameIdx map[string]int
	byName  []nameState
	sess    map[spi.SessionID]sessRec
	stats   Stats
	vio     *Violation
	spare   []item
}

// client is one simulated client process: an engine and what its driver and user know.
type client struct {
	idx    int32
	owner  string
	rate   float64
	origin time.Duration
	inc    uint32
	eng    *engine.Engine // nil while crashed

	paused   bool
	deferred []item

	timers   map[engine.Timer]uint64
	timerSeq uint64

	nextFuture engine.FutureID
	futures    map[engine.FutureID]future
	closing    bool

	open      map[string]int32 // name → index of its unrevoked term
	started   []bool           // the user runs election i
	workFor   []bool           // election i was started with work
	joined    bool
	leaving   bool // a Leave's future is outstanding: the user joins again only after it
	groupWork bool
	lockBusy  bool

	// disturbed: until then a fault (lost, slow or failed call, pause) may hold up rule 3.
	disturbed time.Duration
	// withdrawals are the withdrawals (name → session) that failed at this client, which its
	// backend runs again with the session's next keep-alive (Faults.SessionWaiters).
	withdrawals map[string]spi.SessionID
	renewB      time.Duration // the renewal interval in backend time
}

type future struct {
	op   string
	name string
	at   time.Duration
}

// call is one backend call in flight.
type call struct {
	client   int32
	inc      uint32
	ef       engine.Effect
	reply    engine.Event
	sentB    time.Duration
	sentC    time.Duration
	replyLag time.Duration // backend time from handling to the reply's arrival
	deliver  bool          // the reply reaches the client (else a timeout does, or nothing)
	timeout  bool          // a timeout item is scheduled
	answered bool
	// dropped: an EfCancel came before the request reached the backend: it never does, and
	// the client steps a NotSent reply at once (as the shell drops a call still queued behind
	// its bound on calls in flight).
	dropped bool
	handled bool // the request reached the backend
}

// term is one Elected, followed until its Revoked.
type term struct {
	client   int32
	inc      uint32
	name     string
	ni       int
	token    int64
	session  spi.SessionID
	startB   time.Duration
	deadline time.Duration // client time: its session's latest published deadline
	// until is the term's own bound by its grant (engine rule 6), client time; MaxInt64 once
	// a keep-alive confirmed it. The term is valid before min(deadline, until).
	until    time.Duration
	revoked  bool
	reason   engine.Reason
	revokedB time.Duration
	// work runs under the term until it exits (exitAt, backend time, never if not planned).
	work   bool
	exitAt time.Duration
	// coverW is the client time until which the work may believe its term valid after a
	// revocation: the session's deadline as of a stop, step-down or close; the revocation
	// itself otherwise.
	coverW time.Duration
}

type nameState struct {
	lastToken int64
	lastTerm  int32 // -1: none
	open      []int32
	work      []int32
	r3Holder  spi.SessionID
	r3Since   time.Duration
}

type sessRec struct {
	client int32
	inc    uint32
	forced bool // expired by force: the backend broke its promise, so its terms are exempt
}

// New returns a simulator of runs shaped sh.
func New(sh Shape) *Sim {
	s := &Sim{Lines: DefaultTranscript, LandAfterTimeout: true, shape: sh, driftScale: 1, nameIdx: make(map[string]int)}
	for i := 0; i < sh.Elections; i++ {
		s.names = append(s.names, "e"+strconv.Itoa(i))
	}
	s.names = append(s.names, lockName)
	for p := 0; p < sh.Partitions; p++ {
		s.names = append(s.names, wire.PartitionName(groupName, p))
	}
	for i, n := range s.names {
		s.nameIdx[n] = i
	}
	s.byName = make([]nameState, len(s.names))
	return s
}

// Run runs seed with rule brk broken (zero: none) and returns its outcome.
func (s *Sim) Run(seed uint64, brk engine.Rule) Result {
	s.reset(seed, brk)
	for s.q.len() > 0 && s.vio == nil {
		it := s.q.pop()
		if it.at > s.shape.Duration {
			break
		}
		s.now = it.at
		s.dispatch(&it)
	}
	if s.vio == nil {
		s.now = s.shape.Duration
		s.checkSettled(true)
	}
	res := Result{Config: s.cfg, Violation: s.vio, Stats: s.stats}
	if s.vio != nil {
		res.Transcript = s.tr.String()
	}
	return res
}

func (s *Sim) reset(seed uint64, brk engine.Rule) {
	s.rng = newRand(seed)
	s.cfg = Derive(seed, s.shape, brk, s.rng)
	for i, r := range s.cfg.Rates {
		s.cfg.Rates[i] = 1 + (r-1)*s.driftScale
	}
	f := &s.cfg.Faults
	s.now, s.healed, s.vio, s.stats = 0, false, nil, Stats{}
	opts := []simbatest.ModelOption{simbatest.WithSeed(seed)}
	if !f.ExpiryHints {
		opts = append(opts, simbatest.WithoutExpiryHints())
	}
	if f.ReportAllHeld {
		opts = append(opts, simbatest.WithReportAllHeld())
	}
	if f.LeaseExpiry {
		opts = append(opts, simbatest.WithLeaseExpiry())
	}
	if s.unfair {
		opts = append(opts, simbatest.WithoutFairness())
	}
	if f.SessionWaiters && !s.falseSessionWaiters {
		opts = append(opts, simbatest.WithSessionWaiters())
	}
	if f.UnknownRemaining {
		opts = append(opts, simbatest.WithUnknownRemaining())
	}
	s.model = simbatest.NewModel(opts...)
	s.fairQ = make(map[string][]shadowWaiter)
	s.q.reset()
	s.tr.reset(s.Lines)
	clear(s.calls)
	s.calls = s.calls[:0]
	clear(s.terms)
	s.terms = s.terms[:0]
	clear(s.hints)
	s.hints = s.hints[:0]
	s.sess = make(map[spi.SessionID]sessRec)
	for i := range s.byName {
		ns := &s.byName[i]
		*ns = nameState{lastTerm: -1, open: ns.open[:0], work: ns.work[:0]}
	}
	if len(s.clients) != s.shape.Clients {
		s.clients = make([]client, s.shape.Clients)
	}
	for i := range s.clients {
		c := &s.clients[i]
		*c = client{
			idx: int32(i), owner: "c" + strconv.Itoa(i), rate: s.cfg.Rates[i], origin: s.cfg.Origins[i],
			deferred: c.deferred[:0],
			timers:   make(map[engine.Timer]uint64), futures: make(map[engine.FutureID]future),
			open: make(map[string]int32), started: make([]bool, s.shape.Elections), workFor: make([]bool, s.shape.Elections),
		}
		c.renewB = time.Duration(float64(s.cfg.RenewInterval()) / c.rate)
		// Boot within the first 100 ms.
		s.q.push(item{at: time.Duration(s.rng.Int64N(int64(100 * time.Millisecond))), kind: kRestart, client: int32(i)})
	}
	heal := s.shape.Heal()
	for _, w := range f.Outages {
		s.q.push(item{at: w.From, kind: kOutage, client: -1, idx: -1})
	}
	for _, p := range f.Probes {
		s.q.push(item{at: p.At, kind: kProbe, client: int32(p.Client), idx: -1})
	}
	for _, p := range f.Pauses {
		s.q.push(item{at: p.From, kind: kPause, client: int32(p.Client), idx: -1})
	}
	for i, cr := range f.Crashes {
		s.q.push(item{at: cr.At, kind: kCrash, client: int32(cr.Client), idx: int32(i)})
	}
	for i := 0; i < f.Expiries; i++ {
		s.q.push(item{at: time.Duration(s.rng.Int64N(int64(heal))), kind: kExpire, client: int32(s.rng.IntN(s.shape.Clients))})
	}
	s.q.push(item{at: checkEvery, kind: kCheck, client: -1})
	s.q.push(item{at: heal, kind: kHeal, client: -1})
	s.q.push(item{at: heal + s.shape.LivenessBound, kind: kSettled, client: -1})
}

// --- time ---

// clock is client c's time at backend time b.
func (c *client) clock(b time.Duration) time.Duration {
	return c.origin + time.Duration(c.rate*float64(b))
}

// backendAt is the earliest backend time at which client c's clock reads at least ct.
func (c *client) backendAt(ct time.Duration) time.Duration {
	if ct <= c.origin {
		return 0
	}
	b := time.Duration(math.Ceil(float64(ct-c.origin) / c.rate))
	for c.clock(b) < ct {
		b++
	}
	for b > 0 && c.clock(b-1) >= ct {
		b--
	}
	return b
}

// between draws a duration in [lo, hi).
func (s *Sim) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

func (s *Sim) latency() time.Duration {
	return s.between(s.cfg.Faults.LatencyMin, s.cfg.Faults.LatencyMax+1)
}

func (s *Sim) down(b time.Duration) bool {
	for _, w := range s.cfg.Faults.Outages {
		if b >= w.From && b < w.To {
			return true
		}
	}
	return false
}

// --- transcript ---

func (s *Sim) note(client int32, n note, num int64, str string) {
	r := s.tr.slot()
	r.at, r.ct, r.client, r.kind, r.note, r.n, r.s = s.now, 0, client, recNote, n, num, str
}

func (s *Sim) fail(check string, format string, args ...any) {
	if s.vio != nil {
		return
	}
	s.vio = &Violation{Check: check, At: s.now, Msg: fmt.Sprintf(format, args...)}
}

// --- dispatch ---

func (s *Sim) dispatch(it *item) {
	switch it.kind {
	case kCall:
		s.handleCall(it.idx)
		return
	case kCheck:
		s.checkTermLease()
		s.checkRule3()
		if next := s.now + checkEvery; next <= s.shape.Duration {
			s.q.push(item{at: next, kind: kCheck, client: -1})
		}
		return
	case kHeal:
		s.heal()
		return
	case kSettled:
		s.checkSettled(false)
		return
	case kOutage:
		for _, w := range s.cfg.Faults.Outages {
			if w.From == s.now {
				s.note(-1, nOutage, int64(w.To), "")
			}
		}
		return
	}
	c := &s.clients[it.client]
	switch it.kind {
	case kRestart:
		s.restart(c)
		return
	case kExpire:
		s.expire(c)
		return
	case kCrash:
		s.crash(c, it.idx)
		return
	case kPause:
		if c.eng != nil && !c.paused && !s.healed {
			c.paused = true
			s.stats.Pauses++
			s.note(c.idx, nPause, 0, "")
			for _, p := range s.cfg.Faults.Pauses {
				if p.Client == int(c.idx) && p.From == s.now {
					s.q.push(item{at: p.To, kind: kResume, client: c.idx, inc: c.inc})
					break
				}
			}
		}
		return
	case kResume:
		if it.inc == c.inc {
			s.resume(c)
		}
		return
	case kProbe:
		// Whatever incarnation runs then (a crashed client has none; a paused one steps
		// nothing: its probe would wait for it).
		if c.eng != nil && !c.paused {
			s.step(c, engine.Event{Kind: engine.EvReachable}, -1)
		}
		return
	}
	if it.inc != c.inc || c.eng == nil {
		return // for an incarnation that crashed or closed
	}
	if c.paused {
		c.deferred = append(c.deferred, *it)
		return
	}
	switch it.kind {
	case kReply:
		cl := &s.calls[it.idx]
		if !cl.answered {
			cl.answered = true
			if cl.reply.Err != nil {
				s.withdrawFailed(c, &cl.ef)
			}
			// The call's Reply event was built when the backend handled it.
			s.step(c, cl.reply, it.idx)
		}
	case kTimeout:
		cl := &s.calls[it.idx]
		if !cl.answered {
			cl.answered = true
			s.withdrawFailed(c, &cl.ef)
			ev := engine.ReplyTo(cl.ef)
			ev.SentAt, ev.Err = cl.sentC, errTimeout
			s.step(c, ev, -1)
		}
	case kTimer:
		if c.timers[it.timer] == it.arm {
			delete(c.timers, it.timer)
			s.step(c, engine.Event{Kind: engine.EvTimer, Timer: it.timer}, -1)
		}
	case kHint:
		s.step(c, engine.Event{Kind: engine.EvHint, Hint: s.hints[it.idx]}, -1)
	case kWork:
		t := &s.terms[it.idx]
		if t.work && t.exitAt == it.at {
			t.work = false
			s.dropWork(it.idx)
			s.step(c, engine.Event{Kind: engine.EvWorkExited, Name: t.name, Token: t.token}, -1)
		}
	case kAction:
		s.action(c)
	case kUnlock:
		c.lockBusy = false
		s.step(c, engine.Event{Kind: engine.EvStop, Name: lockName, Future: s.newFuture(c, "unlock", lockName)}, -1)
	}
}

// ReplayCommand is the command that replays seed.
func ReplayCommand(seed uint64) string {
	return "go test ./internal/sim -run TestSimulate -seed=" + strconv.FormatUint(seed, 10) + " -v"
}

// Report describes a failed run: the seed, the options derived from it, the replay command,
// the violation and the transcript before it.
func (r *Result) Report() string {
	if r.Violation == nil {
		return "seed " + strconv.FormatUint(r.Config.Seed, 10) + ": ok"
	}
	return fmt.Sprintf("seed %d FAILED: %s: %s\n  at backend time %v\nreplay: %s\noptions:\n%s\ntranscript (backend time, client, [client time], event / effect / -- driver note), last %d lines:\n%s",
		r.Config.Seed, r.Violation.Check, r.Violation.Msg, r.Violation.At, ReplayCommand(r.Config.Seed), r.Config.String(), strings.Count(r.Transcript, "\n"), r.Transcript)
}

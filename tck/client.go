package tck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/simbatest"
)

// ClientSpec runs the scenarios of the Client (Election, Lock, PartitionGroup, Close) through
// real simba.Clients, each on its own backend from f.NewBackend, against the server under test:
//
//   - Election: one leader among three clients; failover when the leader is cut off from the
//     server (its keep-alives hang, its local deadline passes, its session expires at the
//     server, another client wins with a greater token); failover when the leader's session
//     is expired at the server (only with Factory.ExpireSession); handover keeps the lease until
//     the leader work exits; StepDown keeps the client out of the race for its cooldown.
//   - Lock: Client.Lock, TryLock, Held.Unlock and WithLock across two clients with increasing
//     tokens; Unlock of a lock not held or unlocked twice; Lock with a context that ends while
//     another client holds the lock; goroutines of one client queued on one name, served one
//     after the other with increasing tokens, and the name free at the server once they are
//     done.
//   - PartitionGroup: eight partitions over three members, rebalanced when one leaves and when
//     another joins; Leave returns only once the leaver's session holds no partition and is no
//     longer a member at the server.
//   - Close: with leader work running, and from inside OnElected.
//
// At no instant the scenarios observe may two clients hold valid terms of one lease.
//
// Unlike the other suites, ClientSpec runs on real time: the clients use the real monotonic
// clock (spi.SystemClock, also passed as BackendConfig.Clock), so the server must expire
// sessions on real time too (simbatest: a Server made WithClock(spi.SystemClock())).
// Factory.Wait is not used. The clients' TTL is max(MinTTL, 1 s) where sessions are let expire,
// at least 8 s where Factory.ExpireSession expires them, and max(2 × the first, 2 s) elsewhere,
// all capped by MaxTTL; every wait polls the clients until an outcome holds, with generous
// limits, so a slow machine makes the suite slower, not flaky. On simbatest the suite takes
// about 11 s.
func ClientSpec(t *testing.T, f Factory) {
	h := newHarness(t, f)
	c := newClientHarness(h)
	t.Run("Election", func(t *testing.T) {
		t.Run("OneLeaderAmongThree", c.electOne)
		t.Run("FailoverWhenLeaderIsCutOff", c.electCutOff)
		if f.ExpireSession != nil {
			t.Run("FailoverWhenLeaderSessionExpires", c.electExpired)
		} else {
			t.Log("tck: Factory.ExpireSession is nil: failover on a session expired at the server is not checked")
		}
		t.Run("HandoverKeepsLeaseUntilWorkExits", c.electHandover)
		t.Run("StepDownWithCooldown", c.electStepDown)
	})
	t.Run("Lock", func(t *testing.T) {
		t.Run("LockTryLockUnlockWithLock", c.lockCycle)
		t.Run("UnlockNotHeld", c.lockUnlockNotHeld)
		t.Run("LockContextEndsWhileHeld", c.lockContextEnds)
		t.Run("LocalQueue", c.lockLocalQueue)
	})
	t.Run("PartitionGroup", func(t *testing.T) {
		t.Run("RebalancesOnLeaveAndJoin", c.groupRebalance)
	})
	t.Run("Close", func(t *testing.T) {
		t.Run("WithWorkRunning", c.closeWithWork)
		t.Run("FromInsideOnElected", c.closeFromCallback)
	})
}

// pollEvery is how often the scenarios look at the clients' state while they wait.
const pollEvery = 2 * time.Millisecond

// clientHarness is one ClientSpec run.
type clientHarness struct {
	*harness
	ttl      time.Duration // TTL of clients whose sessions a scenario lets expire
	steady   time.Duration // TTL of clients that keep their sessions
	forced   time.Duration // TTL of clients whose sessions a scenario expires at the server
	cooldown time.Duration // StepDown's cooldown
	patience time.Duration // how long any awaited outcome may take
}

func newClientHarness(h *harness) *clientHarness {
	capped := func(d time.Duration) time.Duration {
		if h.f.MaxTTL > 0 && d > h.f.MaxTTL {
			return h.f.MaxTTL
		}
		return d
	}
	c := &clientHarness{harness: h}
	c.ttl = capped(max(h.f.MinTTL, time.Second))
	c.steady = capped(max(2*c.ttl, 2*time.Second))
	// Long enough that the client learns of a forced expiry from a keep-alive before its local
	// deadline passes, even on a backend that notices the expiry only when it reconnects
	// (ZooKeeper).
	c.forced = capped(max(3*c.steady, 8*time.Second))
	c.cooldown = 2 * c.steady
	c.patience = 30*time.Second + 10*c.steady + 4*h.f.ExpiryLag
	return c
}

// member is one simba.Client of the scenarios, on its own backend, which the scenario can cut
// off from the server.
type member struct {
	*simba.Client
	label   string
	link    *simbatest.Link
	backend spi.Backend // the backend under the link, for checks that go around the client
}

// client starts a client labelled label with the given TTL on a new backend; the client is
// closed (after its link is restored) and then its backend when the test ends.
func (c *clientHarness) client(t testing.TB, label string, ttl time.Duration, opts ...simba.Option) *member {
	t.Helper()
	clock := spi.SystemClock()
	b := c.f.NewBackend(t, BackendConfig{Clock: clock, Prefix: c.prefix})
	if b == nil {
		t.Fatal("tck: Factory.NewBackend returned nil")
	}
	t.Cleanup(func() { b.Close() })
	link := simbatest.NewLink(b)
	owner := c.owner() + ":" + label
	opts = append([]simba.Option{simba.WithTTL(ttl), simba.WithClock(clock), simba.WithOwner(owner)}, opts...)
	cl, err := simba.New(link.Backend(), opts...)
	if err != nil {
		t.Fatalf("simba.New(%s): %v", label, err)
	}
	t.Cleanup(func() {
		link.Restore()
		ctx, cancel := context.WithTimeout(context.Background(), c.patience)
		defer cancel()
		if err := cl.Close(ctx); err != nil {
			t.Errorf("closing client %s: %v", label, err)
		}
	})
	return &member{Client: cl, label: label, link: link, backend: b}
}

// election creates and starts an election for name on m.
func (m *member) election(t testing.TB, name string, opts ...simba.ElectionOption) *simba.Election {
	t.Helper()
	e, err := m.NewElection(name, opts...)
	if err != nil {
		t.Fatalf("%s: NewElection(%q): %v", m.label, name, err)
	}
	if err := e.Start(ctx(t)); err != nil {
		t.Fatalf("%s: Start(%q): %v", m.label, name, err)
	}
	return e
}

// until polls cond until it holds, failing the test if it does not within limit.
func until(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s did not happen within %v", what, limit)
		}
		time.Sleep(pollEvery)
	}
}

// receive waits for a value on ch, failing the test after limit.
func receive[T any](t testing.TB, ch <-chan T, limit time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(limit):
		t.Fatalf("%s did not happen within %v", what, limit)
		panic("unreachable")
	}
}

// exclusive reads the terms that n holders claim on one lease, twice (first in order, then in
// reverse), and returns an error if two of them were valid at one instant. A term valid at both
// of its reads was valid at every instant between them (a term that loses its validity never
// regains it), so another holder's term valid at a read in between overlaps it. It also returns
// the holder whose term was valid at the second read, or -1.
func exclusive(what string, labels []string, read func(i int) (simba.Term, bool)) (int, simba.Term, error) {
	n := len(labels)
	terms := make([]simba.Term, n)
	first := make([]bool, n)
	for i := range n {
		terms[i], first[i] = read(i)
	}
	second := make([]bool, n)
	for i := n - 1; i >= 0; i-- {
		second[i] = first[i] && terms[i].IsValid()
	}
	lead := -1
	for i := range n {
		if !second[i] {
			continue
		}
		for j := i + 1; j < n; j++ {
			if first[j] {
				return -1, simba.Term{}, fmt.Errorf("%s: %s (%v) and %s (%v) held valid terms at one instant", what, labels[i], terms[i], labels[j], terms[j])
			}
		}
		lead = i
	}
	if lead < 0 {
		return -1, simba.Term{}, nil
	}
	return lead, terms[lead], nil
}

// race is one lease name contended by elections on different clients.
type race struct {
	name    string
	members []*member
	es      []*simba.Election
}

func (r *race) labels() []string {
	l := make([]string, len(r.members))
	for i, m := range r.members {
		l[i] = m.label
	}
	return l
}

// leader returns the index of the client leading now (-1 if none) and its term, failing the
// test if two clients are seen leading at one instant.
func (r *race) leader(t testing.TB) (int, simba.Term) {
	t.Helper()
	i, term, err := r.check()
	if err != nil {
		t.Fatal(err)
	}
	return i, term
}

func (r *race) check() (int, simba.Term, error) {
	return exclusive("election "+r.name, r.labels(), func(i int) (simba.Term, bool) { return r.es[i].Term() })
}

// await polls the race, checking that no two clients lead at once, until cond holds for its
// current leader (-1 for none).
func (r *race) await(t testing.TB, limit time.Duration, what string, cond func(i int, term simba.Term) bool) (int, simba.Term) {
	t.Helper()
	var i int
	var term simba.Term
	until(t, limit, what, func() bool {
		i, term = r.leader(t)
		return cond(i, term)
	})
	return i, term
}

// watch keeps checking the race in the background until the test ends, when a second leader
// seen meanwhile fails the test.
func (r *race) watch(t *testing.T) {
	done := make(chan struct{})
	failed := make(chan error, 1)
	go func() {
		defer close(failed)
		for {
			select {
			case <-done:
				return
			case <-time.After(pollEvery):
			}
			if _, _, err := r.check(); err != nil {
				failed <- err
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		if err := <-failed; err != nil {
			t.Error(err)
		}
	})
}

// newRace starts n clients with the given TTL and options, each a candidate for one new lease.
func (c *clientHarness) newRace(t testing.TB, suffix string, n int, ttl time.Duration, opts ...simba.ElectionOption) *race {
	t.Helper()
	r := &race{name: c.name(suffix)}
	for i := range n {
		m := c.client(t, string(rune('a'+i)), ttl)
		r.members = append(r.members, m)
		r.es = append(r.es, m.election(t, r.name, opts...))
	}
	return r
}

// --- elections ---

func (c *clientHarness) electOne(t *testing.T) {
	r := c.newRace(t, "one", 3, c.steady)
	lead, term := r.await(t, c.patience, "a leader", func(i int, _ simba.Term) bool { return i >= 0 })
	if term.Token() <= 0 || term.Name() != r.name {
		t.Fatalf("leader term %v, want a positive token for %q", term, r.name)
	}
	if want := r.members[lead].Owner(); term.Owner() != want {
		t.Errorf("leader term owner %q, want %q", term.Owner(), want)
	}
	// The others learn who leads; the leader stays the only one.
	sid := r.members[lead].Session()
	r.await(t, c.patience, "every candidate to see the leader", func(i int, _ simba.Term) bool {
		if i != lead {
			t.Fatalf("leadership moved from %s to client %d without a fault", r.members[lead].label, i)
		}
		for j, e := range r.es {
			l, ok := e.Leader()
			if j == lead {
				if !ok || !l.Self {
					t.Fatalf("the leader %s: Leader() = %+v, %v, want itself", r.members[j].label, l, ok)
				}
				continue
			}
			if !ok || l.Self || l.Session != sid || l.Owner != r.members[lead].Owner() {
				return false
			}
		}
		return true
	})
	// Keep-alives renew the term past its first deadline, and the leader stays the only one.
	past := time.Now().Add(term.Remaining() + c.steady/10)
	until(t, c.patience, "the leader's term to outlive its first deadline", func() bool {
		if i, t2 := r.leader(t); i != lead || t2 != term {
			t.Fatalf("%s's term %v ended without a fault (now client %d leads with %v)", r.members[lead].label, term, i, t2)
		}
		return time.Now().After(past)
	})
}

func (c *clientHarness) electCutOff(t *testing.T) {
	r := c.newRace(t, "cut", 3, c.ttl)
	lead, t1 := r.await(t, c.patience, "a leader", func(i int, _ simba.Term) bool { return i >= 0 })
	l := r.members[lead]
	old := l.Session()
	// The network drops the leader's traffic: keep-alives hang until they time out, the local
	// deadline passes (the term ends), the session expires at the server, another client
	// takes over.
	l.link.CutOff()
	i, t2 := r.await(t, c.patience, "a new leader after the old one was cut off", func(i int, term simba.Term) bool {
		return i >= 0 && term.Token() != t1.Token()
	})
	if i == lead {
		t.Fatalf("the cut-off client %s leads again (%v)", l.label, t2)
	}
	if t2.Token() <= t1.Token() {
		t.Fatalf("new leader %s has token %d, not greater than the cut-off leader's %d", r.members[i].label, t2.Token(), t1.Token())
	}
	if t1.IsValid() {
		t.Fatalf("the cut-off leader's term %v is still valid", t1)
	}
	var rev *simba.RevokedError
	if cause := context.Cause(t1.Context()); !errors.As(cause, &rev) || rev.Reason != simba.RevokedDeadline {
		t.Errorf("the cut-off leader's term ended with %v, want a revocation for its deadline", cause)
	}
	// Back on the network it finds its session gone and opens a new one (an expired session
	// never comes back); it does not lead while the new leader does.
	l.link.Restore()
	r.await(t, c.patience, "the cut-off client to open a new session", func(int, simba.Term) bool {
		s := l.Session()
		return s != "" && s != old
	})
}

func (c *clientHarness) electExpired(t *testing.T) {
	reasons := make(chan simba.RevokeReason, 16)
	r := c.newRace(t, "expire", 3, c.forced, simba.OnRevoked(func(_ context.Context, _ simba.Term, reason simba.RevokeReason) {
		select {
		case reasons <- reason:
		default:
		}
	}))
	lead, t1 := r.await(t, c.patience, "a leader", func(i int, _ simba.Term) bool { return i >= 0 })
	l := r.members[lead]
	old := l.Session()
	if old == "" {
		t.Fatalf("the leader %s has no session", l.label)
	}
	c.f.ExpireSession(t, old)
	// The leader learns SessionExpired on its next keep-alive, revokes its term and opens a new
	// session; then some client (possibly the same one) leads with a greater token. A forced
	// expiry ends the session before the leader's local deadline, so, unlike an expiry after
	// the TTL, it may let another client lead while the old leader still believes it does,
	// until that keep-alive: this is what fencing tokens are for. Exclusion is not checked here.
	until(t, c.patience, "the leader's term to end", func() bool { return !t1.IsValid() })
	if got := receive(t, reasons, c.patience, "the OnRevoked callback"); got != simba.RevokedSessionExpired {
		t.Errorf("the leader's term was revoked for %v, want %v", got, simba.RevokedSessionExpired)
	}
	var rev *simba.RevokedError
	if cause := context.Cause(t1.Context()); !errors.As(cause, &rev) || rev.Reason != simba.RevokedSessionExpired || !errors.Is(cause, simba.ErrNotHeld) {
		t.Errorf("the leader's term context ended with %v, want a session-expired revocation matching ErrNotHeld", cause)
	}
	i, t2 := r.await(t, c.patience, "a leader with a greater token", func(i int, term simba.Term) bool {
		return i >= 0 && term.Token() != t1.Token()
	})
	if t2.Token() <= t1.Token() {
		t.Fatalf("new leader %s has token %d, not greater than %d", r.members[i].label, t2.Token(), t1.Token())
	}
	until(t, c.patience, "the old leader's new session", func() bool {
		s := l.Session()
		return s != "" && s != old
	})
}

func (c *clientHarness) electHandover(t *testing.T) {
	name := c.name("handover")
	release := make(chan struct{})
	var cancelled, exited atomic.Bool
	a := c.client(t, "a", c.steady)
	ea := a.election(t, name, simba.RunWhileLeader(func(ctx context.Context, _ simba.Term) error {
		<-ctx.Done()
		cancelled.Store(true)
		<-release // still finishing up: the lease must stay a's
		exited.Store(true)
		return nil
	}))
	until(t, c.patience, "a to lead", ea.IsLeader)
	b := c.client(t, "b", c.steady)
	eb := b.election(t, name)
	r := &race{name: name, members: []*member{a, b}, es: []*simba.Election{ea, eb}}
	r.watch(t)
	ta, _ := ea.Term()
	// a keeps the lease for its work until the work exits or the session's local deadline as
	// of the stop passes, which is at least rem away: until then b must not lead and a's Stop
	// must not return. The work exits halfway.
	start := time.Now()
	rem := ta.Remaining()
	inside := func() bool { return time.Since(start) < rem }
	stopped := make(chan error, 1)
	go func() { stopped <- ea.Stop(context.Background()) }()
	until(t, c.patience, "a's work to see its term revoked", cancelled.Load)
	if ta.IsValid() {
		t.Fatal("a's term is valid after its work's context ended")
	}
	until(t, rem, "half of a's remaining time", func() bool {
		if eb.IsLeader() && inside() {
			t.Fatalf("b leads %v after a's stop while a's work still runs (a's deadline is %v away)", time.Since(start), rem)
		}
		select {
		case err := <-stopped:
			if inside() {
				t.Fatalf("a's Stop returned (%v) while its work still runs", err)
			}
			stopped <- err
		default:
		}
		return time.Since(start) >= rem/2
	})
	close(release)
	_, tb := r.await(t, c.patience, "b to lead after the handover", func(i int, _ simba.Term) bool {
		if i == 1 && !exited.Load() && inside() {
			t.Fatal("b leads before a's work exited")
		}
		return i == 1
	})
	if tb.Token() <= ta.Token() {
		t.Fatalf("b's token %d is not greater than a's %d", tb.Token(), ta.Token())
	}
	if err := receive(t, stopped, c.patience, "a's Stop to return"); err != nil {
		t.Fatalf("a's Stop: %v", err)
	}
}

func (c *clientHarness) electStepDown(t *testing.T) {
	name := c.name("stepdown")
	a := c.client(t, "a", c.steady, simba.WithCooldown(c.cooldown))
	ea := a.election(t, name)
	until(t, c.patience, "a to lead", ea.IsLeader)
	ta, _ := ea.Term()
	b := c.client(t, "b", c.steady)
	eb := b.election(t, name)
	r := &race{name: name, members: []*member{a, b}, es: []*simba.Election{ea, eb}}
	r.watch(t)
	stepped := time.Now()
	if err := ea.StepDown(ctx(t)); err != nil {
		t.Fatalf("a's StepDown: %v", err)
	}
	if ta.IsValid() {
		t.Fatal("a's term is valid after StepDown returned")
	}
	_, tb := r.await(t, c.patience, "b to lead after a stepped down", func(i int, _ simba.Term) bool {
		if i == 0 {
			t.Fatalf("a leads again %v after stepping down, inside its %v cooldown", time.Since(stepped), c.cooldown)
		}
		return i == 1
	})
	if tb.Token() <= ta.Token() {
		t.Fatalf("b's token %d is not greater than a's %d", tb.Token(), ta.Token())
	}
	if err := eb.Stop(ctx(t)); err != nil {
		t.Fatalf("b's Stop: %v", err)
	}
	if free := time.Since(stepped); free < c.cooldown {
		t.Logf("the lease is free %v into a's %v cooldown", free, c.cooldown)
	} else {
		t.Logf("slow machine: b stopped only %v after a stepped down, after a's %v cooldown", free, c.cooldown)
	}
	// The lease is free, but a is cooling down: it takes it only once the cooldown is over.
	_, ta2 := r.await(t, c.patience+c.cooldown, "a to lead again after its cooldown", func(i int, _ simba.Term) bool {
		if i == 0 && time.Since(stepped) < c.cooldown {
			t.Fatalf("a leads again %v after stepping down, inside its %v cooldown", time.Since(stepped), c.cooldown)
		}
		return i == 0
	})
	if ta2.Token() <= tb.Token() {
		t.Fatalf("a's new token %d is not greater than b's %d", ta2.Token(), tb.Token())
	}
}

// --- locks ---

func (c *clientHarness) lockCycle(t *testing.T) {
	name := c.name("lock")
	one, two := c.client(t, "one", c.steady), c.client(t, "two", c.steady)
	h1, err := one.Lock(ctx(t), name)
	if err != nil {
		t.Fatalf("one: Lock: %v", err)
	}
	t1 := h1.Term
	if !t1.IsValid() || t1.Token() <= 0 || t1.Name() != name {
		t.Fatalf("one: Lock returned term %v (valid %v), want a valid term of %q with a positive token", t1, t1.IsValid(), name)
	}
	_, err = two.TryLock(ctx(t), name)
	if !errors.Is(err, simba.ErrLockHeld) {
		t.Fatalf("two: TryLock while one holds the lock: %v, want ErrLockHeld", err)
	}
	var held *simba.LockHeldError
	if !errors.As(err, &held) || held.Owner != one.Owner() || held.Holder != one.Session() {
		t.Fatalf("two: TryLock error %v does not name the holder %s (%s)", err, one.Owner(), one.Session())
	}
	if !t1.IsValid() {
		t.Fatal("one's term ended when two tried the lock")
	}
	if err := h1.Unlock(ctx(t)); err != nil {
		t.Fatalf("one: Unlock: %v", err)
	}
	if t1.IsValid() {
		t.Fatal("one's term is valid after Unlock")
	}
	var t2 simba.Term
	err = two.WithLock(ctx(t), name, func(ctx context.Context, term simba.Term) error {
		if !term.IsValid() || ctx.Err() != nil {
			return fmt.Errorf("WithLock ran its function with term %v valid %v, ctx %v", term, term.IsValid(), ctx.Err())
		}
		t2 = term
		return nil
	})
	if err != nil {
		t.Fatalf("two: WithLock: %v", err)
	}
	if t2.Token() <= t1.Token() {
		t.Fatalf("two: WithLock ran with token %d, not greater than one's %d", t2.Token(), t1.Token())
	}
	if t2.IsValid() {
		t.Fatal("two's term is valid after WithLock returned")
	}
	// WithLock unlocked: one takes the lock, with a greater token again.
	h3 := c.tryLock(t, one, name, "one to take the lock after two's WithLock")
	if h3.Token() <= t2.Token() {
		t.Fatalf("one: TryLock token %d, not greater than two's %d", h3.Token(), t2.Token())
	}
	// WithLock returns its function's error, and unlocks.
	boom := errors.New("boom")
	if err := h3.Unlock(ctx(t)); err != nil {
		t.Fatalf("one: Unlock: %v", err)
	}
	if err := two.WithLock(ctx(t), name, func(context.Context, simba.Term) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("two: WithLock returned %v, want its function's error", err)
	}
	h4 := c.tryLock(t, one, name, "one to take the lock after two's failed WithLock")
	if h4.Token() <= h3.Token() {
		t.Fatalf("one: TryLock token %d, not greater than %d", h4.Token(), h3.Token())
	}
	if err := h4.Unlock(ctx(t)); err != nil {
		t.Fatalf("one: Unlock: %v", err)
	}
	// The name is free on one again: an election of that name can run on it, and after Stop,
	// another one, and then a lock again.
	for i := range 2 {
		e := one.election(t, name)
		until(t, c.patience, "an election of the unlocked name to lead", e.IsLeader)
		if err := e.Stop(ctx(t)); err != nil {
			t.Fatalf("one: Stop of election %d: %v", i, err)
		}
	}
	h5 := c.tryLock(t, one, name, "one to lock the name again after its elections stopped")
	if err := h5.Unlock(ctx(t)); err != nil {
		t.Fatalf("one: Unlock: %v", err)
	}
}

// tryLock calls m's TryLock of name once and fails the test unless it is granted: the lock was
// just released by another client, whose Unlock returns only once the lease is free at the
// server.
func (c *clientHarness) tryLock(t testing.TB, m *member, name, what string) *simba.Held {
	t.Helper()
	tctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	h, err := m.TryLock(tctx, name)
	if err != nil {
		t.Fatalf("%s: %s: TryLock: %v", m.label, what, err)
	}
	return h
}

func (c *clientHarness) lockUnlockNotHeld(t *testing.T) {
	name := c.name("unheld")
	one, two := c.client(t, "one", c.steady), c.client(t, "two", c.steady)
	var none *simba.Held
	if err := none.Unlock(ctx(t)); !errors.Is(err, simba.ErrNotHeld) {
		t.Fatalf("Unlock of no lock: %v, want ErrNotHeld", err)
	}
	h2, err := two.Lock(ctx(t), name)
	if err != nil {
		t.Fatalf("two: Lock: %v", err)
	}
	if _, err := one.TryLock(ctx(t), name); !errors.Is(err, simba.ErrLockHeld) {
		t.Fatalf("one: TryLock while two holds it: %v, want ErrLockHeld", err)
	}
	if err := h2.Unlock(ctx(t)); err != nil {
		t.Fatalf("two: Unlock: %v", err)
	}
	if err := h2.Unlock(ctx(t)); !errors.Is(err, simba.ErrNotHeld) {
		t.Fatalf("a second Unlock: %v, want ErrNotHeld", err)
	}
	// The second Unlock changed nothing: one takes the lock, and two's stray Unlock of its
	// old lock does not release one's.
	h1 := c.tryLock(t, one, name, "one to take the lock two released")
	if err := h2.Unlock(ctx(t)); !errors.Is(err, simba.ErrNotHeld) {
		t.Fatalf("two: a third Unlock: %v, want ErrNotHeld", err)
	}
	if !h1.IsValid() {
		t.Fatal("one's term ended when two unlocked its old lock again")
	}
	if _, err := two.TryLock(ctx(t), name); !errors.Is(err, simba.ErrLockHeld) {
		t.Fatalf("two: TryLock after its stray Unlock: %v, want ErrLockHeld (one still holds it)", err)
	}
	if err := h1.Unlock(ctx(t)); err != nil {
		t.Fatalf("one: Unlock: %v", err)
	}
}

func (c *clientHarness) lockContextEnds(t *testing.T) {
	name := c.name("lockctx")
	// Lock returns as its ctx ends and withdraws two from the name's waiter queue (on a
	// backend with one, spi.Queuer) in the background: the observer says when that is over.
	withdrawn := make(chan error, 1)
	observe := simba.WithCallObserver(func(ci simba.CallInfo) {
		if ci.Op == "withdraw" && ci.Name == name {
			select {
			case withdrawn <- ci.Err:
			default:
			}
		}
	})
	one, two, three := c.client(t, "one", c.steady), c.client(t, "two", c.steady, observe), c.client(t, "three", c.steady)
	h1, err := one.Lock(ctx(t), name)
	if err != nil {
		t.Fatalf("one: Lock: %v", err)
	}
	wait := c.steady / 2
	// start before the context: its deadline is then no later than start+wait, whatever the
	// scheduler does between the two lines (a 2 ms pause there failed this check in CI).
	start := time.Now()
	lctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	h2, err := two.Lock(lctx, name)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("two: Lock with a context that ends while one holds the lock: %v, want the context's error", err)
	}
	if took := time.Since(start); took < wait {
		t.Fatalf("two: Lock returned after %v, before its context ended (%v)", took, wait)
	}
	if h2 != nil {
		t.Fatalf("two: failed Lock returned the lock %v", h2.Term)
	}
	if !h1.IsValid() {
		t.Fatal("one's term ended while two waited")
	}
	if _, queues := two.backend.(spi.Queuer); queues {
		if err := receive(t, withdrawn, c.patience, "two's withdrawal from the waiter queue"); err != nil {
			t.Fatalf("two: withdrawal from the waiter queue: %v", err)
		}
	}
	if err := h1.Unlock(ctx(t)); err != nil {
		t.Fatalf("one: Unlock: %v", err)
	}
	// two withdrew: the lease is free for a third client (a grant that raced with two's
	// withdrawal is released at once, not held for a TTL).
	h3 := c.tryLock(t, three, name, "three to take the lock one released")
	if h3.Token() <= h1.Token() {
		t.Fatalf("three's token %d is not greater than one's %d", h3.Token(), h1.Token())
	}
	if err := h3.Unlock(ctx(t)); err != nil {
		t.Fatalf("three: Unlock: %v", err)
	}
}

// lockLocalQueue: goroutines of one client asking for the same name are served one after the
// other, each with its own term and a token above the previous one's; TryLock on the client
// fails at once while the name is taken there; a goroutine whose context ends while it waits
// leaves the queue without taking the lock; and once every goroutine has unlocked, the name
// is free at the server (another client takes it at once).
func (c *clientHarness) lockLocalQueue(t *testing.T) {
	name := c.name("queue")
	one, two := c.client(t, "one", c.steady), c.client(t, "two", c.steady)
	first, err := one.Lock(ctx(t), name)
	if err != nil {
		t.Fatalf("one: Lock: %v", err)
	}
	if _, err := one.TryLock(ctx(t), name); !errors.Is(err, simba.ErrLockHeld) {
		t.Fatalf("one: TryLock while another goroutine of one holds it: %v, want ErrLockHeld", err)
	}
	gctx, cancelGone := context.WithTimeout(ctx(t), c.steady/4)
	defer cancelGone()
	if _, err := one.Lock(gctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("one: a waiter whose context ended: %v, want context.DeadlineExceeded", err)
	}
	const waiters = 4
	type got struct {
		h *simba.Held
		e error
	}
	granted := make(chan got, waiters)
	for range waiters {
		go func() {
			h, err := one.Lock(ctx(t), name)
			granted <- got{h, err}
		}()
	}
	prev := first.Term
	if err := first.Unlock(ctx(t)); err != nil {
		t.Fatalf("one: Unlock: %v", err)
	}
	for i := range waiters {
		var g got
		select {
		case g = <-granted:
		case <-time.After(callTimeout):
			t.Fatalf("one: no waiter got the lock after holder %d unlocked", i)
		}
		if g.e != nil {
			t.Fatalf("one: waiter: Lock: %v", g.e)
		}
		if !g.h.IsValid() || g.h.Token() <= prev.Token() || prev.IsValid() {
			t.Fatalf("one: a waiter got term %v (valid %v) after %v (valid %v): want a new valid term with a greater token",
				g.h.Term, g.h.IsValid(), prev, prev.IsValid())
		}
		select {
		case other := <-granted:
			t.Fatalf("one: two goroutines hold the lock at once: %v and %v (%v)", g.h.Term, other.h, other.e)
		default:
		}
		prev = g.h.Term
		if err := g.h.Unlock(ctx(t)); err != nil {
			t.Fatalf("one: Unlock: %v", err)
		}
	}
	h2 := c.tryLock(t, two, name, "two to take the lock once every goroutine of one unlocked")
	if h2.Token() <= prev.Token() {
		t.Fatalf("two's token %d is not greater than one's last %d", h2.Token(), prev.Token())
	}
	if err := h2.Unlock(ctx(t)); err != nil {
		t.Fatalf("two: Unlock: %v", err)
	}
}

// --- partition groups ---

// groupWatch checks the members of one partition group.
type groupWatch struct {
	name       string
	partitions int
	members    []*member
	groups     []*simba.PartitionGroup
}

// check fails the test if two members (of all that ever joined) were seen holding valid terms
// of one partition at one instant, and reports whether the members in active (indices) agree
// on their membership and each holds exactly the partitions assigned to it, together all of
// them, while the others hold none.
func (g *groupWatch) check(t testing.TB, active ...int) bool {
	t.Helper()
	n := len(g.groups)
	held := make([]map[int]simba.Term, n)
	for i, pg := range g.groups {
		held[i] = pg.Held()
	}
	labels := make([]string, n)
	for i, m := range g.members {
		labels[i] = m.label
	}
	owned := 0
	for p := range g.partitions {
		what := fmt.Sprintf("partition %d of %s", p, g.name)
		// held's reads are exclusive's first ones, in order.
		i, _, err := exclusive(what, labels, func(i int) (simba.Term, bool) {
			term, ok := held[i][p]
			return term, ok
		})
		if err != nil {
			t.Fatal(err)
		}
		if i >= 0 {
			owned++
		}
	}
	var sessions []simba.SessionID
	for _, i := range active {
		sessions = append(sessions, g.members[i].Session())
	}
	slices.Sort(sessions)
	for i, pg := range g.groups {
		keys := make([]int, 0, len(held[i]))
		for p := range held[i] {
			keys = append(keys, p)
		}
		slices.Sort(keys)
		if !slices.Contains(active, i) {
			if len(keys) > 0 {
				return false
			}
			continue
		}
		if !slices.Equal(keys, pg.Assigned()) || !slices.Equal(pg.Members(), sessions) {
			return false
		}
	}
	return owned == g.partitions
}

func (c *clientHarness) groupRebalance(t *testing.T) {
	const partitions = 8
	g := &groupWatch{name: c.name("grp"), partitions: partitions}
	join := func(label string) {
		m := c.client(t, label, c.steady)
		pg, err := m.JoinGroup(ctx(t), g.name, partitions)
		if err != nil {
			t.Fatalf("%s: JoinGroup(%q, %d): %v", label, g.name, partitions, err)
		}
		g.members, g.groups = append(g.members, m), append(g.groups, pg)
	}
	balanced := func(what string, active ...int) {
		t.Helper()
		until(t, c.patience, what, func() bool { return g.check(t, active...) })
	}
	join("a")
	join("b")
	join("c")
	balanced("8 partitions spread over 3 members", 0, 1, 2)
	leaver := g.members[1]
	sid := leaver.Session()
	if err := g.groups[1].Leave(ctx(t)); err != nil {
		t.Fatalf("b: Leave: %v", err)
	}
	// Leave returns once the work is done: at the server, b holds no partition and is no
	// longer a member (asked around b's client, on its session).
	names := make([]string, partitions)
	for p := range names {
		names[p] = wire.PartitionName(g.name, p)
	}
	if ka, err := leaver.backend.KeepAlive(ctx(t), sid, names, nil); err != nil {
		t.Fatalf("keep-alive of b's session after Leave: %v", err)
	} else if len(ka.Held) > 0 {
		t.Fatalf("Leave returned while b's session still holds %v", ka.Held)
	}
	if ms, err := leaver.backend.Members(ctx(t), g.name); err != nil {
		t.Fatalf("Members(%q) after Leave: %v", g.name, err)
	} else if slices.Contains(ms, sid) {
		t.Fatalf("Leave returned while b's session is still a member: %v", ms)
	}
	balanced("8 partitions over the 2 remaining members", 0, 2)
	join("d")
	balanced("8 partitions over 3 members again", 0, 2, 3)
}

// --- close ---

func (c *clientHarness) closeWithWork(t *testing.T) {
	name := c.name("close")
	var exited atomic.Bool
	a := c.client(t, "a", c.steady)
	ea := a.election(t, name, simba.RunWhileLeader(func(ctx context.Context, _ simba.Term) error {
		<-ctx.Done()
		time.Sleep(c.steady / 10) // winding down takes a moment: the lease stays a's
		exited.Store(true)
		return nil
	}))
	until(t, c.patience, "a to lead", ea.IsLeader)
	ta, _ := ea.Term()
	b := c.client(t, "b", c.steady)
	eb := b.election(t, name)
	r := &race{name: name, members: []*member{a, b}, es: []*simba.Election{ea, eb}}
	r.watch(t)
	// a keeps the lease until its work exits or its local deadline (at least rem away) passes.
	start, rem := time.Now(), ta.Remaining()
	closed := make(chan error, 1)
	go func() { closed <- a.Close(context.Background()) }()
	var err error
	until(t, c.patience, "a's Close to return", func() bool {
		if eb.IsLeader() && !exited.Load() && time.Since(start) < rem {
			t.Fatal("b leads while a's work still runs")
		}
		select {
		case err = <-closed:
			return true
		default:
			return false
		}
	})
	if err != nil {
		t.Fatalf("a's Close: %v", err)
	}
	if !exited.Load() {
		t.Fatal("a's Close returned before its leader work exited")
	}
	if ta.IsValid() {
		t.Fatal("a's term is valid after Close")
	}
	var rev *simba.RevokedError
	if cause := context.Cause(ta.Context()); !errors.As(cause, &rev) || rev.Reason != simba.RevokedClosed {
		t.Errorf("a's term ended with %v, want a revocation for the close", cause)
	}
	if _, err := a.NewElection(c.name("after")); !errors.Is(err, simba.ErrClosed) {
		t.Errorf("NewElection after Close: %v, want ErrClosed", err)
	}
	_, tb := r.await(t, c.patience, "b to lead after a closed", func(i int, _ simba.Term) bool { return i == 1 })
	if tb.Token() <= ta.Token() {
		t.Fatalf("b's token %d is not greater than a's %d", tb.Token(), ta.Token())
	}
}

func (c *clientHarness) closeFromCallback(t *testing.T) {
	name := c.name("closecb")
	a := c.client(t, "a", c.steady)
	type result struct {
		err  error
		took time.Duration
		term simba.Term
	}
	returned := make(chan result, 1)
	a.election(t, name, simba.OnElected(func(ctx context.Context, term simba.Term) {
		start := time.Now()
		err := a.Close(ctx) // must not wait for this very callback
		returned <- result{err, time.Since(start), term}
	}))
	res := receive(t, returned, c.patience, "Close called inside OnElected to return")
	if res.err != nil {
		t.Fatalf("Close inside OnElected: %v", res.err)
	}
	t.Logf("Close inside OnElected returned after %v", res.took)
	if err := a.Close(ctx(t)); err != nil {
		t.Fatalf("Close after the callback's Close: %v", err)
	}
	if res.term.IsValid() {
		t.Fatal("the term is valid after the client closed")
	}
	// Close returned once the session was closed, its lease with it: another client takes it
	// at once.
	b := c.client(t, "b", c.steady)
	tb, err := b.TryLock(ctx(t), name)
	if err != nil {
		t.Fatalf("b: TryLock after a closed: %v", err)
	}
	if tb.Token() <= res.term.Token() {
		t.Fatalf("b's token %d is not greater than a's %d", tb.Token(), res.term.Token())
	}
}

package simba_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
)

// TestDriftNaNRejected is the reproduction of issue 13, item 1: WithDrift(NaN) passed the
// `drift < 0 || drift >= 0.5` check, and the deadline arithmetic then put the session's local
// deadline ~292 years away, so a term stayed valid after its session was lost. NaN comes easily
// from a config file through strconv.ParseFloat("nan").
func TestDriftNaNRejected(t *testing.T) {
	fromConfig, err := strconv.ParseFloat("nan", 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, drift := range []float64{math.NaN(), fromConfig, math.Inf(1), math.Inf(-1), -0.1, 0.5} {
		_, err := simba.New(simbatest.NewServer().Backend(), simba.WithDrift(drift))
		if !errors.Is(err, simba.ErrInvalidOption) {
			t.Errorf("New(WithDrift(%v)) = %v, want ErrInvalidOption", drift, err)
		}
	}
}

// TestDurationOptionsInRange: every duration option is bounded, alone and in combination, with
// no check an overflowing product can slip past.
func TestDurationOptionsInRange(t *testing.T) {
	for what, opts := range map[string][]simba.Option{
		"TTL MaxInt64":              {simba.WithTTL(math.MaxInt64)},
		"TTL above MaxTTL":          {simba.WithTTL(simba.MaxTTL + 1)},
		"renewal MaxInt64":          {simba.WithRenewEvery(math.MaxInt64)},
		"renewal wraps 3×":          {simba.WithRenewEvery(math.MaxInt64/3 + 1)},
		"renewal above TTL/3":       {simba.WithTTL(3 * time.Second), simba.WithRenewEvery(time.Second + 1)},
		"TTL too short to renew":    {simba.WithTTL(2), simba.WithMargin(0)},
		"margin MaxInt64":           {simba.WithMargin(math.MaxInt64)},
		"margin TTL/2":              {simba.WithTTL(time.Second), simba.WithMargin(500 * time.Millisecond)},
		"cooldown MaxInt64":         {simba.WithCooldown(math.MaxInt64)},
		"cooldown above MaxTTL":     {simba.WithCooldown(simba.MaxTTL + 1)},
		"jitter MaxInt64":           {simba.WithJitter(math.MaxInt64)},
		"jitter negative":           {simba.WithJitter(-1)},
		"margin negative":           {simba.WithMargin(-1)},
		"cooldown negative":         {simba.WithCooldown(-1)},
		"renewal negative":          {simba.WithRenewEvery(-1)},
		"TTL negative":              {simba.WithTTL(-1)},
		"TTL MinInt64":              {simba.WithTTL(math.MinInt64)},
		"renewal default, TTL tiny": {simba.WithTTL(1), simba.WithMargin(0)},
	} {
		if _, err := simba.New(simbatest.NewServer().Backend(), opts...); !errors.Is(err, simba.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", what, err)
		}
	}
	c, err := simba.New(simbatest.NewServer().Backend(), simba.WithTTL(simba.MaxTTL), simba.WithCooldown(simba.MaxTTL),
		simba.WithJitter(simba.MaxTTL), simba.WithRenewEvery(simba.MaxTTL/3), simba.WithDrift(0.49), simba.WithMargin(simba.MaxTTL/2-1))
	if err != nil {
		t.Fatalf("the largest options: %v", err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// optionSet is one fuzzed option set; zero TTL or renewal means "not given" (the default).
type optionSet struct {
	drift                                float64
	ttl, renew, margin, jitter, cooldown time.Duration
	remaining                            time.Duration // non-zero: the remaining time every open/keep-alive reply reports
}

func (o optionSet) options() []simba.Option {
	opts := []simba.Option{simba.WithDrift(o.drift), simba.WithMargin(o.margin), simba.WithJitter(o.jitter), simba.WithCooldown(o.cooldown)}
	if o.ttl != 0 {
		opts = append(opts, simba.WithTTL(o.ttl))
	}
	if o.renew != 0 {
		opts = append(opts, simba.WithRenewEvery(o.renew))
	}
	return opts
}

// effective returns the TTL and renewal interval the client runs with, and whether the set is
// valid by the documented rules (written independently of options.go).
func (o optionSet) effective() (ttl, renew time.Duration, valid bool) {
	ttl, renew = simba.DefaultTTL, o.renew
	if o.ttl != 0 {
		ttl = o.ttl
	}
	if renew == 0 {
		renew = ttl / 3
	}
	valid = ttl > 0 && ttl <= 24*time.Hour &&
		renew > 0 && renew <= ttl/3 &&
		o.drift >= 0 && o.drift < 0.5 &&
		o.margin >= 0 && o.margin < ttl/2 &&
		o.jitter >= 0 && o.jitter <= 24*time.Hour &&
		o.cooldown >= 0 && o.cooldown <= 24*time.Hour
	return ttl, renew, valid
}

// recorder stands between a client and its backend: it remembers when the last successful
// open or keep-alive was sent (on the virtual clock), counts calls in flight, and optionally
// replaces the remaining time of every reply with a hostile value.
type recorder struct {
	spi.Backend
	clock     *simbatest.VirtualClock
	remaining time.Duration

	mu       sync.Mutex
	inflight int
	lastOK   time.Duration
	anyOK    bool
}

func (r *recorder) begin() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight++
	return r.clock.Now()
}

func (r *recorder) end(sent time.Duration, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight--
	if ok && (!r.anyOK || sent > r.lastOK) {
		r.lastOK, r.anyOK = sent, true
	}
}

func (r *recorder) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	sent := r.begin()
	s, err := r.Backend.OpenSession(ctx, owner, ttl)
	if err == nil && r.remaining != 0 {
		s.Remaining = r.remaining
	}
	r.end(sent, err == nil)
	return s, err
}

func (r *recorder) KeepAlive(ctx context.Context, s simba.SessionID, names, groups []string) (spi.KeepAlive, error) {
	sent := r.begin()
	ka, err := r.Backend.KeepAlive(ctx, s, names, groups)
	if err == nil && !ka.Expired && r.remaining != 0 {
		ka.Remaining = r.remaining
	}
	r.end(sent, err == nil && !ka.Expired)
	return ka, err
}

func (r *recorder) idle() (time.Duration, bool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastOK, r.anyOK, r.inflight == 0
}

// checkSafety runs one client with options o on virtual time, lets it win an election, cuts
// it off from the backend and checks the safety property: every term it had is invalid once
// TTL × (1 + drift) + margin has passed since the send time of its last successful open or
// keep-alive. Rejected option sets must fail with ErrInvalidOption. It reports whether the
// client was elected; it waits up to patience of real time for that (an election needs no
// virtual time), then lets virtual time run for a few renewals.
func checkSafety(t *testing.T, o optionSet, patience time.Duration) bool {
	t.Helper()
	ttl, renew, valid := o.effective()
	clock := simbatest.NewVirtualClock()
	srv := simbatest.NewServer(simbatest.WithClock(clock))
	b := srv.Backend()
	rec := &recorder{Backend: b, clock: clock, remaining: o.remaining}
	var mu sync.Mutex
	var terms []simba.Term
	c, err := simba.New(rec, append(o.options(), simba.WithClock(clock), simba.WithSeed(1), simba.WithOwner("fuzz"))...)
	if !valid {
		if err == nil {
			c.Close(context.Background())
			t.Fatalf("%+v: accepted, but the options are out of range", o)
		}
		if !errors.Is(err, simba.ErrInvalidOption) {
			t.Fatalf("%+v: New = %v, want ErrInvalidOption", o, err)
		}
		return false
	}
	if err != nil {
		t.Fatalf("%+v: New = %v, want the valid options accepted", o, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	e, err := c.NewElection("fuzz", simba.OnElected(func(_ context.Context, term simba.Term) {
		mu.Lock()
		terms = append(terms, term)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	elected := false
	for start := time.Now(); !elected && time.Since(start) < patience; time.Sleep(200 * time.Microsecond) {
		elected = e.IsLeader()
	}
	step := min(max(renew/4, time.Microsecond), time.Second)
	for i := 0; i < 12; i++ { // a few renewals (with the hostile remaining, if any)
		clock.Advance(step)
		time.Sleep(300 * time.Microsecond)
	}
	// The session ends: the backend stops answering.
	b.CutOff(simbatest.Refuse)
	var lastOK time.Duration
	for start := time.Now(); ; time.Sleep(100 * time.Microsecond) {
		last, any, idle := rec.idle()
		if idle {
			if !any {
				return false // no session ever opened: no term can exist
			}
			lastOK = last
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("calls still in flight 10 s after the cut")
		}
	}
	bound := lastOK + time.Duration(float64(ttl)*(1+o.drift)) + o.margin
	if now := clock.Now(); bound > now {
		clock.Advance(bound - now)
	}
	mu.Lock()
	all := append([]simba.Term(nil), terms...)
	mu.Unlock()
	if term, ok := e.Term(); ok {
		all = append(all, term)
	}
	for _, term := range all {
		if term.IsValid() {
			t.Fatalf("%+v: term %v still valid (remaining %v) at %v, TTL×(1+drift)+margin after the last keep-alive sent at %v",
				o, term, term.Remaining(), clock.Now(), lastOK)
		}
	}
	return elected
}

// TestSafetyHarnessElects keeps FuzzOptions honest: with sane options the client is elected
// (so the property is checked on a real term), also when the backend reports a hostile
// remaining time far above the TTL.
func TestSafetyHarnessElects(t *testing.T) {
	for _, o := range []optionSet{
		{drift: 0.01, margin: 50 * time.Millisecond, jitter: 25 * time.Millisecond},
		{drift: 0.01, margin: 50 * time.Millisecond, ttl: 3 * time.Second, remaining: math.MaxInt64},
		{drift: 0, ttl: simba.MaxTTL, remaining: math.MaxInt64},
	} {
		if !checkSafety(t, o, 30*time.Second) {
			t.Errorf("%+v: never elected", o)
		}
	}
}

// FuzzOptions: for any option set (drift, TTL, renewal, margin, jitter, cooldown: NaN, ±Inf,
// huge, negative, zero) and any remaining time a backend reports, either New rejects the set
// with ErrInvalidOption, or every term is invalid within TTL × (1 + drift) + margin of the send
// time of the last successful keep-alive once the backend stops answering.
func FuzzOptions(f *testing.F) {
	const ms = int64(time.Millisecond)
	add := func(drift float64, ttl, renew, margin, jitter, cooldown, remaining int64) {
		f.Add(drift, ttl, renew, margin, jitter, cooldown, remaining)
	}
	add(0.01, 0, 0, 50*ms, 25*ms, 0, 0)             // defaults
	add(math.NaN(), 3000*ms, 0, 50*ms, 25*ms, 0, 0) // the reproduction
	add(math.Inf(1), 3000*ms, 0, 50*ms, 25*ms, 0, 0)
	add(math.Inf(-1), 3000*ms, 0, 50*ms, 25*ms, 0, 0)
	add(-0.0, 3000*ms, 1000*ms, 0, 0, 0, 0)
	add(0.4999999, 3000*ms, 1000*ms, 1499*ms, 0, 0, 0)
	add(0.01, math.MaxInt64, 0, 50*ms, 25*ms, 0, 0)
	add(0.01, int64(24*time.Hour), 0, 50*ms, math.MaxInt64, math.MaxInt64, 0)
	add(0.01, int64(24*time.Hour), int64(8*time.Hour), int64(12*time.Hour)-1, int64(24*time.Hour), int64(24*time.Hour), math.MaxInt64)
	add(0.01, 3000*ms, math.MaxInt64/3+1, 50*ms, 25*ms, 0, 0)
	add(0.01, 3000*ms, 0, math.MaxInt64, 25*ms, 0, 0)
	add(0.01, 3000*ms, 0, math.MinInt64, 25*ms, 0, 0)
	add(0.01, 3000*ms, 0, 50*ms, 25*ms, 0, math.MaxInt64)
	add(0.01, 3000*ms, 0, 50*ms, 25*ms, 0, math.MinInt64)
	add(0.01, 3000*ms, 0, 50*ms, 25*ms, 0, -1)
	add(0.01, 3000*ms, 0, 50*ms, 25*ms, 0, 6000*ms)
	add(0, 3, 1, 0, 0, 0, 0)
	add(0, 2, 0, 0, 0, 0, 0)
	add(0.01, -1, -1, -1, -1, -1, 0)
	f.Fuzz(func(t *testing.T, drift float64, ttl, renew, margin, jitter, cooldown, remaining int64) {
		checkSafety(t, optionSet{drift: drift, ttl: time.Duration(ttl), renew: time.Duration(renew),
			margin: time.Duration(margin), jitter: time.Duration(jitter), cooldown: time.Duration(cooldown),
			remaining: time.Duration(remaining)}, 20*time.Millisecond)
	})
}

// A TTL too short for the default margin (50 ms: any TTL up to 100 ms) is refused with an
// error that names the option to change: a trial's WithTTL(1ms) got only "margin 50ms must be
// in [0, TTL/2)", about an option it never set.
func TestShortTTLNamesWithMargin(t *testing.T) {
	srv := simbatest.NewServer()
	_, err := simba.New(srv.Backend(), simba.WithTTL(60*time.Millisecond))
	if !errors.Is(err, simba.ErrInvalidOption) || !strings.Contains(err.Error(), "WithMargin") {
		t.Fatalf("WithTTL(60ms): %v, want ErrInvalidOption naming WithMargin", err)
	}
	c, err := simba.New(srv.Backend(), simba.WithTTL(60*time.Millisecond), simba.WithMargin(10*time.Millisecond))
	if err != nil {
		t.Fatalf("WithTTL(60ms) with WithMargin(10ms): %v", err)
	}
	_ = c.Close(context.Background())
}

package simba

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/simbatest"
)

// newClientForTest returns a client on an in-memory backend, closed when the test ends.
func newClientForTest(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := New(simbatest.NewServer().Backend(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// engineDefaults returns engine.Defaults() for owner, resolved: what an engine made from the
// defaults runs with on a backend with waiter queues (spi.Queuer), as the tests' simbatest is.
func engineDefaults(t *testing.T, owner string) engine.Options {
	t.Helper()
	d := engine.Defaults()
	d.Owner, d.Queue = owner, true
	r, err := d.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDefaultsHaveOneSource: the defaults are defined once, in internal/engine. The exported
// constants are the engine's, the client's starting configuration is engine.Defaults(), and a
// Client made with no options runs its engine with exactly the engine's defaults (and times its
// calls out after the engine's renewal interval).
func TestDefaultsHaveOneSource(t *testing.T) {
	d := engine.Defaults()
	for what, c := range map[string]struct{ got, want any }{
		"DefaultTTL":        {DefaultTTL, d.TTL},
		"DefaultDrift":      {DefaultDrift, d.Drift},
		"DefaultMargin":     {DefaultMargin, d.Margin},
		"DefaultMaxJitter":  {DefaultMaxJitter, d.RetryJitter},
		"DefaultMinBackoff": {time.Duration(DefaultMinBackoff), engineDefaults(t, "a").BackoffMin},
		"MaxTTL":            {time.Duration(MaxTTL), time.Duration(engine.MaxDuration)},
		"MaxDrift":          {float64(MaxDrift), float64(engine.MaxDrift)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, the engine's is %v", what, c.got, c.want)
		}
	}
	cfg := defaultConfig()
	want := d
	want.Owner = cfg.owner
	if got := cfg.engineOptions(); got != want {
		t.Errorf("the default configuration maps to %+v, want engine.Defaults() %+v", got, want)
	}

	c := newClientForTest(t)
	if got, want := c.eng.Options(), engineDefaults(t, c.Owner()); got != want {
		t.Errorf("a client with no options runs its engine with %+v, want the engine's defaults %+v", got, want)
	}
	if got, want := c.cfg.renewEvery, c.eng.Options().RenewInterval; got != want || got != DefaultTTL/3 {
		t.Errorf("call timeout %v, want the engine's renewal interval %v = DefaultTTL/3", got, want)
	}
}

// TestOptionZeros: the documented meaning of each option's zero value reaches the engine as
// is, with no sentinel: WithDrift(0), WithMargin(0) and WithJitter(0) are literal zeros,
// WithCooldown(0) is the default (one TTL), WithTTL(0) and WithRenewEvery(0) are rejected.
// Every other value stays the engine's default.
func TestOptionZeros(t *testing.T) {
	c := newClientForTest(t, WithDrift(0), WithMargin(0), WithJitter(0), WithCooldown(0))
	want := engineDefaults(t, c.Owner())
	want.Drift, want.Margin, want.RetryJitter = 0, 0, 0
	if got := c.eng.Options(); got != want {
		t.Errorf("WithDrift(0), WithMargin(0), WithJitter(0), WithCooldown(0): the engine runs with %+v, want %+v", got, want)
	}

	// The derived defaults follow the TTL given, exactly as the engine derives them.
	c = newClientForTest(t, WithTTL(30*time.Millisecond), WithMargin(0), WithCooldown(0))
	want = engine.Defaults()
	want.Owner, want.TTL, want.Margin, want.Queue = c.Owner(), 30*time.Millisecond, 0, true
	want, err := want.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if want.RenewInterval != 10*time.Millisecond || want.Cooldown != 30*time.Millisecond || want.BackoffMin != 10*time.Millisecond {
		t.Errorf("engine's derived defaults for a 30 ms TTL: %+v", want)
	}
	if got := c.eng.Options(); got != want {
		t.Errorf("WithTTL(30ms): the engine runs with %+v, want %+v", got, want)
	}

	for what, o := range map[string]Option{"WithTTL(0)": WithTTL(0), "WithRenewEvery(0)": WithRenewEvery(0)} {
		if _, err := New(simbatest.NewServer().Backend(), o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New(%s) = %v, want ErrInvalidOption", what, err)
		}
	}
}

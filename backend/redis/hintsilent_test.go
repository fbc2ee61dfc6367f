package redis

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestRedisHintsAfterSilentOutage: a backend whose link to the server goes silent for a
// second (a blackhole: the open connections get no byte, close or reset, for good) hears
// releases again soon after the link heals. Once a session of TTL 3 s opened, the hub's
// pub/sub connection pings after 500 ms without a message and is given up when it has read
// nothing for 1.5 s (the ping's reply allowed 1 s, minttl.Reply); go-redis then reconnects and subscribes again. Before, go-redis's health
// check only wrote its PING, which a blackhole takes, so the connection stayed "connected"
// and deaf for good: no release reached the backend's waiters, and each hand-over to them
// waited for their one-TTL retry (an outside trial at TTL 1 s: Locks of 8 s). Another
// backend, on a direct link, takes and releases a lease the backend's session waits for until
// the hint of a release arrives: within 10 s (about 1.5 s expected).
func TestRedisHintsAfterSilentOutage(t *testing.T) {
	noLeaks(t)
	direct := testenv.Redis(t)
	p := faultproxy.StartTest(t, direct)
	b, err := Open("redis://"+p.Addr(), WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other, err := Open("redis://"+direct, WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	hints, err := b.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	open := func(b *Backend, ttl time.Duration) spi.SessionID {
		t.Helper()
		s, err := b.OpenSession(ctx, "silent", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	open(b, 3*time.Second) // paces the hub's probes
	// The waiter's session outlives the test: its waits last the holder's time left plus a TTL.
	waiter := open(b, time.Minute)
	holder := open(other, time.Minute)
	grant := func(name string) int64 {
		t.Helper()
		r, err := other.Acquire(ctx, holder, name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != spi.Granted {
			t.Fatalf("acquire %s: %v; want granted", name, r.Kind)
		}
		return r.Token
	}
	prefix := "hintsilent-" + time.Now().Format("150405.000000")
	dropKeys(t, prefix)
	before, after := prefix+".before", prefix+".after"
	tokens := map[string]int64{before: grant(before), after: grant(after)}
	for _, name := range []string{before, after} {
		r, err := b.Acquire(ctx, waiter, name) // the hub subscribes to name's released channel
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != spi.HeldBy {
			t.Fatalf("waiter's acquire of %s: %v; want held by the other backend's session", name, r.Kind)
		}
	}

	// released releases name on the direct link, and takes it again, every 200 ms until the
	// hint of a release of it arrives, for up to within; it reports whether one did.
	released := func(name string, within time.Duration) bool {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if err := other.Release(ctx, holder, name, tokens[name]); err != nil {
				t.Fatal(err)
			}
			wait := time.After(200 * time.Millisecond)
			for waiting := true; waiting; {
				select {
				case h, ok := <-hints:
					if !ok {
						t.Fatal("hint channel closed")
					}
					if h.Kind == spi.Released && h.Name == name {
						return true
					}
				case <-wait:
					waiting = false
				}
			}
			tokens[name] = grant(name)
		}
		return false
	}
	if !released(before, 20*time.Second) {
		t.Fatal("no released hint before the outage")
	}
	p.Set(faultproxy.Fault{Blackhole: true})
	time.Sleep(time.Second)
	p.Heal()
	start := time.Now()
	if !released(after, 10*time.Second) {
		t.Fatal("no released hint within 10 s after a silent outage of 1 s healed")
	}
	t.Logf("a released hint %v after the heal", time.Since(start).Round(time.Millisecond))
}

// TestRedisHintsRideOutStalls: a link that stalls for a few hundred milliseconds (a server
// busy with a fork for persistence, a loaded client; the bytes held, then delivered) is not
// taken for a silent one: the hub's pub/sub connection gives a PING at least minttl.MinReply
// (500 ms) for its reply. With the shortest TTL at 300 ms it pings after 50 ms without a
// message, and gave the connection up after 100 ms without a read, so each stall of 300 ms
// cost a reconnect (and every channel subscribed again, a lease read per waited lease); now
// five stalls cost none.
func TestRedisHintsRideOutStalls(t *testing.T) {
	noLeaks(t)
	p := faultproxy.StartTest(t, testenv.Redis(t))
	b, err := Open("redis://"+p.Addr(), WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The TTL that paces the hub is noted as OpenSession would: no session's keep-alive or
	// acquire uses p, so any new connection is the hub's.
	b.hub.minTTL.Note(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := b.Hints(ctx); err != nil { // returns once the pub/sub connection answered
		t.Fatal(err)
	}
	if n := outagetest.Stalls(p, 5, 300*time.Millisecond); n != 0 {
		t.Fatalf("five stalls of 300 ms at TTL 300 ms: %d new connections, want none", n)
	}
}

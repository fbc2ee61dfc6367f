package redis

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// hintModes runs f on the standalone server and on the Cluster, each backend with a client of
// its own (as separate processes would have).
func hintModes(t *testing.T, f func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient)) {
	for _, mode := range []struct {
		name string
		c    func(testing.TB) goredis.UniversalClient
	}{
		{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			// The clients uniq's cleanup deletes keys with live for the whole run: made before
			// the snapshot, so that a test run alone does not count theirs as leaked.
			sharedRedis()
			leaks := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // registered first: runs last
			f(t, mode.c)
		})
	}
}

// numsub is the number of subscribers of channel at the server (on a Cluster, summed over the
// nodes: each counts only its own connections).
func numsub(t testing.TB, c goredis.UniversalClient, channel string) int64 {
	t.Helper()
	ctx := context.Background()
	if cc, ok := c.(*goredis.ClusterClient); ok {
		var mu sync.Mutex
		var n int64
		err := cc.ForEachShard(ctx, func(ctx context.Context, node *goredis.Client) error {
			m, err := node.PubSubNumSub(ctx, channel).Result()
			mu.Lock()
			n += m[channel]
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	m, err := c.PubSubNumSub(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m[channel]
}

// awaitNumsub waits until channel has want subscribers.
func awaitNumsub(t testing.TB, c goredis.UniversalClient, channel string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for n := numsub(t, c, channel); n != want; n = numsub(t, c, channel) {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d subscribers, want %d", channel, n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitHint waits for hint on hints, skipping others.
func awaitHint(t testing.TB, hints <-chan spi.Hint, want spi.Hint) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case h := <-hints:
			if h == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %v hint for %s", want.Kind, want.Name)
		}
	}
}

// noHint checks that no hint for name is buffered on hints.
func noHint(t testing.TB, hints <-chan spi.Hint, kind spi.HintKind, name string) {
	t.Helper()
	for {
		select {
		case h := <-hints:
			if h.Kind == kind && h.Name == name {
				t.Fatalf("unexpected %v hint for %s", kind, name)
			}
		default:
			return
		}
	}
}

// hinted opens a backend on its own client with a Hints subscription (a short linger, so that
// unsubscribing shows quickly); the subscription ends with the test.
func hinted(t *testing.T, newClient func(testing.TB) goredis.UniversalClient, setup func(h *hub)) (*Backend, <-chan spi.Hint) {
	t.Helper()
	b := newBackend(t, newClient(t))
	b.hub.linger = 50 * time.Millisecond
	if setup != nil {
		setup(&b.hub)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return b, hints
}

// TestHintsSubscribeOnlyToWaitedNames: a backend whose sessions only take and release a lease
// subscribes to nothing (the server sends its connection none of the name's releases, whoever
// makes them); one whose session finds the lease held subscribes to its channel, hears of the
// holder's release, and unsubscribes after the linger once it is granted the lease. Before
// this, every backend with Hints PSUBSCRIBEd to every lease's channel.
func TestHintsSubscribeOnlyToWaitedNames(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		admin := newClient(t)
		b, hints := hinted(t, newClient, nil)
		other := newBackend(t, newClient(t))
		s, o := open(t, b, time.Minute), open(t, other, time.Minute)
		name := uniq(t, "notwaited")
		ch := wire.ReleasedChannel(name)
		for range 3 {
			for _, x := range []struct {
				b *Backend
				s spi.SessionID
			}{{b, s}, {other, o}} {
				r, err := x.b.Acquire(ctx, x.s, name)
				if err != nil || r.Kind != spi.Granted {
					t.Fatalf("acquire: %+v %v", r, err)
				}
				if err := x.b.Release(ctx, x.s, name, r.Token); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n := numsub(t, admin, ch); n != 0 {
			t.Fatalf("%d subscribers of %s, which nobody waited for", n, ch)
		}

		// A wait subscribes; the holder's release (another backend: no local hint) is heard.
		// (Another name: on a Cluster the releases above may reach this connection's node
		// over the cluster bus after the subscription.)
		name = uniq(t, "waited")
		ch = wire.ReleasedChannel(name)
		r, err := other.Acquire(ctx, o, name)
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("acquire: %+v %v", r, err)
		}
		if w, err := b.AcquireQueued(ctx, s, name); err != nil || w.Kind != spi.HeldBy || w.Holder != o {
			t.Fatalf("waiter's acquire: %+v %v", w, err)
		}
		awaitNumsub(t, admin, ch, 1)
		if err := other.Release(ctx, o, name, r.Token); err != nil {
			t.Fatal(err)
		}
		awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: name})
		// The six releases of the name nobody waited for were sent to no subscriber. (The hint
		// may also come from the read after the subscription's confirmation, before the
		// message: wait for it.)
		for deadline := time.Now().Add(20 * time.Second); b.hub.received.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if n := b.hub.received.Load(); n != 1 {
			t.Fatalf("the pub/sub connection received %d messages, want 1 (the waited-for release)", n)
		}
		// The grant ends the wait: the channel goes after the linger.
		if g, err := b.AcquireQueued(ctx, s, name); err != nil || g.Kind != spi.Granted {
			t.Fatalf("waiter's grant: %+v %v", g, err)
		}
		awaitNumsub(t, admin, ch, 0)
	})
}

// TestHintsWaitEnds: a wait also ends with the waiter's Withdraw, its session's close, and when
// it makes no acquire of the name for the holder's time left plus a TTL; the channel is then
// unsubscribed.
func TestHintsWaitEnds(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		admin := newClient(t)
		b, _ := hinted(t, newClient, nil)
		other := newBackend(t, newClient(t))
		o := open(t, other, time.Minute)
		for _, end := range []string{"withdraw", "close", "timeout"} {
			b, ttl := b, time.Minute
			if end == "timeout" {
				// A backend whose sessions' TTL is 1 s: the wait lasts about 2 s (the holder's
				// time left, capped at that TTL, plus the TTL).
				b, _ = hinted(t, newClient, nil)
				ttl = time.Second
			}
			s := open(t, b, ttl)
			name := uniq(t, "ends-"+end)
			ch := wire.ReleasedChannel(name)
			if r, err := other.Acquire(ctx, o, name); err != nil || r.Kind != spi.Granted {
				t.Fatalf("acquire: %+v %v", r, err)
			}
			if w, err := b.AcquireQueued(ctx, s, name); err != nil || w.Kind != spi.HeldBy {
				t.Fatalf("waiter's acquire: %+v %v", w, err)
			}
			awaitNumsub(t, admin, ch, 1)
			switch end {
			case "withdraw":
				if err := b.Withdraw(ctx, s, name); err != nil {
					t.Fatal(err)
				}
			case "close":
				if err := b.CloseSession(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			awaitNumsub(t, admin, ch, 0)
		}
	})
}

// TestHintsConfirmationReadsTheLease: a release between the acquire that found the lease held
// and the server's confirmation of the subscription publishes to nobody; the read that follows
// the confirmation finds the lease no longer held by that holder and delivers the hint. Made
// deterministic by releasing from the hook that runs just before SUBSCRIBE is sent. A lease
// still held, or free but reserved for the waiter the acquire named, gets no hint (a false one
// would make the engine ignore the name's hints for a while).
func TestHintsConfirmationReadsTheLease(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		other := newBackend(t, newClient(t))
		third := newBackend(t, newClient(t))
		o, w := open(t, other, time.Minute), open(t, third, time.Minute)
		var mu sync.Mutex
		before := map[string]func(){} // channel → what happens just before its SUBSCRIBE
		checked := make(chan struct {
			name   string
			hinted bool
		}, 16)
		b, hints := hinted(t, newClient, func(h *hub) {
			h.beforeSubscribe = func(channels []string) {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range channels {
					if f := before[c]; f != nil {
						f()
						delete(before, c)
					}
				}
			}
			h.checked = func(name string, hinted bool) {
				checked <- struct {
					name   string
					hinted bool
				}{name, hinted}
			}
		})
		s := open(t, b, time.Minute)
		expect := func(name string, want bool) {
			t.Helper()
			c := <-checked
			if c.name != name || c.hinted != want {
				t.Fatalf("checked %q hinted=%v, want %q hinted=%v", c.name, c.hinted, name, want)
			}
			if want {
				awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: name})
			} else {
				noHint(t, hints, spi.Released, name)
			}
		}
		grant := func(b *Backend, s spi.SessionID, name string) int64 {
			t.Helper()
			r, err := b.AcquireQueued(ctx, s, name)
			if err != nil || r.Kind != spi.Granted {
				t.Fatalf("acquire: %+v %v", r, err)
			}
			return r.Token
		}
		heldBy := func(name string, holder spi.SessionID) {
			t.Helper()
			r, err := b.AcquireQueued(ctx, s, name)
			if err != nil || r.Kind != spi.HeldBy || r.Holder != holder {
				t.Fatalf("waiter's acquire: %+v %v, want held by %s", r, err, holder)
			}
		}

		// Released before the subscription: hinted by the read.
		lost := uniq(t, "race")
		tok := grant(other, o, lost)
		mu.Lock()
		before[wire.ReleasedChannel(lost)] = func() {
			if err := other.Release(ctx, o, lost, tok); err != nil {
				t.Error(err)
			}
		}
		mu.Unlock()
		heldBy(lost, o)
		expect(lost, true)

		// Still held: no hint.
		held := uniq(t, "held")
		grant(other, o, held)
		heldBy(held, o)
		expect(held, false)

		// Free, reserved for the waiter the acquire named: no hint.
		reserved := uniq(t, "reserved")
		tok = grant(other, o, reserved)
		if r, err := third.AcquireQueued(ctx, w, reserved); err != nil || r.Kind != spi.HeldBy {
			t.Fatalf("third's acquire: %+v %v", r, err)
		}
		if err := other.Release(ctx, o, reserved, tok); err != nil {
			t.Fatal(err)
		}
		heldBy(reserved, w)
		expect(reserved, false)

		// Two sessions of this backend wait: the first saw the holder, the second (after the
		// release, in the same round) the first, for which the free lease is now reserved.
		// The first must be woken.
		s2 := open(t, b, time.Minute)
		mine := uniq(t, "mine")
		tok = grant(other, o, mine)
		mu.Lock()
		before[wire.ReleasedChannel(mine)] = func() {
			if err := other.Release(ctx, o, mine, tok); err != nil {
				t.Error(err)
			}
			if r, err := b.AcquireQueued(ctx, s2, mine); err != nil || r.Kind != spi.HeldBy || r.Holder != s {
				t.Errorf("second waiter's acquire: %+v %v, want held by %s", r, err, s)
			}
		}
		mu.Unlock()
		heldBy(mine, o)
		expect(mine, true)
	})
}

// TestHintsGroups: a join subscribes to the group's channel and its confirmation is a
// GroupChanged hint; another backend's join is heard; after the leave the channel is
// unsubscribed, so later changes are not sent to this backend's connection.
func TestHintsGroups(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		admin := newClient(t)
		b, hints := hinted(t, newClient, nil)
		other := newBackend(t, newClient(t))
		s, o := open(t, b, time.Minute), open(t, other, time.Minute)
		group := uniq(t, "group")
		ch := wire.GroupChangedChannel(group)
		changed := spi.Hint{Kind: spi.GroupChanged, Name: group}
		if st, err := other.Join(ctx, o, group); err != nil || st != spi.OK {
			t.Fatalf("join: %v %v", st, err)
		}
		if n := numsub(t, admin, ch); n != 0 {
			t.Fatalf("%d subscribers of %s before any join of this backend", n, ch)
		}
		if st, err := b.Join(ctx, s, group); err != nil || st != spi.OK {
			t.Fatalf("join: %v %v", st, err)
		}
		awaitHint(t, hints, changed) // the confirmation's
		awaitNumsub(t, admin, ch, 1)
		if st, err := other.Leave(ctx, o, group); err != nil || st != spi.OK {
			t.Fatalf("leave: %v %v", st, err)
		}
		awaitHint(t, hints, changed)
		// A keep-alive naming the group keeps the membership (and the channel).
		if ka, err := b.KeepAlive(ctx, s, nil, []string{group}); err != nil || !slices.Equal(ka.Members[group], []spi.SessionID{s}) {
			t.Fatalf("keep-alive: %+v %v", ka, err)
		}
		if st, err := b.Leave(ctx, s, group); err != nil || st != spi.OK {
			t.Fatalf("leave: %v %v", st, err)
		}
		awaitNumsub(t, admin, ch, 0)
	})
}

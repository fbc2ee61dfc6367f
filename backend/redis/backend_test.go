package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

func open(t *testing.T, b *Backend, ttl time.Duration) spi.SessionID {
	t.Helper()
	s, err := b.OpenSession(context.Background(), "test:"+t.Name(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.CloseSession(context.Background(), s.ID) })
	return s.ID
}

func TestSlotOfMatchesCluster(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	names := []string{"a", "A", "orders.7", "x:y-z_1", strings.Repeat("n", 128), "123456789"}
	for i := range 200 {
		names = append(names, "slot."+strconv.Itoa(i))
	}
	for _, n := range names {
		want, err := c.ClusterKeySlot(ctx, wire.LeaseKey(n)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := slotOf(n); int64(got) != want {
			t.Fatalf("slotOf(%q) = %d, CLUSTER KEYSLOT %s = %d", n, got, wire.LeaseKey(n), want)
		}
	}
	if slotOf("123456789") != 0x31c3&16383 { // the CRC16/XMODEM check value
		t.Fatalf("slotOf(123456789) = %#x", slotOf("123456789"))
	}
}

// TestErrorsAreClassified: an unreachable server is retryable (spi.ErrUnavailable), a wrong
// password permanent, a closed backend spi.ErrClosed, and nothing is sent for a bad name.
func TestErrorsAreClassified(t *testing.T) {
	addr := testenv.Redis(t)
	ctx := context.Background()

	down, err := Open("redis://127.0.0.1:1?dial_timeout=200ms&max_retries=-1")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, err := down.OpenSession(ctx, "x", time.Second); !errors.Is(err, spi.ErrUnavailable) || spi.Classify(err) != spi.Retryable {
		t.Errorf("unreachable server: %v (%s), want retryable spi.ErrUnavailable", err, spi.Classify(err))
	}

	auth, err := Open("redis://nobody:wrong@" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	if _, err := auth.OpenSession(ctx, "x", time.Second); err == nil || spi.Classify(err) != spi.Permanent {
		t.Errorf("wrong password: %v (%s), want permanent", err, spi.Classify(err))
	}

	b := newBackend(t, standaloneClient(t))
	sid := open(t, b, time.Minute)
	for _, name := range []string{"", "a b", "{x}"} {
		if _, err := b.Acquire(ctx, sid, name); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Acquire(%q) = %v", name, err)
		}
		if _, err := b.KeepAlive(ctx, sid, []string{name}, nil); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("KeepAlive(%q) = %v", name, err)
		}
		if _, err := b.Members(ctx, name); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Members(%q) = %v", name, err)
		}
	}
	if _, err := b.OpenSession(ctx, strings.Repeat("o", MaxOwnerLen+1), time.Second); !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("long owner: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Acquire(cctx, sid, uniq(t, "cancel")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	b.Close()
	if _, err := b.Acquire(ctx, sid, "x"); !errors.Is(err, spi.ErrBackendClosed) {
		t.Errorf("after Close: %v", err)
	}
	if _, err := b.Hints(ctx); !errors.Is(err, spi.ErrBackendClosed) {
		t.Errorf("Hints after Close: %v", err)
	}
}

// TestCloseLeavesCallersClient: Close closes only a client the backend opened.
func TestCloseLeavesCallersClient(t *testing.T) {
	c := standaloneClient(t)
	b := newBackend(t, c)
	b.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the caller's client was closed: %v", err)
	}
	o, err := Open("redis://" + testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	oc := o.Client()
	o.Close()
	if err := oc.Ping(context.Background()).Err(); !errors.Is(err, goredis.ErrClosed) {
		t.Fatalf("Open's client after Close: %v, want closed", err)
	}
}

// failing is a hook that fails, with err, the pipelined commands one of whose keys passes
// match (the arguments after EVALSHA's sha and key count).
type failing struct {
	match func(key string) bool
	err   error
}

func (failing) DialHook(next goredis.DialHook) goredis.DialHook          { return next }
func (failing) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (f failing) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			for _, a := range c.Args()[min(3, len(c.Args())):] {
				if f.match(fmt.Sprint(a)) {
					c.SetErr(f.err)
					break
				}
			}
		}
		return err
	}
}

// TestClusterKeepAliveLeavesOutAFailedSlot: when the call of one slot fails with a retryable
// error after the session was renewed, the keep-alive still succeeds, and lists every lease but
// those of that slot (which it did not renew); a permanent failure fails it as a whole. It used
// to fail as a whole on any failure (TestClusterKeepAliveSurvivesAMaster has the cost).
func TestClusterKeepAliveLeavesOutAFailedSlot(t *testing.T) {
	for _, permanent := range []bool{false, true} {
		t.Run(map[bool]string{false: "retryable", true: "permanent"}[permanent], func(t *testing.T) {
			c := clusterClient(t)
			b := newBackend(t, c)
			ctx := context.Background()
			sid := open(t, b, time.Minute)
			var names []string
			for i := range 20 {
				n := uniq(t, "whole") + "." + strconv.Itoa(i)
				if r, err := b.Acquire(ctx, sid, n); err != nil || r.Kind != spi.Granted {
					t.Fatalf("acquire %s: %+v %v", n, r, err)
				}
				names = append(names, n)
			}
			victim := wire.LeaseKey(names[7])
			injected := error(errors.New("injected failure"))
			if permanent {
				injected = fmt.Errorf("injected: %w", luascripts.ErrReply)
			}
			onMasters(t, c, failing{match: func(k string) bool { return k == victim }, err: injected})
			ka, err := b.KeepAlive(ctx, sid, names, nil)
			if permanent {
				if spi.Classify(err) != spi.Permanent || ka.Held != nil {
					t.Fatalf("keep-alive with one slot failed for good = %+v, %v; want a permanent error and no reply", ka, err)
				}
				return
			}
			if err != nil || ka.Expired {
				t.Fatalf("keep-alive with one failed slot = %+v, %v; want a reply without that slot's leases", ka, err)
			}
			var want, got []string
			for _, n := range names {
				if slotOf(n) != slotOf(names[7]) {
					want = append(want, n)
				}
			}
			for _, h := range ka.Held {
				got = append(got, h.Name)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("keep-alive with the slot of %s failed held %v, want %v", names[7], got, want)
			}
		})
	}
}

// TestClusterAcquireFollowsRenewal: a keep-alive that renews the session while an acquire
// carrying the older expiry is in flight does not leave the grant at the older expiry.
func TestClusterAcquireFollowsRenewal(t *testing.T) {
	c := clusterClient(t)
	b := newBackend(t, c)
	ctx := context.Background()
	sid := open(t, b, time.Minute)
	time.Sleep(5 * time.Millisecond)
	s := string(sid)
	ka, err := luascripts.KeepAlive.Run(ctx, c, luascripts.KeepAliveKeys{Session: wire.SessionKey(s), SessionLeases: wire.SessionLeasesKey(s), SessionGroups: wire.SessionGroupsKey(s)}, luascripts.KeepAliveArgs{SessionID: s})
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	e1 := b.sessions[sid].expires
	b.mu.Unlock()
	if ka.ExpiresMS <= e1 {
		t.Fatalf("renewal %d is not after %d", ka.ExpiresMS, e1)
	}
	// The renewal's reply reaches the backend while acquire_at is on the wire.
	var fired atomic.Bool
	c.AddHook(hookProcess(func(cmd goredis.Cmder) {
		if a := cmd.Args(); len(a) > 1 && a[1] == luascripts.AcquireAtSHA1 && !fired.Swap(true) {
			b.renewed(sid, ka.ExpiresMS)
		}
	}))
	name := uniq(t, "follow")
	r, err := b.Acquire(ctx, sid, name)
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("acquire: %+v %v", r, err)
	}
	got, err := c.HGet(ctx, wire.LeaseKey(name), wire.LeaseFieldExpires).Int64()
	if err != nil || got != ka.ExpiresMS {
		t.Fatalf("lease expires %d (%v), want the renewed %d (not the acquire's %d)", got, err, ka.ExpiresMS, e1)
	}
}

// TestClusterAcquireOvertakingReleaseAfterRenewal: an acquire that lands before the same
// session's release of the name's previous term (the engine sends it without waiting for the
// release's reply) is answered as a re-acquire with the released term's token; when a keep-alive
// renewed the session meanwhile, the follow-up that moves the grant to the renewed expiry finds
// the release landed. That was reported as an outage (Unavailable "moving the grant to the
// session's renewed expiry: {Status:1 ... Held:[]}": a backend error, an early keep-alive,
// trial 31 finding 1); the acquire now asks again and reports what the lease is now: a fresh
// grant, held at the server with its token at the renewed expiry.
func TestClusterAcquireOvertakingReleaseAfterRenewal(t *testing.T) {
	c := clusterClient(t)
	b := newBackend(t, c)
	ctx := context.Background()
	sid := open(t, b, time.Minute)
	name := uniq(t, "overtake")
	first, err := b.Acquire(ctx, sid, name)
	if err != nil || first.Kind != spi.Granted {
		t.Fatalf("acquire: %+v %v", first, err)
	}
	time.Sleep(5 * time.Millisecond)
	s := string(sid)
	ka, err := luascripts.KeepAlive.Run(ctx, c, luascripts.KeepAliveKeys{Session: wire.SessionKey(s), SessionLeases: wire.SessionLeasesKey(s), SessionGroups: wire.SessionGroupsKey(s)}, luascripts.KeepAliveArgs{SessionID: s})
	if err != nil {
		t.Fatal(err)
	}
	// The second acquire_at lands while the first term is still held (a re-acquire); then the
	// renewal's reply reaches the backend and the release of the first term lands, both before
	// the follow-up keep_alive_leases.
	var fired atomic.Bool
	var relErr error
	c.AddHook(hookProcess(func(cmd goredis.Cmder) {
		if a := cmd.Args(); len(a) > 1 && a[1] == luascripts.AcquireAtSHA1 && !fired.Swap(true) {
			b.renewed(sid, ka.ExpiresMS)
			relErr = b.Release(ctx, sid, name, first.Token)
		}
	}))
	r, err := b.Acquire(ctx, sid, name)
	if !fired.Load() || relErr != nil {
		t.Fatalf("the release did not land inside the acquire (fired %v): %v", fired.Load(), relErr)
	}
	if err != nil || r.Kind != spi.Granted || r.Token <= first.Token {
		t.Fatalf("acquire overtaking the release of token %d = %+v, %v; want a fresh grant (a token above it)", first.Token, r, err)
	}
	vals, err := c.HMGet(ctx, wire.LeaseKey(name), wire.LeaseFieldSession, wire.LeaseFieldToken, wire.LeaseFieldExpires).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{s, strconv.FormatInt(r.Token, 10), strconv.FormatInt(ka.ExpiresMS, 10)}; !slices.Equal(vals, want) {
		t.Fatalf("lease (session, token, expires) = %v, want %v: the grant at the renewed expiry", vals, want)
	}
}

// TestClusterCloseReleasesGrantOfAcquireDuringRelease: an acquire sent while the session's
// release of the name's previous term is in flight (the engine does so) and granted after that
// release landed is still released by CloseSession. The release's reply used to untrack the
// name after the new grant had tracked it again, so CloseSession left that grant to lapse at
// its expiry: a closed client's lease blocked the name for up to a TTL.
func TestClusterCloseReleasesGrantOfAcquireDuringRelease(t *testing.T) {
	c := clusterClient(t)
	b := newBackend(t, c)
	ctx := context.Background()
	sid := open(t, b, time.Minute)
	name := uniq(t, "retrack")
	first, err := b.Acquire(ctx, sid, name)
	if err != nil || first.Kind != spi.Granted {
		t.Fatalf("acquire: %+v %v", first, err)
	}
	// The release lands; before its reply is handled, the next acquire is granted.
	var fired atomic.Bool
	var second spi.Acquire
	var acqErr error
	c.AddHook(hookProcess(func(cmd goredis.Cmder) {
		if a := cmd.Args(); len(a) > 1 && a[1] == luascripts.ReleaseLeasesSHA1 && !fired.Swap(true) {
			second, acqErr = b.Acquire(ctx, sid, name)
		}
	}))
	if err := b.Release(ctx, sid, name, first.Token); err != nil {
		t.Fatal(err)
	}
	if !fired.Load() || acqErr != nil || second.Kind != spi.Granted || second.Token <= first.Token {
		t.Fatalf("acquire inside the release (fired %v) = %+v, %v; want a fresh grant", fired.Load(), second, acqErr)
	}
	if err := b.CloseSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if holder, err := c.HGet(ctx, wire.LeaseKey(name), wire.LeaseFieldSession).Result(); err != goredis.Nil {
		t.Fatalf("after CloseSession the lease is held by %q (%v), want it free: the grant of token %d was not released", holder, err, second.Token)
	}
}

type hookProcess func(goredis.Cmder)

func (h hookProcess) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h hookProcess) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		h(cmd)
		return err
	}
}
func (h hookProcess) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// TestReleaseTokenZeroReleasesNothing: token 0 means "any token" to release_leases; Release
// must never send it.
func TestReleaseTokenZeroReleasesNothing(t *testing.T) {
	for _, mode := range []struct {
		name string
		c    func(testing.TB) goredis.UniversalClient
	}{{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }}} {
		t.Run(mode.name, func(t *testing.T) {
			b := newBackend(t, mode.c(t))
			ctx := context.Background()
			sid := open(t, b, time.Minute)
			name := uniq(t, "zero")
			r, err := b.Acquire(ctx, sid, name)
			if err != nil || r.Kind != spi.Granted {
				t.Fatal(r, err)
			}
			for _, tok := range []int64{0, -1} {
				if err := b.Release(ctx, sid, name, tok); err != nil {
					t.Fatal(err)
				}
			}
			ka, err := b.KeepAlive(ctx, sid, []string{name}, nil)
			if err != nil || !slices.Contains(ka.Held, spi.Held{Name: name, Token: r.Token}) {
				t.Fatalf("after releases with tokens 0 and -1: %+v %v", ka, err)
			}
		})
	}
}

// TestHintsResubscribeAfterReconnect: the pub/sub connection is killed at the server; hints
// keep coming after go-redis reconnects.
func TestHintsResubscribeAfterReconnect(t *testing.T) {
	name := uniq(t, "hintconn")
	c := goredis.NewClient(&goredis.Options{Addr: testenv.Redis(t), ClientName: name})
	t.Cleanup(func() { c.Close() })
	b := newBackend(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := standaloneClient(t)
	other := newBackend(t, standaloneClient(t))
	sid, waiter := open(t, other, time.Minute), open(t, b, time.Minute)
	lease := uniq(t, "hinted")
	expect := func(what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			r, err := other.Acquire(ctx, sid, lease)
			if err != nil || r.Kind != spi.Granted {
				t.Fatal(r, err)
			}
			if w, err := b.Acquire(ctx, waiter, lease); err != nil || w.Kind != spi.HeldBy {
				t.Fatal(w, err)
			}
			if err := other.Release(ctx, sid, lease, r.Token); err != nil {
				t.Fatal(err)
			}
			timeout := time.After(200 * time.Millisecond)
			for waiting := true; waiting; {
				select {
				case h := <-hints:
					if h.Kind == spi.Released && h.Name == lease {
						return
					}
				case <-timeout:
					waiting = false
				}
			}
		}
		t.Fatalf("no released hint %s", what)
	}
	expect("before the reconnect")
	killed := 0
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+name+" ") && strings.Contains(line, " sub=1 ") {
			for _, f := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(f, "id="); ok {
					n, _ := strconv.ParseInt(id, 10, 64)
					if err := admin.ClientKillByFilter(ctx, "ID", strconv.FormatInt(n, 10)).Err(); err != nil {
						t.Fatal(err)
					}
					killed++
				}
			}
		}
	}
	if killed != 1 {
		t.Fatalf("found %d pub/sub connections named %s, want 1:\n%s", killed, name, list)
	}
	expect("after the pub/sub connection was killed")
}

// TestInspect lists leases, sessions and groups (standalone on database 9, and the Cluster).
func TestInspect(t *testing.T) {
	for _, mode := range []struct {
		name string
		c    func(testing.TB) goredis.UniversalClient
	}{{"standalone", func(t testing.TB) goredis.UniversalClient {
		c := goredis.NewClient(&goredis.Options{Addr: testenv.Redis(t), DB: 9})
		t.Cleanup(func() { c.Close() })
		if err := c.Ping(context.Background()).Err(); err != nil {
			testenv.Unavailable(t, "Redis", err.Error())
		}
		return c
	}}, {"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }}} {
		t.Run(mode.name, func(t *testing.T) {
			b := newBackend(t, mode.c(t))
			ctx := context.Background()
			sid := open(t, b, time.Minute)
			held, freed, group := uniq(t, "held"), uniq(t, "freed"), uniq(t, "group")
			r, err := b.Acquire(ctx, sid, held)
			if err != nil || r.Kind != spi.Granted {
				t.Fatal(r, err)
			}
			f, _ := b.Acquire(ctx, sid, freed)
			if err := b.Release(ctx, sid, freed, f.Token); err != nil {
				t.Fatal(err)
			}
			if st, err := b.Join(ctx, sid, group); err != nil || st != spi.OK {
				t.Fatal(st, err)
			}
			snap, err := b.Inspect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var sawHeld, sawFreed, sawSession bool
			for _, l := range snap.Leases {
				switch l.Name {
				case held:
					sawHeld = l.Holder == sid && l.Token == r.Token && l.Owner == "test:"+t.Name() && l.Remaining > 0 && l.Remaining <= time.Minute
				case freed:
					sawFreed = l.Holder == "" && l.Token == f.Token
				}
			}
			for _, s := range snap.Sessions {
				if s.ID == sid {
					sawSession = s.Owner == "test:"+t.Name() && s.Remaining > 0
				}
			}
			if !sawHeld || !sawFreed || !sawSession || !slices.Equal(snap.Groups[group], []spi.SessionID{sid}) {
				t.Fatalf("snapshot: held %v, freed %v, session %v, group %v", sawHeld, sawFreed, sawSession, snap.Groups[group])
			}
		})
	}
}

// TestKeepAliveRoundTrips: a keep-alive of 10,000 leases and 3 groups is one round trip on
// standalone Redis, and the session call plus one pipelined round on a Cluster.
func TestKeepAliveRoundTrips(t *testing.T) {
	for _, mode := range []struct {
		name string
		c    func(testing.TB) goredis.UniversalClient
		want int64
	}{{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }, 1},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }, 2}} {
		t.Run(mode.name, func(t *testing.T) {
			c := mode.c(t)
			b := newBackend(t, c)
			ctx := context.Background()
			sid := open(t, b, time.Minute)
			prefix := uniq(t, "rt")
			held := prefix + ".held"
			if r, err := b.Acquire(ctx, sid, held); err != nil || r.Kind != spi.Granted {
				t.Fatal(r, err)
			}
			names := []string{held}
			for i := range 9999 {
				names = append(names, prefix+"."+strconv.Itoa(i))
			}
			groups := []string{prefix + ".g1", prefix + ".g2", prefix + ".g3"}
			if _, err := b.Join(ctx, sid, groups[1]); err != nil {
				t.Fatal(err)
			}
			if _, err := b.KeepAlive(ctx, sid, names, groups); err != nil { // warm up (the scripts in the servers' caches)
				t.Fatal(err)
			}
			cnt := &counter{}
			want := mode.want
			if cc, ok := c.(*goredis.ClusterClient); ok {
				// The session's call, then one pipeline per master (10,000 names reach every
				// master), counted on the masters' clients, where they run.
				want = 1 + int64(onMasters(t, cc, cnt))
			} else {
				c.AddHook(cnt)
			}
			ka, err := b.KeepAlive(ctx, sid, names, groups)
			if err != nil || ka.Expired {
				t.Fatal(ka, err)
			}
			if n := cnt.n.Load(); n != want {
				t.Errorf("keep-alive of %d leases and %d groups took %d round trips, want %d", len(names), len(groups), n, want)
			}
			if len(ka.Held) != 1 || ka.Held[0].Name != held || len(ka.Members) != 3 ||
				len(ka.Members[groups[0]]) != 0 || !slices.Equal(ka.Members[groups[1]], []spi.SessionID{sid}) {
				t.Errorf("keep-alive reply %+v", ka)
			}
		})
	}
}

// TestACLUser runs a session and hints through ACL users limited to Simba's keys and channels,
// on a private server (the shared one is left alone): one with the channel patterns as the
// package documentation writes them, one with &simba:* (SUBSCRIBE checks each channel against
// the patterns; the PSUBSCRIBE of earlier versions needed them literally). A user without
// channel permissions gets a permanent NOPERM error from Hints, and a wrong password a
// permanent error from the first call.
func TestACLUser(t *testing.T) {
	pc := startPrivServer(t, "user default off",
		"user simba on >s3cret ~simba:* &simba:lease:{*} &simba:group:{*} +@all",
		"user wide on >s3cret ~simba:* &simba:* +@all",
		"user narrow on >s3cret ~simba:* resetchannels +@all")
	for _, user := range []string{"simba", "wide"} {
		t.Run(user, func(t *testing.T) { aclHints(t, pc, user) })
	}
	ctx := context.Background()
	narrow, err := Open(fmt.Sprintf("redis://narrow:s3cret@127.0.0.1:%d", pc))
	if err != nil {
		t.Fatal(err)
	}
	defer narrow.Close()
	if _, err := narrow.Hints(ctx); err == nil || !strings.Contains(err.Error(), "NOPERM") || spi.Classify(err) != spi.Permanent {
		t.Fatalf("Hints without the channel patterns: %v, want a permanent NOPERM error", err)
	}
	bad, err := Open(fmt.Sprintf("redis://simba:wrong@127.0.0.1:%d", pc))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.OpenSession(ctx, "x", time.Second); err == nil || spi.Classify(err) != spi.Permanent {
		t.Fatalf("wrong password: %v, want a permanent error", err)
	}
}

// aclHints: a waiter of backend b (as user) hears of the release by another backend's holder.
func aclHints(t *testing.T, pc int, user string) {
	ctx := context.Background()
	b, err := Open(fmt.Sprintf("redis://%s:s3cret@127.0.0.1:%d", user, pc))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	holder, err := Open(fmt.Sprintf("redis://%s:s3cret@127.0.0.1:%d", user, pc))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints, err := b.Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}
	sid, hs := open(t, b, time.Minute), open(t, holder, time.Minute)
	name := "acl.lease." + user
	deadline := time.Now().Add(10 * time.Second)
	for got := false; !got; {
		if time.Now().After(deadline) {
			t.Fatal("no released hint as the ACL user")
		}
		r, err := holder.Acquire(ctx, hs, name)
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("acquire as the ACL user: %+v %v", r, err)
		}
		if w, err := b.Acquire(ctx, sid, name); err != nil || w.Kind != spi.HeldBy {
			t.Fatalf("waiter's acquire as the ACL user: %+v %v", w, err)
		}
		if err := holder.Release(ctx, hs, name, r.Token); err != nil {
			t.Fatal(err)
		}
		select {
		case h := <-hints:
			got = h == spi.Hint{Kind: spi.Released, Name: name}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestStandaloneOnAClusterNodeIsPermanent points a standalone client at one Cluster node: its
// cluster-enabled setting (read by the first OpenSession) and MOVED (or CROSSSLOT) replies mean
// the DSN is wrong, so OpenSession fails with a permanent error matching ErrInvalidOption (a
// wrapper tells its users to fix their configuration on it; trial 31 found this one matched no
// sentinel) that says to use redis+cluster://, rather than a retryable one retried forever.
func TestStandaloneOnAClusterNodeIsPermanent(t *testing.T) {
	clusterClient(t) // skips or fails as testenv decides when the Cluster is down
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisCluster(t)[0]})
	t.Cleanup(func() { c.Close() })
	b := newBackend(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	// Some owner keys may hash to the node's own slots; a handful of sessions meet MOVED.
	for i := 0; i < 16 && err == nil; i++ {
		var s spi.Session
		if s, err = b.OpenSession(ctx, fmt.Sprintf("owner-%d", i), 10*time.Second); err == nil {
			b.CloseSession(ctx, s.ID)
		}
	}
	if err == nil {
		t.Fatal("OpenSession on a Cluster node through a standalone client never failed")
	}
	if spi.Classify(err) != spi.Permanent || errors.Is(err, spi.ErrUnavailable) || !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("err = %v: want a permanent error matching ErrInvalidOption (the DSN is wrong)", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "redis+cluster://") ||
		!(strings.Contains(msg, "MOVED") || strings.Contains(msg, "CROSSSLOT") || strings.Contains(msg, "cluster-enabled yes")) {
		t.Errorf("err = %q does not name the misconfiguration", msg)
	}
}

// TestStandaloneOnAClusterNodeFailsAtFirstSession: a standalone client at a Cluster node fails
// its very first OpenSession, whatever slot the session's key hashes to. The MOVED replies alone
// let a session whose key falls in the node's own slots open (about one in three), so
// open.WithPing passed such a DSN and the misconfiguration showed only at the first lease; the
// first OpenSession's check now reads cluster-enabled. Each backend is fresh, since the check
// runs before a backend's first session: with the old code all of them failing had odds of
// (2/3)^12, under 1 %.
func TestStandaloneOnAClusterNodeFailsAtFirstSession(t *testing.T) {
	clusterClient(t) // skips or fails as testenv decides when the Cluster is down
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opened := 0
	for i := 0; i < 12; i++ {
		b, err := Open("redis://" + testenv.RedisCluster(t)[0])
		if err != nil {
			t.Fatal(err)
		}
		s, err := b.OpenSession(ctx, fmt.Sprintf("owner-%d", i), 10*time.Second)
		if err == nil {
			opened++
			b.CloseSession(ctx, s.ID)
		} else if spi.Classify(err) != spi.Permanent || errors.Is(err, spi.ErrUnavailable) ||
			!strings.Contains(err.Error(), "use a redis+cluster:// DSN") {
			t.Errorf("OpenSession: %v (%v), want a permanent error saying to use redis+cluster://", err, spi.Classify(err))
		}
		b.Close()
	}
	if opened > 0 {
		t.Errorf("%d of 12 first sessions opened on a Cluster node through a redis:// DSN", opened)
	}
}

// TestStandaloneInspectOnAClusterNode: Inspect through a standalone client at a Cluster node
// fails with the permanent error that says to use redis+cluster://, as OpenSession does. It
// used to SCAN that node alone and list its share of the leases as if it were all of them
// (`simba status -dsn redis://node:7001` printed an empty list and exited 0), with no error.
func TestStandaloneInspectOnAClusterNode(t *testing.T) {
	clusterClient(t) // skips or fails as testenv decides when the Cluster is down
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, addr := range testenv.RedisCluster(t) {
		b, err := Open("redis://" + addr)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := b.Inspect(ctx)
		b.Close()
		if err == nil {
			t.Errorf("Inspect at Cluster node %s through a redis:// DSN listed %d leases, %d sessions and no error; want an error saying to use redis+cluster://",
				addr, len(snap.Leases), len(snap.Sessions))
			continue
		}
		if spi.Classify(err) != spi.Permanent || errors.Is(err, spi.ErrUnavailable) ||
			!strings.Contains(err.Error(), "use a redis+cluster:// DSN") {
			t.Errorf("Inspect at %s: %v (%v), want a permanent error saying to use redis+cluster://", addr, err, spi.Classify(err))
		}
	}
}

// TestKeepAliveMembersRemaining: a keep-alive tells, per group, the time left of the first
// other member to expire (the caller's own membership is left out), standalone and on a
// Cluster, so the client reads the members when it expires; a group with no other member has
// no entry.
func TestKeepAliveMembersRemaining(t *testing.T) {
	for _, mode := range []struct {
		name string
		c    func(testing.TB) goredis.UniversalClient
	}{{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }}} {
		t.Run(mode.name, func(t *testing.T) {
			b := newBackend(t, mode.c(t))
			ctx := context.Background()
			me := open(t, b, time.Minute)
			opened := time.Now() // before the short session opens: its expiry is at most 5 s after
			short, long := open(t, b, 5*time.Second), open(t, b, time.Minute)
			g, alone := uniq(t, "lapse"), uniq(t, "alone")
			for _, s := range []spi.SessionID{me, short, long} {
				if st, err := b.Join(ctx, s, g); err != nil || st != spi.OK {
					t.Fatalf("Join(%s) = %v, %v", s, st, err)
				}
			}
			if st, err := b.Join(ctx, me, alone); err != nil || st != spi.OK {
				t.Fatalf("Join = %v, %v", st, err)
			}
			ka, err := b.KeepAlive(ctx, me, nil, []string{g, alone})
			if err != nil || ka.Expired {
				t.Fatal(ka, err)
			}
			if len(ka.Members[g]) != 3 || len(ka.Members[alone]) != 1 {
				t.Fatalf("Members = %v", ka.Members)
			}
			// The 5 s session's time left: no more than 5 s, and no less than 5 s minus the time
			// since just before it opened (Redis counts whole milliseconds: 2 ms of slack). A
			// fixed floor (4 s) failed whenever the calls in between took a second on a loaded
			// machine.
			if r, ok := ka.MembersRemaining[g]; !ok || r < 5*time.Second-time.Since(opened)-2*time.Millisecond || r > 5*time.Second {
				t.Errorf("MembersRemaining[%s] = %v, %v; want the 5 s session's time left (%v since it opened)", g, r, ok, time.Since(opened))
			}
			if r, ok := ka.MembersRemaining[alone]; ok {
				t.Errorf("MembersRemaining[%s] = %v for a group with no other member", alone, r)
			}
			// The short session leaves: the least is the long one's.
			if _, err := b.Leave(ctx, short, g); err != nil {
				t.Fatal(err)
			}
			if ka, err = b.KeepAlive(ctx, me, nil, []string{g}); err != nil {
				t.Fatal(err)
			}
			if r := ka.MembersRemaining[g]; len(ka.Members[g]) != 2 || r <= 55*time.Second || r > time.Minute {
				t.Errorf("after the leave: Members = %v, MembersRemaining[%s] = %v; want the long session's", ka.Members, g, r)
			}
		})
	}
}

// TestDSNTheServerCannotServeIsPermanent: a DSN the server can never serve fails at once, at
// the hint subscription (which simba.New makes) and at OpenSession, with a permanent error
// saying what to change, not a retryable ErrUnavailable: a database index out of range, a
// database other than 0 on a Cluster node, and redis+cluster:// at a standalone server, each
// matching ErrInvalidOption, as every DSN that cannot work does (redis:// at a Cluster node:
// TestStandaloneOnAClusterNodeIsPermanent). The
// durability check at the first OpenSession logs nothing first (at a Cluster node, it logged
// that it "could not check" the server, quoting the SELECT's refusal, as if the server had
// refused CONFIG and INFO), and with WithStrictDurability the error is still the DSN's, not
// ErrNotDurable. The servers are only read.
func TestDSNTheServerCannotServeIsPermanent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dsn     func(t *testing.T) string
		invalid bool   // matches spi.ErrInvalidOption
		hint    string // the message says
	}{
		{"db-out-of-range", func(t *testing.T) string { return "redis://" + testenv.Redis(t) + "/99" }, true, "database 99 does not exist"},
		{"cluster-at-standalone", func(t *testing.T) string { return "redis+cluster://" + testenv.Redis(t) }, true, "use a redis:// DSN"},
		{"db-on-cluster-node", func(t *testing.T) string { return "redis://" + testenv.RedisCluster(t)[0] + "/1" }, true, "use a redis+cluster:// DSN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := tc.dsn(t) // skips or fails as testenv decides when the server is down
			var logs testenv.LogBuffer
			b, err := Open(dsn, WithLogger(logs.Logger()))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			strict, err := Open(dsn, WithLogger(logs.Logger()), WithStrictDurability())
			if err != nil {
				t.Fatal(err)
			}
			defer strict.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = b.OpenSession(ctx, "o", 10*time.Second)
			_, herr := b.Hints(ctx)
			_, serr := strict.OpenSession(ctx, "o", 10*time.Second)
			for what, err := range map[string]error{"OpenSession": err, "Hints": herr, "strict OpenSession": serr} {
				if err == nil || spi.Classify(err) != spi.Permanent || errors.Is(err, spi.ErrUnavailable) || errors.Is(err, ErrNotDurable) ||
					errors.Is(err, spi.ErrInvalidOption) != tc.invalid || !strings.Contains(err.Error(), tc.hint) {
					t.Errorf("%s: %s = %v (%v), want a permanent error (ErrInvalidOption %v) saying %q", dsn, what, err, spi.Classify(err), tc.invalid, tc.hint)
				}
			}
			if out := logs.String(); out != "" {
				t.Errorf("%s: logged before the error:\n%s", dsn, out)
			}
		})
	}
}

// TestClusterCloseLeavesGroupOfJoinInFlight: a CloseSession sent while the session's Join of a
// group is in flight (the engine does so: Close does not wait for a Join's reply) and handled
// after that Join landed still leaves the group. A Join used to record its group only from its
// reply, so the close, which leaves the groups recorded, left the membership to lapse at the
// session's expiry: the other members saw a closed client as a member, and kept its
// partitions unled, for up to a TTL.
func TestClusterCloseLeavesGroupOfJoinInFlight(t *testing.T) {
	c := clusterClient(t)
	b := newBackend(t, c)
	ctx := context.Background()
	sid := open(t, b, time.Minute)
	group := uniq(t, "joinclose")
	t.Cleanup(func() { c.ZRem(context.Background(), wire.GroupKey(group), string(sid)) })
	// The Join lands; before its reply is handled, the session is closed.
	var fired atomic.Bool
	var closeErr error
	c.AddHook(hookProcess(func(cmd goredis.Cmder) {
		if a := cmd.Args(); len(a) > 1 && a[1] == luascripts.JoinAtSHA1 && !fired.Swap(true) {
			closeErr = b.CloseSession(ctx, sid)
		}
	}))
	if _, err := b.Join(ctx, sid, group); err != nil {
		t.Fatal(err)
	}
	if !fired.Load() || closeErr != nil {
		t.Fatalf("close inside the join (fired %v): %v", fired.Load(), closeErr)
	}
	if m, err := b.Members(ctx, group); err != nil || len(m) != 0 {
		t.Fatalf("after CloseSession the members of %s are %v (%v), want none: the closed session stays a member until its expiry", group, m, err)
	}
}

// TestClusterCloseLeavesGroupJoinedDuringLeave: a Join of a group made while the session's
// Leave of it is in flight, and answered before that Leave's reply, is still left by
// CloseSession. The engine sends no Join before a Leave's reply (and, when the Leave failed,
// not until one call timeout later), but bounded reports a Leave whose caller left while its
// body goes on until go-redis's own timeouts, which may outlast that wait (a client without
// ContextTimeoutEnabled reads with its ReadTimeout). The Leave's reply used to drop the group
// that the Join had recorded again, as a release's reply did a lease (see
// TestClusterCloseReleasesGrantOfAcquireDuringRelease).
func TestClusterCloseLeavesGroupJoinedDuringLeave(t *testing.T) {
	c := clusterClient(t)
	b := newBackend(t, c)
	ctx := context.Background()
	sid := open(t, b, time.Minute)
	group := uniq(t, "rejoin")
	t.Cleanup(func() { c.ZRem(context.Background(), wire.GroupKey(group), string(sid)) })
	if st, err := b.Join(ctx, sid, group); err != nil || st != spi.OK {
		t.Fatalf("join: %v %v", st, err)
	}
	// The Leave lands; before its reply is handled, the group is joined again.
	var fired atomic.Bool
	var rejoined spi.Status
	var joinErr error
	c.AddHook(hookProcess(func(cmd goredis.Cmder) {
		if a := cmd.Args(); len(a) > 1 && a[1] == luascripts.LeaveAtSHA1 && !fired.Swap(true) {
			rejoined, joinErr = b.Join(ctx, sid, group)
		}
	}))
	if _, err := b.Leave(ctx, sid, group); err != nil {
		t.Fatal(err)
	}
	if !fired.Load() || joinErr != nil || rejoined != spi.OK {
		t.Fatalf("join inside the leave (fired %v) = %v, %v; want OK", fired.Load(), rejoined, joinErr)
	}
	if err := b.CloseSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if m, err := b.Members(ctx, group); err != nil || len(m) != 0 {
		t.Fatalf("after CloseSession the members of %s are %v (%v), want none: the closed session stays a member until its expiry", group, m, err)
	}
}

package zookeeper

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openSession(t *testing.T, b *Backend, ttl time.Duration) spi.SessionID {
	t.Helper()
	s, err := b.OpenSession(testCtx(t), "test-owner", ttl)
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func mustGrant(t *testing.T, b *Backend, s spi.SessionID, name string) int64 {
	t.Helper()
	r, err := b.Acquire(testCtx(t), s, name)
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire(%q) = %+v, %v; want granted", name, r, err)
	}
	return r.Token
}

// rawClient connects a plain go-zookeeper client to the backend's servers, with the digest
// identity auth ("" for none).
func rawClient(t *testing.T, b *Backend, auth string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(b.cfg.Servers, 10*time.Second, zk.WithLogger(quietLogger{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if auth != "" {
		if err := c.AddAuth("digest", []byte(auth)); err != nil {
			t.Fatal(err)
		}
	} else if _, _, err := c.Exists("/"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDigestACLProtectsNodes: with credentials in the DSN, clients without them (or with
// others) can read Simba's nodes but not delete, change or create any.
func TestDigestACLProtectsNodes(t *testing.T) {
	dsn := serverChroot(t).DSN("simba:s3cret", "")
	b := openBackend(t, dsn)
	s := openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, s, "guarded")
	if st, err := b.Join(testCtx(t), s, "crew"); err != nil || st != spi.OK {
		t.Fatalf("Join = %s, %v", st, err)
	}
	lease, member := b.lay.lease("guarded"), b.lay.member("crew", string(s))
	for _, auth := range []string{"", "simba:wrong", "intruder:s3cret"} {
		c := rawClient(t, b, auth)
		data, stat, err := c.Get(lease)
		if err != nil || string(data) != "test-owner" || stat.Czxid != tok {
			t.Errorf("auth %q: Get = %q, %+v, %v; want the owner (world may read)", auth, data, stat, err)
		}
		for _, p := range []string{lease, member} {
			if err := c.Delete(p, -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("auth %q: Delete(%s) = %v, want ErrNoAuth", auth, p, err)
			}
			if _, err := c.Set(p, []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("auth %q: Set(%s) = %v, want ErrNoAuth", auth, p, err)
			}
		}
		if _, err := c.Create(b.lay.lease("squat"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("auth %q: Create under leases = %v, want ErrNoAuth", auth, err)
		}
	}
	acl, _, err := rawClient(t, b, "").GetACL(lease)
	if err != nil || len(acl) != 2 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, wire.ZKSessionIdentityUser+":") ||
		acl[0].Perms != zk.PermAll || acl[1].Scheme != "world" || acl[1].Perms != zk.PermRead {
		t.Errorf("lease ACL = %+v, %v; want the session's own digest identity all + world read", acl, err)
	}
	// Even a client with Simba's credentials cannot write a session's lease node (it can delete
	// it: deletion is the parent's permission).
	if _, err := rawClient(t, b, "simba:s3cret").Set(lease, []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("Set(lease) with Simba's credentials = %v, want ErrNoAuth", err)
	}
	// A second client with the same credentials is a Simba client: it sees the holder.
	other := openBackend(t, dsn)
	o := openSession(t, other, 10*time.Second)
	if r, err := other.Acquire(testCtx(t), o, "guarded"); err != nil || r.Kind != spi.HeldBy || r.Holder != s {
		t.Errorf("Acquire by another Simba client = %+v, %v; want held by %s", r, err, s)
	}
}

// TestOutsideDeletionIsTakenOver: a privileged client deletes a held lease node, before and
// after its watch is set; the keep-alive stops reporting it (the engine's TAKEN_OVER), a
// Released hint is published, the stale release changes nothing and the next grant has a
// greater token.
func TestOutsideDeletionIsTakenOver(t *testing.T) {
	dsn := serverChroot(t).DSN("simba:pw", "")
	b := openBackend(t, dsn)
	admin := rawClient(t, b, "simba:pw")
	s := openSession(t, b, 10*time.Second)
	for _, wait := range []time.Duration{0, 3 * watchDelay} {
		name := "outside-" + wait.String()
		ctx, cancel := context.WithCancel(testCtx(t))
		hints, err := b.Hints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tok := mustGrant(t, b, s, name)
		time.Sleep(wait)
		if err := admin.Delete(b.lay.lease(name), -1); err != nil {
			t.Fatal(err)
		}
		ka, err := b.KeepAlive(testCtx(t), s, []string{name}, nil)
		if err != nil || ka.Expired || len(ka.Held) != 0 {
			t.Fatalf("wait %v: KeepAlive after an outside deletion = %+v, %v; want live, holding nothing", wait, ka, err)
		}
		timeout := time.After(10 * time.Second)
		for seen := false; !seen; {
			select {
			case h := <-hints:
				seen = h.Kind == spi.Released && h.Name == name
			case <-timeout:
				t.Fatalf("wait %v: no released hint for %s", wait, name)
			}
		}
		cancel()
		if err := b.Release(testCtx(t), s, name, tok); err != nil {
			t.Fatal(err)
		}
		if next := mustGrant(t, b, s, name); next <= tok {
			t.Fatalf("wait %v: token after the outside deletion %d, want > %d", wait, next, tok)
		}
	}
}

// TestUnknownOutcomeSettledByKeepAlive: a lease created by a request whose reply was lost is
// reported by the next keep-alive that asks about it, and can then be released.
func TestUnknownOutcomeSettledByKeepAlive(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	sid := openSession(t, b, 10*time.Second)
	s, _ := b.lookup(sid)
	path := b.lay.lease("lost-reply")
	if _, err := s.conn.Create(path, s.owner, zk.FlagEphemeral, s.leaseACL); err != nil {
		t.Fatal(err)
	}
	s.tap.takeCreated(path) // as if the reply had been lost
	s.markUncertain("lost-reply")
	s.markUncertain("never-created")
	ka, err := b.KeepAlive(testCtx(t), sid, []string{"lost-reply", "never-created"}, nil)
	if err != nil || len(ka.Held) != 1 || ka.Held[0].Name != "lost-reply" || ka.Held[0].Token <= 0 {
		t.Fatalf("KeepAlive = %+v, %v; want lost-reply held", ka, err)
	}
	if err := b.Release(testCtx(t), sid, "lost-reply", ka.Held[0].Token); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.conn.Exists(path); err != nil || ok {
		t.Fatalf("node after release: exists=%v, %v", ok, err)
	}
}

// TestExpiredSessionIsNeverReplaced: after ZooKeeper ends a session, its connection does not
// open another one (go-zookeeper would), and the session answers SessionExpired for good.
func TestExpiredSessionIsNeverReplaced(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	rec := newRecorder()
	rb := recorded{Backend: b, r: rec}
	sess, err := rb.OpenSession(testCtx(t), "o", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := b.lookup(sess.ID)
	mustGrant(t, b, sess.ID, "old-term")
	rec.expire(t, sess.ID)
	time.Sleep(2500 * time.Millisecond) // go-zookeeper retries a lone server after a second
	if id := s.conn.SessionID(); id != 0 && SessionIDString(id) != sess.ID {
		t.Fatalf("the connection got the new session %x", id)
	}
	if st := s.conn.State(); st == zk.StateHasSession {
		t.Fatalf("the connection of an expired session is in state %v", st)
	}
	for range 3 {
		if r, err := b.Acquire(testCtx(t), sess.ID, "old-term"); err != nil || r.Kind != spi.SessionExpired {
			t.Fatalf("Acquire = %+v, %v; want session-expired", r, err)
		}
		if ka, err := b.KeepAlive(testCtx(t), sess.ID, []string{"old-term"}, nil); err != nil || !ka.Expired {
			t.Fatalf("KeepAlive = %+v, %v; want expired", ka, err)
		}
		if st, err := b.Join(testCtx(t), sess.ID, "g"); err != nil || st != spi.Expired {
			t.Fatalf("Join = %s, %v; want expired", st, err)
		}
	}
}

// TestPingsDoNotRenew: a session that is not kept alive expires after its timeout even though
// its connection stays up (go-zookeeper's pings are dropped), and one that is kept alive does
// not.
func TestPingsDoNotRenew(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	lo, _ := ttlBounds(t, b)
	ttl := max(lo, 800*time.Millisecond)
	idle, kept := openSession(t, b, ttl), openSession(t, b, ttl)
	deadline := time.Now().Add(2*ttl + 2*time.Second)
	for time.Now().Before(deadline) {
		if ka, err := b.KeepAlive(testCtx(t), kept, nil, nil); err != nil || ka.Expired {
			t.Fatalf("kept-alive session: %+v, %v", ka, err)
		}
		time.Sleep(ttl / 4)
	}
	if ka, err := b.KeepAlive(testCtx(t), idle, nil, nil); err != nil || !ka.Expired {
		t.Fatalf("idle session after %v: %+v, %v; want expired", 2*ttl+2*time.Second, ka, err)
	}
}

// TestGroupsAndInspect: members across clients, a GroupChanged hint on a join, and the
// snapshot of leases, sessions and groups.
func TestGroupsAndInspect(t *testing.T) {
	dsn := serverDSN(t, "")
	a, bb := openBackend(t, dsn), openBackend(t, dsn)
	sa, sb := openSession(t, a, 10*time.Second), openSession(t, bb, 10*time.Second)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := a.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := a.Join(testCtx(t), sa, "workers"); err != nil || st != spi.OK {
		t.Fatalf("Join = %s, %v", st, err)
	}
	// The hint connection may still be setting its watches: join and leave until a hint comes.
	got := false
	for i := 0; i < 50 && !got; i++ {
		if _, err := bb.Join(testCtx(t), sb, "workers"); err != nil {
			t.Fatal(err)
		}
		select {
		case h := <-hints:
			got = h.Kind == spi.GroupChanged && h.Name == "workers"
		case <-time.After(200 * time.Millisecond):
			bb.Leave(testCtx(t), sb, "workers")
		}
	}
	if !got {
		t.Fatal("no group-changed hint")
	}
	bb.Join(testCtx(t), sb, "workers")
	want := []spi.SessionID{sa, sb}
	slices.Sort(want)
	if ms, err := bb.Members(testCtx(t), "workers"); err != nil || !slices.Equal(ms, want) {
		t.Fatalf("Members = %v, %v; want %v", ms, err, want)
	}
	tok := mustGrant(t, a, sa, "inspected")
	snap, err := bb.Inspect(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// sa is another client's session: ZooKeeper does not tell bb its time left.
	if len(snap.Leases) != 1 || snap.Leases[0] != (spi.LeaseInfo{Name: "inspected", Holder: sa, Owner: "test-owner", Token: tok, RemainingUnknown: true}) {
		t.Errorf("leases = %+v", snap.Leases)
	}
	if !slices.Equal(snap.Groups["workers"], want) {
		t.Errorf("groups = %v", snap.Groups)
	}
	var ids []spi.SessionID
	for _, si := range snap.Sessions {
		ids = append(ids, si.ID)
		if si.Owner != "test-owner" {
			t.Errorf("session %s owner %q", si.ID, si.Owner)
		}
		if si.ID == sb && (si.Remaining <= 0 || si.Remaining > 10*time.Second || si.RemainingUnknown) {
			t.Errorf("own session %s remaining %v (unknown %v)", si.ID, si.Remaining, si.RemainingUnknown)
		}
		if si.ID == sa && !si.RemainingUnknown {
			t.Errorf("another client's session %s remaining %v, want unknown", si.ID, si.Remaining)
		}
	}
	if !slices.Equal(ids, want) {
		t.Errorf("sessions = %v, want %v", ids, want)
	}
	// The group's node outlives its members; a group without live members is not listed, as
	// on every other backend.
	for _, m := range []struct {
		b   *Backend
		sid spi.SessionID
	}{{a, sa}, {bb, sb}} {
		if _, err := m.b.Leave(testCtx(t), m.sid, "workers"); err != nil {
			t.Fatal(err)
		}
	}
	if snap, err = bb.Inspect(testCtx(t)); err != nil || len(snap.Groups) != 0 {
		t.Errorf("Inspect after every member left: groups %v, %v; want none", snap.Groups, err)
	}
}

// TestKeepAliveErrorSaysItOnce: a keep-alive's reads run in parallel (the lease root, then
// one per group) and fail alike when the call's time runs out; its error says so once, not
// once per read ("context deadline exceeded\ncontext deadline exceeded").
func TestKeepAliveErrorSaysItOnce(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	sid := openSession(t, b, 10*time.Second)
	ctx, cancel := context.WithDeadline(testCtx(t), time.Now().Add(-time.Second))
	defer cancel()
	_, err := b.KeepAlive(ctx, sid, nil, []string{"g1", "g2", "g3"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("KeepAlive with an expired context = %v, want a deadline error", err)
	}
	if n := strings.Count(err.Error(), context.DeadlineExceeded.Error()); n != 1 || strings.Contains(err.Error(), "\n") {
		t.Errorf("KeepAlive's error %q says %q %d times, want once on one line", err, context.DeadlineExceeded, n)
	}
}

// TestWatchesAreNotRepeated: polling a held lease (HeldBy) and keep-alives with a group keep
// one pending watch per path, not one per call, and a fired watch is set again.
func TestWatchesAreNotRepeated(t *testing.T) {
	dsn := serverDSN(t, "")
	holder, poller := openBackend(t, dsn), openBackend(t, dsn)
	h, p := openSession(t, holder, 10*time.Second), openSession(t, poller, 10*time.Second)
	tok := mustGrant(t, holder, h, "polled")
	if st, err := poller.Join(testCtx(t), p, "team"); err != nil || st != spi.OK {
		t.Fatalf("Join = %s, %v", st, err)
	}
	for range 50 {
		if r, err := poller.Acquire(testCtx(t), p, "polled"); err != nil || r.Kind != spi.HeldBy {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		if _, err := poller.KeepAlive(testCtx(t), p, nil, []string{"team"}); err != nil {
			t.Fatal(err)
		}
	}
	ps, _ := poller.lookup(p)
	ps.mu.Lock()
	pending := len(ps.watching)
	ps.mu.Unlock()
	if pending != 2 {
		t.Fatalf("%d pending watches after 50 polls of one lease and one group, want 2", pending)
	}
	if err := holder.Release(testCtx(t), h, "polled", tok); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps.mu.Lock()
		_, pending := ps.watching[poller.lay.lease("polled")]
		fired := !pending
		ps.mu.Unlock()
		if fired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease watch did not fire on release")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mustGrant(t, poller, p, "polled")
}

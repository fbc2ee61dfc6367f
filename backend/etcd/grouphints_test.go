package etcd

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// awaitGroupChanged reads hints until a GroupChanged hint for g, failing on one for any group
// in never before it, or when ctx ends first.
func awaitGroupChanged(ctx context.Context, t *testing.T, hints <-chan spi.Hint, g string, never ...string) {
	t.Helper()
	for {
		select {
		case h, ok := <-hints:
			if !ok {
				t.Fatal("hint channel closed")
			}
			switch {
			case h.Kind != spi.GroupChanged:
			case h.Name == g:
				return
			case slices.Contains(never, h.Name):
				t.Fatalf("GroupChanged hint for %q, a group no session of the backend uses (waiting for %q)", h.Name, g)
			}
		case <-ctx.Done():
			t.Fatalf("no GroupChanged hint for %q", g)
		}
	}
}

// groupWatched reports whether the backend keeps a watch of g's members, and whether it is
// made (it hears every change from then on).
func groupWatched(b *Backend, g string) (kept, made bool) {
	b.hints.mu.Lock()
	defer b.hints.mu.Unlock()
	w := b.hints.groups[g]
	return w != nil, w != nil && w.since != 0
}

// waitGroupWatch polls until the backend's watch of g's members is made.
func waitGroupWatch(ctx context.Context, t *testing.T, b *Backend, g string) {
	t.Helper()
	for {
		if _, made := groupWatched(b, g); made {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the watch of %s's members was not made", g)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestGroupHintsOnlyForUsedGroups: a backend subscribed to hints hears of the changes of the
// groups its sessions use, and of no other: one that read the members of "mine" (and joined
// nothing) hears nothing of another backend's 5 joins and leaves of "theirs" before it hears of
// that backend's join of "mine". On the old code, which watched the whole groups prefix, it
// got a hint for each of theirs first.
func TestGroupHintsOnlyForUsedGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := serverDSN(t)
	idle, other := openBackend(t, dsn), openBackend(t, dsn)
	hints, err := idle.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := other.OpenSession(ctx, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Members(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	waitGroupWatch(ctx, t, idle, "mine")
	if kept, _ := groupWatched(idle, "theirs"); kept {
		t.Fatal("a watch of theirs, which no session uses")
	}
	for range 5 {
		if st, err := other.Join(ctx, s.ID, "theirs"); err != nil || st != spi.OK {
			t.Fatalf("Join = %v, %v", st, err)
		}
		if st, err := other.Leave(ctx, s.ID, "theirs"); err != nil || st != spi.OK {
			t.Fatalf("Leave = %v, %v", st, err)
		}
	}
	if _, err := other.Join(ctx, s.ID, "mine"); err != nil {
		t.Fatal(err)
	}
	awaitGroupChanged(ctx, t, hints, "mine", "theirs")
	if _, err := other.Leave(ctx, s.ID, "mine"); err != nil {
		t.Fatal(err)
	}
	awaitGroupChanged(ctx, t, hints, "mine", "theirs")
}

// TestGroupInterestEnds: a group is watched while a session is a member of it (from its Join
// on) and for a linger of two TTLs after it left or closed, or after a read of its members;
// the watch ends with the last interest, or with the last subscriber. Without subscribers
// nothing is watched.
func TestGroupInterestEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := serverDSN(t)
	b := openBackend(t, dsn)
	open := func(ttl time.Duration) spi.SessionID {
		s, err := b.OpenSession(ctx, "groups", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	want := func(g string, on bool, why string) {
		t.Helper()
		if kept, _ := groupWatched(b, g); kept != on {
			t.Fatalf("%s: watched(%s) = %v, want %v", why, g, kept, on)
		}
	}
	lapse := func(g string) {
		t.Helper()
		for {
			if kept, _ := groupWatched(b, g); !kept {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the interest in %s did not end", g)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	long := open(time.Minute)
	if _, err := b.Join(ctx, long, "unsubscribed"); err != nil {
		t.Fatal(err)
	}
	want("unsubscribed", false, "a join without a subscriber")

	sctx, unsubscribe := context.WithCancel(ctx)
	hints, err := b.Hints(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(ctx, long, "closed"); err != nil {
		t.Fatal(err)
	}
	want("closed", true, "a member")
	if err := b.CloseSession(ctx, long); err != nil {
		t.Fatal(err)
	}
	lapse("closed") // its only member closed

	// Leaving and reading linger two TTLs (the server's shortest TTL).
	short := open(time.Second)
	if _, err := b.Join(ctx, short, "left"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Leave(ctx, short, "left"); err != nil {
		t.Fatal(err)
	}
	want("left", true, "just left")
	if _, err := b.KeepAlive(ctx, short, nil, []string{"read"}); err != nil {
		t.Fatal(err)
	}
	want("read", true, "just read")
	lapse("left")
	lapse("read")

	if _, err := b.Join(ctx, open(time.Minute), "kept"); err != nil {
		t.Fatal(err)
	}
	want("kept", true, "a member")
	unsubscribe()
	for range hints {
	}
	want("kept", false, "after the last subscriber left")
}

// TestGroupChangeBeforeWatchIsHinted: a join or a leave that lands after a read of a group's
// members and before the group's watch starts (here: run just before it is made) is hinted,
// by the one read made once the watch is.
func TestGroupChangeBeforeWatchIsHinted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := serverDSN(t)
	b, other := openBackend(t, dsn), openBackend(t, dsn)
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := other.OpenSession(ctx, "gap", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Join(ctx, s.ID, "left"); err != nil {
		t.Fatal(err)
	}
	// gaps: what runs before the first watch of a group, once; keyed by group, as a watch
	// goroutine of an earlier test's backend may still call the hook.
	var gapMu sync.Mutex
	gaps := map[string]func(){
		"joined": func() {
			if _, err := other.Join(ctx, s.ID, "joined"); err != nil {
				t.Error(err)
			}
		},
		"left": func() {
			if _, err := other.Leave(ctx, s.ID, "left"); err != nil {
				t.Error(err)
			}
		},
	}
	hook := func(g string) {
		gapMu.Lock()
		f := gaps[g]
		delete(gaps, g)
		gapMu.Unlock()
		if f != nil {
			f()
		}
	}
	beforeGroupWatch.Store(&hook)
	t.Cleanup(func() { beforeGroupWatch.Store(nil) })
	for _, g := range []string{"joined", "left"} {
		if _, err := b.Members(ctx, g); err != nil {
			t.Fatal(err)
		}
		awaitGroupChanged(ctx, t, hints, g)
	}
}

// TestGroupHintsAfterReconnect: a group's watch outlives the loss of the client's connection:
// a join made while the connection was cut is hinted once it is back (the watch resumes after
// the last revision it reported), and so is a later leave.
func TestGroupHintsAfterReconnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	direct := testenv.Etcd(t)[0]
	prefix := testPrefix(t)
	p := faultproxy.StartTest(t, direct)
	b := openBackend(t, "etcd://"+p.Addr()+prefix)
	other := openBackend(t, "etcd://"+direct+prefix)
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := other.OpenSession(ctx, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Members(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	waitGroupWatch(ctx, t, b, "g")
	p.Set(faultproxy.Fault{Cut: true, Reset: true})
	if _, err := other.Join(ctx, s.ID, "g"); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	awaitGroupChanged(ctx, t, hints, "g")
	if _, err := other.Leave(ctx, s.ID, "g"); err != nil {
		t.Fatal(err)
	}
	awaitGroupChanged(ctx, t, hints, "g")
}

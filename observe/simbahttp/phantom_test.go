package simbahttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// scriptedInspector is a backend whose Inspect answers what the test sets: the snapshot of
// another backend, a given snapshot, or an error.
type scriptedInspector struct {
	spi.Backend
	mu   sync.Mutex
	from spi.Inspector
	snap *spi.Snapshot
	err  error
}

func (s *scriptedInspector) set(from spi.Inspector, snap *spi.Snapshot, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from, s.snap, s.err = from, snap, err
}

func (s *scriptedInspector) Inspect(ctx context.Context) (spi.Snapshot, error) {
	s.mu.Lock()
	from, snap, err := s.from, s.snap, s.err
	s.mu.Unlock()
	switch {
	case from != nil:
		return from.Inspect(ctx)
	case snap != nil:
		return *snap, nil
	}
	return spi.Snapshot{}, err
}

// follower starts node-b's election on srv and waits for it to lead, then starts node-a's
// (with a handler on opts) and waits for node-a to learn node-b as the holder.
func follower(t *testing.T, ctx context.Context, srv *simbatest.Server, opts simbahttp.Opts) (
	ca *simba.Client, ea *simba.Election, ha *simbahttp.Handler, eb *simba.Election, tb simba.Term) {
	t.Helper()
	cb, err := simba.New(srv.Backend(), simba.WithOwner("node-b"), simba.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cb.Close(context.Background()) })
	if eb, err = cb.NewElection("leader"); err != nil {
		t.Fatal(err)
	}
	if err := eb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "node-b to lead", 10*time.Second, eb.IsLeader)
	tb, _ = eb.Term()

	ha = simbahttp.New(opts)
	ca, err = simba.New(srv.Backend(), append(ha.Options(), simba.WithOwner("node-a"), simba.WithTTL(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ca.Close(context.Background()) })
	ha.Attach(ca)
	if ea, err = ca.NewElection("leader"); err != nil {
		t.Fatal(err)
	}
	ha.Track(ea)
	if err := ea.Start(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "node-a to learn node-b as the holder", 10*time.Second, func() bool {
		l, ok := ea.Leader()
		return ok && !l.Self && l.Owner == "node-b"
	})
	return ca, ea, ha, eb, tb
}

func holderOf(st simbahttp.Status, name string) (simbahttp.Holder, bool) {
	for _, hd := range st.Holders {
		if hd.Name == name {
			return hd, true
		}
	}
	return simbahttp.Holder{}, false
}

func timelineJSON(st simbahttp.Status, name string) string {
	b, _ := json.Marshal(st.Timeline[name])
	return string(b)
}

// The trial's phantom: node-a follows node-b's election, stops its own, then node-b releases.
// The backend shows the lease free, so node-a's status lists no holder of it, and its timeline
// keeps the one tenure of node-b, ended "seen-free", however many requests follow (it used to
// list node-b from the stopped election's stale view and add a timeline entry per request).
func TestNoPhantomHolderAfterStopAndRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	// Each request inspects (no snapshot shared between requests): the fold of each is tested.
	_, ea, ha, eb, tb := follower(t, ctx, srv, simbahttp.Opts{Backend: srv.Backend(), SnapshotTTL: -1})
	if err := ea.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if l, ok := ea.Leader(); ok {
		t.Errorf("a stopped election's Leader() = %+v, true; want nothing known", l)
	}
	st := ha.Status(ctx)
	if hd, ok := holderOf(st, "leader"); !ok || hd.Source != "backend" || hd.Token != tb.Token() {
		t.Fatalf("holder before the release: %+v %v, want node-b with token %d from the backend", hd, ok, tb.Token())
	}
	if err := eb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		st := ha.Status(ctx)
		if hd, ok := holderOf(st, "leader"); ok {
			t.Errorf("request %d: a released lease has holder %+v", i+1, hd)
		}
		tl := st.Timeline["leader"]
		if len(tl) != 1 || tl[0].Token != tb.Token() || tl[0].Until == nil || tl[0].Reason != "seen-free" {
			t.Fatalf("request %d: timeline %s, want node-b's term %d ended seen-free", i+1, timelineJSON(st, "leader"), tb.Token())
		}
	}
}

// A tracked election's holder, learned before the backend's snapshot showed the lease free,
// neither outweighs that snapshot nor reopens the ended entry when a later Inspect fails (it is
// then the holder shown, from the client).
func TestStaleClientViewDoesNotReopenTheTimeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	insp := &scriptedInspector{Backend: srv.Backend()}
	insp.set(srv.Backend(), nil, nil)
	_, _, ha, _, tb := follower(t, ctx, srv, simbahttp.Opts{Backend: insp, SnapshotTTL: -1})

	st := ha.Status(ctx)
	if hd, ok := holderOf(st, "leader"); !ok || hd.Source != "backend" || hd.Token != tb.Token() {
		t.Fatalf("holder: %+v %v, want node-b with token %d from the backend", hd, ok, tb.Token())
	}
	// The backend says free (node-a's election has not learned it: it still says node-b).
	insp.set(nil, &spi.Snapshot{}, nil)
	for i := range 3 {
		st := ha.Status(ctx)
		if hd, ok := holderOf(st, "leader"); ok {
			t.Errorf("free snapshot, request %d: holder %+v", i+1, hd)
		}
		if tl := st.Timeline["leader"]; len(tl) != 1 || tl[0].Until == nil || tl[0].Reason != "seen-free" {
			t.Fatalf("free snapshot, request %d: timeline %s, want node-b's term ended seen-free", i+1, timelineJSON(st, "leader"))
		}
	}
	// No snapshot: the election's view is all there is, but it ends nothing and reopens nothing.
	insp.set(nil, nil, errors.New("inspect failed"))
	for i := range 3 {
		st := ha.Status(ctx)
		if hd, ok := holderOf(st, "leader"); !ok || hd.Source != "client" || hd.Owner != "node-b" {
			t.Errorf("no snapshot, request %d: holder %+v %v, want node-b from the client", i+1, hd, ok)
		}
		if tl := st.Timeline["leader"]; len(tl) != 1 || tl[0].Until == nil {
			t.Fatalf("no snapshot, request %d: timeline %s, want node-b's one term, ended", i+1, timelineJSON(st, "leader"))
		}
	}
}

// Without a backend snapshot, a tracked election's learned holder is shown until the client
// closes, and not after.
func TestClosedClientShowsNoLearnedHolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ca, ea, ha, _, _ := follower(t, ctx, srv, simbahttp.Opts{})
	if hd, ok := holderOf(ha.Status(ctx), "leader"); !ok || hd.Source != "client" || hd.Owner != "node-b" {
		t.Fatalf("holder: %+v %v, want node-b from the client", hd, ok)
	}
	if err := ca.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if l, ok := ea.Leader(); ok {
		t.Errorf("a closed client's election's Leader() = %+v, true; want nothing known", l)
	}
	if hd, ok := holderOf(ha.Status(ctx), "leader"); ok {
		t.Errorf("after Close: holder %+v", hd)
	}
}

// A holder whose time left the backend cannot tell (ZooKeeper, for another client's session:
// LeaseInfo.RemainingUnknown) has remaining_ms -1, "unknown", not 0, which would read as a
// lease about to expire.
func TestHolderRemainingUnknown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	insp := &scriptedInspector{Backend: srv.Backend()}
	insp.set(nil, &spi.Snapshot{Leases: []spi.LeaseInfo{
		{Name: "zk-held", Holder: "0x1", Owner: "other", Token: 7, RemainingUnknown: true},
		{Name: "sql-held", Holder: "s2", Owner: "other", Token: 8, Remaining: 1500 * time.Millisecond},
	}}, nil)
	st := simbahttp.New(simbahttp.Opts{Backend: insp}).Status(ctx)
	if hd, ok := holderOf(st, "zk-held"); !ok || hd.RemainingMillis != -1 {
		t.Errorf("holder with an unknown time left: %+v %v, want remaining_ms -1", hd, ok)
	}
	if hd, ok := holderOf(st, "sql-held"); !ok || hd.RemainingMillis != 1500 {
		t.Errorf("holder with 1.5 s left: %+v %v, want remaining_ms 1500", hd, ok)
	}
}

// This client's own term is listed as a holder ("self") only where the backend's snapshot
// cannot know of it: when the snapshot began before the term was granted, or there is none.
// A snapshot begun after the grant that shows the name free says the lease is gone at the
// backend (released ahead of the client's revoke event, or its record lost); the status listed
// "self" over it, contradicting the snapshot it carried.
func TestNoSelfHolderOverANewerFreeSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	free := &spi.Snapshot{}

	// A snapshot begun before the grant (kept for SnapshotTTL): the term shows, from self.
	insp := &scriptedInspector{Backend: srv.Backend()}
	insp.set(nil, free, nil)
	h := simbahttp.New(simbahttp.Opts{Backend: insp, SnapshotTTL: time.Minute})
	c := client(t, srv.Backend(), "node-a", h)
	if _, ok := holderOf(h.Status(ctx), "job"); ok {
		t.Fatal("a free name has a holder")
	}
	held := lock(t, ctx, c, "job")
	if hd, ok := holderOf(h.Status(ctx), "job"); !ok || !hd.Self || hd.Source != "self" || hd.Token != held.Token() {
		t.Errorf("over a snapshot begun before the grant: holder %+v %v, want this client's term from self", hd, ok)
	}

	// A snapshot begun after the grant that shows the name free: no holder.
	insp2 := &scriptedInspector{Backend: srv.Backend()}
	insp2.set(nil, free, nil)
	var mu sync.Mutex
	wall := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return wall }
	h2 := simbahttp.New(simbahttp.Opts{Backend: insp2, SnapshotTTL: -1, Now: now})
	c2 := client(t, srv.Backend(), "node-b", h2)
	held2 := lock(t, ctx, c2, "job2")
	mu.Lock()
	wall = wall.Add(time.Millisecond) // the snapshot begins after the grant was seen
	mu.Unlock()
	st := h2.Status(ctx)
	if hd, ok := holderOf(st, "job2"); ok {
		t.Errorf("over a free snapshot begun after the grant (at %v): holder %+v", st.BackendAt, hd)
	}
	if len(st.Terms) != 1 || st.Terms[0].Token != held2.Token() {
		t.Errorf("terms %+v, want this client's term of job2 (its own view)", st.Terms)
	}
	_ = held.Unlock(ctx)
	_ = held2.Unlock(ctx)
}

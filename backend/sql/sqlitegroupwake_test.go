package sql

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// TestSQLiteMemberHearsLaterJoin: on one SQLite file, a member that joined a group and took
// all of its partitions (it was alone) hears of a member that joins right after it from the
// waker (a GroupChanged hint, then a Members read), and hands that member its partitions
// without waiting for its next keep-alive. Members that start a group together each read the
// members once their own Join is in, so the first saw only itself; before the waker watched
// groups, it kept the later members' partitions until its next keep-alive (one renewal
// interval, 20 s at this TTL) showed them, and they found them held meanwhile. Counted, not
// timed: the first member makes no keep-alive between the second's Join and the second leading
// every partition assigned to it.
func TestSQLiteMemberHearsLaterJoin(t *testing.T) {
	const (
		ttl        = time.Minute // renewal every 20 s: far beyond the hand-over
		group      = "started-together"
		partitions = 32
	)
	dsn := liteDSN(t)
	migrated(t, dsn)
	ctx := testCtx(t)
	var firstKeepAlives atomic.Int64
	first, err := simba.New(open(t, dsn), simba.WithOwner("first"), simba.WithTTL(ttl),
		simba.WithCallObserver(func(ci simba.CallInfo) {
			if ci.Op == simba.OpKeepAlive {
				firstKeepAlives.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Close(context.Background()) })
	second, err := simba.New(open(t, dsn), simba.WithOwner("second"), simba.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close(context.Background()) })

	firstAssigned := make(chan struct{}, partitions)
	if _, err := first.JoinGroup(ctx, group, partitions, simba.OnAssigned(func(context.Context, int, simba.Term) {
		firstAssigned <- struct{}{}
	})); err != nil {
		t.Fatal(err)
	}
	for range partitions {
		select {
		case <-firstAssigned:
		case <-ctx.Done():
			t.Fatal("the first member did not lead every partition")
		}
	}

	before := firstKeepAlives.Load()
	secondAssigned := make(chan struct{}, partitions)
	g, err := second.JoinGroup(ctx, group, partitions, simba.OnAssigned(func(context.Context, int, simba.Term) {
		secondAssigned <- struct{}{}
	}))
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the second member sees both members and leads every partition assigned to it
	// (rendezvous hashing gives it none of 32 with probability 2^-32).
	led := 0
	for {
		if a := g.Assigned(); len(g.Members()) == 2 && len(a) > 0 && led >= len(a) {
			break
		}
		select {
		case <-secondAssigned:
			led++
		case <-ctx.Done():
			t.Fatalf("the second member leads %d partitions of %v assigned to it", len(g.Held()), g.Assigned())
		}
	}
	if n := firstKeepAlives.Load() - before; n != 0 {
		t.Fatalf("the first member handed over the second's %d partitions after %d keep-alive(s): it heard of the join only from its keep-alive, not from the waker",
			len(g.Assigned()), n)
	}
	t.Logf("the second member leads its %d partitions of %d; the first made no keep-alive meanwhile", len(g.Assigned()), partitions)
}

// TestSQLiteGroupWatchEnds: the waker watches a group from a Join that succeeded until the
// joining session leaves it, closes or expires, or two TTLs pass, so that the members of a
// settled group cost no more reads than before; a failed Join watches nothing.
func TestSQLiteGroupWatchEnds(t *testing.T) {
	wd, _ := wire.SQLDialectByName(wire.SQLSQLite)
	w := newSQLiteWaker(nil, wd)
	watched := func() []string {
		gs, _ := w.watchedGroups()
		slices.Sort(gs)
		return gs
	}
	w.joined("s1", "g", spi.OK, nil)
	if gs, fresh := w.watchedGroups(); !slices.Equal(gs, []string{"g"}) || !fresh {
		t.Fatalf("after a Join: %v (fresh %v); want [g], fresh", gs, fresh)
	}
	if _, fresh := w.watchedGroups(); fresh {
		t.Fatal("a group stays fresh after poll took it")
	}
	w.joined("s2", "g", spi.OK, nil)
	w.joined("s3", "h", spi.OK, errors.New("timeout"))
	w.joined("s3", "i", spi.Expired, nil)
	if gs := watched(); !slices.Equal(gs, []string{"g"}) {
		t.Fatalf("after a second member's Join, a failed Join and an expired one: %v; want [g]", gs)
	}
	w.left("s1", "g", spi.OK, nil)
	if gs := watched(); !slices.Equal(gs, []string{"g"}) {
		t.Fatalf("after one of two sessions left: %v; want [g]", gs)
	}
	w.closed("s2")
	if gs := watched(); gs != nil {
		t.Fatalf("after both sessions left or closed: %v; want none", gs)
	}
	w.joined("s4", "j", spi.OK, nil)
	w.mu.Lock()
	w.groups["j"].sids["s4"] = time.Now().Add(-time.Millisecond) // two TTLs have passed
	w.mu.Unlock()
	if gs := watched(); gs != nil {
		t.Fatalf("two TTLs after the Join: %v; want none", gs)
	}
}

package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestKeepAliveManyGroups: a keep-alive asking about more groups than one transaction may
// range over separately (etcd's --max-txn-ops) still reports each group's members, from one
// range over every group.
func TestKeepAliveManyGroups(t *testing.T) {
	b := openBackend(t, serverDSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s1, err := b.OpenSession(ctx, "a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.OpenSession(ctx, "b", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for i := range 200 {
		g := fmt.Sprintf("g%03d", i)
		groups = append(groups, g)
		if _, err := b.Join(ctx, s1.ID, g); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := b.Join(ctx, s2.ID, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	groups = append(groups, "g0") // a prefix of g000's name: must not see g000's members
	for _, n := range []int{10, len(groups)} {
		ka, err := b.KeepAlive(ctx, s1.ID, nil, groups[len(groups)-n:])
		if err != nil || ka.Expired {
			t.Fatalf("KeepAlive(%d groups) = %+v, %v", n, ka, err)
		}
		for _, g := range groups[len(groups)-n:] {
			var want []spi.SessionID
			var i int
			if _, err := fmt.Sscanf(g, "g%03d", &i); err == nil && g != "g0" {
				want = []spi.SessionID{s1.ID}
				if i%2 == 0 {
					want = append(want, s2.ID)
				}
				slices.Sort(want)
			}
			if got := ka.Members[g]; !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("KeepAlive(%d groups): members of %s = %v, want %v", n, g, got, want)
			}
		}
	}
}

// TestHints: a join and a leave of a group the backend uses are GroupChanged hints, and a
// session's end (CloseSession: etcd deletes its keys with its lease) is a Released hint for
// each lease it held that a session of the subscribed backend waits for; the channel closes
// when the backend does.
func TestHints(t *testing.T) {
	dsn := serverDSN(t)
	b := openBackend(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := openBackend(t, dsn)
	s, err := other.OpenSession(ctx, "hints", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := func(h spi.Hint, do func()) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			do()
			select {
			case got := <-hints:
				if got == h {
					return
				}
				do = func() {}
			case <-time.After(500 * time.Millisecond):
				// the watch may not be established yet: do it again
			case <-deadline:
				t.Fatalf("no hint %+v", h)
			}
		}
	}
	// b hears of the changes of the groups its sessions use: here, one it read.
	if _, err := b.Members(ctx, "grp"); err != nil {
		t.Fatal(err)
	}
	want(spi.Hint{Kind: spi.GroupChanged, Name: "grp"}, func() { other.Join(ctx, s.ID, "grp") })  //nolint:errcheck
	want(spi.Hint{Kind: spi.GroupChanged, Name: "grp"}, func() { other.Leave(ctx, s.ID, "grp") }) //nolint:errcheck
	if r, err := other.Acquire(ctx, s.ID, "l1"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	// b hears of the releases of names its sessions wait for.
	mine, err := b.OpenSession(ctx, "waiter", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(ctx, mine.ID, "l1"); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("the waiter's Acquire = %+v, %v", r, err)
	}
	want(spi.Hint{Kind: spi.Released, Name: "l1"}, func() { other.CloseSession(ctx, s.ID) }) //nolint:errcheck
	b.Close()
	for range hints {
	}
}

// TestInspect: the snapshot lists the live sessions with their owners, the held leases with
// holder, owner, token and time left, and the groups' members; a closed session and what it
// held are gone.
func TestInspect(t *testing.T) {
	b := openBackend(t, serverDSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s1, err := b.OpenSession(ctx, "one", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.OpenSession(ctx, "two", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Acquire(ctx, s1.ID, "res")
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	for _, s := range []spi.SessionID{s1.ID, s2.ID} {
		if st, err := b.Join(ctx, s, "grp"); err != nil || st != spi.OK {
			t.Fatalf("Join = %v, %v", st, err)
		}
	}
	snap, err := b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Leases) != 1 {
		t.Fatalf("leases %+v, want one", snap.Leases)
	}
	l := snap.Leases[0]
	if l.Name != "res" || l.Holder != s1.ID || l.Owner != "one" || l.Token != r.Token || l.Remaining <= 0 || l.Remaining > 10*time.Second {
		t.Errorf("lease %+v, want res held by %s (one) with token %d", l, s1.ID, r.Token)
	}
	if len(snap.Sessions) != 2 || !slices.IsSortedFunc(snap.Sessions, func(a, b spi.SessionInfo) int { return strings.Compare(string(a.ID), string(b.ID)) }) {
		t.Errorf("sessions %+v, want two, sorted", snap.Sessions)
	}
	want := []spi.SessionID{s1.ID, s2.ID}
	slices.Sort(want)
	if !slices.Equal(snap.Groups["grp"], want) {
		t.Errorf("group grp = %v, want %v", snap.Groups["grp"], want)
	}
	if err := b.CloseSession(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}
	snap, err = b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Leases) != 0 || len(snap.Sessions) != 1 || !slices.Equal(snap.Groups["grp"], []spi.SessionID{s2.ID}) {
		t.Errorf("after CloseSession: %+v", snap)
	}
}

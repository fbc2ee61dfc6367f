package etcd

import (
	"context"
	"fmt"
	"slices"
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

package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// TestClusterKeepAliveSurvivesAMaster kills one master of a private Cluster (3 masters, a
// replica each) together with its replica — so that nothing serves its slots and no retry can
// renew anything there — while two sessions hold leases on every master: one a bare backend
// session, one a simba.Client's with an election per lease. Neither session lives on the killed
// master. The bare session's next keep-alive must succeed and list exactly the leases on the
// masters that answered (and the group whose master answered); the client must lose the terms
// of the leases on the killed master only, keeping its session and, with their tokens, its other
// terms past two TTLs (when a session whose keep-alives all failed would have lapsed).
//
// The reply names the leases it left out as unrenewed, and the client's terms on the killed
// master end as not renewed (RevokedDeadline): they ended as taken over, though nobody took them.
//
// On the old code, whose keep-alive failed as a whole when any master's part failed, the bare
// keep-alive returned an error, and the client lost every term and its session at its deadline.
func TestClusterKeepAliveSurvivesAMaster(t *testing.T) {
	pc := startPrivCluster(t)
	ctx := context.Background()
	// A killed master and replica would otherwise have the others refuse every slot
	// (CLUSTERDOWN) once they see it fail: the test is about the masters that still serve.
	for _, p := range pc.ports {
		if err := pc.node(p).ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
	}
	cc := pc.client()
	const ttl = 3 * time.Second

	// The client and its session.
	c, err := simba.New(newBackend(t, pc.client()), simba.WithTTL(ttl), simba.WithOwner("clusterka"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(cctx)
	})
	await(t, 10*time.Second, "the client's session", func() bool { return c.Session() != "" })
	csid := c.Session()

	// The bare session, on a master the client's session is not on either, if need be after a
	// few tries, so that a third master is left to kill.
	b := newBackend(t, cc)
	var bs spi.Session
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatal("no bare session on a master apart from the client's in 30 tries")
		}
		if bs, err = b.OpenSession(ctx, "bare", ttl); err != nil {
			t.Fatal(err)
		}
		if pc.masterOfKey(cc, wire.SessionKey(string(bs.ID))) != pc.masterOfKey(cc, wire.SessionKey(string(csid))) {
			break
		}
	}
	safe := map[int]bool{
		pc.masterOfKey(cc, wire.SessionKey(string(bs.ID))): true,
		pc.masterOfKey(cc, wire.SessionKey(string(csid))):  true,
	}
	var victim int
	masters := map[int]bool{}
	for _, p := range pc.ports {
		for _, n := range pc.nodes(p) {
			if n.port == p && n.isMaster {
				masters[p] = true
			}
		}
	}
	for p := range masters {
		if !safe[p] {
			victim = p
		}
	}
	if len(masters) != 3 || victim == 0 {
		t.Fatalf("masters %v, sessions on %v: no master to kill", masters, safe)
	}

	// Two names per master for each session (two slots per master, mostly).
	pick := func(prefix string) (names []string, on map[string]int) {
		on = map[string]int{}
		count := map[int]int{}
		for i := 0; len(names) < 6; i++ {
			n := fmt.Sprintf("%s.%d", prefix, i)
			m := pc.masterOfKey(cc, wire.LeaseKey(n))
			if count[m] < 2 {
				count[m]++
				names = append(names, n)
				on[n] = m
			}
		}
		return names, on
	}
	bareNames, bareOn := pick("clusterka.bare")
	clientNames, clientOn := pick("clusterka.client")

	tokens := map[string]int64{}
	for _, n := range bareNames {
		a, err := b.Acquire(ctx, bs.ID, n)
		if err != nil || a.Kind != spi.Granted {
			t.Fatalf("acquire %s: %+v, %v", n, a, err)
		}
		tokens[n] = a.Token
	}
	var liveGroup, deadGroup string
	for i := 0; liveGroup == "" || deadGroup == ""; i++ {
		g := fmt.Sprintf("clusterka.g%d", i)
		if pc.masterOfKey(cc, wire.GroupKey(g)) == victim {
			deadGroup = g
		} else {
			liveGroup = g
		}
	}
	for _, g := range []string{liveGroup, deadGroup} {
		if st, err := b.Join(ctx, bs.ID, g); err != nil || st != spi.OK {
			t.Fatalf("join %s: %v, %v", g, st, err)
		}
	}

	elections := map[string]*simba.Election{}
	for _, n := range clientNames {
		e, err := c.NewElection(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		elections[n] = e
	}
	leading := func(n string) (int64, bool) {
		if term, ok := elections[n].Term(); ok && term.IsValid() {
			return term.Token(), true
		}
		return 0, false
	}
	await(t, 20*time.Second, "every election led", func() bool {
		for _, n := range clientNames {
			if _, ok := leading(n); !ok {
				return false
			}
		}
		return true
	})
	clientTokens := map[string]int64{}
	victimTerms := map[string]simba.Term{}
	for _, n := range clientNames {
		clientTokens[n], _ = leading(n)
		if clientOn[n] == victim {
			victimTerms[n], _ = elections[n].Term()
		}
	}

	replica := pc.replicaOf(victim)
	pc.kill(victim)
	pc.kill(replica)
	killed := time.Now()

	// The bare session's keep-alive: renewed, with the leases and the group whose masters
	// answered, and nothing from the killed one.
	kctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ka, err := b.KeepAlive(kctx, bs.ID, bareNames, []string{liveGroup, deadGroup})
	cancel()
	if err != nil {
		t.Fatalf("keep-alive with master %d down: %v (it should cost only the leases on that master)", victim, err)
	}
	if ka.Expired || ka.Remaining <= 0 {
		t.Fatalf("keep-alive with master %d down: %+v", victim, ka)
	}
	var want, got []spi.Held
	for _, n := range bareNames {
		if bareOn[n] != victim {
			want = append(want, spi.Held{Name: n, Token: tokens[n]})
		}
	}
	for _, h := range ka.Held {
		if slices.Contains(bareNames, h.Name) {
			got = append(got, h)
		}
	}
	byName := func(a, b spi.Held) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	}
	slices.SortFunc(want, byName)
	slices.SortFunc(got, byName)
	if !slices.Equal(got, want) {
		t.Fatalf("keep-alive held %v, want the leases off master %d: %v", got, victim, want)
	}
	var wantUnrenewed []string
	for _, n := range bareNames {
		if bareOn[n] == victim {
			wantUnrenewed = append(wantUnrenewed, n)
		}
	}
	gotUnrenewed := slices.Sorted(slices.Values(ka.Unrenewed))
	if !slices.Equal(gotUnrenewed, wantUnrenewed) {
		t.Fatalf("keep-alive unrenewed %v, want the leases on master %d: %v", gotUnrenewed, victim, wantUnrenewed)
	}
	if _, ok := ka.Members[deadGroup]; ok {
		t.Fatalf("keep-alive reported members %v of group %s, whose master %d is down", ka.Members[deadGroup], deadGroup, victim)
	}
	if !slices.Contains(ka.Members[liveGroup], bs.ID) {
		t.Fatalf("keep-alive's members of %s: %v, want them with %s", liveGroup, ka.Members[liveGroup], bs.ID)
	}

	// The client: the terms on the killed master end, the others stay, under the same session
	// and with the same tokens, past two TTLs from the kill.
	await(t, 3*ttl, "the terms on the killed master revoked", func() bool {
		for _, n := range clientNames {
			if _, ok := leading(n); ok && clientOn[n] == victim {
				return false
			}
		}
		return true
	})
	// Revoked as not renewed (deadline): nobody took them over.
	for n, term := range victimTerms {
		select { // a term may read invalid (its bound passed) a moment before its revoke
		case <-term.Context().Done():
		case <-time.After(3 * ttl):
		}
		var rev *simba.RevokedError
		if cause := context.Cause(term.Context()); !errors.As(cause, &rev) || rev.Reason != simba.RevokedDeadline {
			t.Errorf("%s (on the killed master): its term ended with %v, want revoked as not renewed (%v)", n, cause, simba.RevokedDeadline)
		}
	}
	for time.Since(killed) < 2*ttl {
		time.Sleep(50 * time.Millisecond)
	}
	if s := c.Session(); s != csid {
		t.Fatalf("the client's session changed from %s to %q after master %d was killed", csid, s, victim)
	}
	for _, n := range clientNames {
		if clientOn[n] == victim {
			continue
		}
		if tok, ok := leading(n); !ok || tok != clientTokens[n] {
			t.Fatalf("%s (master %d): leading %v with token %d, want still leading with %d after master %d was killed",
				n, clientOn[n], ok, tok, clientTokens[n], victim)
		}
	}
	t.Logf("master %d (and replica %d) killed: the bare keep-alive kept %d of %d leases; the client kept its session and its terms off that master", victim, replica, len(got), len(bareNames))
}

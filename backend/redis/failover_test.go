package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
)

// fleet is a set of simba.Clients contending for one lease on a private Cluster, with a monitor
// that samples, every millisecond, how many of them hold a valid term, and a log of every
// election (token, session).
type fleet struct {
	t       *testing.T
	name    string
	mu      sync.Mutex
	members []*fleetMember
	grants  []grant
	overlap atomic.Int64 // samples that saw two valid terms
	stop    chan struct{}
	done    chan struct{}
}

type fleetMember struct {
	label string
	c     *simba.Client
	e     *simba.Election
}

type grant struct {
	label   string
	token   int64
	session simba.SessionID
}

func newFleet(t *testing.T, name string) *fleet {
	f := &fleet{t: t, name: name, stop: make(chan struct{}), done: make(chan struct{})}
	go f.monitor()
	t.Cleanup(f.halt)
	return f
}

func (f *fleet) halt() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
		<-f.done
	}
}

func (f *fleet) monitor() {
	defer close(f.done)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
		f.mu.Lock()
		valid := 0
		for _, m := range f.members {
			if t, ok := m.e.Term(); ok && t.IsValid() {
				valid++
			}
		}
		f.mu.Unlock()
		if valid > 1 {
			f.overlap.Add(1)
		}
	}
}

// add starts a client labelled label on backend b with an election for the fleet's lease.
func (f *fleet) add(label string, b *Backend, ttl time.Duration) *fleetMember {
	t := f.t
	c, err := simba.New(b, simba.WithTTL(ttl), simba.WithOwner(label))
	if err != nil {
		t.Fatal(err)
	}
	m := &fleetMember{label: label, c: c}
	m.e, err = c.NewElection(f.name, simba.OnElected(func(_ context.Context, term simba.Term) {
		f.mu.Lock()
		f.grants = append(f.grants, grant{label: label, token: term.Token(), session: c.Session()})
		f.mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	f.mu.Lock()
	f.members = append(f.members, m)
	f.mu.Unlock()
	return m
}

// await waits until cond holds, failing the test after limit.
func await(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitOr is await that adds state() to the failure.
func awaitOr(t *testing.T, limit time.Duration, what string, state func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; state:%s", limit, what, state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func leaderToken(m *fleetMember) (int64, bool) {
	if t, ok := m.e.Term(); ok && t.IsValid() {
		return t.Token(), true
	}
	return 0, false
}

// TestClusterFailoverWithWait fails over the master of a held lease on a private Cluster (3
// masters, a replica each) after cutting its replication, so that everything the master
// acknowledged afterwards is lost. With WithWaitReplicas(1, …) nothing was acknowledged after
// the cut (grants and keep-alives fail their WAIT): no grant is lost — the promoted replica
// still has the last acknowledged token — there are never two valid holders, and tokens never
// go back across the failover (a new grant's is higher; the session that led before, if it
// outlived the failover — its session key on another master — may lead again with its own). The old master is restarted (it rejoins as the new master's
// replica) since WAIT 1 cannot succeed on a master without a replica.
func TestClusterFailoverWithWait(t *testing.T) {
	pc := startPrivCluster(t)
	cc := pc.client()
	name := "failover.wait"
	m := pc.masterOfKey(cc, wire.LeaseKey(name))
	r := pc.replicaOf(m)
	f := newFleet(t, name)
	ttl := 3 * time.Second
	var members []*fleetMember
	for i := range 3 {
		b := newBackend(t, pc.client(), WithWaitReplicas(1, 300*time.Millisecond))
		members = append(members, f.add(fmt.Sprintf("w%d", i), b, ttl))
		if err := members[i].e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var before int64
	var beforeSession simba.SessionID
	await(t, 20*time.Second, "a first leader", func() bool {
		for _, x := range members {
			if tok, ok := leaderToken(x); ok {
				before, beforeSession = tok, x.c.Session()
				return true
			}
		}
		return false
	})
	time.Sleep(ttl / 2) // a keep-alive or two, acknowledged by the replica

	pc.breakReplication(m)
	time.Sleep(ttl) // the leader's renewals and any grant on the master now fail their WAIT
	pc.kill(m)
	pc.waitPromoted(r, 30*time.Second)
	promoted := pc.node(r)
	tok, err := promoted.HGet(context.Background(), wire.LeaseKey(name), wire.LeaseFieldToken).Int64()
	if err != nil || tok < before {
		t.Fatalf("the promoted replica has token %d (%v) for %s, want ≥ %d: an acknowledged grant was lost", tok, err, name, before)
	}
	// The new master has no replica, so every WAIT 1 fails (grants and renewals on it stop)
	// until the old master comes back, as its replica.
	pc.start(m)
	pc.waitPort(m)
	pc.waitHealthy(30 * time.Second)
	var after int64
	awaitOr(t, 30*time.Second, "a leader after the failover", func() string {
		var b strings.Builder
		for _, x := range members {
			tm, ok := x.e.Term()
			l, lok := x.e.Leader()
			fmt.Fprintf(&b, "\n  %s: session %s, term %v valid %v token %d, leader %+v %v", x.label, x.c.Session(), ok, ok && tm.IsValid(), tm.Token(), l, lok)
		}
		f.mu.Lock()
		fmt.Fprintf(&b, "\n  grants %+v", f.grants)
		f.mu.Unlock()
		h, err := pc.node(r).HGetAll(context.Background(), wire.LeaseKey(name)).Result()
		fmt.Fprintf(&b, "\n  lease hash on %d: %v %v", r, h, err)
		return b.String()
	}, func() bool {
		for _, x := range members {
			// A new grant has a higher token; the session that led before may also lead again
			// with its own token, if its session outlived the failover and nobody was granted
			// the lease meanwhile (a re-acquire by the holding session keeps its token).
			if tok, ok := leaderToken(x); ok && (tok > before || tok == before && x.c.Session() == beforeSession) {
				after = tok
				return true
			}
		}
		return false
	})
	time.Sleep(ttl / 2)
	f.halt()
	if n := f.overlap.Load(); n > 0 {
		t.Errorf("two clients held valid terms of %s in %d samples", name, n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[int64]simba.SessionID{}
	var last int64
	for _, g := range f.grants {
		if s, ok := seen[g.token]; ok && s != g.session {
			t.Errorf("token %d granted to two sessions (%s and %s)", g.token, s, g.session)
		}
		if g.token < last {
			t.Errorf("token %d elected after %d", g.token, last)
		}
		seen[g.token], last = g.session, g.token
	}
	t.Logf("leader token %d before the failover of %d to %d, %d after; grants %+v", before, m, r, after, f.grants)
}

// TestClusterFailoverLosesStateWithoutWait shows what an asynchronous failover can lose and
// that the client recovers: with the master's replication cut, a client whose session and
// lease live on that master is elected; the master crashes and its replica, promoted, has
// neither the session nor the grant. The client's keep-alive finds the session gone, revokes
// the term, opens a new session and is elected again — with a token that may repeat the lost
// grant's (the fencing hazard WithWaitReplicas prevents).
func TestClusterFailoverLosesStateWithoutWait(t *testing.T) {
	pc := startPrivCluster(t)
	cc := pc.client()
	name := "failover.nowait"
	m := pc.masterOfKey(cc, wire.LeaseKey(name))
	r := pc.replicaOf(m)
	pc.breakReplication(m)
	f := newFleet(t, name)
	ttl := 3 * time.Second
	var c *fleetMember
	for i := 0; c == nil; i++ {
		if i == 20 {
			t.Fatal("no session landed on the master's slots in 20 tries")
		}
		x := f.add(fmt.Sprintf("n%d", i), newBackend(t, pc.client()), ttl)
		await(t, 10*time.Second, "a session", func() bool { return x.c.Session() != "" })
		if pc.masterOfKey(cc, wire.SessionKey(string(x.c.Session()))) == m {
			c = x
		}
	}
	if err := c.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var first int64
	await(t, 20*time.Second, "the first election", func() bool {
		tok, ok := leaderToken(c)
		first = tok
		return ok
	})
	old := c.c.Session()
	pc.kill(m)
	pc.waitPromoted(r, 30*time.Second)
	if n, _ := pc.node(r).Exists(context.Background(), wire.SessionKey(string(old))).Result(); n != 0 {
		t.Fatalf("the promoted replica has session %s: replication was not cut", old)
	}
	var second int64
	await(t, 30*time.Second, "re-election under a new session", func() bool {
		tok, ok := leaderToken(c)
		second = tok
		return ok && c.c.Session() != "" && c.c.Session() != old
	})
	t.Logf("elected with token %d under session %s; after the failover the replica had lost both, and the client was re-elected with token %d under session %s", first, old, second, c.c.Session())
	if second <= first {
		t.Logf("token %d repeats the lost grant's %d: without WithWaitReplicas fencing cannot tell these tenures apart", second, first)
	}
}

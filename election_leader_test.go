package simba_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// ownerless is a connection whose HeldBy replies lose the holder's owner while blank is set, as
// the SQL and Redis backends report a free lease reserved for its first waiter (the waiter's
// session, no owner).
type ownerless struct {
	*simbatest.Backend
	blank atomic.Bool
}

func (o *ownerless) strip(a spi.Acquire, err error) (spi.Acquire, error) {
	if err == nil && a.Kind == spi.HeldBy && o.blank.Load() {
		a.HolderOwner = ""
	}
	return a, err
}

func (o *ownerless) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	return o.strip(o.Backend.Acquire(ctx, s, name))
}

func (o *ownerless) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	return o.strip(o.Backend.AcquireQueued(ctx, s, name))
}

func leaderIs(e *simba.Election, owner string) func() bool {
	return func() bool { l, ok := e.Leader(); return ok && !l.Self && l.Owner == owner }
}

// TestElectionLeaderOwnerLearnedLater: a candidate first told of the holder without its owner
// names the owner once a later reply carries it (it used to show the holder without an owner
// for the holder's whole tenure).
func TestElectionLeaderOwnerLearnedLater(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	cb, _ := w.client("b")
	conn := &ownerless{Backend: w.srv.Backend()}
	conn.blank.Store(true)
	ca := w.clientOn(conn, "a")
	eb, err := cb.NewElection("lead")
	if err != nil {
		t.Fatal(err)
	}
	if err := eb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "b leads", eb.IsLeader)
	ea, err := ca.NewElection("lead")
	if err != nil {
		t.Fatal(err)
	}
	if err := ea.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "a learns the holder", func() bool { _, ok := ea.Leader(); return ok })
	if l, _ := ea.Leader(); l.Owner != "" || l.Self {
		t.Fatalf("a's view with the owner withheld: %+v", l)
	}
	conn.blank.Store(false)
	w.until(3*testTTL, "a names b's owner", leaderIs(ea, "b"))
}

// TestElectionLeaderAfterOwnTerm: a candidate that led between two terms of the same other
// session names that session as the leader again once it has lost the lease to it (its
// Leader used to report nothing known for that whole tenure, since the holder was the one it
// had last been told of before its own term).
func TestElectionLeaderAfterOwnTerm(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ca, _ := w.client("a")
	cb, _ := w.client("b")
	ea, err := ca.NewElection("lead")
	if err != nil {
		t.Fatal(err)
	}
	eb, err := cb.NewElection("lead")
	if err != nil {
		t.Fatal(err)
	}
	if err := ea.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "a leads", ea.IsLeader)
	if err := eb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.async(func() error { return ea.StepDown(ctx) })
	w.until(5*time.Second, "b leads", eb.IsLeader)
	w.until(3*testTTL, "a names b", leaderIs(ea, "b"))
	w.async(func() error { return eb.StepDown(ctx) })
	w.until(3*testTTL, "a leads again", ea.IsLeader)
	w.async(func() error { return ea.StepDown(ctx) })
	w.until(3*testTTL, "b leads again", eb.IsLeader)
	w.until(3*testTTL, "a names b again", leaderIs(ea, "b"))
}

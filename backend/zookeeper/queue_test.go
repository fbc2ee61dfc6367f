package zookeeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/spi"
)

// queued runs AcquireQueued and checks its reply kind.
func queued(t *testing.T, b *Backend, s spi.SessionID, name string, want spi.AcquireKind) spi.Acquire {
	t.Helper()
	r, err := b.AcquireQueued(testCtx(t), s, name)
	if err != nil || r.Kind != want {
		t.Fatalf("AcquireQueued(%s, %q) = %+v, %v; want %s", s, name, r, err, want)
	}
	return r
}

// waiterNodes lists the waiter nodes of name's queue as the server has them: path → session.
func waiterNodes(t *testing.T, c *zk.Conn, b *Backend, name string) map[string]spi.SessionID {
	t.Helper()
	qp := b.lay.queue(name)
	ch, _, err := c.Children(qp)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]spi.SessionID{}
	for _, n := range ch {
		p := qp + "/" + n
		data, st, err := c.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, sid, _, ok := b.lay.waiterOf(p); !ok || spi.SessionID(sid) != SessionIDString(st.EphemeralOwner) || string(data) != "test-owner" {
			t.Errorf("waiter node %s: owner session %s, data %q; want an ephemeral node of the session in its name, with its owner", p, SessionIDString(st.EphemeralOwner), data)
		}
		out[p] = SessionIDString(st.EphemeralOwner)
	}
	return out
}

// TestWaiterNodes: a queued acquire that finds the lease held adds one ephemeral sequential
// waiter node and keeps it on later attempts, each add or remove bumps the queue node's
// version, a plain Acquire adds none, and Withdraw deletes it.
func TestWaiterNodes(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	c := rawClient(t, b, "")
	holder, w, plain := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, holder, "q")
	if n := waiterNodes(t, c, b, "q"); len(n) != 0 {
		t.Fatalf("waiter nodes after a grant = %v, want none", n)
	}
	if r, err := b.Acquire(testCtx(t), plain, "q"); err != nil || r.Kind != spi.HeldBy || r.Holder != holder {
		t.Fatalf("Acquire = %+v, %v; want held by %s", r, err, holder)
	}
	if n := waiterNodes(t, c, b, "q"); len(n) != 0 {
		t.Fatalf("waiter nodes after a plain Acquire = %v, want none", n)
	}
	queued(t, b, w, "q", spi.HeldBy)
	first := waiterNodes(t, c, b, "q")
	if len(first) != 1 {
		t.Fatalf("waiter nodes = %v, want one of %s", first, w)
	}
	_, st, err := c.Get(b.lay.queue("q"))
	if err != nil {
		t.Fatal(err)
	}
	queued(t, b, w, "q", spi.HeldBy)
	if again := waiterNodes(t, c, b, "q"); len(again) != 1 || strings.Join(keys(again), "") != strings.Join(keys(first), "") {
		t.Fatalf("waiter nodes after a second attempt = %v, want %v (the waiter keeps its place)", again, first)
	}
	if err := b.Withdraw(testCtx(t), w, "q"); err != nil {
		t.Fatal(err)
	}
	if n := waiterNodes(t, c, b, "q"); len(n) != 0 {
		t.Fatalf("waiter nodes after Withdraw = %v, want none", n)
	}
	if _, st2, err := c.Get(b.lay.queue("q")); err != nil || st2.Version != st.Version+1 {
		t.Fatalf("queue node version after Withdraw = %v (%v), want %d", st2, err, st.Version+1)
	}
	if err := b.Withdraw(testCtx(t), w, "q"); err != nil {
		t.Fatalf("a second Withdraw = %v, want nil", err)
	}
	// With no waiter left, the lease goes to anyone once released.
	if err := b.Release(testCtx(t), holder, "q", tok); err != nil {
		t.Fatal(err)
	}
	if got := mustGrant(t, b, plain, "q"); got <= tok {
		t.Fatalf("token %d, want above %d", got, tok)
	}
}

func keys(m map[string]spi.SessionID) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestHeadWaiterWithdrawalIsHinted: with the lease free and reserved for the first waiter, the
// second learns by a Released hint when the first withdraws (the watcher connection does not
// watch waiter nodes: the hint comes from the watch the second's HeldBy read left), and is
// then granted.
func TestHeadWaiterWithdrawalIsHinted(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	holder, w1, w2 := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, holder, "h")
	queued(t, b, w1, "h", spi.HeldBy)
	queued(t, b, w2, "h", spi.HeldBy)
	if err := b.Release(testCtx(t), holder, "h", tok); err != nil {
		t.Fatal(err)
	}
	if r := queued(t, b, w2, "h", spi.HeldBy); r.Holder != w1 || r.HolderOwner != "test-owner" {
		t.Fatalf("the second waiter's AcquireQueued = %+v, want held by the first, %s", r, w1)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Withdraw(testCtx(t), w1, "h"); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case h := <-hints:
			got = h.Kind == spi.Released && h.Name == "h"
		case <-deadline:
			t.Fatal("no Released hint after the first waiter withdrew")
		}
	}
	if r := queued(t, b, w2, "h", spi.Granted); r.Token <= tok {
		t.Fatalf("token %d, want above %d", r.Token, tok)
	}
	if n := waiterNodes(t, rawClient(t, b, ""), b, "h"); len(n) != 0 {
		t.Fatalf("waiter nodes after the grant = %v, want none (a grant removes the grantee's)", n)
	}
}

// TestForeignNodeInQueue: a node in a waiter queue that Simba did not create (a persistent node
// named as a waiter node) does not hold the lease back; the waiters behind it are served.
func TestForeignNodeInQueue(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	holder, w, late := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, holder, "f")
	c := rawClient(t, b, "")
	if _, err := c.Create(b.lay.queue("f"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(b.lay.waiter("f", "00000000000000ff")+"0000000000", []byte("squatter"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	queued(t, b, w, "f", spi.HeldBy)
	if err := b.Release(testCtx(t), holder, "f", tok); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(testCtx(t), late, "f"); err != nil || r.Kind != spi.HeldBy || r.Holder != w {
		t.Fatalf("a late comer's Acquire = %+v, %v; want held by the waiter %s (not the foreign node)", r, err, w)
	}
	if r := queued(t, b, w, "f", spi.Granted); r.Token <= tok {
		t.Fatalf("token %d, want above %d", r.Token, tok)
	}
}

// TestFailedWithdrawalIsRetried: a waiter node lives as long as its session, so a withdrawal
// that failed (here: its context was already cancelled) is run again by the session's next
// keep-alive; otherwise a waiter that stopped waiting would keep a free lease reserved for as
// long as its process runs. A queued acquire in between cancels the retry (the session waits
// again, in its place).
func TestFailedWithdrawalIsRetried(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	c := rawClient(t, b, "")
	holder, w, other := openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second), openSession(t, b, 10*time.Second)
	tok := mustGrant(t, b, holder, "n")
	mustGrant(t, b, holder, "m")
	queued(t, b, w, "n", spi.HeldBy)
	queued(t, b, w, "m", spi.HeldBy)
	dead, cancel := context.WithCancel(testCtx(t))
	cancel()
	for _, n := range []string{"n", "m"} {
		if err := b.Withdraw(dead, w, n); err == nil {
			t.Fatalf("Withdraw(%q) with a cancelled context succeeded", n)
		}
	}
	place := waiterNodes(t, c, b, "m")
	queued(t, b, w, "m", spi.HeldBy) // waits again
	if ka, err := b.KeepAlive(testCtx(t), w, nil, nil); err != nil || ka.Expired {
		t.Fatalf("KeepAlive = %+v, %v", ka, err)
	}
	if got := waiterNodes(t, c, b, "n"); len(got) != 0 {
		t.Fatalf("waiter nodes of n after the keep-alive: %v, want none (the withdrawal retried)", got)
	}
	if got := waiterNodes(t, c, b, "m"); strings.Join(keys(got), "") != strings.Join(keys(place), "") {
		t.Fatalf("waiter nodes of m after the keep-alive: %v, want %v (waiting again, in its place)", got, place)
	}
	// The free lease is no longer reserved for the waiter that stopped waiting.
	if err := b.Release(testCtx(t), holder, "n", tok); err != nil {
		t.Fatal(err)
	}
	if got := mustGrant(t, b, other, "n"); got <= tok {
		t.Fatalf("token %d, want above %d", got, tok)
	}
}

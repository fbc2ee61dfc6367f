package simbatest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// The model is pure: every call names the backend time, and the same calls give the same
// replies. This is how the simulator drives it.
func ExampleModel() {
	m := simbatest.NewModel(simbatest.WithSeed(1))
	a, _ := m.OpenSession(0, "node-a", 3*time.Second)
	b, _ := m.OpenSession(0, "node-b", 3*time.Second)

	r, _ := m.Acquire(time.Second, a.ID, "orders")
	fmt.Println("a:", r.Kind, "token", r.Token, "remaining", r.Remaining)
	r, _ = m.Acquire(time.Second, b.ID, "orders")
	fmt.Println("b:", r.Kind, r.HolderOwner, "remaining", r.Remaining)

	// b keeps its session alive, a does not: at 3 s a's session has expired.
	m.KeepAlive(2*time.Second, b.ID, nil, nil)
	r, _ = m.Acquire(3*time.Second, b.ID, "orders")
	fmt.Println("b:", r.Kind, "token", r.Token, "remaining", r.Remaining)
	fmt.Println("hints:", m.TakeHints())
	// Output:
	// a: granted token 1 remaining 2s
	// b: held-by node-a remaining 2s
	// b: granted token 2 remaining 2s
	// hints: [{released orders}]
}

// A Server is shared by many clients; each Backend is one client's connection, so faults can
// target one client. The default clock is virtual: time moves when the test advances it.
func ExampleServer() {
	ctx := context.Background()
	srv := simbatest.NewServer()
	clock := srv.VirtualClock()
	alice, bob := srv.Backend(), srv.Backend()

	sa, _ := alice.OpenSession(ctx, "alice", 3*time.Second)
	sb, _ := bob.OpenSession(ctx, "bob", 3*time.Second)
	r, _ := alice.Acquire(ctx, sa.ID, "leader")
	fmt.Println("alice:", r.Kind, r.Token)

	// Alice's network fails: her keep-alives do not arrive, and her session expires.
	alice.CutOff(simbatest.Refuse)
	_, err := alice.KeepAlive(ctx, sa.ID, []string{"leader"}, nil)
	fmt.Println("alice keep-alive unavailable:", errors.Is(err, spi.ErrUnavailable))
	clock.Advance(2 * time.Second)
	bob.KeepAlive(ctx, sb.ID, nil, nil)
	clock.Advance(time.Second)

	r, _ = bob.Acquire(ctx, sb.ID, "leader")
	fmt.Println("bob:", r.Kind, r.Token)
	alice.Restore()
	ka, _ := alice.KeepAlive(ctx, sa.ID, []string{"leader"}, nil)
	fmt.Println("alice expired:", ka.Expired)
	// Output:
	// alice: granted 1
	// alice keep-alive unavailable: true
	// bob: granted 2
	// alice expired: true
}

// Advance returns once every callback due by the new time has run, each at its deadline.
func ExampleVirtualClock() {
	clock := simbatest.NewVirtualClock()
	fired := make(chan time.Duration, 1)
	clock.AfterFunc(5*time.Second, func() { fired <- clock.Now() })

	clock.Advance(10 * time.Second)
	fmt.Println("fired at", <-fired, "now", clock.Now())
	// Output: fired at 5s now 10s
}

// A failover test with real clients, written without sleeps: Settle and Advance return once
// every client on the clock has processed everything due (elections won, calls replied,
// callbacks run), so the test reads the state right after them.
func Example_failover() {
	ctx := context.Background()
	srv := simbatest.NewServer()
	clock := srv.VirtualClock()
	jobs := make(chan string, 100)
	node := func(owner string, seed uint64) (*simbatest.Link, *simba.Client, *simba.Election) {
		link := simbatest.NewLink(srv.Backend()) // to crash this node without a goodbye
		c, err := simba.New(link.Backend(), simba.WithClock(clock), simba.WithTTL(3*time.Second),
			simba.WithOwner(owner), simba.WithSeed(seed))
		if err != nil {
			panic(err)
		}
		e, err := c.NewElection("cron", simba.Schedule(time.Second, func(_ context.Context, t simba.Term) {
			if t.IsValid() {
				jobs <- fmt.Sprintf("%s@%v", owner, clock.Now())
			}
		}))
		if err != nil {
			panic(err)
		}
		if err := e.Start(ctx); err != nil {
			panic(err)
		}
		return link, c, e
	}
	linkA, a, ea := node("a", 1)
	clock.Settle() // a opens its session, wins and runs the job: no time has to pass
	_, b, eb := node("b", 2)
	clock.Settle() // b is a candidate: a holds the lease
	fmt.Println("a leads:", ea.IsLeader(), "b leads:", eb.IsLeader(), "job:", <-jobs)

	// a's network fails: its term ends at its local deadline, its session expires at the server
	// at 3s, which b's keep-alive at 3s makes the server notice; the release hint has b take
	// the lease at once.
	linkA.CutOff()
	clock.Advance(4 * time.Second) // TTL + one renewal interval
	t, _ := eb.Term()
	fmt.Println("a leads:", ea.IsLeader(), "b leads:", eb.IsLeader(), "token:", t.Token())
	for len(jobs) > 0 {
		fmt.Println("job:", <-jobs)
	}

	linkA.Restore()
	_ = a.Close(ctx)
	_ = b.Close(ctx)
	// Output:
	// a leads: true b leads: false job: a@0s
	// a leads: false b leads: true token: 2
	// job: a@1s
	// job: a@2s
	// job: b@3s
	// job: b@4s
}

// A lost reply: the call takes effect at the server but the client gets a retryable error, so
// it cannot know it holds the lease until a keep-alive reports it.
func ExampleFaults_DropNextReplies() {
	ctx := context.Background()
	srv := simbatest.NewServer()
	b := srv.Backend()
	s, _ := b.OpenSession(ctx, "node-a", 3*time.Second)

	b.DropNextReplies(1)
	_, err := b.Acquire(ctx, s.ID, "leader")
	fmt.Println("reply lost:", errors.Is(err, simbatest.ErrReplyLost), "retryable:", spi.Classify(err) == spi.Retryable)
	ka, _ := b.KeepAlive(ctx, s.ID, []string{"leader"}, nil)
	fmt.Println("held:", ka.Held)
	// Output:
	// reply lost: true retryable: true
	// held: [{leader 1}]
}

// WaitHolder blocks until some session holds a lease: how a test waits for an election to have
// a leader.
func ExampleServer_WaitHolder() {
	ctx := context.Background()
	srv := simbatest.NewServer()
	b := srv.Backend()
	go func() {
		s, _ := b.OpenSession(ctx, "node-a", 3*time.Second)
		b.Acquire(ctx, s.ID, "leader")
	}()
	info, _ := srv.WaitHolder(ctx, "leader")
	fmt.Println(info.Owner, "holds", info.Name, "with token", info.Token)
	// Output: node-a holds leader with token 1
}

package simba_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// New starts a client on a backend: one session, kept alive for every lease the client will
// hold. It checks every option before any I/O, so a bad value fails here, with an error that
// names it and matches ErrInvalidOption, rather than at the first call.
func ExampleNew() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock())) // or simbasql.Open, redis.Open, …
	ctx := context.Background()

	c, err := simba.New(srv.Backend(), simba.WithTTL(5*time.Second), simba.WithOwner("billing-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	fmt.Println("owner:", c.Owner())

	_, err = simba.New(srv.Backend(), simba.WithTTL(0))
	fmt.Println(err)
	fmt.Println("invalid option:", errors.Is(err, simba.ErrInvalidOption), "permanent:", simba.IsPermanent(err))
	// Output:
	// owner: billing-1
	// simba: invalid option: TTL 0s must be in (0, 24h0m0s]
	// invalid option: true permanent: true
}

// TryLock makes one attempt and never waits: while another client holds the lock it fails with
// a *LockHeldError, which names the holder and matches ErrLockHeld.
func ExampleClient_TryLock() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, _ := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner("report-runner-a"))
	defer a.Close(ctx)
	b, _ := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner("report-runner-b"))
	defer b.Close(ctx)

	held, _ := a.Lock(ctx, "nightly-report")

	_, err := b.TryLock(ctx, "nightly-report")
	var busy *simba.LockHeldError
	if errors.As(err, &busy) {
		fmt.Printf("%s is held by %s: skip this run\n", busy.Name, busy.Owner)
	}
	fmt.Println("ErrLockHeld:", errors.Is(err, simba.ErrLockHeld))

	_ = held.Unlock(ctx)
	mine, err := b.TryLock(ctx, "nightly-report")
	fmt.Println("after the unlock:", err, mine.Token() > held.Token())
	_ = mine.Unlock(ctx)
	// Output:
	// nightly-report is held by report-runner-a: skip this run
	// ErrLockHeld: true
	// after the unlock: <nil> true
}

// WithLock runs a function under the lock, with a context that ends when the lock is lost, and
// unlocks when it returns. Here the client's link to the server is cut while the function
// works: once the client can no longer be sure it holds the lock (its local deadline, a little
// under one TTL after its last renewal), the function's context is cancelled, and WithLock
// returns an error matching ErrNotHeld that says why the term ended.
func ExampleClient_WithLock() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	link := simbatest.NewLink(srv.Backend()) // a link the example can cut
	ctx := context.Background()
	c, _ := simba.New(link.Backend(), simba.WithTTL(time.Second))
	defer c.Close(ctx)

	err := c.WithLock(ctx, "invoice-42", func(ctx context.Context, t simba.Term) error {
		fmt.Println("charging invoice-42 under token", t.Token())
		link.CutOff() // the network fails mid-work
		<-ctx.Done()  // the lock is lost: stop writing
		fmt.Println("work stopped; still valid:", t.IsValid())
		return context.Cause(ctx)
	})
	fmt.Println("lock lost:", errors.Is(err, simba.ErrNotHeld))
	// Output:
	// charging invoice-42 under token 1
	// work stopped; still valid: false
	// lock lost: true
}

// Schedule makes a cron singleton: every replica stands for election, and only the leader runs
// the job, at once and then every interval. On the virtual clock of package simbatest the
// example runs without sleeping.
func ExampleSchedule() {
	srv := simbatest.NewServer()
	clock := srv.VirtualClock()
	ctx := context.Background()

	runs := map[string]int{"a": 0, "b": 0} // job runs per replica
	for _, owner := range []string{"a", "b"} {
		c, _ := simba.New(srv.Backend(), simba.WithClock(clock), simba.WithTTL(3*time.Second), simba.WithOwner(owner))
		defer c.Close(ctx)
		e, _ := c.NewElection("nightly-cleanup", simba.Schedule(time.Second, func(ctx context.Context, t simba.Term) {
			runs[owner]++ // the job; it runs on the leader only
		}))
		_ = e.Start(ctx)
		clock.Settle() // a starts first, and leads
	}
	clock.Advance(3 * time.Second)
	fmt.Println(runs)
	// Output: map[a:4 b:0]
}

// RunWhileLeader runs leader work with a context that ends when leadership does. Stop hands
// over: the lease is kept until the work returns, so the next leader never overlaps it.
func ExampleRunWhileLeader() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, _ := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner("a"))
	defer a.Close(ctx)
	b, _ := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner("b"))
	defer b.Close(ctx)

	working := make(chan struct{})
	elected := make(chan simba.Term, 1)
	ea, _ := a.NewElection("scheduler", simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
		fmt.Println("a schedules with token", t.Token())
		close(working)
		<-ctx.Done() // Stop, a lost lease or Close
		fmt.Println("a stops scheduling:", context.Cause(ctx))
		time.Sleep(100 * time.Millisecond) // finishing up
		fmt.Println("a's work returns; b elected meanwhile:", len(elected) > 0)
		return nil
	}))
	eb, _ := b.NewElection("scheduler", simba.OnElected(func(_ context.Context, t simba.Term) { elected <- t }))

	_ = ea.Start(ctx)
	<-working
	_ = eb.Start(ctx)
	_ = ea.Stop(ctx) // returns once a's work has returned and the lease is released
	t := <-elected
	fmt.Println(t.Owner(), "leads with token", t.Token())
	// Output:
	// a schedules with token 1
	// a stops scheduling: simba: term scheduler#1 revoked: stopped
	// a's work returns; b elected meanwhile: false
	// b leads with token 2
}

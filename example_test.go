package simba_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
)

// An Election keeps one leader among many clients. Here two clients share an in-memory server;
// the first to start leads, and when it stops the other takes over with a greater fencing token.
func ExampleElection() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	opts := []simba.Option{simba.WithTTL(time.Second)}

	a, _ := simba.New(srv.Backend(), append(opts, simba.WithOwner("a"))...)
	defer a.Close(ctx)
	b, _ := simba.New(srv.Backend(), append(opts, simba.WithOwner("b"))...)
	defer b.Close(ctx)

	elected := make(chan string, 2)
	report := func(who string) simba.ElectionOption {
		return simba.OnElected(func(_ context.Context, t simba.Term) {
			elected <- fmt.Sprintf("%s leads %s with token %d", who, t.Name(), t.Token())
		})
	}
	ea, _ := a.NewElection("reports", report("a"))
	_ = ea.Start(ctx)
	fmt.Println(<-elected)

	eb, _ := b.NewElection("reports", report("b"))
	_ = eb.Start(ctx)
	_ = ea.Stop(ctx) // a releases at once; b is told by the released hint
	fmt.Println(<-elected)
	// Output:
	// a leads reports with token 1
	// b leads reports with token 2
}

// Client.Lock is a mutex across processes: it waits for the named lock and returns it held,
// with its fencing token. TryLock fails at once while another client holds it; WithLock runs a
// function under the lock and unlocks. Locks are calls, not objects: lock as many names as you
// like, the client keeps nothing of a name once it is unlocked.
func ExampleClient_Lock() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	a, _ := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner("a"))
	defer a.Close(ctx)
	b, _ := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner("b"))
	defer b.Close(ctx)

	held, _ := a.Lock(ctx, "invoice-42")
	fmt.Println("a holds the lock with token", held.Token())

	_, err := b.TryLock(ctx, "invoice-42")
	fmt.Println("b's TryLock:", errors.Is(err, simba.ErrLockHeld))

	_ = held.Unlock(ctx)
	_ = b.WithLock(ctx, "invoice-42", func(ctx context.Context, t simba.Term) error {
		// Pass t.Token() to the resource: it rejects writes with a lower token.
		fmt.Println("b works under token", t.Token())
		return nil
	})
	// Output:
	// a holds the lock with token 1
	// b's TryLock: true
	// b works under token 2
}

// A PartitionGroup spreads P partitions over its live members by rendezvous hashing: each
// partition is led by exactly one member, and a member that joins or leaves moves only its
// share.
func ExamplePartitionGroup() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	var groups []*simba.PartitionGroup
	for _, owner := range []string{"a", "b"} {
		c, _ := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner(owner))
		defer c.Close(ctx)
		g, _ := c.JoinGroup(ctx, "orders", 8)
		groups = append(groups, g)
	}
	// Wait until the two members lead all 8 partitions between them.
	for {
		total := 0
		for _, g := range groups {
			if len(g.Members()) == 2 && len(g.Held()) == len(g.Assigned()) {
				total += len(g.Held())
			}
		}
		if total == 8 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("members:", len(groups[0].Members()))
	fmt.Println("partitions led:", len(groups[0].Held())+len(groups[1].Held()))
	// Output:
	// members: 2
	// partitions led: 8
}

// IsPermanent tells an error that retrying will not heal from one worth retrying.
func ExampleIsPermanent() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	ctx := context.Background()
	c, _ := simba.New(srv.Backend(), simba.WithTTL(time.Second))
	defer c.Close(ctx)

	_, err := c.Lock(ctx, "no spaces allowed")
	fmt.Println("invalid name:", simba.IsPermanent(err))

	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	<-short.Done()
	_, err = c.Lock(short, "invoice-42")
	fmt.Println("deadline passed:", simba.IsPermanent(err)) // a new deadline may be enough

	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	_, err = c.Lock(cancelled, "invoice-42")
	fmt.Println("cancelled:", simba.IsPermanent(err)) // the caller chose to stop
	// Output:
	// invalid name: true
	// deadline passed: false
	// cancelled: true
}

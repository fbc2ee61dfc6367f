package simba_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/locktest"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestLockContentionMemory: 8 goroutines of one client and 8 of another take one lock in turns
// for 10 s on the memory backend, on real time: never two valid terms at once, tokens strictly
// increase, and every goroutine gets the lock.
func TestLockContentionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s of contention; run without -short")
	}
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	var clients []*simba.Client
	for _, owner := range []string{"one", "two"} {
		c, err := simba.New(srv.Backend(), simba.WithOwner(owner), simba.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		clients = append(clients, c)
	}
	r := locktest.Contend(t, clients, locktest.Config{Name: "contended", Goroutines: 8, Duration: 10 * time.Second,
		Hold: 2 * time.Millisecond, Think: 20 * time.Millisecond, Seed: 1})
	t.Logf("%d turns; per goroutine %v", r.Total, r.Turns)
}

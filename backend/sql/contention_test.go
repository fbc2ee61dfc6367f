package sql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/locktest"
)

// TestLockContentionSQLite: 8 goroutines of one client and 8 of another, each client on its
// own backend of one SQLite file, take one lock in turns for 10 s: never two valid terms at
// once, tokens strictly increase, and every goroutine gets the lock. SQLite pushes no released
// hints, so a waiting client polls when the holder's lease would expire; each goroutine pauses
// between turns (as real work does), which leaves gaps for the other client.
func TestLockContentionSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s of contention; run without -short")
	}
	dsn := liteDSN(t)
	migrated(t, dsn)
	var clients []*simba.Client
	for _, owner := range []string{"one", "two"} {
		c, err := simba.New(open(t, dsn), simba.WithOwner(owner), simba.WithTTL(time.Second))
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

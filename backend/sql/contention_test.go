package sql

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/locktest"
)

// TestLockContentionSQLite: 8 goroutines of one client and 8 of another, each client on its
// own backend of one SQLite file, take one lock in turns for 10 s: never two valid terms at
// once, tokens strictly increase, and every goroutine gets the lock. SQLite pushes no released
// hints, so a waiting client polls when the holder's lease would expire; each goroutine pauses
// between turns (as real work does), which leaves gaps for the other client.
func TestLockContentionSQLite(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	clients := locktest.Clients(t, time.Second, open(t, dsn), open(t, dsn))
	r := locktest.Contend(t, clients, locktest.Eight8("contended"))
	t.Logf("%d turns; per goroutine %v", r.Total, r.Turns)
}

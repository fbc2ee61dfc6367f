package sql

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/locktest"
)

// TestLockContentionSQLite: 8 goroutines of one client and 8 of another, each client on its
// own backend of one SQLite file, take one lock in turns for 10 s: never two valid terms at
// once, tokens strictly increase, and every goroutine gets the lock. The other client learns
// of a release from its waker (sqlitewake.go); each goroutine pauses between turns (as real
// work does), which leaves gaps for the other client.
//
// The TTL is 3 s, so a call may take up to a second (the renewal interval): every turn is two
// write transactions on the one file, and under -race on a loaded 2-CPU machine a writer that
// SQLite's busy handler keeps sleeping (1, 2, 5 … 100 ms between tries) waited past the 333 ms
// of a 1 s TTL now and then, once the waker let the clients take ~40 turns a second instead of
// ~17 (2026-12-03): the release then ends "outcome unknown", which this test counts as a
// failure.
func TestLockContentionSQLite(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	clients := locktest.Clients(t, 3*time.Second, open(t, dsn), open(t, dsn))
	r := locktest.Contend(t, clients, locktest.Eight8("contended"))
	t.Logf("%d turns; per goroutine %v", r.Total, r.Turns)
}

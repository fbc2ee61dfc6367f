package sql

import (
	"testing"

	"github.com/simba-go/simba/spi"
)

// TestSQLiteQueueKeepsArrivalOrder: a waiter entry's arrival orders SQLite's queue, and it was
// the host clock in µs, at millisecond resolution: sessions queued within one millisecond tied
// and were ordered by session id, a later arrival granted first about half the time
// (TestWakerLocalReleaseHintOnlyWhenWaited/sqlite failed now and then for it:
// "AcquireQueued(first) = {Kind:held-by ...}; want Granted"), and after the host clock stepped
// back (an NTP correction) every later arrival went ahead of the earlier ones. Arrivals now
// strictly increase per name in the order the entries were made (spec/sql.yaml, arrival_us).
//
// The clock step is made by moving the first entry's arrival 5 s ahead, as a clock that then
// stepped back 5 s would have left it: on the old statement the second waiter is granted first
// ("waiter 1 of 3 in arrival order: AcquireQueued = {Kind:held-by ...}").
func TestSQLiteQueueKeepsArrivalOrder(t *testing.T) {
	b := migrated(t, liteDSN(t))
	name := "arrival-" + unique(t)
	holder := openSession(t, b, longTTL)
	tok := grant(t, b, holder, name)
	queue := []spi.SessionID{openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)}
	for i, s := range queue {
		if r, err := b.AcquireQueued(testCtx(t), s, name); err != nil || r.Kind != spi.HeldBy {
			t.Fatalf("AcquireQueued = %+v, %v; want HeldBy", r, err)
		}
		if i == 0 {
			exec(t, b, "UPDATE simba_waiter SET arrival_us = arrival_us + 5000000 WHERE name = ? AND session_id = ?", name, string(s))
		}
	}
	from, fromTok := holder, tok
	for i, s := range queue {
		if err := b.Release(testCtx(t), from, name, fromTok); err != nil {
			t.Fatal(err)
		}
		r, err := b.AcquireQueued(testCtx(t), s, name)
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("waiter %d of %d in arrival order: AcquireQueued = %+v, %v; want Granted", i+1, len(queue), r, err)
		}
		from, fromTok = s, r.Token
	}
}

package redis

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// TestClusterAcquireWaitsForSlowMigrationWithinDeadline: an Acquire whose slot stays
// half-migrated for longer than 5 s waits for the migration for as long as its deadline
// allows, and is granted once it ends. On the old code followSlotMove gave up after 5 s
// (slotMoveWait) whatever the deadline, and the Acquire failed with TRYAGAIN although its
// deadline (a call timeout of 10 s, for a TTL of 30 s) was seconds away.
func TestClusterAcquireWaitsForSlowMigrationWithinDeadline(t *testing.T) {
	pc := startPrivCluster(t)
	ctx := context.Background()
	cc, refused := countRefusals(pc)
	b := newBackend(t, cc, WithLogger(discard))
	sid := open(t, b, privTestTTL)
	const name = "slowmigrate.deadline"
	m := newSlotMove(t, pc, cc, wire.LeaseKey(name))
	m.begin()
	var r spi.Acquire
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		cctx, cancel := context.WithTimeout(ctx, 3*slotMoveWait)
		defer cancel()
		r, err = b.Acquire(cctx, sid, name)
	}()
	if !awaitRefusals(t, refused, moreThanRetries, done) {
		t.Fatalf("Acquire returned %+v, %v; want it to wait for the migration", r, err)
	}
	// Held half-done past slotMoveWait, well within the call's deadline.
	select {
	case <-done:
		t.Fatalf("with the slot still MIGRATING, Acquire returned %+v, %v after %d refusals; want it to wait for the migration within its deadline", r, err, refused.n.Load())
	case <-time.After(slotMoveWait + time.Second):
	}
	m.migrateAll()
	m.finish()
	<-done
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire after a migration longer than %v = %+v, %v; want granted", slotMoveWait, r, err)
	}
}

//go:build unix

package sql

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/locktest"
)

// TestSQLiteWaiterCPU reports the CPU time a process spends while one of its clients waits
// for a SQLite lock held by another client (the waker reads the change counter after each
// write to the file, until it sees the commit, and every 250 ms; every 2 ms where there is no
// file watch), as a fraction of one core, beside the statements the waiter's backend sent (the
// waker's reads run on a connection of its own). It checks that the waiter kept waiting; the numbers
// are for the report.
func TestSQLiteWaiterCPU(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	c := &counter{}
	clients := locktest.Clients(t, wakeTTL, open(t, dsn), countedBackend(t, "sqlite", dsn, c))
	ctx := testCtx(t)
	name := "cpu-" + unique(t)
	h, err := clients[0].Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = clients[1].Lock(wctx, name)
	}()
	time.Sleep(200 * time.Millisecond)
	c.reset()
	const window = 3 * time.Second
	u0, s0 := rusage(t)
	start := time.Now()
	time.Sleep(window)
	u1, s1 := rusage(t)
	wall := time.Since(start)
	stmts, trips, _ := c.reset()
	select {
	case <-done:
		t.Fatal("the waiter's Lock returned while the lock was held")
	default:
	}
	cancel()
	<-done
	cpu := (u1 - u0) + (s1 - s0)
	t.Logf("SQLite waiter: process CPU %v over %v = %.2f%% of a core (user %v, sys %v); the waiting backend sent %d statements in %d round trips on its pool (%.2f per TTL of %v)",
		cpu, wall.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(), u1-u0, s1-s0, stmts, trips, float64(trips)*wakeTTL.Seconds()/wall.Seconds(), wakeTTL)
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// rusage returns the process's user and system CPU time.
func rusage(t *testing.T) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

package sql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestPostgresWithdrawOfFirstWaiterWakesNext is the wake-up a PostgreSQL partition group's start
// lost (bench/cmd/groupstart: 14 of 40 starts of 3 processes at TTL 5 s took 4.8 s, one TTL
// less the first waiter's age; 4 of 16 at TTL 15 s took 14.7 s). The order of events:
//
//  1. holder holds the lease; first and then second wait for it (AcquireQueued: HeldBy, and
//     each is entered in the lease's waiter queue, first ahead of second).
//  2. holder releases: release NOTIFYs the lease's own channel and both waiters hear it.
//  3. second attempts at once: the lease is free but owed to the first live waiter, so the
//     reply is HeldBy(first) with the remaining time of first's entry, about a TTL.
//  4. first withdraws (in a group start: its member view changed and the partition is no
//     longer its own). The withdraw was waiter_remove, a plain DELETE: nothing was NOTIFYed,
//     so second's backend delivered no hint, and second's engine tried again only at first's
//     remaining time, a TTL after the release.
//
// The withdraw is now withdraw_notify (spec/sql.yaml): the DELETE NOTIFYs the lease's own
// channel when the lease was owed to the withdrawn entry (no live session holds it and no live
// waiter was ahead). The test checks that second's listener hears a notification of the lease's
// channel after the withdraw, by commit order: a later release of another lease second waits
// for (a sentinel) is heard after it. A withdraw from a lease a live session holds, or of a
// waiter behind a live first waiter, must stay silent (nothing becomes owed to the next waiter
// then).
func TestPostgresWithdrawOfFirstWaiterWakesNext(t *testing.T) {
	dsn := pgDSN(t)
	other := migrated(t, dsn) // the holder's and the first waiter's backend (another process)
	c := migrated(t, dsn)     // the second waiter's backend
	heard := hearing(c)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := c.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	waitListening(t, c) // connected

	name, held := "owed-"+unique(t), "held-"+unique(t)
	sentinels := []string{"sentinel-a-" + unique(t), "sentinel-b-" + unique(t), "sentinel-c-" + unique(t)}
	holder := openSession(t, other, longTTL)
	first := openSession(t, other, longTTL)
	third := openSession(t, other, longTTL) // queued between first and second
	second := openSession(t, c, longTTL)
	tok := grant(t, other, holder, name)
	grant(t, other, holder, held)
	var sentToks []int64
	for _, n := range sentinels {
		sentToks = append(sentToks, grant(t, other, holder, n))
	}

	queueBehind(t, other, first, name, holder)
	queueBehind(t, other, first, held, holder)
	queueBehind(t, other, third, name, holder)
	for _, n := range append([]string{name, held}, sentinels...) {
		queueBehind(t, c, second, n, holder)
		waitListening(t, c) // the LISTEN on n's channel is in
	}
	// heardBefore releases sentinel i and drains c's notifications up to its, reporting
	// whether one of n came first (the server delivers them in commit order).
	heardBefore := func(n string, i int) bool {
		t.Helper()
		if err := other.Release(testCtx(t), holder, sentinels[i], sentToks[i]); err != nil {
			t.Fatal(err)
		}
		saw := false
		timeout := time.After(30 * time.Second)
		for {
			select {
			case h := <-heard:
				if h.payload == sentinels[i] {
					return saw
				}
				saw = saw || h.payload == n
			case <-timeout:
				t.Fatalf("no notification of %q within 30 s", sentinels[i])
			}
		}
	}

	// A withdraw from a lease a live session holds: nothing is owed, no notification.
	if err := other.Withdraw(testCtx(t), first, held); err != nil {
		t.Fatal(err)
	}
	if heardBefore(held, 0) {
		t.Fatalf("the withdraw from %q, which a live session holds, notified its channel", held)
	}

	// 2. The release; second hears it (the server's notification on the lease's channel).
	if err := other.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case h := <-heard:
			done = h.payload == name
		case <-timeout:
			t.Fatalf("no notification of %q's release within 30 s", name)
		}
	}
	// 3. Free, but owed to first.
	queueBehind(t, c, second, name, first)
	// A withdraw of a waiter behind first: the lease is still owed to first, no notification.
	if err := other.Withdraw(testCtx(t), third, name); err != nil {
		t.Fatal(err)
	}
	if heardBefore(name, 1) {
		t.Fatalf("the withdraw of a waiter behind a live first waiter of %q notified its channel", name)
	}
	// 4. first withdraws; then a release second hears after anything the withdraw sent.
	if err := other.Withdraw(testCtx(t), first, name); err != nil {
		t.Fatal(err)
	}
	if !heardBefore(name, 2) {
		t.Fatalf("first's withdraw left %q free and owed to second, but nothing notified its channel: "+
			"second's backend hints nothing, and its engine tries again only at first's remaining time (about a TTL)", name)
	}
	// And the attempt the hint brings is granted.
	if r, err := c.AcquireQueued(testCtx(t), second, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("AcquireQueued after the withdraw = %+v, %v; want Granted", r, err)
	}
}

// TestPostgresCloseOfFirstWaiterWakesNext is the same gap for a first waiter that closes its
// session instead of withdrawing (a process that stops while it waits, when its withdrawal did
// not land first): close_session deleted the session, and its waiter entries with it (the
// foreign key's cascade), without a NOTIFY, so the next waiter, told HeldBy by the closed one
// with its entry's time left, tried again only then. close_session now NOTIFYs the lease's
// channel for each entry the lease was owed to, as withdraw_notify does; closing a session that
// waits for a held lease, or behind a live first waiter, stays silent.
func TestPostgresCloseOfFirstWaiterWakesNext(t *testing.T) {
	dsn := pgDSN(t)
	other := migrated(t, dsn) // the holder's and the first waiters' backend
	c := migrated(t, dsn)     // the second waiter's backend
	heard := hearing(c)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := c.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	waitListening(t, c)

	name, held := "owedc-"+unique(t), "heldc-"+unique(t)
	sentinels := []string{"sentinelc-a-" + unique(t), "sentinelc-b-" + unique(t), "sentinelc-c-" + unique(t)}
	holder := openSession(t, other, longTTL)
	first := openSession(t, other, longTTL)
	third := openSession(t, other, longTTL) // queued between first and second
	heldWaiter := openSession(t, other, longTTL)
	second := openSession(t, c, longTTL)
	tok := grant(t, other, holder, name)
	grant(t, other, holder, held)
	var sentToks []int64
	for _, n := range sentinels {
		sentToks = append(sentToks, grant(t, other, holder, n))
	}
	queueBehind(t, other, heldWaiter, held, holder)
	queueBehind(t, other, first, name, holder)
	queueBehind(t, other, third, name, holder)
	for _, n := range append([]string{name, held}, sentinels...) {
		queueBehind(t, c, second, n, holder)
		waitListening(t, c)
	}
	heardBefore := func(n string, i int) bool {
		t.Helper()
		if err := other.Release(testCtx(t), holder, sentinels[i], sentToks[i]); err != nil {
			t.Fatal(err)
		}
		saw := false
		timeout := time.After(30 * time.Second)
		for {
			select {
			case h := <-heard:
				if h.payload == sentinels[i] {
					return saw
				}
				saw = saw || h.payload == n
			case <-timeout:
				t.Fatalf("no notification of %q within 30 s", sentinels[i])
			}
		}
	}
	closeSession := func(s spi.SessionID) {
		t.Helper()
		if err := other.CloseSession(testCtx(t), s); err != nil {
			t.Fatal(err)
		}
	}

	// Closing a waiter of a lease a live session holds: nothing is owed.
	closeSession(heldWaiter)
	if heardBefore(held, 0) {
		t.Fatalf("closing a waiter of %q, which a live session holds, notified its channel", held)
	}
	if err := other.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case h := <-heard:
			done = h.payload == name
		case <-timeout:
			t.Fatalf("no notification of %q's release within 30 s", name)
		}
	}
	queueBehind(t, c, second, name, first) // free, owed to first
	// Closing the waiter behind first: still owed to first, nothing notified.
	closeSession(third)
	if heardBefore(name, 1) {
		t.Fatalf("closing a waiter behind a live first waiter of %q notified its channel", name)
	}
	closeSession(first)
	if !heardBefore(name, 2) {
		t.Fatalf("first's close left %q free and owed to second, but nothing notified its channel: "+
			"second's engine tries again only at first's remaining time (about a TTL)", name)
	}
	if r, err := c.AcquireQueued(testCtx(t), second, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("AcquireQueued after the close = %+v, %v; want Granted", r, err)
	}
}

// queueBehind queues session s for n on b and fails the test unless the reply is HeldBy want.
func queueBehind(t *testing.T, b *Backend, s spi.SessionID, n string, want spi.SessionID) {
	t.Helper()
	r, err := b.AcquireQueued(testCtx(t), s, n)
	if err != nil || r.Kind != spi.HeldBy || r.Holder != want {
		t.Fatalf("AcquireQueued(%s) = %+v, %v; want HeldBy %s", n, r, err, want)
	}
}

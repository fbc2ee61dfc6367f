package sql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/spi"
)

// TestMySQLWakerEndsSilencedMarker: a holder's marker connection that its link silenced (a
// blackhole: no byte, close or reset reaches the server) lived on at the server, and with it
// the named lock of the lease it marked, until the server's wait_timeout (8 h by default): the
// waker gave up on it (its RELEASE_LOCK timed out) but the server never heard. Every waiter of
// the lock then blocked on it and got no hint; hand-overs waited for retries (MariaDB in
// bench/results/outage.md, 2026-12-05: 177 grants in 2 min against 506-575 on the other
// backends). The waker now notes the id of each connection it uses and ends the ones it
// abandoned (KILL CONNECTION) from a working one once the link heals: the lock is let go and
// the waiter is woken by the next holder's release. On the old code no hint arrives (the
// waiter's session TTL is long: no retry wakes it either) and the dead connection keeps the
// lock.
func TestMySQLWakerEndsSilencedMarker(t *testing.T) {
	direct, cfg := myDatabase(t, "simba_sqlbe_")
	proxied, p := proxyDSN(t, direct, "3306")
	holder := migrated(t, proxied, WithHousekeepingInterval(-1))
	other := open(t, direct, WithHousekeepingInterval(-1))
	waiter := open(t, direct, WithHousekeepingInterval(-1))
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	name := "silenced-" + unique(t)
	// usedBy is the connection that holds name's named lock (the spec's wake_lock name), if any.
	usedBy := func() sql.NullInt64 {
		t.Helper()
		var id sql.NullInt64
		err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT(COALESCE(DATABASE(), ''), '/', ?), 256), 48)))", name).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}

	if _, err := holder.Hints(ctx); err != nil { // the holder marks while it has subscribers
		t.Fatal(err)
	}
	hints, err := waiter.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hs := openSession(t, holder, 10*time.Minute)
	tok := grant(t, holder, hs, name)
	var marker sql.NullInt64
	for marker = usedBy(); !marker.Valid; marker = usedBy() {
		time.Sleep(10 * time.Millisecond)
	}

	// Silence the holder's link for good (its marker connection and its pool's), then heal
	// it: new connections work.
	p.Set(faultproxy.Fault{Blackhole: true})
	p.Heal()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		err := holder.Release(rctx, hs, name, tok)
		rcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
	}

	// Another client takes the lease and a third waits for it; the lease's TTL is long, so
	// only a hint wakes the waiter within the test.
	oth := openSession(t, other, 10*time.Minute)
	otok := grant(t, other, oth, name)
	ws := openSession(t, waiter, 10*time.Minute)
	if r, err := waiter.Acquire(ctx, ws, name); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("the waiter's Acquire = %+v, %v; want held", r, err)
	}
	// Once the holder's waker has ended its marker connection the lock is let go (the waiter's
	// probes then follow the lease row).
	deadline := time.After(time.Minute) // a bound for the old code: its lock lasts 8 h
	for used := usedBy(); used == marker; used = usedBy() {
		select {
		case <-deadline:
			t.Fatalf("the named lock is still held by the silenced marker connection %v", marker)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := other.Release(ctx, oth, name, otok); err != nil {
		t.Fatal(err)
	}
	for woken := false; !woken; {
		select {
		case h := <-hints:
			woken = h.Kind == spi.Released && h.Name == name
		case <-deadline:
			t.Fatalf("no Released hint for %s after the holder's silenced marker connection; the named lock is held by connection %v (the silenced one: %v)",
				name, usedBy(), marker)
		}
	}
	if used := usedBy(); used == marker {
		t.Fatalf("the named lock is still held by the silenced marker connection %v", marker)
	}
	if r, err := waiter.Acquire(ctx, ws, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("the waiter's Acquire after the hint = %+v, %v; want granted", r, err)
	}
	if k := holder.waker.(*mysqlWaker).snapshot().kills; k < 1 {
		t.Fatalf("the holder's waker ended %d connections; want the silenced marker's", k)
	}
}

// TestMySQLWakerEndsOnlyItsAbandonedConnection: reap ends a connection only while the server
// shows it with the id and the client address the waker noted (a server restarted, or another
// that took over, numbers its connections anew: another client's connection may have the id).
// A connection of another client's with the id but another address lives on; the one noted
// is ended and its named lock let go; an id the server does not know is done with.
func TestMySQLWakerEndsOnlyItsAbandonedConnection(t *testing.T) {
	direct, cfg := myDatabase(t, "simba_sqlbe_")
	b := migrated(t, direct, WithHousekeepingInterval(-1))
	w := b.waker.(*mysqlWaker)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx := testCtx(t)
	victim, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	var ref connRef
	if err := victim.QueryRowContext(ctx, w.connID).Scan(&ref.id, &ref.host); err != nil {
		t.Fatal(err)
	}
	name := "reap-" + unique(t)
	if got, err := w.getLock(ctx, victim, name, 0); err != nil || !got {
		t.Fatalf("GET_LOCK = %v, %v", got, err)
	}
	alive := func() bool {
		t.Helper()
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", ref.id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	reap := func(r connRef) {
		t.Helper()
		w.mu.Lock()
		w.abandoned[r] = struct{}{}
		w.mu.Unlock()
		w.reap(ctx)
		w.mu.Lock()
		left := len(w.abandoned)
		w.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d abandoned connections left after reap", left)
		}
	}

	reap(connRef{id: ref.id, host: "192.0.2.1:1"})    // the id, another address
	reap(connRef{id: ref.id + 1<<40, host: ref.host}) // no such id
	if !alive() || w.snapshot().kills != 0 {
		t.Fatalf("reap ended a connection it did not abandon (alive %v, kills %d)", alive(), w.snapshot().kills)
	}
	reap(ref)
	if k := w.snapshot().kills; k != 1 {
		t.Fatalf("reap ended %d connections; want the one abandoned", k)
	}
	for alive() {
		time.Sleep(10 * time.Millisecond) // KILL returns before the connection is gone
	}
	if _, err := w.getLock(ctx, victim, name, 0); err == nil {
		t.Fatal("the ended connection still runs statements")
	}
}

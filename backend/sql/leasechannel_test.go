package sql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// notification is one NOTIFY the hint listener heard (pgHub.heard).
type notification struct{ channel, payload string }

// hearing makes b's hint listener report every notification it receives on the returned
// channel; call it before b's first Hints.
func hearing(b *Backend) <-chan notification {
	heard := make(chan notification, 1024)
	b.d.(*pgDialect).hub.heard = func(channel, payload string) {
		select {
		case heard <- notification{channel, payload}:
		default:
		}
	}
	return heard
}

// waitListening waits until b's listener has (re)connected or brought its LISTENs in line with
// its sessions' waits.
func waitListening(t *testing.T, b *Backend) {
	t.Helper()
	select {
	case <-b.d.(*pgDialect).hub.listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the hint listener did not (re)subscribe")
	}
}

// TestPostgresHintsOnlyForWaitedNames: a backend whose sessions wait for nothing hears nothing
// of another backend's lock and unlock of a name (the old listener LISTENed on the shared
// simba_released and heard every release in the database), while the release of a name its
// session waits for still reaches it as a Released hint, from the server's notification on
// that name's own channel (the session's TTL is long: no retry would have found it).
//
// Checked against the old behaviour by having the listener LISTEN on simba_released again (the
// spec's listen list with "LISTEN {{release_channel_ident}}" restored, and its notifications
// delivered as Released hints): the test then fails with the unwaited name's hint.
func TestPostgresHintsOnlyForWaitedNames(t *testing.T) {
	dsn := pgDSN(t)
	a := migrated(t, dsn) // the hinted backend
	other := migrated(t, dsn)
	heard := hearing(a)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := a.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, a) // connected

	unwaited := "unwaited-" + unique(t)
	waited := "waited-" + unique(t)
	holder := openSession(t, other, longTTL)
	waiter := openSession(t, a, 10*time.Minute)

	// A lock and unlock of a name nobody of a waits for, before a waits for anything: no
	// channel but the group channel is LISTENed.
	tok := grant(t, other, holder, unwaited)
	if err := other.Release(testCtx(t), holder, unwaited, tok); err != nil {
		t.Fatal(err)
	}

	// a's session waits for waited.
	held := grant(t, other, holder, waited)
	if r, err := a.AcquireQueued(testCtx(t), waiter, waited); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("AcquireQueued = %+v, %v; want HeldBy", r, err)
	}
	waitListening(t, a) // the LISTEN on waited's channel is in

	// Another lock and unlock of the unwaited name, then the release of the waited one: the
	// server delivers a listener's notifications in commit order, so once the waited name's is
	// heard, the unwaited name's would have been heard before it.
	tok = grant(t, other, holder, unwaited)
	if err := other.Release(testCtx(t), holder, unwaited, tok); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(testCtx(t), holder, waited, held); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case n := <-heard:
			if n.payload == unwaited {
				t.Fatalf("the listener heard %q's release on %q though no session of its backend waits for it", unwaited, n.channel)
			}
			if n.payload == waited {
				if n.channel != wire.SQLLeaseChannel(waited) {
					t.Fatalf("the release of %q came on %q, want its own channel %q", waited, n.channel, wire.SQLLeaseChannel(waited))
				}
				done = true
			}
		case <-timeout:
			t.Fatalf("no notification of %q's release within 30 s (the waiter's TTL is 10 min)", waited)
		}
	}
	// The hints: the LISTEN's catch-up hint and the release's, never the unwaited name.
	cancel()
	sawWaited := false
	for h := range hints {
		if h.Kind == spi.Released && h.Name == unwaited {
			t.Fatalf("a Released hint for %q, which no session of the backend waits for", unwaited)
		}
		sawWaited = sawWaited || (h.Kind == spi.Released && h.Name == waited)
	}
	if !sawWaited {
		t.Fatalf("no Released hint for %q", waited)
	}
}

// TestPostgresLockWokenByLeaseChannel: a Lock of a simba.Client on PostgreSQL, with a TTL of
// ten minutes (so that its retry comes at the holder's remaining time: ten minutes), gets the
// lock once another backend's holder releases it: woken by the hint on the name's own channel.
// (The test's context ends long before any retry.)
func TestPostgresLockWokenByLeaseChannel(t *testing.T) {
	dsn := pgDSN(t)
	other := migrated(t, dsn)
	c, err := simba.New(migrated(t, dsn), simba.WithOwner("waiter"), simba.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	name := "woken-" + unique(t)
	holder := openSession(t, other, 10*time.Minute)
	tok := grant(t, other, holder, name)
	got := make(chan error, 1)
	ctx, cancel := context.WithTimeout(testCtx(t), time.Minute)
	defer cancel()
	go func() {
		h, err := c.Lock(ctx, name)
		if err == nil {
			err = h.Unlock(context.Background())
		}
		got <- err
	}()
	// Release once the waiter is in the queue (it then waits: the holder's time is ten
	// minutes, and so is the waiter's TTL).
	for {
		var n int
		err := other.d.(*pgDialect).pool.QueryRow(testCtx(t), "SELECT count(*) FROM simba_waiter WHERE name = $1", name).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := other.Release(testCtx(t), holder, name, tok); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock after the holder's release: %v (no hint: the retry would come in ten minutes)", err)
	}
}

// TestPostgresReleaseNotifiesLegacyChannel: clients of earlier 5.x releases LISTEN only on
// simba_released; a release and a close_session still notify it with the lease name, beside the
// lease's own channel, so that they keep their hints during a rolling upgrade.
func TestPostgresReleaseNotifiesLegacyChannel(t *testing.T) {
	dsn := pgDSN(t)
	b := migrated(t, dsn)
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	released, closed := "legacy-"+unique(t), "legacy-closed-"+unique(t)
	pg, _ := wire.SQLDialectByName(wire.SQLPostgres) // the generated statements a listener sends
	for _, st := range []string{
		"LISTEN " + wire.SQLReleaseChannel, // what an earlier client's listen statement is
		pg.ListenLease(released),
		pg.ListenLease(closed),
	} {
		if _, err := conn.Exec(testCtx(t), st); err != nil {
			t.Fatal(err)
		}
	}
	s := openSession(t, b, longTTL)
	tok := grant(t, b, s, released)
	if err := b.Release(testCtx(t), s, released, tok); err != nil {
		t.Fatal(err)
	}
	grant(t, b, s, closed)
	if err := b.CloseSession(testCtx(t), s); err != nil {
		t.Fatal(err)
	}
	want := map[notification]bool{
		{wire.SQLReleaseChannel, released}: true, {wire.SQLLeaseChannel(released), released}: true,
		{wire.SQLReleaseChannel, closed}: true, {wire.SQLLeaseChannel(closed), closed}: true,
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	for len(want) > 0 {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("still waiting for %v: %v", want, err)
		}
		delete(want, notification{n.Channel, n.Payload})
	}
}

// TestLeaseChannelIsPostgresMD5: wire.SQLLeaseChannel and wire.SQLGroupOwnChannel (Go's MD5 of
// the name's bytes) name the channels the statements notify (PostgreSQL's md5(text) of the name), for names of every byte
// wire.ValidateName accepts and of every length up to the longest, and fits PostgreSQL's
// 63-byte identifier limit.
func TestLeaseChannelIsPostgresMD5(t *testing.T) {
	b := migrated(t, pgDSN(t))
	const alphabet = "-.0123456789:ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
	var names []string
	for i := range alphabet {
		names = append(names, alphabet[i:i+1], "x"+alphabet[i:]) // every byte, many lengths
	}
	for n := 1; n <= wire.MaxNameLen; n++ {
		names = append(names, strings.Repeat(alphabet, 2)[:n])
	}
	for _, name := range names {
		if err := wire.ValidateName(name); err != nil {
			continue // a reserved name
		}
		for _, c := range []struct {
			prefix  string
			channel func(string) string
		}{{wire.SQLLeaseChannelPrefix, wire.SQLLeaseChannel}, {wire.SQLGroupChannelPrefix, wire.SQLGroupOwnChannel}} {
			var got string
			err := b.d.(*pgDialect).pool.QueryRow(testCtx(t), "SELECT $1::text || md5($2::text)", c.prefix, name).Scan(&got)
			if err != nil {
				t.Fatal(err)
			}
			if want := c.channel(name); got != want || len(want) > 63 {
				t.Fatalf("channel of %q: PostgreSQL %q, Go %q (%d bytes)", name, got, want, len(want))
			}
		}
	}
}

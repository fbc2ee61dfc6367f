package sql

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// heardOn waits until the listener hears a notification with payload on channel, failing on
// any notification of a payload in never before it (the server delivers a listener's
// notifications in commit order, so a change committed earlier would have been heard first).
func heardOn(t *testing.T, heard <-chan notification, channel, payload string, never ...string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case n := <-heard:
			for _, p := range never {
				if n.payload == p {
					t.Fatalf("the listener heard %q on %q", p, n.channel)
				}
			}
			if n.payload == payload && n.channel == channel {
				return
			}
		case <-timeout:
			t.Fatalf("no notification of %q on %q within 30 s", payload, channel)
		}
	}
}

// hinted waits until hints delivers hint.
func hinted(t *testing.T, hints <-chan spi.Hint, hint spi.Hint) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case h, ok := <-hints:
			if !ok {
				t.Fatal("hint channel closed")
			}
			if h == hint {
				return
			}
		case <-timeout:
			t.Fatalf("no %v hint for %q within 30 s", hint.Kind, hint.Name)
		}
	}
}

// TestPostgresGroupHintsOnlyForMembers: a backend whose sessions take part in no group hears
// nothing of another backend's joins and leaves (the old listener LISTENed on the shared
// simba_group and heard every membership change in the database), and none of a group it has
// no interest in once one of its sessions is a member of another group, whose changes reach
// it on that group's own channel as GroupChanged hints.
//
// Checked against the old behaviour by having the listener LISTEN on simba_group again (the
// spec's listen list with "LISTEN {{group_channel_ident}}" restored, and its notifications
// delivered as GroupChanged hints): the test then fails with the other group's notification.
func TestPostgresGroupHintsOnlyForMembers(t *testing.T) {
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

	foreign, mine := "foreign-"+unique(t), "mine-"+unique(t)
	joiner := openSession(t, other, longTTL)
	member := openSession(t, a, 10*time.Minute)

	// Joins and leaves of a group nobody of a takes part in, before a takes part in any.
	join(t, other, joiner, foreign)
	leave(t, other, joiner, foreign)

	// a's session joins mine; once the LISTEN on mine's channel is in (its catch-up hint is
	// delivered after it), another change of foreign, then a join of mine by the other backend.
	join(t, a, member, mine)
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: mine})
	join(t, other, joiner, foreign)
	join(t, other, joiner, mine)
	heardOn(t, heard, wire.SQLGroupOwnChannel(mine), mine, foreign)
	leave(t, other, joiner, mine)
	heardOn(t, heard, wire.SQLGroupOwnChannel(mine), mine, foreign)

	cancel()
	sawMine := false
	for h := range hints {
		if h.Kind == spi.GroupChanged && h.Name == foreign {
			t.Fatalf("a GroupChanged hint for %q, which no session of the backend takes part in", foreign)
		}
		sawMine = sawMine || (h.Kind == spi.GroupChanged && h.Name == mine)
	}
	if !sawMine {
		t.Fatalf("no GroupChanged hint for %q's notifications", mine)
	}
}

// TestPostgresGroupChannelLifetime: the listener LISTENs on a group's own channel while a
// session of its backend is a member (from the Join: the change of a join by another client
// right after it is heard, and the LISTEN's catch-up hint follows), and UNLISTENs it a linger
// after the last member left: a later change of the group is not heard, while a change of a
// group the backend still takes part in is (after it, in commit order).
func TestPostgresGroupChannelLifetime(t *testing.T) {
	dsn := pgDSN(t)
	a := migrated(t, dsn)
	other := migrated(t, dsn)
	a.d.(*pgDialect).hub.linger = time.Millisecond
	heard := hearing(a)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := a.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, a)
	g, still := "life-"+unique(t), "still-"+unique(t)
	joiner, later := openSession(t, other, longTTL), openSession(t, other, longTTL)
	member := openSession(t, a, 10*time.Minute)
	join(t, a, member, still)
	join(t, a, member, g)
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: g}) // the catch-up hint: LISTENed
	join(t, other, joiner, g)
	heardOn(t, heard, wire.SQLGroupOwnChannel(g), g)
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: g})

	leave(t, a, member, g)
	// The listener UNLISTENs once the linger is over: at its next sweep, which a kick (a new
	// group, here a read of one) brings on.
	hub := &a.d.(*pgDialect).hub
	for listened := true; listened; {
		if _, err := a.Members(testCtx(t), "kick-"+unique(t)); err != nil {
			t.Fatal(err)
		}
		waitListening(t, a)
		hub.imu.Lock()
		listened = hub.groups[g] != nil
		hub.imu.Unlock()
	}
	// The UNLISTEN of g went with the plan that dropped it: a LISTEN planned after that (a
	// join of next) is sent with it or after it, so once next's catch-up hint is delivered,
	// g's channel is no longer LISTENed (and a change of next heard after it means that the
	// notification of a's own leave of g was heard before, in commit order).
	next := "next-" + unique(t)
	join(t, a, member, next)
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: next})
	join(t, other, joiner, next)
	heardOn(t, heard, wire.SQLGroupOwnChannel(next), next)
	join(t, other, later, g) // a change of g (joiner is a member already)
	join(t, other, joiner, still)
	heardOn(t, heard, wire.SQLGroupOwnChannel(still), still, g)
}

// TestPostgresGroupHintsAfterReconnect: after its connection is killed, the hint listener
// reconnects, LISTENs on the channels of the groups its backend's sessions are members of
// again and hears their changes from the server (not only the catch-up hint that follows the
// LISTEN).
func TestPostgresGroupHintsAfterReconnect(t *testing.T) {
	dsn := pgDSN(t)
	app := "simba-grp-hints-" + unique(t)
	a := migrated(t, withParam(t, dsn, "application_name", app))
	other := migrated(t, dsn)
	heard := hearing(a)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := a.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, a)
	g := "reconnect-" + unique(t)
	joiner := openSession(t, other, longTTL)
	member := openSession(t, a, 10*time.Minute)
	join(t, a, member, g)
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: g}) // the LISTEN on g's channel is in
	// Kill the listener's connection from the server side (its last statement LISTENed).
	exec(t, other, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ? AND query LIKE '%LISTEN%'", app)
	// Nothing changes g meanwhile: its next hint is the catch-up hint of the new connection's
	// LISTEN.
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: g})
	join(t, other, joiner, g)
	heardOn(t, heard, wire.SQLGroupOwnChannel(g), g)
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: g})
}

// TestPostgresGroupChangeNotifiesLegacyChannel: clients of earlier 5.x releases LISTEN only on
// simba_group (and simba_released); a join, a leave and a close_session still notify it with
// the group name, beside the group's own channel, so that they keep their hints during a
// rolling upgrade.
func TestPostgresGroupChangeNotifiesLegacyChannel(t *testing.T) {
	dsn := pgDSN(t)
	b := migrated(t, dsn)
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	joined, left, closed := "legacy-j-"+unique(t), "legacy-l-"+unique(t), "legacy-c-"+unique(t)
	pg, _ := wire.SQLDialectByName(wire.SQLPostgres) // the generated statements a listener sends
	for _, st := range []string{
		"LISTEN " + wire.SQLGroupChannel, // what an earlier client's listen statement is
		pg.ListenGroup(joined),
		pg.ListenGroup(left),
		pg.ListenGroup(closed),
	} {
		if _, err := conn.Exec(testCtx(t), st); err != nil {
			t.Fatal(err)
		}
	}
	s := openSession(t, b, longTTL)
	join(t, b, s, joined)
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	expect := func(want map[notification]bool) {
		t.Helper()
		for len(want) > 0 {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("still waiting for %v: %v", want, err)
			}
			delete(want, notification{n.Channel, n.Payload})
		}
	}
	expect(map[notification]bool{{wire.SQLGroupChannel, joined}: true, {wire.SQLGroupOwnChannel(joined), joined}: true})
	join(t, b, s, left)
	leave(t, b, s, left)
	join(t, b, s, closed)
	if err := b.CloseSession(testCtx(t), s); err != nil {
		t.Fatal(err)
	}
	expect(map[notification]bool{
		{wire.SQLGroupChannel, left}: true, {wire.SQLGroupOwnChannel(left), left}: true,
		{wire.SQLGroupChannel, closed}: true, {wire.SQLGroupOwnChannel(closed), closed}: true,
	})
}

// join makes session s of b a member of group, failing the test unless it is.
func join(t *testing.T, b *Backend, s spi.SessionID, group string) {
	t.Helper()
	if st, err := b.Join(testCtx(t), s, group); err != nil || st != spi.OK {
		t.Fatalf("Join(%s) = %v, %v", group, st, err)
	}
}

// leave removes session s of b from group, failing the test unless it answers OK.
func leave(t *testing.T, b *Backend, s spi.SessionID, group string) {
	t.Helper()
	if st, err := b.Leave(testCtx(t), s, group); err != nil || st != spi.OK {
		t.Fatalf("Leave(%s) = %v, %v", group, st, err)
	}
}

// TestPostgresGroupMemberSeesJoin: a PartitionGroup member of a simba.Client on PostgreSQL,
// with a TTL of ten minutes (its keep-alives, which also bring the members, come every 200 s),
// sees another session join its group and leave it again within the test's minute: told by the
// hint on the group's own channel, not by its keep-alives.
func TestPostgresGroupMemberSeesJoin(t *testing.T) {
	dsn := pgDSN(t)
	other := migrated(t, dsn)
	c, err := simba.New(migrated(t, dsn), simba.WithOwner("member"), simba.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(testCtx(t), time.Minute)
	defer cancel()
	name := "seen-" + unique(t)
	g, err := c.JoinGroup(ctx, name, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Leave(context.Background())
	waitMembers := func(n int) {
		t.Helper()
		for len(g.Members()) != n {
			if ctx.Err() != nil {
				t.Fatalf("members %v, want %d (no hint: the next keep-alive is minutes away)", g.Members(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitMembers(1)
	joiner := openSession(t, other, 10*time.Minute)
	join(t, other, joiner, name)
	waitMembers(2)
	leave(t, other, joiner, name)
	waitMembers(1)
}

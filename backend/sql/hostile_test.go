package sql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestHeldLeaseWithNegativeTokenIsCorrupt: a lease row of a live session whose token another
// program set negative is not reported held with that token (the client read the mismatch as a
// takeover: "revoked: taken-over") but named Corrupt, with one warning, and the client revokes
// the term as corrupt-record, matching ErrCorruptRecord, while its other lock stays held. On
// the old code KeepAlive listed the lease in Held with token -5 and Corrupt was empty.
func TestHeldLeaseWithNegativeTokenIsCorrupt(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			b := migrated(t, d.dsn(t), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			ctx := testCtx(t)
			s := openSession(t, b, longTTL)
			bad, good := "negtok-"+unique(t), "negtok-"+unique(t)
			var tok int64
			for _, n := range []string{bad, good} {
				r, err := b.Acquire(ctx, s, n)
				if err != nil || r.Kind != spi.Granted {
					t.Fatalf("Acquire(%s) = %+v, %v", n, r, err)
				}
				tok = r.Token
			}
			exec(t, b, "UPDATE simba_lease SET token = -5 WHERE name = ?", bad)
			for range 2 {
				ka, err := b.KeepAlive(ctx, s, []string{bad, good}, nil)
				if err != nil || ka.Expired {
					t.Fatalf("KeepAlive = %+v, %v", ka, err)
				}
				if want := []spi.Held{{Name: good, Token: tok}}; !slices.Equal(ka.Held, want) || !slices.Equal(ka.Corrupt, []string{bad}) {
					t.Fatalf("KeepAlive held %v, corrupt %q; want held %v, corrupt [%s]", ka.Held, ka.Corrupt, want, bad)
				}
			}
			if n := strings.Count(logs.String(), "token below 1"); n != 1 {
				t.Errorf("want one warning naming the lease, got %d; log:\n%s", n, logs.String())
			}
		})
	}
	t.Run("client", func(t *testing.T) {
		b := migrated(t, liteDSN(t))
		cl, err := simba.New(b, simba.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close(context.Background()) })
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lost, err := cl.Lock(lctx, "overwritten")
		if err != nil {
			t.Fatal(err)
		}
		kept, err := cl.Lock(lctx, "kept")
		if err != nil {
			t.Fatal(err)
		}
		exec(t, b, "UPDATE simba_lease SET token = -5 WHERE name = 'overwritten'")
		select {
		case <-lost.Term.Context().Done():
		case <-lctx.Done():
			t.Fatal("the overwritten lock's term did not end within 30 s")
		}
		var re *simba.RevokedError
		if cause := context.Cause(lost.Term.Context()); !errors.As(cause, &re) || re.Reason != simba.RevokedCorruptRecord || !errors.Is(cause, simba.ErrCorruptRecord) {
			t.Errorf("the overwritten lock's term ended with %v; want RevokedCorruptRecord, matching ErrCorruptRecord", cause)
		}
		if !kept.Term.IsValid() {
			t.Errorf("the other lock's term ended too: %v", context.Cause(kept.Term.Context()))
		}
		if err := kept.Unlock(lctx); err != nil {
			t.Errorf("Unlock of the other lock: %v", err)
		}
	})
}

// TestForgedWaitersDoNotReserveLeases: a waiter entry no client made does not keep a free
// lease from the next acquire. An entry whose id is not a client's (for a hand-written
// session row live for ages) is dropped, with one warning, as a foreign holder is freed; one
// whose session expired, or whose expiry was forged ahead of its live session's, or (SQLite,
// written with foreign keys off) whose session row is gone, does not count. A real waiter
// still does (it is owed the lease). On the old code each forged entry made every acquire of the
// name on MariaDB and SQLite (and on PostgreSQL once the lease had a row) reply HeldBy naming
// it, for as long as its own expiry said: 31 years here.
func TestForgedWaitersDoNotReserveLeases(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			dsn := d.dsn(t)
			b := migrated(t, dsn, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			ctx := testCtx(t)
			now, err := b.DatabaseNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			far := now + 1e12
			live := openSession(t, b, longTTL)
			u := unique(t)
			expired, gone := "0123456789abcdef0123456789abcdef", "00112233445566778899aabbccddeeff"
			exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'x', 1000, ?)", "intruder", far)
			exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'x', 1000, ?)", expired, now-60000)
			cases := []struct{ name, waiter string }{
				{"foreign", "intruder"},
				{"expired", expired},
				{"forged-expiry", string(live)},
			}
			if d.name == "sqlite" {
				cases = append(cases, struct{ name, waiter string }{"gone", gone})
			}
			for _, tc := range cases {
				name := "forgedq-" + u + "." + tc.name
				exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, NULL, 7)", name)
				if tc.name == "gone" {
					// Another program's connection, with SQLite's default: foreign keys off.
					db, err := sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite://"))
					if err != nil {
						t.Fatal(err)
					}
					_, err = db.ExecContext(ctx, "INSERT INTO simba_waiter (name, session_id, arrival_us, expiry_ms) VALUES (?, ?, 0, ?)", name, tc.waiter, far)
					db.Close()
					if err != nil {
						t.Fatal(err)
					}
				} else {
					exec(t, b, "INSERT INTO simba_waiter (name, session_id, arrival_us, expiry_ms) VALUES (?, ?, 0, ?)", name, tc.waiter, far)
				}
				s := openSession(t, b, longTTL)
				r, err := b.AcquireQueued(ctx, s, name)
				if err != nil || r.Kind != spi.Granted || r.Token <= 7 {
					t.Errorf("%s: AcquireQueued = %+v, %v; want granted above token 7", tc.name, r, err)
				}
			}
			if n := strings.Count(logs.String(), "waiter=intruder"); n != 1 {
				t.Errorf("want one warning naming the foreign waiter, got %d; log:\n%s", n, logs.String())
			}
			// A real waiter is still owed the lease it waits for.
			name := "forgedq-" + u + ".sound"
			holder, waiter, other := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
			tok := grant(t, b, holder, name)
			if r, err := b.AcquireQueued(ctx, waiter, name); err != nil || r.Kind != spi.HeldBy {
				t.Fatalf("the waiter's AcquireQueued = %+v, %v; want HeldBy", r, err)
			}
			if err := b.Release(ctx, holder, name, tok); err != nil {
				t.Fatal(err)
			}
			if r, err := b.Acquire(ctx, other, name); err != nil || r.Kind != spi.HeldBy || r.Holder != waiter {
				t.Errorf("another session's Acquire = %+v, %v; want HeldBy naming the waiter %s", r, err, waiter)
			}
		})
	}
}

// TestSessionRowWithForgedTTLEnds: a session whose row's ttl_ms was written over by something
// else (0, negative, beyond the longest TTL a client opens a session with, or the int64
// maximum) is reported expired by KeepAlive, and its row is not renewed: its
// lease goes to another session once the expiry of its last renewal passes, not in years. A
// session of the longest TTL (24 h) still renews. On the old code PostgreSQL and SQLite renewed
// such a row and replied live with the forged time left (-1 s, 0, 277,777 h: the lease then held
// for as long), and the int64 maximum failed every keep-alive on PostgreSQL and MariaDB with
// "bigint out of range" while the row stayed live.
func TestSessionRowWithForgedTTLEnds(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			u := unique(t)
			if s := openSession(t, b, spi.MaxSessionTTL); true {
				ka, err := b.KeepAlive(ctx, s, nil, nil)
				if err != nil || ka.Expired || ka.Remaining <= spi.MaxSessionTTL-time.Minute {
					t.Fatalf("KeepAlive of a %v session = %+v, %v; want live, %v left", spi.MaxSessionTTL, ka, err, spi.MaxSessionTTL)
				}
			}
			for _, ttl := range []int64{-1000, 0, spi.MaxSessionTTL.Milliseconds() + 1, 1e12, math.MaxInt64} {
				s := openSession(t, b, time.Second)
				name := fmt.Sprintf("forgedttl-%s.%d", u, ttl)
				grant(t, b, s, name)
				exec(t, b, "UPDATE simba_session SET ttl_ms = ? WHERE id = ?", ttl, string(s))
				ka, err := b.KeepAlive(ctx, s, []string{name}, nil)
				if err != nil || !ka.Expired {
					t.Errorf("ttl_ms %d: KeepAlive = %+v, %v; want Expired", ttl, ka, err)
				}
				other := openSession(t, b, longTTL)
				r, err := b.Acquire(ctx, other, name)
				if err != nil || (r.Kind != spi.Granted && (r.Kind != spi.HeldBy || r.Remaining > time.Second)) {
					t.Errorf("ttl_ms %d: another session's Acquire = %+v, %v; want granted, or held for at most the 1 s of the last renewal", ttl, r, err)
				}
			}
		})
	}
}

// TestDanglingHolderFreed: a lease row whose holder's session row does not exist (the foreign
// key bypassed: here PostgreSQL's session_replication_role = replica on one connection, as a
// restore with triggers disabled does) is taken by the next acquire, keeping its token, on
// every dialect. PostgreSQL's one-statement acquire treated a holder it cannot see as a
// session created after its snapshot, hence live: on the old code it replied HeldBy with 0
// left for ever (the client retrying soon, again and again), while Inspect showed the name
// free. MariaDB and SQLite (foreign_key_checks = 0, foreign_keys off) took such a lease
// already.
func TestDanglingHolderFreed(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			dsn := d.dsn(t)
			b := migrated(t, dsn)
			ctx := testCtx(t)
			name := "dangling-" + unique(t)
			ghost := "0123456789abcdef0123456789abcdef"
			insert := "INSERT INTO simba_lease (name, session_id, token) VALUES (?, ?, 7)"
			switch d.name {
			case "postgres":
				c, err := b.d.(*pgDialect).pool.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{"SET session_replication_role = replica", strings.ReplaceAll(strings.Replace(insert, "?", "$1", 1), "?", "$2"), "SET session_replication_role = DEFAULT"} {
					var args []any
					if strings.Contains(q, "$1") {
						args = []any{name, ghost}
					}
					if _, err := c.Exec(ctx, q, args...); err != nil {
						c.Release()
						t.Fatalf("%s: %v", q, err)
					}
				}
				c.Release()
			case "mysql":
				std := b.d.(*stdDialect)
				c, err := std.db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{"SET SESSION foreign_key_checks = 0", insert, "SET SESSION foreign_key_checks = 1"} {
					var args []any
					if q == insert {
						args = []any{name, ghost}
					}
					if _, err := c.ExecContext(ctx, q, args...); err != nil {
						c.Close()
						t.Fatalf("%s: %v", q, err)
					}
				}
				c.Close()
			case "sqlite":
				db, err := sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite://"))
				if err != nil {
					t.Fatal(err)
				}
				_, err = db.ExecContext(ctx, insert, name, ghost)
				db.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			s := openSession(t, b, longTTL)
			for _, op := range []string{"acquire", "acquire_queued"} {
				r, err := b.acquireAs(ctx, op, s, name)
				if err != nil || r.Kind != spi.Granted || r.Token <= 7 {
					t.Fatalf("%s = %+v, %v; want granted above token 7", op, r, err)
				}
			}
		})
	}
}

// TestTokenOfNoTenure: a lease row whose token is one no tenure has, written by another
// program, is reported as such. A held row at token 0 (a tenure's token is at least 1) is named
// Corrupt by KeepAlive, as a negative one is (the client said taken-over), and its holder's
// re-acquire fails with ErrCorruptToken (it was granted at token 0), and Inspect shows it as an
// unreadable record (it was shown held at token 0). On SQLite, which
// keeps any value in any column, a token that is text: a held one is named Corrupt (it reads as
// 0), and an acquire of a free one fails with ErrCorruptToken saying it is not an integer,
// writing nothing; on the old code it failed with ErrTokenOverflow, "holds token 0, which has
// no successor".
func TestTokenOfNoTenure(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			s := openSession(t, b, longTTL)
			held := "notenure-" + unique(t)
			grant(t, b, s, held)
			exec(t, b, "UPDATE simba_lease SET token = 0 WHERE name = ?", held)
			if ka, err := b.KeepAlive(ctx, s, []string{held}, nil); err != nil || len(ka.Held) != 0 || !slices.Equal(ka.Corrupt, []string{held}) {
				t.Errorf("token 0: KeepAlive = %+v, %v; want %s named Corrupt, nothing held", ka, err, held)
			}
			if l, ok, err := b.InspectLease(ctx, held); err != nil || !ok || !strings.Contains(l.Unreadable, "token 0 is no tenure's") || !l.RemainingUnknown {
				t.Errorf("token 0: InspectLease = %+v, %v, %v; want it unreadable", l, ok, err)
			}
			// Its holder's re-acquire is refused, not granted at token 0: the client would adopt
			// the term and revoke it at every keep-alive (an election flapping at every renewal).
			if r, err := b.Acquire(ctx, s, held); !errors.Is(err, spi.ErrCorruptToken) || spi.Classify(err) != spi.Permanent {
				t.Errorf("token 0: the holder's Acquire = %+v, %v; want a permanent ErrCorruptToken", r, err)
			}
			if d.name != "sqlite" {
				return
			}
			exec(t, b, "UPDATE simba_lease SET token = 'abc' WHERE name = ?", held)
			if ka, err := b.KeepAlive(ctx, s, []string{held}, nil); err != nil || len(ka.Held) != 0 || !slices.Equal(ka.Corrupt, []string{held}) {
				t.Errorf("text token: KeepAlive = %+v, %v; want %s named Corrupt, nothing held", ka, err, held)
			}
			free := "notenure-" + unique(t)
			exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, NULL, 'abc')", free)
			r, err := b.Acquire(ctx, s, free)
			if !errors.Is(err, spi.ErrCorruptToken) || errors.Is(err, spi.ErrTokenOverflow) || !strings.Contains(err.Error(), "not an integer") || spi.Classify(err) != spi.Permanent {
				t.Errorf("Acquire of a text token = %+v, %v; want a permanent ErrCorruptToken saying not an integer", r, err)
			}
			if l, ok, err := b.InspectLease(ctx, free); err != nil || !ok || l.Holder != "" {
				t.Errorf("after the refused acquire: %+v, %v, %v; want the row still free", l, ok, err)
			}
		})
	}
}

// TestJoinOfForgedTTLSessionWritesNothing: a session whose row's ttl_ms is none a client
// writes is reported Expired by Join (as by KeepAlive) and no membership is left behind, on
// every dialect. On MariaDB and SQLite, whose Join inserts the membership and then reads the
// session's time left, the old statement inserted the row before the Expired reply, and the
// group counted a member its client had given up for the rest of the row's last TTL; on
// PostgreSQL (one statement) the join replied OK and inserted the membership while the row had
// not expired. Leave agrees (Expired; MySQL and SQLite read session_remaining, 0 for such a
// row; PostgreSQL's leave replied OK).
func TestJoinOfForgedTTLSessionWritesNothing(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			s := openSession(t, b, longTTL)
			group := "forgedttl-" + unique(t)
			exec(t, b, "UPDATE simba_session SET ttl_ms = 0 WHERE id = ?", string(s))
			if st, err := b.Join(ctx, s, group); err != nil || st != spi.Expired {
				t.Fatalf("Join = %v, %v; want Expired", st, err)
			}
			if m, err := b.Members(ctx, group); err != nil || len(m) != 0 {
				t.Errorf("Members = %q, %v; want none", m, err)
			}
			if st, err := b.Leave(ctx, s, group); err != nil || st != spi.Expired {
				t.Errorf("Leave = %v, %v; want Expired", st, err)
			}
		})
	}
}

// TestSQLiteExpiryNotAnInteger: SQLite keeps any value in any column and compares a text or a
// blob above every number, so a session row whose expiry_ms another program set to one was
// live for ever to every "expiry_ms > now" (its memberships counted in Members, KeepAlive's
// members and Inspect, its waiter entries never lapsed, housekeeping never deleted it, and its
// keep-alive renewed it), while the statements that subtract the clock from it read it as 0,
// long past. PostgreSQL's and MySQL's BIGINT cannot hold such a value; SQLite's statements now
// take it for an expiry long past, everywhere. (A text that reads as an integer, '1', is stored
// as the integer by the column's affinity: it is an expiry in 1970, expired already.)
func TestSQLiteExpiryNotAnInteger(t *testing.T) {
	for _, v := range []struct{ name, sql string }{{"text", "'never'"}, {"blob", "x'ff'"}, {"real", "1e300"}} {
		t.Run(v.name, func(t *testing.T) {
			b := migrated(t, liteDSN(t))
			ctx := testCtx(t)
			forged, other := openSession(t, b, longTTL), openSession(t, b, longTTL)
			group, name := "nonint-"+unique(t), "nonint-"+unique(t)
			if st, err := b.Join(ctx, forged, group); err != nil || st != spi.OK {
				t.Fatalf("Join = %v, %v", st, err)
			}
			if _, err := b.Join(ctx, other, group); err != nil {
				t.Fatal(err)
			}
			if r, err := b.Acquire(ctx, forged, name); err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire = %+v, %v", r, err)
			}
			exec(t, b, "INSERT INTO simba_waiter (name, session_id, arrival_us, expiry_ms) VALUES ('waited', ?, 1, "+v.sql+")", string(other))
			exec(t, b, "UPDATE simba_session SET expiry_ms = "+v.sql+" WHERE id = ?", string(forged))

			want := []spi.SessionID{other}
			if m, err := b.Members(ctx, group); err != nil || !slices.Equal(m, want) {
				t.Errorf("Members = %q, %v; want %q", m, err, want)
			}
			ka, err := b.KeepAlive(ctx, other, nil, []string{group})
			if err != nil || ka.Expired || !slices.Equal(ka.Members[group], want) {
				t.Errorf("the other's KeepAlive = %+v, %v; want members %q", ka, err, want)
			}
			snap, err := b.Inspect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range snap.Sessions {
				if s.ID == forged {
					t.Errorf("Inspect lists the session as live: %+v", s)
				}
			}
			if r, err := b.Acquire(ctx, other, name); err != nil || r.Kind != spi.Granted {
				t.Errorf("Acquire of the forged session's lease by another = %+v, %v; want Granted", r, err)
			}
			if err := b.Housekeeping(ctx); err != nil {
				t.Fatal(err)
			}
			d := b.d.(*stdDialect)
			var sessions, waiters int
			if err := d.db.QueryRowContext(ctx, "SELECT count(*) FROM simba_session WHERE id = ?", string(forged)).Scan(&sessions); err != nil {
				t.Fatal(err)
			}
			if err := d.db.QueryRowContext(ctx, "SELECT count(*) FROM simba_waiter WHERE name = 'waited'").Scan(&waiters); err != nil {
				t.Fatal(err)
			}
			if sessions != 0 || waiters != 0 {
				t.Errorf("after housekeeping: %d session rows, %d waiter rows left; want 0 (expired)", sessions, waiters)
			}
			// Its own keep-alive finds it expired (and does not make it an integer again).
			exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'o', 60000, "+v.sql+")", string(forged))
			if ka, err := b.KeepAlive(ctx, forged, nil, nil); err != nil || !ka.Expired {
				t.Errorf("the session's own KeepAlive = %+v, %v; want Expired", ka, err)
			}
			if r, err := b.Acquire(ctx, forged, "nonint-other-"+unique(t)); err != nil || r.Kind != spi.SessionExpired {
				t.Errorf("Acquire by the session = %+v, %v; want SessionExpired", r, err)
			}
			if st, err := b.Join(ctx, forged, group); err != nil || st != spi.Expired {
				t.Errorf("Join by the session = %v, %v; want Expired", st, err)
			}
			if m, err := b.Members(ctx, group); err != nil || !slices.Equal(m, want) {
				t.Errorf("Members after the join = %q, %v; want %q", m, err, want)
			}
		})
	}
}

// TestSQLiteTTLNotAnInteger: a session row whose ttl_ms another program set to a value that is
// not an integer (SQLite keeps any) is none a client writes, as one out of range: its
// keep-alive and its joins report it expired and write nothing. A text or a blob already
// failed the range test (it compares above every number); a real within range (1000.5) was
// renewed (its expiry made a real, now + 1000.5) and reported live.
func TestSQLiteTTLNotAnInteger(t *testing.T) {
	for _, v := range []struct{ name, sql string }{{"text", "'never'"}, {"blob", "x'ff'"}, {"real", "1000.5"}} {
		t.Run(v.name, func(t *testing.T) {
			b := migrated(t, liteDSN(t))
			ctx := testCtx(t)
			s := openSession(t, b, longTTL)
			group := "nonintttl-" + unique(t)
			exec(t, b, "UPDATE simba_session SET ttl_ms = "+v.sql+" WHERE id = ?", string(s))
			if ka, err := b.KeepAlive(ctx, s, nil, nil); err != nil || !ka.Expired {
				t.Errorf("KeepAlive = %+v, %v; want Expired", ka, err)
			}
			if st, err := b.Join(ctx, s, group); err != nil || st != spi.Expired {
				t.Errorf("Join = %v, %v; want Expired", st, err)
			}
			if m, err := b.Members(ctx, group); err != nil || len(m) != 0 {
				t.Errorf("Members = %q, %v; want none", m, err)
			}
		})
	}
}

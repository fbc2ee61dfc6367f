package sql

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestForeignGroupMemberSkipped: a membership written by hand for a "session" whose id is not
// of the form clients make (the foreign key needs a session row, so one is written too, live
// for ages) is skipped, with one warning, by Members and by KeepAlive: otherwise it would count
// as a live member for as long as its row says and take partitions that nobody leads.
func TestForeignGroupMemberSkipped(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			b := migrated(t, d.dsn(t), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			ctx := testCtx(t)
			group := "foreign-" + unique(t)
			s := openSession(t, b, longTTL)
			if st, err := b.Join(ctx, s, group); err != nil || st != spi.OK {
				t.Fatalf("Join = %v, %v", st, err)
			}
			now, err := b.DatabaseNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"intruder", "0123456789ABCDEF0123456789ABCDEF"} {
				exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'x', 1000, ?)", id, now+1e12)
				exec(t, b, "INSERT INTO simba_member (group_name, session_id) VALUES (?, ?)", group, id)
			}
			want := []spi.SessionID{s}
			for range 2 {
				m, err := b.Members(ctx, group)
				if err != nil || !slices.Equal(m, want) {
					t.Fatalf("Members = %q, %v; want %q", m, err, want)
				}
				ka, err := b.KeepAlive(ctx, s, nil, []string{group})
				if err != nil || !slices.Equal(ka.Members[group], want) {
					t.Fatalf("KeepAlive members = %q, %v; want %q", ka.Members[group], err, want)
				}
			}
			out := logs.String()
			if n := strings.Count(out, "session_id=intruder") + strings.Count(out, "member=intruder"); n != 1 {
				t.Fatalf("want one warning about the foreign member, got %d; log:\n%s", n, out)
			}
		})
	}
}

// TestForeignLeaseHolderFreed: a lease row held by a session row whose id no client makes
// (written by hand, live for ages) no longer blocks the name: the acquire frees it, with one
// warning, keeping the token (the grant's token is the next one). A lease held by a real
// session, or by a hand-written session of the client form, is still refused, the latter with
// a positive time left however far its expiry (the milliseconds once overflowed).
func TestForeignLeaseHolderFreed(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			b := migrated(t, d.dsn(t), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			ctx := testCtx(t)
			now, err := b.DatabaseNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i, holder := range []string{"intruder", "0123456789ABCDEF0123456789ABCDEF"} {
				name := fmt.Sprintf("foreign-%s.%d", unique(t), i)
				exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'x', 1000, ?)", holder, now+1e12)
				exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, ?, 8999999999999999)", name, holder)
				s := openSession(t, b, longTTL)
				r, err := b.Acquire(ctx, s, name)
				if err != nil || r.Kind != spi.Granted || r.Token != 9000000000000000 {
					t.Fatalf("Acquire over foreign holder %q = %+v, %v; want granted with token 9000000000000000 (the foreign record's token + 1: it is kept, and above the clock floor)", holder, r, err)
				}
				other := openSession(t, b, longTTL)
				if r, err := b.Acquire(ctx, other, name); err != nil || r.Kind != spi.HeldBy || r.Holder != s {
					t.Fatalf("Acquire of a lease held by a real session = %+v, %v; want held by %s", r, err, s)
				}
				if !strings.Contains(logs.String(), "lease="+name) {
					t.Fatalf("no warning about the foreign holder of %s; log:\n%s", name, logs.String())
				}
			}
			name := "foreign-" + unique(t) + ".honoured"
			holder := "0123456789abcdef0123456789abcdef"
			exec(t, b, "INSERT INTO simba_session (id, owner, ttl_ms, expiry_ms) VALUES (?, 'x', 1000, ?)", holder, int64(9e15))
			exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, ?, 7)", name, holder)
			if r, err := b.Acquire(ctx, openSession(t, b, longTTL), name); err != nil || r.Kind != spi.HeldBy || r.Holder != spi.SessionID(holder) || r.Remaining <= 0 || r.Remaining > 1<<62 {
				t.Fatalf("Acquire of a hand-written lease = %+v, %v; want held by %s with time left", r, err, holder)
			}
		})
	}
}

package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestGarbageGroupMemberDoesNotBlockPartitions: a hand-added entry of a group's zset that is not
// a client session id, with a far-future score (a "member" that never expires), is skipped with
// a warning: two real clients joined to the group lead every partition within a few TTLs. Before
// the entry was skipped it counted as a live member forever, and the partitions rendezvous
// hashing gave it were never led.
func TestGarbageGroupMemberDoesNotBlockPartitions(t *testing.T) {
	for _, mode := range []struct {
		name   string
		client func(t testing.TB) goredis.UniversalClient
	}{
		{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			const (
				ttl        = 600 * time.Millisecond
				partitions = 32 // the garbage member would own none with probability (2/3)^32
				garbage    = "not-a-session\x1b[31m"
			)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := mode.client(t)
			var rnd [6]byte
			_, _ = rand.Read(rnd[:])
			group := "foreign-" + hex.EncodeToString(rnd[:])
			t.Cleanup(func() {
				c.Del(context.Background(), wire.GroupKey(group))
				for p := range partitions {
					c.Del(context.Background(), wire.LeaseKey(fmt.Sprintf("%s.%d", group, p)))
				}
			})
			if err := c.ZAdd(ctx, wire.GroupKey(group), goredis.Z{Score: 9e15, Member: garbage}).Err(); err != nil {
				t.Fatal(err)
			}

			var logs testenv.LogBuffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			var groups []*simba.PartitionGroup
			for range 2 {
				cl, err := simba.New(newBackend(t, c, WithLogger(logger)), simba.WithTTL(ttl))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cl.Close(context.Background()) })
				g, err := cl.JoinGroup(ctx, group, partitions)
				if err != nil {
					t.Fatal(err)
				}
				groups = append(groups, g)
			}

			// Done when both clients see the same two members and every partition is led, by
			// exactly the client rendezvous hashing assigns it to.
			deadline := time.Now().Add(10 * ttl)
			for {
				led := map[int]int{}
				for _, g := range groups {
					for p, term := range g.Held() {
						if term.IsValid() {
							led[p]++
						}
					}
				}
				m0, m1 := groups[0].Members(), groups[1].Members()
				done := len(led) == partitions && len(m0) == 2 && slices.Equal(m0, m1) &&
					len(groups[0].Assigned())+len(groups[1].Assigned()) == partitions
				for _, n := range led {
					done = done && n == 1
				}
				if done {
					break
				}
				if time.Now().After(deadline) {
					var unled []int
					for p := range partitions {
						if led[p] == 0 {
							unled = append(unled, p)
						}
					}
					t.Fatalf("after %v, partitions %v are unled; members seen: %q / %q", 10*ttl, unled, m0, m1)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for _, g := range groups {
				if slices.Contains(g.Members(), simba.SessionID(garbage)) {
					t.Fatalf("members %q hold the foreign entry", g.Members())
				}
			}
			if out := logs.String(); !strings.Contains(out, "not a client session id") || !strings.Contains(out, "group="+group) {
				t.Fatalf("no warning about the foreign member; log:\n%s", out)
			}
		})
	}
}

// TestForeignLeaseHolderFreed: a lease hash whose holder is not a client session id (written by
// hand, with an expiry far in the future, or an empty holder) no longer blocks the name: the
// acquire frees it, with one warning, keeping the token (the grant's token is the next one), and
// a lease held by a real session (or by a hand-written holder of the client form) is still
// refused.
func TestForeignLeaseHolderFreed(t *testing.T) {
	for _, mode := range []struct {
		name   string
		client func(t testing.TB) goredis.UniversalClient
	}{
		{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := mode.client(t)
			var logs testenv.LogBuffer
			b := newBackend(t, c, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			var rnd [6]byte
			_, _ = rand.Read(rnd[:])
			for i, holder := range []string{"intruder", "", "0123456789ABCDEF0123456789ABCDEF"} {
				name := fmt.Sprintf("foreign-%x.%d", rnd, i)
				key := wire.LeaseKey(name)
				t.Cleanup(func() { c.Del(context.Background(), key) })
				if err := c.HSet(ctx, key, wire.LeaseFieldSession, holder, wire.LeaseFieldToken, "8999999999999999", wire.LeaseFieldExpires, "9000000000000000", wire.LeaseFieldOwner, "x").Err(); err != nil {
					t.Fatal(err)
				}
				s, err := b.OpenSession(ctx, "o", 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				r, err := b.Acquire(ctx, s.ID, name)
				if err != nil || r.Kind != spi.Granted || r.Token != 9000000000000000 {
					t.Fatalf("Acquire over foreign holder %q = %+v, %v; want granted with token 9000000000000000 (the foreign record's token + 1: it is kept, and above the clock floor)", holder, r, err)
				}
				other, err := b.OpenSession(ctx, "o", 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if r, err := b.Acquire(ctx, other.ID, name); err != nil || r.Kind != spi.HeldBy || r.Holder != s.ID {
					t.Fatalf("Acquire of a lease held by a real session = %+v, %v; want held by %s", r, err, s.ID)
				}
				if !strings.Contains(logs.String(), fmt.Sprintf("lease=%s", name)) {
					t.Fatalf("no warning about the foreign holder of %s; log:\n%s", name, logs.String())
				}
			}
			// A holder of the client form is honoured, even with an expiry centuries away: HeldBy
			// with a positive time left (the milliseconds once overflowed into a negative one).
			name := fmt.Sprintf("foreign-%x.honoured", rnd)
			key := wire.LeaseKey(name)
			t.Cleanup(func() { c.Del(context.Background(), key) })
			holder := "0123456789abcdef0123456789abcdef"
			if err := c.HSet(ctx, key, wire.LeaseFieldSession, holder, wire.LeaseFieldToken, "7", wire.LeaseFieldExpires, "9000000000000000").Err(); err != nil {
				t.Fatal(err)
			}
			s, err := b.OpenSession(ctx, "o", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := b.Acquire(ctx, s.ID, name); err != nil || r.Kind != spi.HeldBy || r.Holder != spi.SessionID(holder) || r.Remaining <= 0 || r.Remaining > 1<<62 {
				t.Fatalf("Acquire of a hand-written lease = %+v, %v; want held by %s with time left", r, err, holder)
			}
		})
	}
}

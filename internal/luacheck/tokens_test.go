package luacheck

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
)

// acquireBoth runs acquire (standalone) or acquire_at (Cluster) for sid on name.
type acquireFunc func(t *testing.T, c *redis.Client, sid, owner, name string, expires int64) (luascripts.AcquireReply, error)

func acquireStandalone(t *testing.T, c *redis.Client, sid, _, name string, _ int64) (luascripts.AcquireReply, error) {
	return luascripts.Acquire.Run(context.Background(), c,
		luascripts.AcquireKeys{Lease: wire.LeaseKey(name), Session: wire.SessionKey(sid), SessionLeases: wire.SessionLeasesKey(sid), Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)},
		luascripts.AcquireArgs{SessionID: sid, Name: name})
}

func acquireAtCall(t *testing.T, c *redis.Client, sid, owner, name string, expires int64) (luascripts.AcquireReply, error) {
	r, err := luascripts.AcquireAt.Run(context.Background(), c,
		luascripts.AcquireAtKeys{Lease: wire.LeaseKey(name), Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)},
		luascripts.AcquireAtArgs{SessionID: sid, Owner: owner, ExpiresMS: expires})
	return luascripts.AcquireReply(r), err
}

var acquireScripts = []struct {
	name string
	run  acquireFunc
}{{"acquire", acquireStandalone}, {"acquire_at", acquireAtCall}}

// TestTokenClockFloor: a lease hash that is lost (here deleted, as eviction, a restart without
// AOF or an operator would) does not restart the token: the next grant's token is still greater
// than every token granted before, because a new tenure's token is max(last + 1, TIME in µs).
// A lease whose stored token is ahead of the clock continues from it (last + 1).
func TestTokenClockFloor(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	for _, sc := range acquireScripts {
		t.Run(sc.name, func(t *testing.T) {
			s1, o1 := open(t, c, "one", ttl)
			s2, o2 := open(t, c, "two", ttl)
			name := newName("floor")
			var last int64
			for i := range 3 {
				sid, exp := s1, o1.ExpiresMS
				if i%2 == 1 {
					sid, exp = s2, o2.ExpiresMS
				}
				r, err := sc.run(t, c, sid, "owner", name, exp)
				if err != nil || r.Status != luascripts.StatusOK || r.Token <= last {
					t.Fatalf("grant %d: %+v %v, want a token > %d", i, r, err, last)
				}
				last = r.Token
				if err := c.Del(ctx, wire.LeaseKey(name)).Err(); err != nil { // the record is lost
					t.Fatal(err)
				}
			}
			// A stored token ahead of the clock: the next is exactly last + 1.
			ahead := redisNowUS(t, c) + 1_000_000_000
			c.HSet(ctx, wire.LeaseKey(name), wire.LeaseFieldToken, strconv.FormatInt(ahead, 10))
			r, err := sc.run(t, c, s1, "owner", name, o1.ExpiresMS)
			if err != nil || r.Status != luascripts.StatusOK || r.Token != ahead+1 {
				t.Fatalf("after a token ahead of the clock: %+v %v, want %d", r, err, ahead+1)
			}
		})
	}
}

// TestTokenCorruptAndOverflow: a stored token that is not a plain decimal is refused with the
// corrupt_token error (never coerced: tonumber would read "0x10" as 16), one at or above 2^53, or
// whose successor would reach 2^53, with token_overflow; nothing is written in either case.
func TestTokenCorruptAndOverflow(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	cases := []struct {
		stored string
		want   string
	}{
		{"0x10", luascripts.ErrorCorruptToken},
		{"-5", luascripts.ErrorCorruptToken},
		{"abc", luascripts.ErrorCorruptToken},
		{"1.5", luascripts.ErrorCorruptToken},
		{"1e3", luascripts.ErrorCorruptToken},
		{" 7", luascripts.ErrorCorruptToken},
		{"", luascripts.ErrorCorruptToken},
		{"9007199254740991", luascripts.ErrorTokenOverflow}, // 2^53 - 1: its successor is 2^53
		{"9007199254740992", luascripts.ErrorTokenOverflow}, // 2^53
		{"9007199254740993", luascripts.ErrorTokenOverflow}, // 2^53 + 1 (a double reads 2^53)
		{"9223372036854775807", luascripts.ErrorTokenOverflow},
		{"99999999999999999999999", luascripts.ErrorTokenOverflow},
	}
	for _, sc := range acquireScripts {
		for _, tc := range cases {
			t.Run(sc.name+"/"+tc.stored, func(t *testing.T) {
				sid, o := open(t, c, "one", ttl)
				name := newName("corrupt")
				key := wire.LeaseKey(name)
				c.HSet(ctx, key, wire.LeaseFieldToken, tc.stored)
				before, _ := c.HGetAll(ctx, key).Result()
				_, err := sc.run(t, c, sid, "owner", name, o.ExpiresMS)
				if err == nil || !redis.HasErrorPrefix(err, tc.want) {
					t.Fatalf("stored token %q: %v, want an error starting %q", tc.stored, err, "ERR "+tc.want)
				}
				after, _ := c.HGetAll(ctx, key).Result()
				if len(after) != len(before) || after[wire.LeaseFieldToken] != tc.stored || after[wire.LeaseFieldSession] != "" {
					t.Fatalf("the refused acquire wrote: %v, was %v", after, before)
				}
				if n, _ := c.SCard(ctx, wire.SessionLeasesKey(sid)).Result(); n > 1 {
					t.Fatalf("the refused acquire added the lease to the session's set")
				}
			})
		}
	}
	// The largest token with an exact successor below 2^53 is still granted.
	sid, o := open(t, c, "one", ttl)
	name := newName("edge")
	c.HSet(ctx, wire.LeaseKey(name), wire.LeaseFieldToken, "9007199254740990")
	r, err := acquireStandalone(t, c, sid, "", name, o.ExpiresMS)
	if err != nil || r.Token != 9007199254740991 {
		t.Fatalf("stored 2^53 - 2: %+v %v, want token 2^53 - 1", r, err)
	}
	if got := leaseField(t, c, name, wire.LeaseFieldToken); got != "9007199254740991" || strings.ContainsAny(got, "e.") {
		t.Fatalf("stored %q, want 9007199254740991", got)
	}
}

// TestCorruptTokenNeverCoercedByKeepAliveOrRelease: when a held lease's token is overwritten
// with something that is not a plain decimal, keep_alive and keep_alive_leases do not report
// the lease held (tonumber would have reported "0x10" as 16), and release and release_leases
// with the coerced value (16) release nothing.
func TestCorruptTokenNeverCoercedByKeepAliveOrRelease(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	sid, o := open(t, c, "one", ttl)
	name := newName("coerce")
	if r := acquire(t, c, sid, name); r.Status != luascripts.StatusOK {
		t.Fatalf("acquire: %+v", r)
	}
	c.HSet(ctx, wire.LeaseKey(name), wire.LeaseFieldToken, "0x10")
	if ka := keepAlive(t, c, sid, []string{name}, nil); ka.Status != luascripts.StatusOK || len(ka.Held) != 0 {
		t.Fatalf("keep_alive: %+v, want the lease not reported held", ka)
	}
	kl, err := luascripts.KeepAliveLeases.Run(ctx, c, luascripts.KeepAliveLeasesKeys{Leases: []string{wire.LeaseKey(name)}},
		luascripts.KeepAliveLeasesArgs{SessionID: sid, ExpiresMS: o.ExpiresMS, Names: []string{name}})
	if err != nil || len(kl.Held) != 0 {
		t.Fatalf("keep_alive_leases: %+v %v, want the lease not reported held", kl, err)
	}
	if release(t, c, sid, name, 16) {
		t.Fatal("release with token 16 released a lease whose token is \"0x10\"")
	}
	rl, err := luascripts.ReleaseLeases.Run(ctx, c, luascripts.ReleaseLeasesKeys{Leases: []string{wire.LeaseKey(name)}},
		luascripts.ReleaseLeasesArgs{SessionID: sid, Names: []string{name}, Tokens: []int64{16}})
	if err != nil || rl.Released != 0 {
		t.Fatalf("release_leases with token 16: %+v %v, want nothing released", rl, err)
	}
	if got := leaseField(t, c, name, wire.LeaseFieldSession); got != sid {
		t.Fatalf("the lease's holder is %q, want still %s", got, sid)
	}
}

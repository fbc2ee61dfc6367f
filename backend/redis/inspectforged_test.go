package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestInspectForgedLeaseRecords: a lease hash that something else wrote (a token that is not a
// plain decimal, a holder with no expiry or with one that is not a plain decimal, an expiry
// years away) is never shown free by Inspect: it comes back with Unreadable saying why, its
// holder field as Holder and RemainingUnknown, and no absurd Remaining. What an acquire does
// with the same record is pinned beside it (doc.go, "Foreign records"): a corrupt token is
// refused, a holder without a readable expiry is taken over as the spec's "not live" says, an
// expiry years away keeps the name held. Before readLease, the corrupt-token records showed
// as free with token 0, the holders without a readable expiry as free, and the far expiry as
// held for 87,600 hours: this test failed on that code. Found by trial19, also failing before
// its fix: a token at or above 2^53, which every acquire refuses as an overflow, was shown free
// (beyond int64 it was unreadable but said acquires fail with ErrCorruptToken); a holder that
// is not a client session id, which the next acquire frees, was shown held until its expiry
// and its token verified.
func TestInspectForgedLeaseRecords(t *testing.T) {
	ctx := context.Background()
	// Database 9, as TestInspect: Inspect SCANs the whole keyspace of its database.
	c := goredis.NewClient(&goredis.Options{Addr: testenv.Redis(t), DB: 9})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(ctx).Err(); err != nil {
		testenv.Unavailable(t, "Redis", err.Error())
	}
	b := newBackend(t, c, WithLogger(discard))
	sid := open(t, b, privTestTTL)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	holder := fmt.Sprintf("%032x", now.UnixNano()) // a client session id no session has
	cases := []struct {
		name       string
		fields     map[string]string
		unreadable string // substring of Unreadable; "" for a sound record
		acquire    string // what Acquire does with it: corrupt, granted or held
	}{
		{"free-junk-token", map[string]string{wire.LeaseFieldToken: "abc"}, `token "abc" is not a plain decimal integer`, "corrupt"},
		{"held-hex-token", map[string]string{wire.LeaseFieldSession: holder, wire.LeaseFieldToken: "0x10", wire.LeaseFieldExpires: at(time.Minute), wire.LeaseFieldOwner: "forger"}, `token "0x10"`, "corrupt"},
		{"negative-token", map[string]string{wire.LeaseFieldSession: holder, wire.LeaseFieldToken: "-5", wire.LeaseFieldExpires: at(time.Minute)}, `token "-5"`, "corrupt"},
		{"no-expiry", map[string]string{wire.LeaseFieldSession: holder, wire.LeaseFieldToken: "7", wire.LeaseFieldOwner: "forger"}, "with no expiry", "granted"},
		{"negative-expiry", map[string]string{wire.LeaseFieldSession: holder, wire.LeaseFieldToken: "7", wire.LeaseFieldExpires: "-5"}, `expiry "-5" is not a plain decimal integer`, "granted"},
		{"junk-expiry", map[string]string{wire.LeaseFieldSession: holder, wire.LeaseFieldToken: "7", wire.LeaseFieldExpires: "soon"}, `expiry "soon"`, "granted"},
		{"years-away", map[string]string{wire.LeaseFieldSession: holder, wire.LeaseFieldToken: "7", wire.LeaseFieldExpires: at(10 * 365 * 24 * time.Hour), wire.LeaseFieldOwner: "forger"}, "beyond the longest session TTL (24h0m0s)", "held"},
		{"token-2p53", map[string]string{wire.LeaseFieldToken: "9007199254740992"}, "at or above 2^53", "overflow"},
		// 2^53 - 1: a tenure may hold it (the holder keeps it), but no new one can follow.
		// Free, or left by an expired holder, it showed free before mends5.
		{"token-last-free", map[string]string{wire.LeaseFieldToken: "9007199254740991"}, "has no successor below 2^53", "overflow"},
		{"token-last-expired", map[string]string{wire.LeaseFieldSession: holder, wire.LeaseFieldToken: "9007199254740991", wire.LeaseFieldExpires: at(-time.Minute)}, "has no successor below 2^53", "overflow"},
		{"token-beyond-int64", map[string]string{wire.LeaseFieldToken: "99999999999999999999"}, "out of the int64 range (acquires fail with spi.ErrTokenOverflow)", "overflow"},
		{"foreign-holder", map[string]string{wire.LeaseFieldSession: "not-a-session", wire.LeaseFieldToken: "7", wire.LeaseFieldExpires: at(time.Minute), wire.LeaseFieldOwner: "forger"}, `holder "not-a-session" is not a client session id`, "granted"},
		{"sound", map[string]string{wire.LeaseFieldSession: holder, wire.LeaseFieldToken: "7", wire.LeaseFieldExpires: at(time.Minute), wire.LeaseFieldOwner: "forger"}, "", "held"},
	}
	names := map[string]int{}
	for i, tc := range cases {
		name := uniq(t, "forged."+tc.name)
		names[name] = i
		key := wire.LeaseKey(name)
		t.Cleanup(func() { c.Del(context.Background(), key) })
		if err := c.HSet(ctx, key, tc.fields).Err(); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range snap.Leases {
		i, ok := names[l.Name]
		if !ok {
			continue
		}
		seen++
		tc := cases[i]
		if l.Holder == "" && l.Unreadable == "" {
			t.Errorf("%s: shown free: %+v", tc.name, l)
		}
		if l.Remaining > spi.MaxSessionTTL {
			t.Errorf("%s: Remaining %v", tc.name, l.Remaining)
		}
		switch {
		case tc.unreadable == "":
			if l.Unreadable != "" || l.Holder != spi.SessionID(holder) || l.Token != 7 || l.Remaining <= 0 {
				t.Errorf("%s: %+v, want held by %s with token 7 and time left", tc.name, l, holder)
			}
		case !strings.Contains(l.Unreadable, tc.unreadable) || !l.RemainingUnknown || l.Remaining != 0:
			t.Errorf("%s: %+v, want Unreadable naming %q, time left unknown", tc.name, l, tc.unreadable)
		case tc.name == "token-last-expired" && l.Holder != "":
			t.Errorf("%s: holder %q shown, want none (its holder expired)", tc.name, l.Holder)
		case tc.name != "token-last-expired" && (string(l.Holder) != tc.fields[wire.LeaseFieldSession] || l.Owner != tc.fields[wire.LeaseFieldOwner]):
			t.Errorf("%s: holder %q owner %q, want the record's %q %q", tc.name, l.Holder, l.Owner, tc.fields[wire.LeaseFieldSession], tc.fields[wire.LeaseFieldOwner])
		}
	}
	if seen != len(cases) {
		t.Fatalf("Inspect listed %d of the %d forged leases", seen, len(cases))
	}
	// InspectLease reads each record as Inspect does, and fence.LeaseVerifier, which reads it
	// so, verifies no token of an unreadable record (a forger could write any token and any
	// holder field into one), only the sound record's.
	verify := fence.LeaseVerifier(b, nil)
	for name, i := range names {
		tc := cases[i]
		l, found, err := b.InspectLease(ctx, name)
		if err != nil || !found || !strings.Contains(l.Unreadable, tc.unreadable) || (tc.unreadable == "") != (l.Unreadable == "") {
			t.Errorf("%s: InspectLease = %+v, %v, %v; want Unreadable naming %q as Inspect", tc.name, l, found, err, tc.unreadable)
		}
		err = verify(ctx, name, l.Token)
		var refused *fence.UnverifiedTokenError
		switch {
		case tc.unreadable == "" && err != nil:
			t.Errorf("%s: the sound record's token %d refused: %v", tc.name, l.Token, err)
		case tc.unreadable != "" && (!errors.As(err, &refused) || refused.Unreadable == ""):
			t.Errorf("%s: token %d of an unreadable record: %v, want an *UnverifiedTokenError naming the record unreadable", tc.name, l.Token, err)
		}
	}
	for name, i := range names {
		tc := cases[i]
		r, err := b.Acquire(ctx, sid, name)
		var ok bool
		switch tc.acquire {
		case "corrupt":
			ok = errors.Is(err, spi.ErrCorruptToken)
		case "overflow":
			ok = errors.Is(err, spi.ErrTokenOverflow)
		case "granted":
			ok = err == nil && r.Kind == spi.Granted && r.Token > 7
		case "held":
			ok = err == nil && r.Kind == spi.HeldBy && r.Holder == spi.SessionID(holder)
		}
		if !ok {
			t.Errorf("%s: Acquire = %+v, %v; want %s", tc.name, r, err, tc.acquire)
		}
	}
}

// TestInspectKeysOfAnotherType: a key under Simba's prefixes that is not of the type Simba
// writes (a string where a lease hash, a session hash or a group's sorted set belongs, written
// by hand or by another program) is one foreign record, not a failure of the whole snapshot:
// Inspect lists the rest, shows the lease unreadable (never free: every acquire fails on it
// with WRONGTYPE) and skips the session and the group; InspectLease reads the lease the same
// way and fence.LeaseVerifier refuses its tokens as unverified, not as a failed read. Found by
// trial19: on the old code one such key made Inspect fail with WRONGTYPE, so simba status and
// the status page showed nothing at all, and InspectLease failed (the verifier answering 503).
// It runs on a private server, since on the old code the shared one's Inspect would fail for
// every other test while the key exists.
func TestInspectKeysOfAnotherType(t *testing.T) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.PrivateRedis(t)})
	t.Cleanup(func() { c.Close() })
	b := newBackend(t, c, WithLogger(discard))
	sid := open(t, b, privTestTTL)
	if r, err := b.Acquire(ctx, sid, "sound"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	for _, k := range []string{wire.LeaseKey("stringly"), wire.SessionKey(fmt.Sprintf("%032x", 7)), wire.GroupKey("stringly")} {
		if err := c.Set(ctx, k, "hello", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := b.Inspect(ctx)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	leases := map[string]spi.LeaseInfo{}
	for _, l := range snap.Leases {
		leases[l.Name] = l
	}
	if l := leases["sound"]; l.Holder != sid || l.Unreadable != "" {
		t.Errorf("the sound lease: %+v, want held by %s", l, sid)
	}
	want := "not a hash"
	if l, ok := leases["stringly"]; !ok || !strings.Contains(l.Unreadable, want) || !l.RemainingUnknown {
		t.Errorf("the string lease key: %+v (listed %v), want Unreadable naming %q", l, ok, want)
	}
	if len(snap.Sessions) != 1 || snap.Sessions[0].ID != sid {
		t.Errorf("sessions %+v, want only %s", snap.Sessions, sid)
	}
	if m, ok := snap.Groups["stringly"]; ok {
		t.Errorf("the string group key listed with members %v", m)
	}
	l, found, err := b.InspectLease(ctx, "stringly")
	if err != nil || !found || !strings.Contains(l.Unreadable, want) {
		t.Errorf("InspectLease = %+v, %v, %v; want Unreadable naming %q", l, found, err, want)
	}
	var refused *fence.UnverifiedTokenError
	if err := fence.LeaseVerifier(b, nil)(ctx, "stringly", 1); !errors.As(err, &refused) || refused.Unreadable == "" {
		t.Errorf("verify: %v, want an *UnverifiedTokenError naming the record unreadable", err)
	}
}

// TestInspectForgedSession: a session hash that something else wrote with an expiry years
// away is listed by Inspect with Unreadable saying its expiry lies beyond any session TTL, its
// Remaining unknown, as a lease record with such an expiry is; a real session beside it is
// listed with its time left. Before, only lease records were checked against the 24 h bound,
// and the forged session showed a Remaining of 87,600 hours in simba status: this test failed
// on that code. A private server: Inspect SCANs the whole keyspace.
func TestInspectForgedSession(t *testing.T) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.PrivateRedis(t)})
	t.Cleanup(func() { c.Close() })
	b := newBackend(t, c, WithLogger(discard))
	sid := open(t, b, privTestTTL)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	forged := fmt.Sprintf("%032x", now.UnixNano())
	far := strconv.FormatInt(now.Add(10*365*24*time.Hour).UnixMilli(), 10)
	if err := c.HSet(ctx, wire.SessionKey(forged), wire.SessionFieldOwner, "forger", wire.SessionFieldExpires, far).Err(); err != nil {
		t.Fatal(err)
	}
	snap, err := b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, s := range snap.Sessions {
		switch s.ID {
		case spi.SessionID(forged):
			seen++
			if !strings.Contains(s.Unreadable, "beyond the longest session TTL") || !s.RemainingUnknown || s.Remaining != 0 {
				t.Errorf("forged session = %+v; want Unreadable (beyond the longest session TTL), its Remaining unknown", s)
			}
		case sid:
			seen++
			if s.Unreadable != "" || s.RemainingUnknown || s.Remaining <= 0 || s.Remaining > privTestTTL {
				t.Errorf("real session = %+v; want its time left", s)
			}
		}
	}
	if seen != 2 {
		t.Errorf("Inspect listed %d of the 2 sessions: %+v", seen, snap.Sessions)
	}
}

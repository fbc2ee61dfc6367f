package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// scanCount is the COUNT hint of Inspect's SCANs and the size of its pipelined read batches.
const scanCount = 1000

// Inspect lists every lease key (free ones with Holder empty and their last token), every live
// session and every group's live members, as status tools show them. A lease hash it cannot
// read (see the package doc, "Foreign records") is listed with spi.LeaseInfo.Unreadable set,
// never as free. It SCANs the keyspace (on
// a Cluster, every master) and reads what it finds in pipelined batches, with remaining times
// by each master's TIME: it is for status tools, not hot paths, and is not a consistent
// snapshot. Like OpenSession, it refuses a password for the default user at a server that has
// none configured (ErrAuth). A standalone client's Inspect first checks that the server is not a Redis Cluster
// node (one CONFIG GET, as the first OpenSession does), whose SCAN would list only that node's
// share of the leases: it fails with a permanent error saying to use a redis+cluster:// DSN. It
// returns once ctx is done, as every call does (see bounded): a status tool's deadline bounds it
// even when the server stops answering.
func (b *Backend) Inspect(ctx context.Context) (spi.Snapshot, error) {
	return bounded(ctx, b, "inspect", "", func() (spi.Snapshot, error) { return b.inspectCall(ctx) })
}

// inspectCall is Inspect's body, run by bounded.
func (b *Backend) inspectCall(ctx context.Context) (spi.Snapshot, error) {
	if err := b.checkOpen(); err != nil {
		return spi.Snapshot{}, err
	}
	// A password for the default user at a server that has none is refused here as at the
	// first OpenSession (ErrAuth, spi.ErrInvalidOption): a status tool with the DSN of a
	// simba lock would otherwise list the server unauthenticated where the lock is refused.
	if err := b.passwordChecked(ctx); err != nil {
		return spi.Snapshot{}, err
	}
	var mu sync.Mutex
	snap := spi.Snapshot{Groups: map[string][]spi.SessionID{}}
	node := func(ctx context.Context, c goredis.Cmdable) error {
		part, err := inspectNode(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		snap.Leases = append(snap.Leases, part.Leases...)
		snap.Sessions = append(snap.Sessions, part.Sessions...)
		for g, m := range part.Groups {
			snap.Groups[g] = append(snap.Groups[g], m...)
		}
		return nil
	}
	var err error
	if b.cc != nil {
		err = b.cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return node(ctx, c) })
	} else if err = checkNotClusterNode(ctx, b.c); err == nil {
		// A standalone client at a Cluster node would SCAN that node's slots alone and list a
		// part of the leases as if it were all of them (simba status showed an empty list);
		// fail names the redis+cluster:// DSN instead.
		err = node(ctx, b.c)
	}
	if err != nil {
		return spi.Snapshot{}, b.fail("inspect", err)
	}
	slices.SortFunc(snap.Leases, func(a, b spi.LeaseInfo) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(snap.Sessions, func(a, b spi.SessionInfo) int { return strings.Compare(string(a.ID), string(b.ID)) })
	for _, m := range snap.Groups {
		slices.Sort(m)
	}
	return snap, nil
}

// InspectLease reads the lease called name as Inspect lists it (spi.LeaseInspector): the
// server's TIME, whether the lease key exists and its fields, pipelined in one round trip to
// the server (on a Cluster, in one MULTI/EXEC on the master of the key's slot, following MOVED
// and ASK while the slot migrates) that holds the key. It reads nothing else, whatever the
// number of leases. A name outside the wire grammar is refused before any I/O.
func (b *Backend) InspectLease(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	if err := wire.ValidateName(name); err != nil {
		return spi.LeaseInfo{}, false, err
	}
	type found struct {
		info spi.LeaseInfo
		ok   bool
	}
	f, err := bounded(ctx, b, "inspect lease", name, func() (found, error) {
		info, ok, err := b.inspectLeaseCall(ctx, name)
		return found{info, ok}, err
	})
	return f.info, f.ok, err
}

// inspectLeaseCall is InspectLease's body, run by bounded.
func (b *Backend) inspectLeaseCall(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	if err := b.checkOpen(); err != nil {
		return spi.LeaseInfo{}, false, err
	}
	key := wire.LeaseKey(name)
	var pipe goredis.Pipeliner
	if b.cc != nil {
		// One MULTI/EXEC through the Cluster client: it goes to the master of the lease key's
		// slot with TIME (which has no key) inside, so the clock read is that master's, the one
		// the lease's expiry was written by; and the client follows a MOVED or ASK for the
		// whole transaction while the slot migrates, where a pipeline sent to the master the
		// client's slot map named (MasterForKey) failed with the redirection until the map was
		// reloaded.
		pipe = b.cc.TxPipeline()
	} else {
		pipe = b.c.Pipeline()
	}
	t := pipe.Time(ctx)
	exists := pipe.Exists(ctx, key)
	fields := hmgetLease(ctx, pipe, key)
	if _, err := pipe.Exec(ctx); err != nil && !(wrongType(fields.Err()) && t.Err() == nil && exists.Err() == nil) {
		return spi.LeaseInfo{}, false, b.fail("inspect lease", err)
	}
	if exists.Val() == 0 {
		return spi.LeaseInfo{}, false, nil
	}
	if fields.Err() != nil {
		return notAHash(name), true, nil
	}
	return readLease(name, fields.Val(), t.Val().UnixMilli()), true, nil
}

// hmgetLease queues the read of a lease key's fields that readLease decodes (Inspect and
// InspectLease share both, so they cannot disagree).
func hmgetLease(ctx context.Context, pipe goredis.Pipeliner, key string) *goredis.SliceCmd {
	return pipe.HMGet(ctx, key, wire.LeaseFieldSession, wire.LeaseFieldToken, wire.LeaseFieldExpires, wire.LeaseFieldOwner)
}

func scanKeys(ctx context.Context, c goredis.Cmdable, match string) ([]string, error) {
	var keys []string
	it := c.Scan(ctx, 0, match, scanCount).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	return keys, it.Err()
}

// inspectNode reads one server's part of the snapshot.
func inspectNode(ctx context.Context, c goredis.Cmdable) (spi.Snapshot, error) {
	snap := spi.Snapshot{Groups: map[string][]spi.SessionID{}}
	t, err := c.Time(ctx).Result()
	if err != nil {
		return snap, err
	}
	now := t.UnixMilli()
	leaseKeys, err := scanKeys(ctx, c, wire.LeaseKeyMatch)
	if err != nil {
		return snap, err
	}
	for batch := range slices.Chunk(leaseKeys, scanCount) {
		pipe := c.Pipeline()
		cmds := make([]*goredis.SliceCmd, len(batch))
		for i, k := range batch {
			cmds[i] = hmgetLease(ctx, pipe, k)
		}
		if err := execTolerant(ctx, pipe, cmds); err != nil {
			return snap, err
		}
		for i, k := range batch {
			name, ok := wire.ParseLeaseKey(k)
			if !ok {
				continue
			}
			if cmds[i].Err() != nil {
				snap.Leases = append(snap.Leases, notAHash(name))
				continue
			}
			snap.Leases = append(snap.Leases, readLease(name, cmds[i].Val(), now))
		}
	}
	sessionKeys, err := scanKeys(ctx, c, wire.SessionKeyMatch)
	if err != nil {
		return snap, err
	}
	for batch := range slices.Chunk(sessionKeys, scanCount) {
		pipe := c.Pipeline()
		cmds := make([]*goredis.SliceCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.HMGet(ctx, k, wire.SessionFieldOwner, wire.SessionFieldExpires)
		}
		if err := execTolerant(ctx, pipe, cmds); err != nil {
			return snap, err
		}
		for i, k := range batch {
			sid, ok := wire.ParseSessionKey(k)
			if !ok || cmds[i].Err() != nil {
				continue // a key of another type is no session of a client
			}
			v := cmds[i].Val()
			if exp := num(v[1]); exp > now {
				owner, _ := v[0].(string)
				snap.Sessions = append(snap.Sessions, spi.BoundSession(spi.SessionInfo{ID: spi.SessionID(sid), Owner: owner, Remaining: ms(exp - now)}))
			}
		}
	}
	groupKeys, err := scanKeys(ctx, c, wire.GroupKeyMatch)
	if err != nil {
		return snap, err
	}
	for batch := range slices.Chunk(groupKeys, scanCount) {
		pipe := c.Pipeline()
		cmds := make([]*goredis.StringSliceCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.ZRangeByScore(ctx, k, &goredis.ZRangeBy{Min: "(" + strconv.FormatInt(now, 10), Max: "+inf"})
		}
		if err := execTolerant(ctx, pipe, cmds); err != nil {
			return snap, err
		}
		for i, k := range batch {
			g, ok := wire.ParseGroupKey(k)
			if !ok || cmds[i].Err() != nil {
				continue // a key of another type has no members
			}
			for _, m := range cmds[i].Val() {
				snap.Groups[g] = append(snap.Groups[g], spi.SessionID(m))
			}
		}
	}
	return snap, nil
}

// wrongType reports a command's WRONGTYPE error: the key holds a value of another type than
// the command reads, which no client wrote there.
func wrongType(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

// execTolerant runs pipe, whose commands are cmds, and fails only if a command failed otherwise
// than with WRONGTYPE: one key of another type under Simba's prefix (written by hand or by
// something else) must not take the whole snapshot with it, as it did simba status and the
// status page. The callers read a command that failed so as a foreign key.
func execTolerant[C goredis.Cmder](ctx context.Context, pipe goredis.Pipeliner, cmds []C) error {
	if _, err := pipe.Exec(ctx); err == nil {
		return nil
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil && !wrongType(err) {
			return err
		}
	}
	return nil
}

// notAHash is the lease whose key holds another type than a hash: never free (every acquire
// fails on it with spi.ErrCorruptRecord), unreadable.
func notAHash(name string) spi.LeaseInfo {
	return spi.LeaseInfo{Name: name, RemainingUnknown: true,
		Unreadable: "the key is not a hash (acquires fail with spi.ErrCorruptRecord)"}
}

// readLease reads a lease hash's session, token, expires and owner fields (v, by HMGET) as
// Inspect shows it, at the server time now (ms). A record Simba cannot read is never shown
// free: it comes back with Unreadable saying why, its holder field as Holder, RemainingUnknown
// set. The acquire scripts read the same fields, and the doc's "Foreign records" says what
// they do with each such record.
func readLease(name string, v []any, now int64) spi.LeaseInfo {
	info := spi.LeaseInfo{Name: name}
	holder, _ := v[0].(string)
	owner, _ := v[3].(string)
	unreadable := func(format string, args ...any) spi.LeaseInfo {
		info.Holder, info.Owner, info.RemainingUnknown = spi.SessionID(holder), owner, true
		info.Unreadable = fmt.Sprintf(format, args...)
		return info
	}
	if t, ok := v[1].(string); ok {
		n, err := plainDecimal(t)
		switch {
		case errors.Is(err, errOutOfRange):
			// The scripts read digits as a Lua number, so they refuse it as an overflow.
			return unreadable("token %s is %v (acquires fail with spi.ErrTokenOverflow)", clip(t), err)
		case err != nil:
			return unreadable("token %s is %v (acquires fail with spi.ErrCorruptToken)", clip(t), err)
		case n >= luascripts.TokenLimit:
			// No grant writes one (it fails first), and no acquire can follow it: shown free,
			// the name would look usable while every Lock of it fails for good.
			info.Token = n
			return unreadable("token %d is at or above 2^53, which no grant writes (acquires fail with spi.ErrTokenOverflow)", n)
		}
		info.Token = n
	}
	// free is the lease with no live holder: the next acquire starts a tenure, unless the
	// token has no successor below 2^53 (the scripts' limit), which every acquire refuses as
	// an overflow; shown free, the name would look usable while every Lock of it fails for
	// good. (Held by a live session, such a lease is held: its holder keeps the token.)
	free := func() spi.LeaseInfo {
		if info.Token == luascripts.TokenLimit-1 {
			return spi.LeaseInfo{Name: name, Token: info.Token, RemainingUnknown: true,
				Unreadable: fmt.Sprintf("token %d has no successor below 2^53 (acquires fail with spi.ErrTokenOverflow)", info.Token)}
		}
		return info
	}
	if holder == "" {
		return free() // an expiry or owner without a holder is no tenure
	}
	e, ok := v[2].(string)
	if !ok {
		return unreadable("held by %s with no expiry", clip(holder))
	}
	exp, err := plainDecimal(e)
	if err != nil {
		return unreadable("expiry %s is %v", clip(e), err)
	}
	if exp <= now {
		return free() // its holder's expiry has passed: free to the next acquire
	}
	if !wire.IsClientSessionID(holder) {
		// No client holds it, so no token of it may be verified, yet it is not free until an
		// acquire clears it: shown held by it, the name looked taken for as long as its expiry
		// said while any Lock took it at once.
		return unreadable("holder %s is not a client session id (the next acquire frees the lease, keeping its token)", clip(holder))
	}
	if left := ms(exp - now); left > spi.MaxSessionTTL {
		return unreadable("expiry %v away, beyond the longest session TTL (%v)", left.Round(time.Second), spi.MaxSessionTTL)
	}
	info.Holder, info.Owner, info.Remaining = spi.SessionID(holder), owner, ms(exp-now)
	return info
}

// errOutOfRange is plainDecimal's error for digits beyond int64.
var errOutOfRange = errors.New("out of the int64 range")

// plainDecimal parses a field Simba writes as a plain non-negative decimal integer (as the
// scripts check a token: no sign, hex, fraction or exponent, which Lua's tonumber would take).
func plainDecimal(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a plain decimal integer")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errOutOfRange
	}
	return n, nil
}

// clip quotes a field's value for an Unreadable reason, cut to 32 bytes as the scripts cut a
// corrupt token in their errors (a status tool escapes what it shows).
func clip(s string) string {
	if len(s) > 32 {
		return strconv.Quote(s[:32]) + "..."
	}
	return strconv.Quote(s)
}

// num parses a decimal hash field (0 when absent or malformed).
func num(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// Package fenceredis fences Redis keys: a SET or HSET that happens only if its fencing token is
// at least the highest token the resource has seen, in one Lua script with the check
// (generated from spec/redis.yaml and spec/lua/fence_set.lua, fence_hset.lua). It works on
// standalone Redis and on Redis Cluster.
//
// The highest token of resource R lives in the string key simba:fence:{R} (wire.FenceKey),
// which never expires. A guarded key must share that key's hash slot, so that one script can
// touch both on a Cluster: give it the hash tag {R}, e.g. invoice:{invoice-42}:status for the
// resource invoice-42. The helper checks the slot before any I/O, on standalone Redis too, so
// code that works there works on a Cluster.
//
// The fence key is as durable as the server: if it is lost (an allkeys-* maxmemory-policy
// evicting it, a restart without AOF, a failover that drops the last writes, an operator's DEL)
// a stale token is accepted again. Configure Redis as for Simba's lease hashes (noeviction or a
// volatile-* policy, appendonly yes).
//
// The fence key never expires, so a token that is not the lease's (another lease name's, or the
// int64 maximum) would lock the resource's holders out for good: set Fence.Verify
// (fence.LeaseVerifier) and a token above the fence key is checked with the lock service
// first, at the cost of one GET per write.
package fenceredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/internal/raise"
	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/printable"
)

// ErrCrossSlot is matched (errors.Is) by the error for a guarded key outside its resource's
// hash slot: give the key the hash tag {resource}.
var ErrCrossSlot = errors.New("fenceredis: key outside the resource's hash slot")

// Fence runs fenced writes through c: a *redis.Client, *redis.ClusterClient, *redis.Ring or
// redis.UniversalClient. It is safe for concurrent use (set Verify before the first write).
type Fence struct {
	// Verify, when set, is asked about a write's token before it may raise its resource's
	// highest token (a resource's first token included): Set and HSet first GET the fence
	// key and call Verify only if the token is above it, so once per tenure. A refusal is
	// returned as it is (errors.Is(err, fence.ErrUnverifiedToken) for a token the lease never
	// granted) and nothing is written. fence.LeaseVerifier is the ready-made one. Nil trusts
	// every token: a token of another lease or a made-up one (the int64 maximum) raises the
	// fence key for good, and every legitimate holder after it is refused as stale.
	Verify fence.Verifier

	c redis.Scripter
}

// New returns a fence that writes through c.
func New(c redis.Scripter) *Fence { return &Fence{c: c} }

// Set sets key to value if token is at least the highest token resource has seen, recording
// token as the highest; otherwise it writes nothing and returns a *fence.StaleTokenError
// (errors.Is(err, fence.ErrStaleToken)). key must hash to resource's slot (ErrCrossSlot).
func (f *Fence) Set(ctx context.Context, resource string, token int64, key, value string) error {
	if err := check(resource, token, key); err != nil {
		return err
	}
	if err := f.verify(ctx, resource, token); err != nil {
		return err
	}
	r, err := luascripts.FenceSet.Run(ctx, f.c,
		luascripts.FenceSetKeys{Fence: wire.FenceKey(resource), Target: key},
		luascripts.FenceSetArgs{Token: token, Value: value})
	if err != nil {
		return fmt.Errorf("fenceredis: SET %s for %s: %w", key, resource, printable.Error(err))
	}
	return verdict(resource, token, r.Status, r.Highest)
}

// HSet sets field of the hash key to value if token is at least the highest token resource
// has seen, like Set.
func (f *Fence) HSet(ctx context.Context, resource string, token int64, key, field, value string) error {
	if err := check(resource, token, key); err != nil {
		return err
	}
	if err := f.verify(ctx, resource, token); err != nil {
		return err
	}
	r, err := luascripts.FenceHset.Run(ctx, f.c,
		luascripts.FenceHsetKeys{Fence: wire.FenceKey(resource), Target: key},
		luascripts.FenceHsetArgs{Token: token, Field: field, Value: value})
	if err != nil {
		return fmt.Errorf("fenceredis: HSET %s %s for %s: %w", key, field, resource, printable.Error(err))
	}
	return verdict(resource, token, r.Status, r.Highest)
}

// Highest returns the highest token resource has seen, and false if it has seen none.
func (f *Fence) Highest(ctx context.Context, resource string) (int64, bool, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return 0, false, err
	}
	c, ok := f.c.(redis.StringCmdable)
	if !ok {
		return 0, false, fmt.Errorf("fenceredis: %T cannot GET", f.c)
	}
	v, err := c.Get(ctx, wire.FenceKey(resource)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("fenceredis: GET %s: %w", wire.FenceKey(resource), err)
	}
	h, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("fenceredis: %s holds %q, not a token", wire.FenceKey(resource), v)
	}
	return h, true, nil
}

// verify asks Verify about token unless the fence key holds at least token (raise.Check).
func (f *Fence) verify(ctx context.Context, resource string, token int64) error {
	return raise.Check(ctx, f.Verify, f.Highest, resource, token)
}

func check(resource string, token int64, key string) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	if err := fence.ValidateToken(token); err != nil {
		return err
	}
	if Slot(key) != Slot(wire.FenceKey(resource)) {
		return fmt.Errorf("%w: %q is in slot %d, resource %q in slot %d: give the key the hash tag {%s}",
			ErrCrossSlot, key, Slot(key), resource, Slot(wire.FenceKey(resource)), resource)
	}
	return nil
}

// verdict turns the script's reply into nil or a *fence.StaleTokenError.
func verdict(resource string, token, status int64, highest string) error {
	switch status {
	case luascripts.StatusOK:
		return nil
	case luascripts.StatusStale:
		h, err := strconv.ParseInt(highest, 10, 64)
		if err != nil {
			return fmt.Errorf("fenceredis: the fence of %s replied stale with %q, not a token", resource, highest)
		}
		return &fence.StaleTokenError{Resource: resource, Token: token, Highest: h}
	default:
		return fmt.Errorf("fenceredis: unexpected status %d from the fence script", status)
	}
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag — the text
// between the first '{' and the first '}' after it, when not empty — or of the whole key,
// modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

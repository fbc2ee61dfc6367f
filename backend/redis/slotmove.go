package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// How a routeBySlot call waits for a slot migration (followSlotMove): it pauses
// slotMovePauseMin before its first attempt again, doubling up to slotMovePauseMax, until its
// ctx's deadline, or for at most slotMoveWait when its ctx has none.
const (
	slotMovePauseMin = time.Millisecond
	slotMovePauseMax = 16 * time.Millisecond
	slotMoveWait     = 5 * time.Second
)

// slotMoving reports whether err is a Cluster node's refusal to run a command because the
// command's slot is being migrated: TRYAGAIN (a multi-key command whose keys are split between
// the migrating and the importing node, or are not all on the importing node yet — a key a
// script would create counts as missing, so every multi-key script that writes a key that
// does not exist yet is refused on both nodes until the migration ends), or ASK or MOVED left
// over when the Cluster client ran out of redirections (or for a call on a master's own client,
// which follows none). None of them ran the command: sending it again is safe.
func slotMoving(err error) bool {
	return err != nil && (goredis.HasErrorPrefix(err, "TRYAGAIN") || goredis.HasErrorPrefix(err, "ASK") ||
		goredis.HasErrorPrefix(err, "MOVED"))
}

// followSlotMove runs call, a routeBySlot script call, and again for as long as it fails
// because its slot is being migrated (slotMoving), after pauses of slotMovePauseMin doubling up
// to slotMovePauseMax, until it runs (or fails otherwise), limit has passed since the first
// failure (limit ≤ 0: no limit but ctx's deadline, or slotMoveWait for a ctx without one), or
// ctx's deadline would come before the next attempt. It then returns the last outcome: a
// refusal that is still slotMoving is retryable, and known not to have run.
//
// Why: while a slot is being migrated (CLUSTER SETSLOT MIGRATING and IMPORTING, then MIGRATE of
// its keys, then SETSLOT NODE), Redis refuses with TRYAGAIN every multi-key command whose keys
// are not all on one side, and a script's keys that do not exist (acquire_at's waiter queue,
// which exists only while someone waits; a new session's keys) are never all anywhere: acquire_at
// on a lease whose slot moves is refused from the MIGRATING until the importing master owns the
// slot. go-redis's Cluster client retries TRYAGAIN up to MaxRedirects times with its retry
// backoff (10–90 ms in all), then fails; the engine then retried after its own backoff, which
// doubles with each failure up to the renewal interval: a Lock during the migration of a slot
// that took about a second returned about a second after the migration ended
// (TestClusterLockFollowsSlotMigration). Waiting here, the call runs a few milliseconds after
// the slot settles. Redis never runs the script on part of its keys (the refusal is made before
// the script starts), so a lease is still granted once at a time and its token still rises.
//
// The pauses are short because go-redis's own retries space the attempts already; the loop only
// keeps the call from giving up. A routing refusal that outlasts the call's deadline (a slow
// migration, or one left half-done, which needs redis-cli --cluster fix) fails the call with it,
// retryable; the wait was capped at slotMoveWait whatever the deadline, so that a call with a
// deadline of 10 s (the engine's call timeout for a TTL of 30 s) failed after 5 s
// (TestClusterAcquireWaitsForSlowMigrationWithinDeadline). A MOVED has the
// client's slot map reloaded (a master's own client, used WithWaitReplicas, follows none): the
// next attempt goes to the new owner.
func followSlotMove[R any](ctx context.Context, b *Backend, limit time.Duration, call func() (R, error)) (R, error) {
	r, err := call()
	if err == nil || !b.cluster || !slotMoving(err) {
		return r, err
	}
	end := time.Now().Add(slotMoveWait)
	if limit > 0 {
		end = time.Now().Add(limit)
	}
	if d, ok := ctx.Deadline(); ok && (limit <= 0 || d.Before(end)) {
		end = d
	}
	pause := slotMovePauseMin
	for slotMoving(err) {
		if time.Until(end) < pause {
			break
		}
		if b.cc != nil && goredis.HasErrorPrefix(err, "MOVED") {
			b.cc.ReloadState(ctx)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, err // the last refusal: known not to have run
		case <-t.C:
		}
		pause = min(2*pause, slotMovePauseMax)
		r, err = call()
	}
	return r, err
}

// halfLeft is half the time left before ctx's deadline (0 without one: slotMoveWait), the
// share of a keep-alive's time its session call and then its round may spend waiting for a
// slot migration, so that what the keep-alive renewed is reported before its timeout.
func halfLeft(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(d)/2, time.Nanosecond)
}

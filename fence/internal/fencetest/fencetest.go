// Package fencetest holds the scenarios every fence helper's tests run: a paused ex-holder's
// stale write after a newer holder wrote (with real Simba clients on a real backend), and
// concurrent writers with interleaved tokens.
package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/spi"
)

// WriteFunc writes value to the fenced resource with token; a stale token must fail with an
// error matching fence.ErrStaleToken.
type WriteFunc func(ctx context.Context, token int64, value string) error

// ReadFunc returns the resource's current value.
type ReadFunc func(ctx context.Context) (string, error)

// errPaused is what the paused backend answers with: a call whose outcome is unknown.
var errPaused = fmt.Errorf("%w: fencetest: the process is paused", spi.ErrUnavailable)

// paused is a backend whose process can be paused: while paused, every call fails (as if the
// process were SIGSTOPped, its keep-alives never leave), so its session expires on the server.
type paused struct {
	spi.Backend
	on atomic.Bool
}

func (p *paused) KeepAlive(ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	if p.on.Load() {
		return spi.KeepAlive{}, errPaused
	}
	return p.Backend.KeepAlive(ctx, s, names, groups)
}

func (p *paused) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	if p.on.Load() {
		return spi.Acquire{}, errPaused
	}
	return p.Backend.Acquire(ctx, s, name)
}

// PausedHolder runs the fencing story on real Simba clients: holder A (on backend a) locks
// name and writes; A's process pauses (its backend calls stop, so its session expires on the
// server); holder B (on backend b, the same store) locks name with a higher token and writes;
// A resumes and writes with its old token, which the resource must refuse with a
// *fence.StaleTokenError naming both tokens. It checks that the resource then holds B's
// value, and returns A's and B's tokens.
func PausedHolder(t *testing.T, a, b spi.Backend, name string, write WriteFunc, read ReadFunc) (tokenA, tokenB int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pa := &paused{Backend: a}
	ttl := simba.WithTTL(1500 * time.Millisecond)
	ca, err := simba.New(pa, ttl, simba.WithOwner("holder-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { pa.on.Store(false); _ = ca.Close(context.Background()) }()
	cb, err := simba.New(b, ttl, simba.WithOwner("holder-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cb.Close(context.Background()) }()

	heldA, err := ca.Lock(ctx, name)
	if err != nil {
		t.Fatalf("A: Lock: %v", err)
	}
	tokenA = heldA.Token()
	if err := write(ctx, tokenA, "written by A"); err != nil {
		t.Fatalf("A's write with token %d while it holds the lock: %v", tokenA, err)
	}

	pa.on.Store(true) // A pauses: a GC pause, a SIGSTOP, a partition
	heldB, err := cb.Lock(ctx, name)
	if err != nil {
		t.Fatalf("B: Lock after A paused: %v", err)
	}
	tokenB = heldB.Token()
	if tokenB <= tokenA {
		t.Fatalf("B's token %d is not above A's %d", tokenB, tokenA)
	}
	if err := write(ctx, tokenB, "written by B"); err != nil {
		t.Fatalf("B's write with token %d: %v", tokenB, err)
	}

	// A resumes, still believing in its term, and writes with its old token.
	err = write(ctx, tokenA, "stale write by A")
	var stale *fence.StaleTokenError
	if !errors.Is(err, fence.ErrStaleToken) || !errors.As(err, &stale) {
		t.Fatalf("A's stale write with token %d after B wrote with %d: got %v, want a *fence.StaleTokenError", tokenA, tokenB, err)
	}
	if stale.Token != tokenA || stale.Highest != tokenB {
		t.Fatalf("stale error %+v: want token %d, highest %d", stale, tokenA, tokenB)
	}
	if got, err := read(ctx); err != nil || got != "written by B" {
		t.Fatalf("resource holds %q (%v) after A's stale write, want B's value", got, err)
	}
	pa.on.Store(false)
	if err := heldB.Unlock(ctx); err != nil {
		t.Errorf("B: Unlock: %v", err)
	}
	_ = heldA.Unlock(ctx) // lost long ago; Unlock exactly once
	return tokenA, tokenB
}

// Interleaved runs writers goroutines against one resource, each writing perWriter times with
// tokens drawn from a shuffled, interleaved sequence (a seeded random order, logged so a
// failure can be replayed with the seed), the value being the token in decimal. It checks that
// every refusal is a *fence.StaleTokenError whose Highest exceeds its token, that the highest
// token was accepted, and that the resource ends holding the highest token's value.
func Interleaved(t *testing.T, seed uint64, writers, perWriter int, write WriteFunc, read ReadFunc) {
	t.Helper()
	t.Logf("seed %d (%d writers × %d writes)", seed, writers, perWriter)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := writers * perWriter
	tokens := make([]int64, n)
	base := int64(1_700_000_000_000_000) // microsecond-scale, as Simba's tokens are
	for i := range tokens {
		tokens[i] = base + int64(i/2) // pairs of equal tokens: "at least the highest" admits both
	}
	rng.Shuffle(n, func(i, j int) { tokens[i], tokens[j] = tokens[j], tokens[i] })
	highest := base + int64((n-1)/2)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted = map[int64]bool{}
		rejected int
		failures []string
	)
	for w := range writers {
		wg.Add(1)
		go func(mine []int64) {
			defer wg.Done()
			for _, tok := range mine {
				err := write(ctx, tok, strconv.FormatInt(tok, 10))
				mu.Lock()
				var stale *fence.StaleTokenError
				switch {
				case err == nil:
					accepted[tok] = true
				case errors.As(err, &stale) && errors.Is(err, fence.ErrStaleToken) && stale.Token == tok && stale.Highest > tok:
					rejected++
				default:
					failures = append(failures, fmt.Sprintf("token %d: %v", tok, err))
				}
				mu.Unlock()
			}
		}(tokens[w*perWriter : (w+1)*perWriter])
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("seed %d: %d writes failed otherwise than stale, e.g. %s", seed, len(failures), failures[0])
	}
	if !accepted[highest] {
		t.Fatalf("seed %d: the highest token %d was refused", seed, highest)
	}
	got, err := read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(highest, 10); got != want {
		t.Fatalf("seed %d: the resource holds %q, want the highest token's value %q", seed, got, want)
	}
	t.Logf("%d writes accepted, %d refused as stale", len(accepted), rejected)
}

// Seed returns a fresh seed for Interleaved, or the one in $FENCE_SEED to replay a failure.
func Seed(t *testing.T) uint64 {
	t.Helper()
	if s, err := strconv.ParseUint(getenv("FENCE_SEED"), 10, 64); err == nil {
		return s
	}
	return rand.Uint64()
}

func getenv(k string) string { return os.Getenv(k) }

// HostileTokens checks a resource whose writes are verified against the lease name (with
// fence.LeaseVerifier on b's backend): tokens the lease never granted — the int64 maximum,
// the holder's token plus one, a token of another lease — are refused with an error matching
// fence.ErrUnverifiedToken and write nothing, before and after the holder's first write; the
// holder's writes go through; and after the holder unlocks, the next holder's write goes
// through too and the old token is stale. Without the check, the first hostile token raises
// the resource's highest for good and locks every legitimate holder out.
func HostileTokens(t *testing.T, b spi.Backend, name string, write WriteFunc, read ReadFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := simba.New(b, simba.WithOwner("holder"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()

	held, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatalf("Lock %s: %v", name, err)
	}
	// A token of another lease, granted after name's: on SQL and Redis (clock-based tokens),
	// ZooKeeper (zxids) and etcd (revisions) it is above the holder's.
	other, err := c.Lock(ctx, name+"-other")
	if err != nil {
		t.Fatalf("Lock %s-other: %v", name, err)
	}
	if other.Token() <= held.Token() {
		t.Fatalf("lease %s-other's token %d is not above lease %s's %d: this backend's tokens are per-name counters", name, other.Token(), name, held.Token())
	}
	hostile := []int64{math.MaxInt64, held.Token() + 1, other.Token()}
	refused := func(when string) {
		t.Helper()
		for _, tok := range hostile {
			err := write(ctx, tok, "hostile")
			var unverified *fence.UnverifiedTokenError
			if !errors.Is(err, fence.ErrUnverifiedToken) || !errors.As(err, &unverified) {
				t.Fatalf("%s: write with token %d the lease %q never granted (it holds %d): got %v, want a *fence.UnverifiedTokenError",
					when, tok, name, held.Token(), err)
			}
		}
	}
	refused("before the holder wrote")
	if err := write(ctx, held.Token(), "by the first holder"); err != nil {
		t.Fatalf("the holder's write with token %d after hostile tokens: %v", held.Token(), err)
	}
	refused("after the holder wrote")
	if err := write(ctx, held.Token(), "again by the first holder"); err != nil {
		t.Fatalf("the holder's second write with token %d: %v", held.Token(), err)
	}
	if got, err := read(ctx); err != nil || got != "again by the first holder" {
		t.Fatalf("resource holds %q (%v), want the holder's value", got, err)
	}
	first := held.Token()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, next.Token(), "by the next holder"); err != nil {
		t.Fatalf("the next holder's write with token %d: %v", next.Token(), err)
	}
	if err := write(ctx, first, "stale"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("the first holder's token %d after the next holder's %d: got %v, want fence.ErrStaleToken", first, next.Token(), err)
	}
	if got, err := read(ctx); err != nil || got != "by the next holder" {
		t.Fatalf("resource holds %q (%v), want the next holder's value", got, err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

package fenceredis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	redisbe "github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fenceredis"
	"github.com/simba-go/simba/fence/internal/fencetest"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
)

func unique(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// server is one Redis deployment: a client, and the DSN of a Simba backend on it.
type server struct {
	name string
	c    goredis.UniversalClient
	dsn  string
}

func standalone(t *testing.T) server {
	addr := testenv.Redis(t)
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(t, "Redis", err.Error())
	}
	return server{"standalone", c, "redis://" + addr}
}

func cluster(t *testing.T) server {
	addrs := testenv.RedisCluster(t)
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(t, "Redis Cluster", err.Error())
	}
	return server{"cluster", c, "redis+cluster://" + strings.Join(addrs, ",")}
}

var servers = []func(t *testing.T) server{standalone, cluster}

// cleanup deletes the test's keys (fence keys never expire).
func cleanup(t *testing.T, c goredis.UniversalClient, keys ...string) {
	t.Cleanup(func() {
		for _, k := range keys {
			c.Del(context.Background(), k)
		}
	})
}

// TestPausedHolderRejected: holder A locks a name through Simba's Redis backend and SETs;
// A pauses, its session expires, B locks and SETs; A's SET with its old token is refused, on
// standalone Redis and on the Cluster.
func TestPausedHolderRejected(t *testing.T) {
	for _, open := range servers {
		s := open(t)
		t.Run(s.name, func(t *testing.T) {
			backend := func() *redisbe.Backend {
				b, err := redisbe.Open(s.dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				return b
			}
			resource := "invoice-" + unique(t)
			key := "invoice:{" + resource + "}:status"
			cleanup(t, s.c, key, wire.FenceKey(resource))
			f := fenceredis.New(s.c)
			write := func(ctx context.Context, token int64, value string) error {
				return f.Set(ctx, resource, token, key, value)
			}
			read := func(ctx context.Context) (string, error) { return s.c.Get(ctx, key).Result() }
			_, tokenB := fencetest.PausedHolder(t, backend(), backend(), resource, write, read)
			if h, ok, err := f.Highest(context.Background(), resource); err != nil || !ok || h != tokenB {
				t.Fatalf("Highest = %d, %v, %v; want %d", h, ok, err, tokenB)
			}
		})
	}
}

// TestInterleavedWriters: many goroutines SET (and HSET) one resource with interleaved
// tokens; the key ends with the highest token's value.
func TestInterleavedWriters(t *testing.T) {
	for _, open := range servers {
		s := open(t)
		t.Run(s.name, func(t *testing.T) {
			f := fenceredis.New(s.c)
			for round := range 3 {
				resource := "acct-" + unique(t)
				key, hash := "acct:{"+resource+"}", "acct:{"+resource+"}:h"
				cleanup(t, s.c, key, hash, wire.FenceKey(resource))
				if round%2 == 0 {
					fencetest.Interleaved(t, fencetest.Seed(t), 32, 8,
						func(ctx context.Context, token int64, v string) error { return f.Set(ctx, resource, token, key, v) },
						func(ctx context.Context) (string, error) { return s.c.Get(ctx, key).Result() })
				} else {
					fencetest.Interleaved(t, fencetest.Seed(t), 32, 8,
						func(ctx context.Context, token int64, v string) error {
							return f.HSet(ctx, resource, token, hash, "balance", v)
						},
						func(ctx context.Context) (string, error) { return s.c.HGet(ctx, hash, "balance").Result() })
				}
			}
		})
	}
}

// TestLargeTokensCompareExactly: tokens above 2^53 (where Lua's numbers stop being exact)
// still compare exactly, as decimal text.
func TestLargeTokensCompareExactly(t *testing.T) {
	s := standalone(t)
	ctx := context.Background()
	f := fenceredis.New(s.c)
	resource := "big-" + unique(t)
	key := "{" + resource + "}"
	cleanup(t, s.c, key, wire.FenceKey(resource))
	const big = int64(1)<<62 + 1
	if err := f.Set(ctx, resource, big, key, "hi"); err != nil {
		t.Fatal(err)
	}
	var stale *fence.StaleTokenError
	if err := f.Set(ctx, resource, big-1, key, "lo"); !errors.As(err, &stale) || stale.Highest != big {
		t.Fatalf("token 2^62 after 2^62+1: %v", err)
	}
	if err := f.Set(ctx, resource, 9, key, "tiny"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 9 (shorter text) after 2^62+1: %v", err)
	}
	if err := f.Set(ctx, resource, big, key, "again"); err != nil {
		t.Fatalf("the same token again: %v", err)
	}
}

// TestCorruptFenceKey: a fence key holding junk is an error, never coerced; the error quotes
// the junk escaped (a terminal escape sequence or a bidirectional override in it reached the
// text raw before mends5).
func TestCorruptFenceKey(t *testing.T) {
	s := standalone(t)
	ctx := context.Background()
	resource := "junk-" + unique(t)
	key := "{" + resource + "}"
	cleanup(t, s.c, key, wire.FenceKey(resource))
	for _, junk := range []string{"0x10", "-5", "1e9", "007", " 5", "\x1b[2J", "5\u202e"} {
		s.c.Set(ctx, wire.FenceKey(resource), junk, 0)
		err := fenceredis.New(s.c).Set(ctx, resource, 5, key, "v")
		if err == nil || errors.Is(err, fence.ErrStaleToken) || !strings.Contains(err.Error(), "corrupt_token") {
			t.Errorf("fence key %q: %v", junk, err)
		}
		if msg := fmt.Sprint(err); strings.ContainsAny(msg, "\x1b\u202e") {
			t.Errorf("fence key %q: the error's text carries it raw: %q", junk, msg)
		}
		if s.c.Exists(ctx, key).Val() != 0 {
			t.Fatalf("fence key %q: the guarded key was written", junk)
		}
	}
}

// TestCrossSlot: a key without the resource's hash tag is refused before any I/O.
func TestCrossSlot(t *testing.T) {
	f := fenceredis.New(goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}))
	err := f.Set(context.Background(), "invoice-42", 1, "invoice:42:status", "paid")
	if !errors.Is(err, fenceredis.ErrCrossSlot) {
		t.Fatalf("key without the hash tag: %v", err)
	}
	if err := f.HSet(context.Background(), "a b", 1, "{a b}", "f", "v"); !errors.Is(err, fence.ErrInvalidResource) {
		t.Fatalf("bad resource: %v", err)
	}
}

// TestSlotMatchesCluster: Slot agrees with CLUSTER KEYSLOT.
func TestSlotMatchesCluster(t *testing.T) {
	s := cluster(t)
	ctx := context.Background()
	keys := []string{"foo", "{user1000}.following", "a{}b", "{}{x}", "x{y", "x}y{z}", wire.FenceKey("invoice-42")}
	for i := range 100 {
		keys = append(keys, "k"+strconv.Itoa(i), "p:{r"+strconv.Itoa(i)+"}:q")
	}
	for _, k := range keys {
		want, err := s.c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := fenceredis.Slot(k); int64(got) != want {
			t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT = %d", k, got, want)
		}
	}
}

// TestHostileTokensRefused: with Verify = fence.LeaseVerifier on a Redis lease backend,
// tokens the lease never granted (the int64 maximum, another lease's) write nothing and leave
// the fence key alone, so the holders after them are not locked out.
func TestHostileTokensRefused(t *testing.T) {
	for _, open := range servers {
		s := open(t)
		t.Run(s.name, func(t *testing.T) {
			b, err := redisbe.Open(s.dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			resource := "invoice-" + unique(t)
			key := "invoice:{" + resource + "}:status"
			cleanup(t, s.c, key, wire.FenceKey(resource))
			f := fenceredis.New(s.c)
			f.Verify = fence.LeaseVerifier(b, nil)
			write := func(ctx context.Context, token int64, value string) error {
				return f.Set(ctx, resource, token, key, value)
			}
			read := func(ctx context.Context) (string, error) { return s.c.Get(ctx, key).Result() }
			fencetest.HostileTokens(t, b, resource, write, read)
		})
	}
}

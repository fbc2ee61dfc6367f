package luacheck

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
)

// TestSourcesMatchShippedFiles: each wrapper's Source is byte for byte the shipped lua/<name>.lua,
// carries the generated-code header, and its SHA1 constant is the SHA1 of exactly that text.
func TestSourcesMatchShippedFiles(t *testing.T) {
	if len(luascripts.All) == 0 {
		t.Fatal("no scripts generated")
	}
	for _, s := range luascripts.All {
		data, err := os.ReadFile(filepath.Join("..", "..", "lua", s.Name+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != s.Source {
			t.Errorf("%s: Source differs from lua/%s.lua", s.Name, s.Name)
		}
		if !strings.HasPrefix(s.Source, "-- Code generated ") || !strings.Contains(strings.SplitN(s.Source, "\n", 2)[0], "DO NOT EDIT.") {
			t.Errorf("%s: no generated-code header", s.Name)
		}
		sum := sha1.Sum([]byte(s.Source))
		if got := hex.EncodeToString(sum[:]); got != s.SHA1 {
			t.Errorf("%s: SHA1 constant %s, SHA1 of Source %s", s.Name, s.SHA1, got)
		}
		if strings.Contains(s.Source, "${") {
			t.Errorf("%s: unsubstituted placeholder in the source", s.Name)
		}
	}
}

// TestScriptLoadReturnsGeneratedSHA1: Redis accepts every script and computes the same SHA1.
func TestScriptLoadReturnsGeneratedSHA1(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	for _, s := range luascripts.All {
		sha, err := c.ScriptLoad(ctx, s.Source).Result()
		if err != nil {
			t.Errorf("SCRIPT LOAD %s: %v", s.Name, err)
			continue
		}
		if sha != s.SHA1 {
			t.Errorf("SCRIPT LOAD %s returned %s, generated constant is %s", s.Name, sha, s.SHA1)
		}
	}
	if err := luascripts.LoadAll(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// TestNoScriptFallback: after SCRIPT FLUSH a bare EVALSHA fails with NOSCRIPT, Run still works
// (EVAL), and afterwards the script is cached again so EVALSHA works. It flushes the script
// cache of a private redis-server (testenv.PrivateRedis), never the shared server's: that one
// serves other packages' tests at the same time, whose EVALSHAs a flush would fail.
func TestNoScriptFallback(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testenv.PrivateRedis(t)})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	g := newName("flush")
	keys := luascripts.MembersKeys{Group: wire.GroupKey(g)}
	args := luascripts.MembersArgs{GroupName: g}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	err := luascripts.Members.EvalSha(ctx, c, keys, args).Err()
	if !luascripts.IsNoScript(err) {
		t.Fatalf("EVALSHA after SCRIPT FLUSH: %v, want NOSCRIPT", err)
	}
	sid, _ := open(t, c, "flush", 5*time.Second) // Run of open_session after the flush: EVAL fallback
	r, err := luascripts.Members.Run(ctx, c, keys, args)
	if err != nil {
		t.Fatalf("Run after SCRIPT FLUSH: %v", err)
	}
	if len(r.Members) != 0 {
		t.Fatalf("members of a fresh group: %v", r.Members)
	}
	v, err := luascripts.Members.EvalSha(ctx, c, keys, args).Result()
	if err != nil {
		t.Fatalf("EVALSHA after the EVAL fallback: %v", err)
	}
	if _, err := luascripts.Members.Decode(v); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Exists(ctx, wire.SessionKey(sid)).Result(); err != nil || ok != 1 {
		t.Fatalf("session opened through the fallback does not exist: %d %v", ok, err)
	}
}

// TestBuildChecksListLengths: list arguments must match their list keys (no Redis needed).
func TestBuildChecksListLengths(t *testing.T) {
	_, _, err := luascripts.KeepAlive.Build(luascripts.KeepAliveKeys{Leases: []string{wire.LeaseKey("a")}}, luascripts.KeepAliveArgs{})
	if !errors.Is(err, luascripts.ErrArgs) {
		t.Fatalf("Build with 1 lease key and 0 names: %v, want ErrArgs", err)
	}
	k, a, err := luascripts.KeepAlive.Build(
		luascripts.KeepAliveKeys{Session: "s", SessionLeases: "l", SessionGroups: "g", Leases: []string{"k1", "k2"}, Groups: []string{"g1"}},
		luascripts.KeepAliveArgs{SessionID: "sid", Names: []string{"n1", "n2"}, GroupNames: []string{"G1"}})
	if err != nil {
		t.Fatal(err)
	}
	wantK := []string{"s", "l", "g", "k1", "k2", "g1"}
	wantA := []any{"sid", int64(2), "n1", "n2", "G1"}
	if strings.Join(k, ",") != strings.Join(wantK, ",") {
		t.Errorf("KEYS %q, want %q", k, wantK)
	}
	if len(a) != len(wantA) {
		t.Fatalf("ARGV %v, want %v", a, wantA)
	}
	for i := range a {
		if a[i] != wantA[i] {
			t.Errorf("ARGV[%d] = %#v, want %#v", i+1, a[i], wantA[i])
		}
	}
}

// TestDecodeRejectsWrongShapes: a reply of another shape is an ErrReply, never a zero value.
func TestDecodeRejectsWrongShapes(t *testing.T) {
	for _, v := range []any{nil, "x", int64(1), []any{int64(1)}, []any{int64(1), "1", int64(3), "", ""}, []any{"1", int64(1), int64(3), "", ""}} {
		if _, err := luascripts.Acquire.Decode(v); !errors.Is(err, luascripts.ErrReply) {
			t.Errorf("Decode(%#v): %v, want ErrReply", v, err)
		}
	}
	r, err := luascripts.Acquire.Decode([]any{luascripts.StatusHeldBy, int64(7), int64(900), "sid", "own"})
	if err != nil {
		t.Fatal(err)
	}
	want := luascripts.AcquireReply{Status: luascripts.StatusHeldBy, Token: 7, RemainingMS: 900, Holder: "sid", Owner: "own"}
	if r != want {
		t.Fatalf("Decode = %+v, want %+v", r, want)
	}
	ka, err := luascripts.KeepAlive.Decode([]any{int64(1), int64(10), int64(20), []any{[]any{"n", int64(3)}}, []any{[]any{"a", "b"}, []any{}}, []any{int64(700), int64(-1)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ka.Held) != 1 || ka.Held[0] != (luascripts.Held{Name: "n", Token: 3}) || len(ka.Members) != 2 || len(ka.Members[0]) != 2 || len(ka.Members[1]) != 0 ||
		!slices.Equal(ka.LapseMS, []int64{700, -1}) {
		t.Fatalf("KeepAlive.Decode = %+v", ka)
	}
	if _, err := luascripts.KeepAlive.Decode([]any{int64(1), int64(10), int64(20), []any{[]any{"n", "3"}}, []any{}, []any{}}); !errors.Is(err, luascripts.ErrReply) {
		t.Fatalf("a string token decoded: %v", err)
	}
	if _, err := luascripts.KeepAlive.Decode([]any{int64(1), int64(10), int64(20), []any{}, []any{[]any{"a"}}, []any{"700"}}); !errors.Is(err, luascripts.ErrReply) {
		t.Fatalf("a string lapse_ms decoded: %v", err)
	}
}

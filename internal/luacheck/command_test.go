package luacheck

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
)

// unsent is a hook that sends nothing: the commands are built and handed to Process as usual,
// and no server is needed.
type unsent struct{}

func (unsent) DialHook(next redis.DialHook) redis.DialHook { return next }
func (unsent) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { return nil }
}
func (unsent) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(context.Context, []redis.Cmder) error { return nil }
}

// wrapped is a Scripter of another kind than go-redis's own clients: the generated code sends
// through its EvalSha and Eval.
type wrapped struct{ redis.Scripter }

// scriptCall is one call of a generated script: its EvalSha and Eval, and what go-redis's own
// EvalSha and Eval would send for the same call (the KEYS and ARGV of its Build).
type scriptCall struct {
	name          string
	evalSha, eval func(context.Context, redis.Scripter) *redis.Cmd
	build         func() ([]string, []any, error)
	sha, src      string
}

func callOf[K, A any](name string, s interface {
	EvalSha(context.Context, redis.Scripter, K, A) *redis.Cmd
	Eval(context.Context, redis.Scripter, K, A) *redis.Cmd
	Build(K, A) ([]string, []any, error)
	Info() luascripts.Info
}, keys K, args A) scriptCall {
	return scriptCall{
		name:    name,
		evalSha: func(ctx context.Context, c redis.Scripter) *redis.Cmd { return s.EvalSha(ctx, c, keys, args) },
		eval:    func(ctx context.Context, c redis.Scripter) *redis.Cmd { return s.Eval(ctx, c, keys, args) },
		build:   func() ([]string, []any, error) { return s.Build(keys, args) },
		sha:     s.Info().SHA1, src: s.Info().Source,
	}
}

// TestCommandsAsGoRedisBuildsThem: a script's EvalSha and Eval send, on a client, a pipeline
// and a wrapping Scripter, the command go-redis's own EvalSha and Eval build from the script's
// KEYS and ARGV: the same arguments of the same types in the same order, so the same bytes.
// And they build it as one list: on a client, EvalSha allocates that list, the boxes of the
// values that need one (non-empty strings, integers from 256) and the command. Until 2026-12-06
// it allocated 4 more: KEYS and ARGV as lists of their own, and go-redis's boxes of "evalsha"
// and the SHA1.
func TestCommandsAsGoRedisBuildsThem(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: unsent
	c.AddHook(unsent{})
	t.Cleanup(func() { c.Close() })
	calls := []scriptCall{
		callOf("acquire", luascripts.Acquire, luascripts.AcquireKeys{Lease: "simba:lease:{n}", Session: "simba:session:{s}", SessionLeases: "simba:session-leases:{s}", Waiters: "w", Waiting: "x"},
			luascripts.AcquireArgs{SessionID: "0123456789abcdef0123456789abcdef", Name: "n", Queued: 1}),
		callOf("release", luascripts.Release, luascripts.ReleaseKeys{Lease: "l", SessionLeases: "sl"},
			luascripts.ReleaseArgs{SessionID: "s", Name: "n", Token: 1 << 52}),
		callOf("acquire_at", luascripts.AcquireAt, luascripts.AcquireAtKeys{Lease: "l", Waiters: "w", Waiting: "x"},
			luascripts.AcquireAtArgs{SessionID: "s", Owner: "o", ExpiresMS: 1 << 41}),
		callOf("keep_alive", luascripts.KeepAlive, luascripts.KeepAliveKeys{Session: "s", SessionLeases: "l", SessionGroups: "g", Leases: []string{"k1", "k2"}, Groups: []string{"g1"}},
			luascripts.KeepAliveArgs{SessionID: "sid", Names: []string{"n1", "n2"}, GroupNames: []string{"G1"}}),
		callOf("release_leases (no keys)", luascripts.ReleaseLeases, luascripts.ReleaseLeasesKeys{}, luascripts.ReleaseLeasesArgs{SessionID: "s"}),
		callOf("release_leases", luascripts.ReleaseLeases, luascripts.ReleaseLeasesKeys{Leases: []string{"a", "b"}},
			luascripts.ReleaseLeasesArgs{SessionID: "s", Names: []string{"a", "b"}, Tokens: []int64{7, 1 << 40}}),
	}
	for _, call := range calls {
		k, a, err := call.build()
		if err != nil {
			t.Fatalf("%s: Build: %v", call.name, err)
		}
		for _, via := range []struct {
			name string
			c    redis.Scripter
		}{{"client", c}, {"pipeline", c.Pipeline()}, {"wrapper", wrapped{c}}} {
			for _, m := range []struct {
				name      string
				got, want *redis.Cmd
			}{
				{"EvalSha", call.evalSha(ctx, via.c), c.EvalSha(ctx, call.sha, k, a...)},
				{"Eval", call.eval(ctx, via.c), c.Eval(ctx, call.src, k, a...)},
			} {
				if got, want := m.got.Args(), m.want.Args(); !reflect.DeepEqual(got, want) {
					t.Errorf("%s %s on a %s sends %s, want %s", call.name, m.name, via.name, typed(got), typed(want))
				}
				if err := m.got.Err(); err != nil {
					t.Errorf("%s %s on a %s: %v", call.name, m.name, via.name, err)
				}
			}
		}
		boxed := len(k)
		for _, v := range a {
			switch v := v.(type) {
			case string:
				if v != "" {
					boxed++
				}
			case int64:
				if v < 0 || v >= 256 {
					boxed++
				}
			}
		}
		got := testing.AllocsPerRun(100, func() { call.evalSha(ctx, c) })
		if want := float64(boxed + 2); got > want {
			t.Errorf("%s EvalSha on a client allocated %.0f times, want at most %.0f (its list, %d boxes, the command)", call.name, got, want, boxed)
		}
	}
}

// typed renders a command's arguments with their types, which decide their bytes.
func typed(args []any) string {
	s := "["
	for i, a := range args {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%T(%v)", a, a)
	}
	return s + "]"
}

package redis

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// probeHook records the commands sent (pipelined ones too) and fails PING while fail is set.
type probeHook struct {
	fail atomic.Bool
	mu   sync.Mutex
	cmds []string
}

func (h *probeHook) record(cmd goredis.Cmder) {
	h.mu.Lock()
	h.cmds = append(h.cmds, cmd.Name())
	h.mu.Unlock()
}

func (h *probeHook) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.cmds
	h.cmds = nil
	return out
}

func (h *probeHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *probeHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.record(cmd)
		if cmd.Name() == "ping" && h.fail.Load() {
			cmd.SetErr(errors.New("probe: no reply"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (h *probeHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, c := range cmds {
			h.record(c)
		}
		return next(ctx, cmds)
	}
}

// TestKeepAliveAfterFailureProvesRoundTripFirst: after a keep-alive fails, the next one sends
// a PING before renewing, and renews nothing if the PING fails. A one-way partition (chaos
// harness) lets a retried renewal reach the server on a pooled connection while its reply
// cannot come back, so the session outlives the client's deadline by up to a TTL.
func TestKeepAliveAfterFailureProvesRoundTripFirst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(testing.TB) goredis.UniversalClient
	}{
		{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.client(t)
			b := newBackend(t, c)
			ctx := context.Background()
			sid := open(t, b, time.Minute)
			name := uniq(t, "probe")
			if r, err := b.Acquire(ctx, sid, name); err != nil {
				t.Fatal(r, err)
			}
			h := &probeHook{}
			c.AddHook(h)
			renews := func(cmds []string) bool {
				return slices.ContainsFunc(cmds, func(c string) bool { return c == "evalsha" || c == "eval" })
			}
			probes := func(cmds []string) bool { return slices.Contains(cmds, "ping") }
			if _, err := b.KeepAlive(ctx, sid, []string{name}, nil); err != nil {
				t.Fatal(err)
			}
			if got := h.take(); probes(got) || !renews(got) {
				t.Fatalf("first keep-alive sent %q: want a renewal and no PING", got)
			}
			dead, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel()
			if _, err := b.KeepAlive(dead, sid, []string{name}, nil); err == nil {
				t.Fatal("keep-alive with a passed deadline succeeded")
			}
			h.take()
			h.fail.Store(true)
			if _, err := b.KeepAlive(ctx, sid, []string{name}, nil); err == nil {
				t.Fatal("keep-alive succeeded although its PING failed")
			}
			if got := h.take(); !probes(got) || renews(got) {
				t.Fatalf("keep-alive after a failure, PING failing, sent %q: want the PING and no renewal", got)
			}
			h.fail.Store(false)
			if ka, err := b.KeepAlive(ctx, sid, []string{name}, nil); err != nil || len(ka.Held) != 1 {
				t.Fatal(ka, err)
			}
			if got := h.take(); len(got) == 0 || got[0] != "ping" || !renews(got) {
				t.Fatalf("keep-alive after a failure sent %q: want the PING first, then the renewal", got)
			}
			if _, err := b.KeepAlive(ctx, sid, []string{name}, nil); err != nil {
				t.Fatal(err)
			}
			if got := h.take(); probes(got) || !renews(got) {
				t.Fatalf("keep-alive after a success sent %q: want a renewal and no PING", got)
			}
		})
	}
}

package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// firstKeepAlive opens a session on a new routeBySlot backend on c, takes a lease and joins a
// group, and returns the backend and the arguments of a keep-alive that renews both.
func firstKeepAlive(t *testing.T, c *goredis.ClusterClient) (*Backend, spi.SessionID, []string, []string) {
	t.Helper()
	b := newBackend(t, c)
	ctx := context.Background()
	sid := open(t, b, time.Minute)
	name, group := uniq(t, "firstka"), uniq(t, "firstka-g")
	if r, err := b.Acquire(ctx, sid, name); err != nil || r.Kind != spi.Granted {
		t.Fatal(r, err)
	}
	if _, err := b.Join(ctx, sid, group); err != nil {
		t.Fatal(err)
	}
	return b, sid, []string{name}, []string{group}
}

// TestClusterFirstKeepAliveRoundTrips: the first keep-alive of a Cluster backend that renews a
// lease or a group costs what every later one does: the session call and one pipelined round.
// It used to load all of the backend's scripts first (luascripts.LoadAll: one SCRIPT LOAD per
// script, one after the other, each sent to every master), 18 more round trips inside the
// keep-alive's timeout, and the keep-alive that first renews a new grant is the one that must
// confirm it before the grant's own bound, less than a renewal interval away: on a loaded
// 2-CPU machine the load took up to ~100 ms and the keep-alive timed out
// (TestTermNotPastRedisLease/cluster: "no keep-alive confirmed it").
func TestClusterFirstKeepAliveRoundTrips(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	// Every master knows the scripts, as after any earlier use (the SCRIPT LOADs a NOSCRIPT
	// costs are another test's: TestClusterKeepAliveNoScript). Warming up with another backend's
	// keep-alive was not enough: it loaded the keep-alive scripts only on the masters of that
	// backend's keys, and on a Cluster just started (CI) this backend's keys could sit on
	// another master, whose NOSCRIPT cost a load and a second pipeline (3 round trips).
	if err := luascripts.LoadAll(ctx, c); err != nil {
		t.Fatal(err)
	}
	b, sid, names, groups := firstKeepAlive(t, c)
	rec := &roundTrips{}
	onMasters(t, c, rec)
	// The session's call, then one pipeline on each master of the lease and the group.
	want := 1 + mastersOf(t, c, wire.LeaseKey(names[0]), wire.GroupKey(groups[0]))
	ka, err := b.KeepAlive(ctx, sid, names, groups)
	if err != nil || ka.Expired || len(ka.Held) != 1 || len(ka.Members[groups[0]]) != 1 {
		t.Fatal(ka, err)
	}
	if got := rec.list(); len(got) != want {
		t.Errorf("the first keep-alive of a lease and a group took %d round trips, want %d: %q", len(got), want, got)
	}
}

// roundTrips records the commands of each round trip through a client's hooks (a pipeline is
// one round trip), so that a count that is off says which round trip was extra.
type roundTrips struct {
	mu    sync.Mutex
	trips []string
}

func (r *roundTrips) add(cmds []goredis.Cmder) {
	var names []string
	for _, c := range cmds {
		names = append(names, fmt.Sprint(c.Args()...))
	}
	r.mu.Lock()
	r.trips = append(r.trips, strings.Join(names, " | "))
	r.mu.Unlock()
}

func (r *roundTrips) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.trips...)
}

func (r *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (r *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		r.add([]goredis.Cmder{cmd})
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		r.add(cmds)
		return next(ctx, cmds)
	}
}

// noScriptOnce answers the first pipelined EVALSHA of each script with NOSCRIPT (without
// sending it), as a master that lost its script cache (a restart, a failover to a replica that
// never ran the script) would. It counts the EVALSHAs it let through and the EVALs (and, with
// loadHook, the SCRIPT LOADs).
type noScriptOnce struct {
	mu    sync.Mutex // the masters' pipelines run at once
	seen  map[string]bool
	loads atomic.Int64
	shas  atomic.Int64
	evals atomic.Int64
}

func (h *noScriptOnce) DialHook(next goredis.DialHook) goredis.DialHook          { return next }
func (h *noScriptOnce) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (h *noScriptOnce) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		var send []goredis.Cmder
		for _, c := range cmds {
			switch c.Name() {
			case "evalsha":
				sha, _ := c.Args()[1].(string)
				h.mu.Lock()
				first := !h.seen[sha]
				h.seen[sha] = true
				h.mu.Unlock()
				if first {
					c.SetErr(goredis.ErrNoScript)
					continue
				}
				h.shas.Add(1)
			case "eval":
				h.evals.Add(1)
			}
			send = append(send, c)
		}
		if len(send) == 0 {
			return nil
		}
		return next(ctx, send)
	}
}

// loadHook, on the masters' clients, counts the SCRIPT LOADs and fails them while fail is set.
type loadHook struct {
	fail  bool
	loads *atomic.Int64
}

func (h loadHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h loadHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "script" {
			h.loads.Add(1)
			if h.fail {
				cmd.SetErr(errors.New("test: SCRIPT LOAD refused"))
				return cmd.Err()
			}
		}
		return next(ctx, cmd)
	}
}
func (h loadHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// TestClusterKeepAliveNoScript: a keep-alive whose pipelined calls meet NOSCRIPT loads their
// scripts on the masters that answered NOSCRIPT (one SCRIPT LOAD per script and master) and
// sends them again with EVALSHA in the same
// keep-alive; if a load fails, it sends them again with EVAL. Either way it succeeds.
func TestClusterKeepAliveNoScript(t *testing.T) {
	for _, failLoad := range []bool{false, true} {
		t.Run(map[bool]string{false: "load", true: "eval"}[failLoad], func(t *testing.T) {
			c := clusterClient(t)
			ctx := context.Background()
			b, sid, names, groups := firstKeepAlive(t, c)
			h := &noScriptOnce{seen: map[string]bool{}}
			onMasters(t, c, h)
			onMasters(t, c, loadHook{fail: failLoad, loads: &h.loads})
			ka, err := b.KeepAlive(ctx, sid, names, groups)
			if err != nil || ka.Expired || len(ka.Held) != 1 || len(ka.Members[groups[0]]) != 1 {
				t.Fatal(ka, err)
			}
			for _, s := range []string{luascripts.KeepAliveLeasesSHA1, luascripts.KeepAliveGroupSHA1} {
				if !h.seen[s] {
					t.Errorf("no EVALSHA %s sent: %v", s, h.seen)
				}
			}
			// keep_alive_leases and keep_alive_group: loaded and sent again with EVALSHA, or,
			// the first load failing, both sent again with EVAL.
			wantLoads, wantShas, wantEvals := int64(2), int64(2), int64(0)
			if failLoad {
				// Each master's part tries one load (the first of its scripts), which fails.
				wantLoads, wantShas, wantEvals = int64(mastersOf(t, c, wire.LeaseKey(names[0]), wire.GroupKey(groups[0]))), 0, 2
			}
			if l, s, e := h.loads.Load(), h.shas.Load(), h.evals.Load(); l != wantLoads || s != wantShas || e != wantEvals {
				t.Errorf("%d SCRIPT LOADs, then %d EVALSHAs and %d EVALs; want %d, %d and %d", l, s, e, wantLoads, wantShas, wantEvals)
			}
		})
	}
}

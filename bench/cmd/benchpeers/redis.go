package main

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	simbaredis "github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/spi"
)

// clusterAddrs are the Redis Cluster's masters and replicas on this machine.
const clusterAddrs = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005,127.0.0.1:7006"

// redisCount counts what a go-redis client sends, per server: every command, the single
// commands (one round trip each) and the pipelines (one round trip each, whatever their
// length). Pub/sub connections are not counted.
type redisCount struct {
	mu    sync.Mutex
	nodes map[string]*nodeCount
}

type nodeCount struct{ cmds, singles, pipes atomic.Int64 }

func (r *redisCount) node(addr string) *nodeCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nodes == nil {
		r.nodes = map[string]*nodeCount{}
	}
	n := r.nodes[addr]
	if n == nil {
		n = new(nodeCount)
		r.nodes[addr] = n
	}
	return n
}

// nodeHook counts one server's share in a nodeCount.
type nodeHook struct{ n *nodeCount }

func (h nodeHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h nodeHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.cmds.Add(1)
		h.n.singles.Add(1)
		return next(ctx, cmd)
	}
}

func (h nodeHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.cmds.Add(int64(len(cmds)))
		h.n.pipes.Add(1)
		return next(ctx, cmds)
	}
}

// redisSnap is a redisCount at one moment: per server, commands, single commands, pipelines.
type redisSnap map[string][3]int64

func (r *redisCount) snapshot() redisSnap {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := redisSnap{}
	for a, n := range r.nodes {
		s[a] = [3]int64{n.cmds.Load(), n.singles.Load(), n.pipes.Load()}
	}
	return s
}

// cmds is the number of commands sent to every server.
func (s redisSnap) cmds() int64 {
	var t int64
	for _, v := range s {
		t += v[0]
	}
	return t
}

// perServer is, between two snapshots, the single commands and pipelines of each server that
// got any, by address.
func perServer(before, after redisSnap) (addrs []string, singles, pipes []int64) {
	for a, v := range after {
		b := before[a]
		if v[1] == b[1] && v[2] == b[2] {
			continue
		}
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		singles = append(singles, after[a][1]-before[a][1])
		pipes = append(pipes, after[a][2]-before[a][2])
	}
	return addrs, singles, pipes
}

// redisCounts maps a Simba Redis backend opened by openSimbaRedis to its counter.
var redisCounts sync.Map

// redisCountOf is b's counter, or nil for a backend openSimbaRedis did not open.
func redisCountOf(b spi.Backend) *redisCount {
	if v, ok := redisCounts.Load(b); ok {
		return v.(*redisCount)
	}
	return nil
}

// openSimbaRedis opens a Simba Redis backend (standalone or Cluster) whose go-redis clients
// count their commands per server (on a Cluster, a hook on each node's client: the Cluster
// client sends each master its share of a pipeline as one pipeline).
func openSimbaRedis(dsn string) (spi.Backend, error) {
	cfg, err := simbaredis.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	rc := new(redisCount)
	if cfg.ClusterOptions != nil {
		cfg.ClusterOptions.NewClient = func(opt *goredis.Options) *goredis.Client {
			c := goredis.NewClient(opt)
			c.AddHook(nodeHook{rc.node(opt.Addr)})
			return c
		}
	}
	b, err := simbaredis.OpenConfig(cfg, simbaredis.WithLogger(quiet))
	if err != nil {
		return nil, err
	}
	if cfg.Options != nil {
		b.Client().AddHook(nodeHook{rc.node(cfg.Options.Addr)})
	}
	redisCounts.Store(spi.Backend(b), rc)
	return b, nil
}

// lastOpened wraps o so that the backend it opened last can be read (to find its counter).
func lastOpened(o opener) (opener, func() spi.Backend) {
	var mu sync.Mutex
	var last spi.Backend
	return func(ctx context.Context) (spi.Backend, error) {
			b, err := o(ctx)
			mu.Lock()
			last = b
			mu.Unlock()
			return b, err
		}, func() spi.Backend {
			mu.Lock()
			defer mu.Unlock()
			return last
		}
}

// redisCmds returns a function that reads the commands counted for the backend get returns
// (nil when it is not a Redis backend of openSimbaRedis).
func redisCmds(get func() spi.Backend) func() int64 {
	rc := redisCountOf(get())
	if rc == nil {
		return nil
	}
	return func() int64 { return rc.snapshot().cmds() }
}

// The redislock-shaped cycle: the two scripts redislock v0.9 runs for Obtain and Release, sent
// as raw EVALSHA (what a minimal SET NX PX lock costs on this server).
const (
	redislockObtain = `
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[3]) then return redis.status_reply("OK") end

local offset = tonumber(ARGV[2])
if redis.call("getrange", KEYS[1], 0, offset-1) == string.sub(ARGV[1], 1, offset) then return redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[3]) end
`
	redislockRelease = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`
)

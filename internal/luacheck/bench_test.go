package luacheck

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
)

// The script-level cost of issue 8's measures, on standalone Redis. Compare, in one run:
//
//	go test -run '^$' -bench . -count 5 ./internal/luacheck
//
// BenchmarkTrivialEvalSha is the baseline (EVALSHA of a script doing nothing); a cycle of
// BenchmarkAcquireReleaseCycle is two script calls (one acquire, one release), and
// BenchmarkKeepAlive10000 renews 10,000 held leases in one call.

// trivial is the baseline script: EVALSHA of a script doing nothing.
var trivial = redis.NewScript("return 1")

func BenchmarkTrivialEvalSha(b *testing.B) {
	c := client(b)
	ctx := context.Background()
	if err := trivial.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := trivial.EvalSha(ctx, c, nil).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAcquireReleaseCycle(b *testing.B) {
	c := client(b)
	ctx := context.Background()
	sid, _ := open(b, c, "bench", time.Hour)
	name := newName("bench")
	akeys := luascripts.AcquireKeys{Lease: wire.LeaseKey(name), Session: wire.SessionKey(sid), SessionLeases: wire.SessionLeasesKey(sid), Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)}
	aargs := luascripts.AcquireArgs{SessionID: sid, Name: name}
	rkeys := luascripts.ReleaseKeys{Lease: wire.LeaseKey(name), SessionLeases: wire.SessionLeasesKey(sid)}
	if err := luascripts.LoadAll(ctx, c); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := luascripts.Acquire.Run(ctx, c, akeys, aargs)
		if err != nil || r.Status != luascripts.StatusOK {
			b.Fatalf("acquire: %+v %v", r, err)
		}
		rel, err := luascripts.Release.Run(ctx, c, rkeys, luascripts.ReleaseArgs{SessionID: sid, Name: name, Token: r.Token})
		if err != nil || rel.Released != 1 {
			b.Fatalf("release: %+v %v", rel, err)
		}
	}
}

func BenchmarkKeepAlive10000(b *testing.B) {
	c := client(b)
	ctx := context.Background()
	sid, _ := open(b, c, "bench", time.Hour)
	prefix := newName("bench-ka")
	keys := luascripts.KeepAliveKeys{Session: wire.SessionKey(sid), SessionLeases: wire.SessionLeasesKey(sid), SessionGroups: wire.SessionGroupsKey(sid)}
	var args luascripts.KeepAliveArgs
	args.SessionID = sid
	pipe := c.Pipeline()
	for i := 0; i < 10000; i++ {
		n := prefix + "." + strconv.Itoa(i)
		args.Names = append(args.Names, n)
		keys.Leases = append(keys.Leases, wire.LeaseKey(n))
		luascripts.Acquire.Eval(ctx, pipe, luascripts.AcquireKeys{Lease: wire.LeaseKey(n), Session: wire.SessionKey(sid), SessionLeases: wire.SessionLeasesKey(sid), Waiters: wire.WaitersKey(n), Waiting: wire.WaitingKey(n)}, luascripts.AcquireArgs{SessionID: sid, Name: n})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := luascripts.KeepAlive.Run(ctx, c, keys, args)
		if err != nil || len(r.Held) != 10000 {
			b.Fatalf("keep-alive: %d held, %v", len(r.Held), err)
		}
	}
}

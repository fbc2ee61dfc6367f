package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// targetWhy is the short, hand-written reason shown beside each target in the Targets table,
// by target id (see targets in targets.go: e.g. "redis-vs-redislock", "failover/etcd",
// "handover/mariadb"). It is static text: keep it in step with the numbers of a full run.
var targetWhy = map[string]string{
	"lock-vs-spi/redis":            "Both rows make the same two script calls through the same backend, so the ratio is the shell's own work over a cycle whose round trips are ~100 µs each: what runs in the client between a Lock and its acquire and between an Unlock and its release. The harness passes a context that can end (one with a deadline, 30 s a slice); since 2026-12-03 such a Lock or Unlock runs its call on the caller's goroutine too, cut short should the context end, instead of handing it to a call worker (a partial run after that, -only redis,postgres -measures cycle at 16:10 on an otherwise idle 2-CPU machine, gave 1.17×). Until 2026-12-06 07:00 each such call made a context of its own for the cut (context.WithCancel on the shared timeout context and a context.AfterFunc on the caller's, allocated, registered and removed per call); since then the calls for one caller's context share one cut while the shared timeout lasts (callerCut in callercut.go), and a term's context, with the RevokedError that is its cause, is made only when someone asks for it (Term.Context). An uncontended Lock and Unlock now allocates 8 times in the shell whatever the context (TestLockCycleAllocations, on a backend that allocates nothing), against 19 with the harness's context and 11 with context.Background before that, and 23 before the other changes of 2026-12-06: the calls share a timeout context unless something may cut them short, where each call's own WithTimeout armed and stopped a timer and allocated four times, and a future makes its channel only for a wait begun before its completion, which an inline step never is. Measured before and after in the same session on the 2-CPU machine, loaded by other work (load average 12–18): BenchmarkLockCycle/redis-deadline (the harness's kind of context; two sets of six alternating runs of each test binary, 3,000 cycles each, medians) put the Lock cycle at 1.27× and 1.23× the SPI cycle before and 1.09× and 1.16× after in wall time, and at 1.29× and 1.33× before and 1.17× and 1.22× after in the process's CPU time; `-only redis -measures cycle` runs, alternating the two binaries (8 of each, 12 and 20 rounds), were too noisy on that machine to tell them apart (their same-round ratios pooled: medians 1.33× and 1.15× before, 1.27× and 1.25× after, quartiles from about 0.9× to 1.6× either way). On the same machine once quiet (2026-12-06 07:50 UTC, load below 1, -only redis -measures cycle, 7 runs of each binary alternated, 4 and 12 rounds): 1.04–1.11× (median 1.05×) before and 0.98–1.12× (median 1.05×) after, within the target either way; the full run's figure (1.15× at 07:46 UTC) runs higher than a run of the Redis rows alone, as it has in every full run. What is left is the loop's step of the Lock and Unlock events, the futures and the engine's bookkeeping, about 9 µs of CPU a cycle on the in-memory backend (BenchmarkLockCycle/memory). The backend's own savings of 2026-12-06 are in both rows alike, so they narrow the cycles and not the gap between them: Acquire and Release build nothing they do not send (an error's text only on failure, a session's keys once per session), and each script call is one list of arguments handed to go-redis as its command, where KEYS, ARGV and go-redis's copy of both made three (an SPI Acquire and Release allocates 34 times, go-redis's reading of the replies included, against 42: TestAcquireReleaseAllocations). The Redis client SUBSCRIBEs only for waited-for names, so an uncontended cycle costs no pub/sub message and no hint. On PostgreSQL the shell vanishes in the round trip.",
	"lock-vs-spi/postgresql":       "Both rows send the same two statements per cycle, on one pooled connection, with nothing between them: the one-statement acquire (the Lock row's AcquireQueued runs the plain acquire first, one round trip; its transaction runs only when the lease is held) and the release (its UPDATE with the NOTIFYs, committed without waiting for its WAL flush). Counted with pg_stat_statements and log_statement = all on a private PostgreSQL 15, 2026-12-06: 200 cycles of each row gave 200 Acquire, 200 Release and PostgreSQL's 200 foreign-key checks, each row's on one connection, with no BEGIN, COMMIT, LISTEN or ping on it; a call observer saw every Lock's acquire and every Unlock's release run on the caller's goroutine (no hop to a call worker, so the connection waits no longer between the two than the SPI row's). The difference was the client's: until 2026-12-06 every Release on PostgreSQL handed a Released hint to the backend's own Hints subscribers, the Lock row's client among them, whose hint reader woke on another thread at each Unlock, found no waiter for the name and dropped it (an execution trace of 200 Lock cycles: one goroutine wake-up per cycle, none in 200 SPI cycles), beside the server's next statement on a 2-CPU host. Since then a release hints the backend's own subscribers only when one of its sessions waits for the name, as on Redis (backend/sql pgHub.localHubFor; TestPostgresLocalReleaseHintOnlyWhenWaited), and on SQLite and MySQL/MariaDB likewise since the same day (TestWakerLocalReleaseHintOnlyWhenWaited). BenchmarkLockCycle, root package, six alternating runs of the test binaries before and after, 2,000 cycles each, 2026-12-06 09:46 UTC at load 4–5 (cycles of 0.6–3 ms, commit-bound): Lock ÷ SPI 1.17× → 1.06× with context.Background and 1.10× → 1.07× with a deadline (the harness's kind of context), medians; the Lock cycle's process CPU above the SPI cycle's 101 → 49 µs and 82 → 29 µs, its context switches above the SPI cycle's 2.4 → 0.3 (four more alternations of each at load 2–4, 10:10 UTC: 1.17× → 1.09× and 1.05× → 0.99×; CPU above the SPI cycle's 90 → 44 µs and 76 → 17 µs). Runs of -only postgres -measures cycle alternating the two harness binaries on that loaded machine (8 of each, 6 and 12 rounds, 09:51–09:57 UTC; the baseline UPDATE took 0.24–9 ms by round, against 0.27 ms in the quiet full run) could not tell them apart: run medians 0.98–1.65× before and 0.80–1.30× after, pooled same-round ratios median 1.15× (quartiles 0.91–1.69×) before and 1.10× (0.80–1.35×) after. What is left is the shell's own work, about 9 µs of CPU a cycle on the in-memory backend (BenchmarkLockCycle/memory), and what the host adds to it; the full run's 1.24× (717 against 541 µs) predates the change. The Lock row's client also keeps its session alive (TTL 2 s: a three-statement batch every 0.67 s, about one per 1,000 cycles) and runs a hint listener on a connection of its own (a ping every third of a second at that TTL), which LISTENs on no channel while nothing is waited for and so is not signalled by the cycle's NOTIFYs.",
	"redis-vs-redislock":           "Both send 2 EVALSHA per cycle (the Redis commands column), but Simba's two scripts run 9 commands inside (TIME, 3 × HMGET, HSET, SADD, SREM, HDEL, PUBLISH: the session check, the fencing token from the server's clock, the session's lease set, the released hint) against redislock's 3 (SET NX PX; GET, DEL): counted with INFO commandstats on a private redis-server, 2026-12-03. Since 2026-12-06 20:30 UTC each script also reads the session's lease set (SISMEMBER) before its first write, so that a key of another type fails the call with nothing written (Lua scripts are not rolled back): 11 commands; 6 alternating runs of each build (-only redis -measures cycle, load 6–7) gave 1.29–1.66× (median 1.57×) before and 1.40–1.72× (median 1.47×) after, no difference this host resolves. That work is the server's and is fixed by the frozen wire protocol (spec/redis.yaml), as are the commands' sizes (5 keys and 3 arguments, then 2 and 3, against the shaped cycle's 1 and 3, then 1 and 1); no client-side change moves it. The client's side is what the Lock-vs-SPI row describes: since 2026-12-06 the shell allocates 8 times per uncontended Lock and Unlock, whatever the context (23 before, 19 with the harness's context after the first changes of that day), and each of Simba's script calls is one list of arguments handed to go-redis as its command, where the shaped cycle, like any caller of go-redis's EvalSha, passes KEYS and ARGV that go-redis copies into a list of its own. Earlier figures predate those changes (2026-12-03, -measures cycle): 2.0–2.7× with -only redis on a loaded 2-CPU machine, and 1.16× with -only redis,postgres at 16:10 on an otherwise idle one, after the inline call path; until the Redis backend subscribed only to waited-for names, a full run's figure was also inflated by the harness's other subscribed Redis clients.",
	"postgresql-vs-pglock":         "Both cycles are commit-bound (Simba's release commits without waiting for its WAL flush, pglock's two statements each wait), so the ratio follows the server's commit times in each round. Until 2026-12-05 it also carried a cost of the harness's other clients: each Simba client LISTENed on one channel for every release, so the hand-over rows' idle clients, open during the cycle slice, were each woken by every Unlock of the cycle row (0.99× in the full run of 2026-12-05 17:09 UTC against 0.77× in a run of the cycle measure alone right before it, -measures cycle, 16:56 UTC). Since then a release NOTIFYs the lease's own channel and a client LISTENs only on the names it waits for (backend/sql hints.go; BenchmarkLockCycleIdleHinted: a cycle with 8 idle clients open 1.37× → 1.13× of the cycle alone). What is left of it is PostgreSQL's: a NOTIFY signals every connection that LISTENs on any channel; since a join or leave NOTIFYs the group's own channel too (BenchmarkGroupChurnIdleHinted), a client that waits for no name and is in no group LISTENs on no channel and is not signalled at all.",
	"zookeeper-vs-zklock":          "A cycle is two ZooKeeper writes either way (each logged and synced by the server before it answers): zk.Lock creates a sequential node, lists the lock's children and deletes its node; Simba's acquire is one multi-op (create the lease node with a check of the waiter queue: while the name has no queue node, a create and delete of it) and its release one multi-op (a write of the lease node, which only its session may make, and its delete), so Simba's cycle saves zk.Lock's read. Counted on 2026-12-06 with a dialer that counts what each of a backend's connections sends (TestZooKeeperLockCycleRequests, root package): an uncontended Lock + Unlock sends the server exactly what the SPI's Acquire + Release does, multi[create,create,delete] and multi[setData,delete], with a context.Background or a deadline, and opens no hint connection (a keep-alive adds one exists per renewal interval); zk.Lock sends create, getChildren2 and delete. So what the Lock row costs over the SPI row is the client's own work. Per cycle (BenchmarkLockCycle/zookeeper, and a loop of each: allocations 100–103 for Lock, 87–93 for the SPI, 53 for zk.Lock, 27 for a bare create + delete until 2026-12-07, when pooled lease requests, cached paths and one watch timer per session cut the SPI's to 69 and the Lock's to about 77 (backend/zookeeper TestAcquireReleaseAllocations; callgrind, GOMAXPROCS=1: an SPI acquire + release 117K → 107K instructions with a deadline, 99.5K → 94.8K with context.Background; 67 of the 69 are go-zookeeper's own encoding, which its public API offers no cheaper way around); the shell's steps all inline, no loop wake-up and no timer armed per cycle): until 2026-12-06 each request of a call whose context can end (every call a simba.Client makes, as its calls have a timeout, and the harness's SPI row) also started a goroutine to wait on, since go-zookeeper takes no context, and go-zookeeper's encoding grew that goroutine's stack: perf put stack growth at 4.8–6.2 % of the process's CPU in an acquire + release loop and goroutine starts and exits at 1.4–3.7 %. The backend now keeps those goroutines for the next request (backend/zookeeper hops.go; 2 goroutines started a cycle → 0, stack growth 0.05 %). BenchmarkLockCycle/zookeeper, 5 runs of each build alternated (2026-12-06 13:25 UTC, load 4–5, 1,000 cycles a run): Lock ÷ SPI with context.Background (whose SPI calls need no goroutine) median 1.17× before, 1.09× after, the Lock's CPU 367 → 298 µs a cycle; with a deadline 1.08× → 1.04×. The cycle rows of this harness cannot resolve that on this 2-CPU VM while other work runs: 8 runs of each build alternated (-only zookeeper -measures cycle, 6 and 12 rounds, 13:26–13:30 UTC, load 4–12) gave Lock ÷ zk.Lock 0.57–1.17× (median 0.97×) before and 0.58–1.21× (median 0.90×) after. Runs of the cycle alone on a quiet machine gave 0.89–0.93× (2026-12-05 16:56 UTC). Where a Lock cycle's CPU goes (a profile of 3,000 cycles with a deadline, 2026-12-06 20:10 UTC): the loopback writes of the requests about 20 %, epoll waits 12 %, futex wake-ups of idle threads 15 %, allocation and go-zookeeper's reflection a few %. Pooling each multi-op's request structs and hand-off, caching paths per name and one watch timer per session cut the Lock cycle's allocations from 99 to 77 (66 of the SPI's remaining 69 are go-zookeeper's reflection encoding, which its API gives no way around) but moved neither the CPU per cycle (232 → 228 µs, medians of 6 alternating runs at load 4–7) nor this ratio (0.80× before, 0.89× after, each 0.68–1.36× across runs): it was not kept, the added pooling's lifetime rules being a risk for no measured gain; only the two smallest cuts were (hop workers' idle timer reset once per idle period, the tap's path match without a string copy). In the full runs until 2026-12-05 it was 1.37–1.51×: every Simba client kept a recursive watch on all lease nodes, so the hand-over rows' idle clients, open during the cycle slice, each got a watch event for every create and delete of the cycle row. Since then a client watches only the lease nodes its sessions wait for (backend/zookeeper watcher.go; BenchmarkAcquireReleaseIdleHinted: a cycle with 8 idle clients open 1.49 → 1.13 raw create+delete pairs, 1.10 alone).",
	"handover/redis":               "A 5 ms p99 is also the host's: the measured column names the peers' p99 in the same run (in the full run of 2026-12-04 14:59 UTC, a 2-CPU AMD EPYC VM, redislock's was 7.8 ms and zk.Lock's 9.3 ms). In the quietest full run so far (2026-12-04 06:08 UTC, bench/results as of b26386a) Simba's worst p99 was 1.5 ms on Redis, 5.0 ms on PostgreSQL, 8.7 ms on ZooKeeper and 6.8 ms on etcd. The Election rows take the Lock's path since 2026-12-06 (BenchmarkHandoverHops, root package, times the three side by side, one sample of each in turn): until then the leader's Stop and StepDown took the caller's goroutine id (a stack trace, 56 % of a Stop's CPU; on the in-memory server a Stop's release returned 0.13 ms after the call at p50, an Unlock's 0.09) and the candidate's OnElected ran on a goroutine started for it (grant stepped → OnElected p50 0.06 ms on Redis and PostgreSQL, grant → Lock returned 0.05); now Stop and StepDown take that id only while leader work of the name runs, and OnElected runs on the call worker that received the grant (0.02 ms), one goroutine switch fewer on the waiter's side than a Lock's. Election ÷ Lock p50 (Stop and StepDown; six alternating runs of each build of 100 hand-overs, three at load 13–14 and three at load 2): in memory 1.04–1.24 (median 1.12) before, 0.94–1.10 (0.98) after; on Redis 0.96–2.77 (1.08) before, 0.96–1.08 (1.02) after; at load 2, PostgreSQL 1.04–1.21 (1.12) before, 0.94–1.19 (1.04) after, and ZooKeeper 1.02 before, 0.98 after (0.83–1.10 and 0.92–1.06). Every run's p99 (the second slowest of 100) followed the host, before and after, as the Lock row's does.",
	"handover/postgresql":          "The waiter learns of the release by NOTIFY on the lease's own channel, which its LISTEN connection listens on while it waits, then acquires (one more round trip). A 5 ms p99 is also the host's: the measured column names the peers' p99 in the same run (in the full run of 2026-12-04 14:59 UTC, a 2-CPU AMD EPYC VM, redislock's was 7.8 ms and zk.Lock's 9.3 ms). In the quietest full run so far (2026-12-04 06:08 UTC, bench/results as of b26386a) Simba's worst p99 was 1.5 ms on Redis, 5.0 ms on PostgreSQL, 8.7 ms on ZooKeeper and 6.8 ms on etcd. Where the time goes (BenchmarkHandoverHops, root package, 300 hand-overs a run, 2026-12-06 06:33–06:55 UTC on this 2-CPU VM at load 9–15): the client's own hops are small, the listener's goroutine to the hint reader p50 0.03 ms, p99 0.12 ms; hint read → acquire sent p99 ≤ 0.45 ms; grant → Lock returned p99 ≤ 0.25 ms. The rest is the server's: the waiter's acquire took p50 2.0–2.6 ms, p99 26–103 ms, and a one-row UPDATE's commit alone p50 0.5–3.0 ms, p99 6.7–57 ms in the same runs, so on a loaded host the server's own writes miss 5 ms at p99. Why the acquire's p50 (1.1–1.4 ms on a quiet host) is twice what pgbench gives the same statement (0.35–0.6 ms): every request of a hand-over follows an idle pause, and on this VM a request after a pause costs more than one right after another, whatever it is (pgbench -M prepared on a private PostgreSQL 15, 2026-12-06: SELECT 1 0.04 ms back to back and 0.25 ms after \\sleep 20 ms; a synced one-row UPDATE 0.49 and 1.32 ms). The same release then acquire in bare pgx, without Simba's client, gave release/acquire p50 0.16/0.58–0.63 ms back to back and 0.51/1.19–1.27 ms with 20 ms between hand-overs; BenchmarkHandoverHops's floor-idle (the UPDATE after the hand-over's 20 ms pause) p50 1.24–1.43 ms against the acquire's 1.12–1.36 ms in the same runs (floor back to back 0.21–0.29 ms). Ruled out, with numbers: custom plans (pg_stat_statements and the statement log of a private server: each pool connection plans the acquire afresh for its first 5 executions only, 0.4–2.8 ms of Bind each, then keeps the generic plan, Bind 0.02–0.1 ms); pgxpool's ping (a connection is taken from the pool in under 10 µs, idle 0); the acquire_queued transaction (the hinted acquire is the one statement; the transaction runs only on the waiter's first attempt); and the Go side (the bare pgx probe shows the same times). The Election rows take the Lock's path since 2026-12-06 (BenchmarkHandoverHops, root package, times the three side by side, one sample of each in turn): until then the leader's Stop and StepDown took the caller's goroutine id (a stack trace, 56 % of a Stop's CPU; on the in-memory server a Stop's release returned 0.13 ms after the call at p50, an Unlock's 0.09) and the candidate's OnElected ran on a goroutine started for it (grant stepped → OnElected p50 0.06 ms on Redis and PostgreSQL, grant → Lock returned 0.05); now Stop and StepDown take that id only while leader work of the name runs, and OnElected runs on the call worker that received the grant (0.02 ms), one goroutine switch fewer on the waiter's side than a Lock's. Election ÷ Lock p50 (Stop and StepDown; six alternating runs of each build of 100 hand-overs, three at load 13–14 and three at load 2): in memory 1.04–1.24 (median 1.12) before, 0.94–1.10 (0.98) after; on Redis 0.96–2.77 (1.08) before, 0.96–1.08 (1.02) after; at load 2, PostgreSQL 1.04–1.21 (1.12) before, 0.94–1.19 (1.04) after, and ZooKeeper 1.02 before, 0.98 after (0.83–1.10 and 0.92–1.06). Every run's p99 (the second slowest of 100) followed the host, before and after, as the Lock row's does.",
	"handover/zookeeper":           "The waiter learns of the release by a watch on the holder's node, then acquires (a multi-op): two writes in the path, each logged and synced by the server before it answers (the release's delete, the grant's create). go-zookeeper's zk.Lock has one: the holder deletes its sequential node and the next in line only lists the children, a read; that write is the ~1 ms between the two p50s (2.49 against 1.43 ms in the full run of 2026-12-05 00:57 UTC, where zk.Lock's p99 was 2.5 ms and so this row's peers do not miss the target). Simba cannot drop the grant's write: the fencing token is the lease node's czxid and the node is ephemeral, owned by the session that creates it, so the releasing session cannot create it for the waiter. A 5 ms p99 is also the host's: the measured column names the peers' p99 in the same run (in the full run of 2026-12-04 14:59 UTC, a 2-CPU AMD EPYC VM, redislock's was 7.8 ms and zk.Lock's 9.3 ms). In the quietest full run so far (2026-12-04 06:08 UTC, bench/results as of b26386a) Simba's worst p99 was 1.5 ms on Redis, 5.0 ms on PostgreSQL, 8.7 ms on ZooKeeper and 6.8 ms on etcd. Where the time goes (BenchmarkHandoverHops, root package, 300 hand-overs a run, 2026-12-06 06:33–06:55 UTC on this 2-CPU VM at load 9–15): the client's own hops are small, the watcher's goroutine to the hint reader p50 0.01 ms, p99 0.12 ms; hint read → acquire sent p99 ≤ 0.12 ms; grant → Lock returned p99 ≤ 0.24 ms. The rest is the server's: the waiter's acquire took p50 1.1–1.2 ms, p99 16–27 ms, and go-zookeeper's create + delete alone p50 1.1–3.0 ms, p99 7.5–137 ms in the same runs, so on a loaded host the server's own writes miss 5 ms at p99. Between two processes, bench/cmd/zklegs times each leg from the frames on the wire, beside go-zookeeper alone sending the same requests: the server's two legs are the p99, Simba's client adds about 0.1 ms at p50 and 0.5 ms at p99 (see the two-process row's note). The Election rows take the Lock's path since 2026-12-06 (BenchmarkHandoverHops, root package, times the three side by side, one sample of each in turn): until then the leader's Stop and StepDown took the caller's goroutine id (a stack trace, 56 % of a Stop's CPU; on the in-memory server a Stop's release returned 0.13 ms after the call at p50, an Unlock's 0.09) and the candidate's OnElected ran on a goroutine started for it (grant stepped → OnElected p50 0.06 ms on Redis and PostgreSQL, grant → Lock returned 0.05); now Stop and StepDown take that id only while leader work of the name runs, and OnElected runs on the call worker that received the grant (0.02 ms), one goroutine switch fewer on the waiter's side than a Lock's. Election ÷ Lock p50 (Stop and StepDown; six alternating runs of each build of 100 hand-overs, three at load 13–14 and three at load 2): in memory 1.04–1.24 (median 1.12) before, 0.94–1.10 (0.98) after; on Redis 0.96–2.77 (1.08) before, 0.96–1.08 (1.02) after; at load 2, PostgreSQL 1.04–1.21 (1.12) before, 0.94–1.19 (1.04) after, and ZooKeeper 1.02 before, 0.98 after (0.83–1.10 and 0.92–1.06). Every run's p99 (the second slowest of 100) followed the host, before and after, as the Lock row's does.",
	"handover/etcd":                "The waiter learns of the release by a watch on the lease key (one per waited-for name), then acquires (a transaction); etcd commits through raft even on one member. A 5 ms p99 is also the host's: the measured column names the peers' p99 in the same run (in the full run of 2026-12-04 14:59 UTC, a 2-CPU AMD EPYC VM, redislock's was 7.8 ms and zk.Lock's 9.3 ms). In the quietest full run so far (2026-12-04 06:08 UTC, bench/results as of b26386a) Simba's worst p99 was 1.5 ms on Redis, 5.0 ms on PostgreSQL, 8.7 ms on ZooKeeper and 6.8 ms on etcd. Where the time goes (BenchmarkHandoverHops, root package, 300 hand-overs a run, 2026-12-06 06:33–06:55 UTC on this 2-CPU VM at load 9–15): the client's own hops are small, hint read → acquire sent p99 0.06 ms; grant → Lock returned p99 0.24 ms. The rest is the server's: in one run the holder's release took p50 2.2 ms (four times a put's p50 of 0.50 ms, p99 3.6 ms) and the waiter's acquire p50 1.2 ms, p99 9.9 ms. That put was back to back; the release follows the hand-over's idle pause, and so does every write of a hand-over: a release is one transaction (two compares on the lease key, two deletes; TestReleaseRequests) and costs about a Put timed the same way (BenchmarkReleaseCost, backend/etcd, 2026-12-07 at load 8–9, three runs of 200: after 20 ms idle a release's p50 was 1.07–1.18 Puts' and a leased key's Delete 1.01–1.07, 1.09–1.25 with a waiter watching the name; back to back 1.2–1.4 Puts' back to back; an idle Put's p50 was 2.0–2.4 times a back-to-back one's). The hand-over's two synced writes (the release and the waiter's grant, whose lease key must be created on the waiter's etcd lease for its token) are what its p99 is made of on a loaded host. The Election rows take the Lock's path since 2026-12-06 (BenchmarkHandoverHops, root package, times the three side by side, one sample of each in turn): until then the leader's Stop and StepDown took the caller's goroutine id (a stack trace, 56 % of a Stop's CPU; on the in-memory server a Stop's release returned 0.13 ms after the call at p50, an Unlock's 0.09) and the candidate's OnElected ran on a goroutine started for it (grant stepped → OnElected p50 0.06 ms on Redis and PostgreSQL, grant → Lock returned 0.05); now Stop and StepDown take that id only while leader work of the name runs, and OnElected runs on the call worker that received the grant (0.02 ms), one goroutine switch fewer on the waiter's side than a Lock's. Election ÷ Lock p50 (Stop and StepDown; six alternating runs of each build of 100 hand-overs, three at load 13–14 and three at load 2): in memory 1.04–1.24 (median 1.12) before, 0.94–1.10 (0.98) after; on Redis 0.96–2.77 (1.08) before, 0.96–1.08 (1.02) after; at load 2, PostgreSQL 1.04–1.21 (1.12) before, 0.94–1.19 (1.04) after, and ZooKeeper 1.02 before, 0.98 after (0.83–1.10 and 0.92–1.06). Every run's p99 (the second slowest of 100) followed the host, before and after, as the Lock row's does.",
	"handover/mariadb":             "MySQL/MariaDB push nothing: the waiter blocks in GET_LOCK on the holder's named lock (backend/sql, mysqlwake.go) and acquires when it gets it.",
	"handover/sqlite":              "SQLite has no server: the waiter's backend watches the file and its WAL (inotify) and reads PRAGMA data_version 0, 2, 4 … 64 ms after each write until a read after the first sees the commit (backend/sql, sqlitewake.go). Stopping there (2026-12-03) left hand-overs as they were: seven runs of each (-only sqlite -measures waiting,handover, loaded 2-CPU machine), pooled, p50 5.7 / 5.5 / 5.6 ms before and 5.6 / 5.5 / 5.5 ms after (Lock / Stop / StepDown), p90 10.7–11.8 ms both; the p99 of a run followed the machine's load (10–215 ms before, 11–250 ms after). Five more of each once the machine was quiet (load below 4, 18:24–18:30), pooled: p99 12.6 / 11.0 / 11.6 ms before, 13.9 / 12.9 / 12.0 ms after; p50 4.9 ms before, 4.6 ms after.",
	"failover/zookeeper":           "ZooKeeper expires sessions in tickTime buckets: each request of a session moves its expiry to the next multiple of tickTime after its arrival + the session timeout (ExpiryQueue.roundToNextInterval), so a session that asks for the TTL loses a crashed holder's lease up to one tickTime (200 ms here, .ci/zoo.cfg) after its last request + TTL: 1.03–1.05 × TTL in the full runs of 2026-12-04 before 11:00, as go-zookeeper's zk.Lock shows in its row. Since then Simba's ZooKeeper DSN here carries the server's tickTime (tickTime=200ms; backend/zookeeper, Config.TickTime), and its sessions ask for the TTL less one tick, so the lease goes by the holder's last request + TTL (TestTickTimeCrashedHolderGoesByTTL, a private server: 15 nodes went 1.80–1.98 s after the last request at TTL 2 s). On an ensemble a follower's client can add up to half a tick (the leader learns of its requests at the next ping).",
	"failover-calls/zookeeper":     "One acquire call per failover in this harness: the one the expiry's hint brings. A waiter's entry is an ephemeral node that lives with its session (spi.SessionQueue), so the engine does not re-attempt to keep its place, and ZooKeeper's HeldBy carries no remaining time, so besides the hint a waiter retries only in case the hint was lost. That fallback retry came one TTL after the waiter's last attempt and mostly landed inside the failover, before the crashed holder's session expired: 2 calls in 15 of 20 failovers (median 2.2, max 3.0 per TTL; 2 calls in a failover shorter than two thirds of a TTL read as 3, and 3.1 missed the target in the full run of 2026-12-05 22:20 UTC). The backend now reports that its hints survive reconnects (spi.SteadyHints: go-zookeeper sends a session's watches again with its last zxid on each reconnect, and the hint connection sets its watches again and reads each node behind them; see backend/zookeeper, Steady hints), and the fallback retry comes two TTLs after the last attempt: 1 call in 20 of 20 and in 30 of 30 failovers (median 1.2, max 1.5 and 1.6 per TTL; `-only zookeeper -measures failover -rounds 20` and `-rounds 30`, 2026-12-06 03:00–03:14 UTC). The harness's waiter attempts less than a TTL before the kill; a waiter whose last attempt was more than a TTL before a crash (a longer wait) may still have its fallback retry fall inside the failover, about half as often as before: 2 calls in a failover of at least two thirds of a TTL, 3 per TTL at most.",
	"handover-xproc/redis":         "The holder's Unlock and the waiter's Lock in two processes: the waiter's client learns of the release by pub/sub, then acquires (one EVALSHA).",
	"handover-xproc/postgresql":    "The waiter's process learns of the release by NOTIFY on its LISTEN connection, then acquires: two commits in the path, each synced by the server. Its p99 follows the machine: 2.75 ms (p50 1.82, 300 samples) between two programs written from the README on the 2-CPU AMD EPYC machine of 2026-12-04 05:58.",
	"handover-xproc/zookeeper":     "The waiter's process learns of the release by a watch on the holder's node, then acquires in a multi-op: two synced writes in the path (the release, the waiter's create), which the frozen 5.x layout needs. Its p99 follows the machine: 3.77 ms between two programs written from the README on the 2-CPU AMD EPYC machine of 2026-12-04 05:58. Leg by leg (bench/cmd/zklegs: both processes note when each ZooKeeper frame is written or read; 2026-12-07 12:52–12:58 UTC, 9 runs of each mode taken in turn, 300 hand-overs a run, load 1.2–7; medians of the runs' p50 / p99 in ms): the holder's client, unlock → release on the wire, 0.12 / 0.79; the server, release → the waiter's watch event, 1.16 / 8.3, and the acquire's round trip 0.89 / 7.0; the waiter's client, event → acquire on the wire 0.09 / 0.46 and reply → Lock returned 0.07 / 0.34 (client legs together 0.30 / 1.5, server legs 2.1 / 12.3; the runs' total p99 7.9–123). go-zookeeper alone sending the same requests (the release's multi[setData, delete], the queue entry, a child watch, the acquire's multi[create, setData, delete]) gave 2.32 / 18.0 in total, its server legs 2.1 / 18.0 and its client legs 0.19 / 1.0; zk.Lock (a delete, then a read) 1.63 / 8.6. So the tail is the two synced writes a hand-over is made of, which Simba's client does not add to: the watch event arrives with the release's own reply (the server sends both once the delete is logged), the acquire is one multi-op with no read before it, the slow round trips fall off smoothly (no 40 ms delayed-ACK mode), and each process ran 0–2 garbage collections in a run of 300. The server's own update latency (mntr, request in → reply out, all its clients) had p99 8 ms over those minutes, and this VM's disk, under the other work on it, gave two fdatasyncs in a row p99 1.6 ms in one minute and 8.5 ms in another. What Simba's client adds is about 0.1 ms at p50 and 0.5 ms at p99 (its three legs against go-zookeeper's own); the backend's hop worker (go-zookeeper takes no context) is about 0.04 ms of the p50 (a build running the requests on the caller's goroutine instead, 4 runs alternated with the current one: client legs p50 0.31 → 0.27 ms, their p99 within the runs' spread).",
	"handover-xproc/mariadb":       "The waiter's process blocks in GET_LOCK on the holder's named lock (backend/sql, mysqlwake.go), which the holder's connection lets go with the release, and then acquires.",
	"failover-calls/sqlite":        "A waiter's entry lives with its session (spi.SessionQueue since 2026-12-07: a keep-alive of a session that waits moves its entries to its renewed expiry, spec/sql.yaml keep_alive_waiters_correlated), so the waiting candidate re-attempts only at the holder's remaining time or on a wake-up, not also before its entry's expiry: max 2.8 -> 2.8 (median 2.4 -> 2.1), and a waiting process behind a live holder 1.50 -> 1.00 acquire calls per TTL (`-only sqlite -measures waiting,failover -rounds 10`, before and after, 2026-12-07 12:45-12:55 UTC).",
	"handover-xproc/sqlite":        "No server and no push: the waiter's process watches the file and its WAL (inotify) and reads PRAGMA data_version after each write (backend/sql, sqlitewake.go); the two processes' writes take turns at the file's cross-process gate (<file>-simba-gate).",
	"failover/etcd":                "etcd's lessor revokes expired leases on a fixed 500 ms timer (server/lease/lessor.go, runLoop), so a crashed holder's keys go up to 500 ms after its TTL; etcd's own concurrency.Mutex shows the same (its row in the crash-failover table).",
	"failover-calls/etcd":          "As on ZooKeeper: etcd's HeldBy carries no remaining time, so a waiter retries, besides the acquire the expiry's hint brings, only in case the hint was lost; the backend reports that its hints survive reconnects (spi.SteadyHints: a name's watches resume after the last revision they reported), so that retry comes two TTLs after the waiter's last attempt rather than one, and no longer falls inside the failover here: 1 call in 20 of 20 failovers (median 1.05, max 1.35 per TTL), against 2 in 19 of 20 with the one-TTL retry (median 2.1, max 2.8; 20 rounds each, `-only etcd -measures failover -rounds 20`, 2026-12-06 03:16–03:20 UTC).",
	"failover-calls/redis-cluster": "Not a Cluster cost: 3 acquire calls in a failover of 0.998 TTL. A waiting candidate re-attempts before its queue entry lapses with its session's expiry as of its last attempt (every 2/3 to 1 TTL), then acquires when the holder's lease runs out, so a failover as long as a TTL can hold two such attempts and the grant: 3 per TTL is the bound's edge, and a window a hair under one TTL reads a hair over 3 (PostgreSQL in the same round, before its waiter entries lived with their session: 3 calls in 1.0045 TTL, 2.99). Failovers shorter than a TTL take 2 (20 samples, `-only redis-cluster -measures failover`, 2026-12-03).",
	"failover-calls/postgresql":    "One or two acquire calls per failover. Since 2026-12-07 a waiter's entry lives with its session (spi.SessionQueue: each keep-alive moves the session's entries to its renewed expiry, spec/sql.yaml keep_alive_waiters), so the waiting candidate no longer re-attempts before its entry's expiry as of its last attempt (every 2/3 to 1 TTL), only at the holder's remaining time as its last HeldBy told it: a kill after the holder's last renewal that the waiter read takes one call (the grant), one after a later renewal two (a HeldBy with the renewed time, then the grant); a failover lasts at least the 2/3 TTL the holder's last renewal left, so two calls read as at most 3 per TTL. Before, a failover of 0.78 TTL could hold two re-attempts and the grant: max 3.9 (median 2.5) in the full run of 2026-12-07 07:24 UTC; after, max 2.7 (median 2.2; 1 call in 4 of 10 failovers, 2 in 6) with `-only postgres -measures failover,waiting -rounds 10` (2026-12-07 09:40 UTC), and a waiting process behind a live holder 1.50 -> 1.00 acquire calls per TTL. A client of an earlier 5.x release still re-attempts.",
	"failover-calls/mariadb":       "MySQL/MariaDB free a crashed holder's named locks with its connection, which ends the waiter's blocking GET_LOCK while the lease lives on; the waker reads the lease row before it wakes anyone, so the crash costs no acquire (backend/sql, mysqlwake.go). Without that read each waiter paid one acquire for it: 3 per failover (4.3 per TTL in the 07:27 run); with it 2 (2.0–2.6 per TTL, `-only mariadb -measures failover`, 2026-12-03). Since 2026-12-07 a waiter's entry lives with its session on MySQL/MariaDB too (spi.SessionQueue: a keep-alive of a session that waits moves its entries to its renewed expiry, spec/sql.yaml keep_alive_waiters_join), so the waiting candidate re-attempts only at the holder's remaining time, not also before its entry's expiry: max 2.9 -> 2.8 (median 2.3 -> 2.2), and a waiting process behind a live holder 1.50 -> 1.00 acquire calls per TTL (`-only mariadb -measures waiting,failover -rounds 10`, before and after, 2026-12-07 12:40-12:52 UTC).",
	"keepalive/redis-cluster":      "On a Cluster a keep-alive is the session's keep_alive script on its own slot (a single command), then one pipelined round: the Cluster client sends each master that holds some of the leases its share as one pipeline (backend/redis, cluster.go).",
	"idle-cpu/sqlite":              "Judged on what waiting adds: the waiting process's CPU less that of an idle process watched beside it over the same seconds (the same client and TTL, its session open and kept alive, waiting for nothing; SQLite on a file of its own); the row shows both. The idle process costs 0.2–0.4 % at TTL 2 s: keep-alives were not most of the 1.2–2.0 % the whole waiting process used to cost, as this text said until 2026-12-03. With its waker switched off the waiting process cost ~0.4 % (a probe, 10 s windows); the rest was the waker (backend/sql, sqlitewake.go), whose reads cost far more than their statements: 0.2–0.4 ms of CPU each on this VM, mostly the wake-up of an idle Go process (scheduler, sysmon; perf), and ~0.5 ms for the lease read after each change. The waiter's file sees ~3.75 commits a second (the holder's and the waiter's keep-alives, the waiter's acquire retries), and each was read 7 times (0, 2, 4 … 64 ms after the write): ~27 reads a second. Since 2026-12-03 the waker stops once a read after the write's first sees the commit (about 2 reads per commit) and prepares its statements once: seven runs of each (-only sqlite -measures waiting,handover, 2026-12-03 18:04–18:20, a loaded 2-CPU machine) gave 1.21–2.01 % (mean 1.65 %) before, and 0.78–1.09 % (mean 0.95 %) after, of which waiting adds 0.54–0.80 % (mean 0.67 %); five more of each on a quiet machine: 1.24–1.97 % (mean 1.46 %) before, 0.75–1.05 % (mean 0.88 %) after, adding 0.50–0.72 % (mean 0.61 %). What is left is mostly the reads after the waiter's own commits (60 % of the file's here; telling them from another process's needs the write lock's release, which the waker cannot see) and a lease read per change. The 1 % line is this harness's reading of issue 16's \"a small fraction of a core\".",
}

// zkTickNote says what Simba's ZooKeeper DSN was told of the server's tickTime (-zk-ticktime).
func zkTickNote(tick string) string {
	if tick == "" || tick == "0s" {
		return "Simba's ZooKeeper DSN leaves tickTime out (-zk-ticktime 0): its sessions ask for the TTL"
	}
	return "Simba's ZooKeeper DSN passes it on, `tickTime=" + tick + "`, so its sessions ask for the TTL less one tick; go-zookeeper's sessions ask for the TTL"
}

// describe fills in the machine, versions and date.
func describe(r *report) {
	r.Date = time.Now().UTC().Format("2006-01-02 15:04 MST")
	if b, err := exec.Command("uname", "-srm").Output(); err == nil {
		r.Machine = strings.TrimSpace(string(b))
	}
	r.CPUs = runtime.NumCPU()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				r.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	r.Go = runtime.Version()
	r.Simba = "unknown"
	if b, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		r.Simba = strings.TrimSpace(string(b))
	}
	r.Peers = map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			for _, p := range []string{"github.com/bsm/redislock", "github.com/go-redsync/redsync/v4", "cirello.io/pglock", "github.com/go-zookeeper/zk", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/client/v3", "github.com/redis/go-redis/v9"} {
				if d.Path == p {
					r.Peers[p] = d.Version
				}
			}
		}
	}
}

func f2(x float64) string {
	if x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

func ms(x float64) string {
	switch {
	case x == 0:
		return "–"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func errNote(n int, last string) string {
	if n == 0 {
		return ""
	}
	if len(last) > 120 {
		last = last[:120] + "…"
	}
	return fmt.Sprintf("%d failed (%s)", n, strings.ReplaceAll(last, "|", "/"))
}

// markdown renders the report as one table per measure.
func markdown(r *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Simba beside the peers\n\n")
	fmt.Fprintf(&b, "Run %s on %s, %d CPUs (%s); %s; Simba %s; TTL %s; %d rounds, interleaved; %s in all.  \n", r.Date, r.Machine, r.CPUs, r.CPU, r.Go, r.Simba, r.TTL, r.Rounds, r.Elapsed)
	var peers []string
	for k, v := range r.Peers {
		peers = append(peers, k+" "+v)
	}
	sort.Strings(peers)
	fmt.Fprintf(&b, "Peers: %s.  \n", strings.Join(peers, ", "))
	fmt.Fprintf(&b, "Reproduce: `make bench-peers` (`go -C bench run ./cmd/benchpeers -h` for the flags). Servers on this machine: Redis, Redis Cluster (3 masters, 3 replicas), PostgreSQL, MariaDB, ZooKeeper (tickTime 200 ms, .ci/zoo.cfg; %s); SQLite on a temporary file; etcd embedded in a child process of the harness (etcd's concurrency package and Simba's etcd backend on the same member). Each round takes the cycle and hand-over rows one server at a time, with only that server's clients open: they are opened for the server's slice and closed after it, so no other row's keep-alives, pings or hint listeners run in the harness meanwhile; every slice starts with untimed warm-ups (20 cycles, 2 hand-overs per row).\n\n", zkTickNote(r.ZKTickTime))

	if r.Selected != "" || r.HandoverSamples != defaultHandSamples {
		sel := r.Selected
		if r.HandoverSamples != defaultHandSamples {
			sel = strings.TrimPrefix(sel+fmt.Sprintf("; up to %d hand-over samples per row per round (-handover-samples)", r.HandoverSamples), "; ")
		}
		fmt.Fprintf(&b, "**A partial run.** Selected: %s.\n\n", sel)
	}
	writeTargets(&b, r)
	// A partial run leaves out the sections of the measures it did not run.
	if r.sel.measure(mCycle) {
		writeCycle(&b, r)
	}
	if r.sel.measure(mHandover) {
		writeHandover(&b, r)
	}
	if r.sel.measure(mFailover) {
		writeFailover(&b, r)
	}
	// A report written again from a run before the stale-write measure has no rows of it.
	if r.sel.measure(mStale) && len(r.Stale) > 0 {
		writeStale(&b, r)
	}
	if r.sel.measure(mKeepAlive) {
		writeKeepAlive(&b, r)
	}
	if len(r.Waiting) > 0 {
		writeWaiting(&b, r)
	}
	writeSkipped(&b, r.Skipped)
	return b.String()
}

// writeSkipped writes the "Left out" section: each row or measure left out of a run and why,
// sorted (nothing when none was).
func writeSkipped(b *strings.Builder, skipped map[string]string) {
	if len(skipped) == 0 {
		return
	}
	b.WriteString("\n## Left out\n\n| what | why |\n|---|---|\n")
	ks := make([]string, 0, len(skipped))
	for k := range skipped {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Fprintf(b, "| %s | %s |\n", k, strings.ReplaceAll(skipped[k], "|", "/"))
	}
}

// writeCycle writes the cycle section.
func writeCycle(b *strings.Builder, r *report) {
	b.WriteString("## Cycle: acquire + release, one goroutine\n\n")
	b.WriteString("In same-run baseline operations: the median over rounds of (µs per cycle ÷ µs per baseline op of the same round and server). Baselines: Redis (and Redis Cluster, on one key's master) one EVALSHA of `return 1`; PostgreSQL, MariaDB, SQLite one one-row UPDATE; ZooKeeper one create + delete; etcd one Put.\n\n")
	b.WriteString("Redis commands per cycle: what the row's go-redis client sent (EVALSHA counts one, whatever its script does inside), median over rounds.\n\n")
	b.WriteString("| server | library | cycle (baseline ops) | µs per cycle (median) | Redis commands per cycle | notes |\n|---|---|---|---|---|---|\n")
	for _, c := range r.Cycle {
		ratio := f2(c.MedianRatio)
		if c.Baseline {
			ratio = "1 (baseline)"
		}
		cmds := "–"
		if len(c.CmdsPerOp) > 0 {
			cmds = fmt.Sprintf("%.2f", c.MedianCmds)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.0f | %s | %s |\n", c.Group, c.Name, ratio, c.MedianUS, cmds, errNote(c.Errors, c.LastError))
	}
}

// writeHandover writes the graceful handover section.
func writeHandover(b *strings.Builder, r *report) {
	b.WriteString("\n## Graceful handover: holder lets go → waiter granted\n\n")
	fmt.Fprintf(b, "Two clients (two sessions, two connection pools) in this process, except in the rows \"%s\": there one client is in this process and the other in a child process (this binary re-executed), the lock going back and forth between them, and the time runs from just before the holder's Unlock to the waiter's Lock returning, on the wall clock both processes read. The waiter has been waiting for 30 ms when the holder unlocks (Election: the leader calls Stop or StepDown; the time runs to the candidate's OnElected). Up to %d samples per row per round (fewer where one takes long). p99 is the nearest-rank percentile: over fewer than 100 samples it is the slowest one. Each server's \"baseline: …, one op alone\" row times its cycle baseline (the same op as in the cycle table) one op per sample in the same slice, each after the same 30 ms idle pause as the waiter's (on a VM a request after an idle pause costs several times one sent right after another): the server's own write, the step a hand-over's release and grant are each made of, so its p99 is a floor that the host and the server set under the hand-over's.\n\n", plain(rowLockXProc), r.HandoverSamples)
	b.WriteString("| server | library | samples | p50 ms | p99 ms | max ms | notes |\n|---|---|---|---|---|---|---|\n")
	for _, h := range r.Handover {
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s |\n", h.Group, h.Name, len(h.MS), ms(h.P50), ms(h.P99), ms(h.Max), errNote(h.Errors, h.LastError))
	}
}

// writeFailover writes the crash failover section.
func writeFailover(b *strings.Builder, r *report) {
	b.WriteString("\n## Crash failover: holder process SIGKILLed → waiter granted\n\n")
	b.WriteString("A holder process (this binary re-executed) takes the lock and renews it; a waiter in the harness waits; the holder is SIGKILLed after a random 0.3–1.3 s; time to the waiter's grant in TTLs. One sample per row per round, all rows at once. Calls: the waiter's backend calls from the kill to the grant, per TTL (Simba: counted by a spi.Backend decorator, acquire calls / all calls; redislock, redsync: every Redis command, by a go-redis hook; etcd: unary gRPC calls, watches not counted; – where the library gives no hook).\n\n")
	b.WriteString("| server | library | samples | p50 ×TTL | max ×TTL | waiter's acquire calls per TTL | waiter's calls per TTL | notes |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.Failover {
		acq, all := "–", "–"
		if f.Counted {
			acq, all = fmt.Sprintf("%.1f", f.MedAcq), fmt.Sprintf("%.1f", f.MedAll)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", f.Group, f.Name, len(f.TTLRatios), f2(f.P50), f2(f.Max), acq, all, errNote(f.Errors, f.LastError))
	}
}

// writeStale writes the stale-write section.
func writeStale(b *strings.Builder, r *report) {
	b.WriteString("\n## Stale writes after a pause past the TTL\n\n")
	fmt.Fprintf(b, "Kleppmann's GC-pause scenario, for each library. A holder process (this binary re-executed) takes the lock, does what the library's documentation recommends before a write (the check column), says it is about to write and waits for a word on stdin; the harness SIGSTOPs it there, so the pause falls between the check and the write. A waiter of the same library in the harness takes the lock once the holder's lease has run out and writes its own value to the shared resource through the same write path; once the holder has been stopped for %s (1.5 × TTL) or more, the harness lets it go on (SIGCONT) and the holder writes. **Landed**: the resource ended with the stale holder's value, written after the new holder's: the safety violation. Otherwise the holder learned it had lost the lock before writing (pglock: the context `Client.Do` hands its function had ended, and the write was not sent or not committed), or the resource refused the write (Simba: the fence helper's `fence.ErrStaleToken`; etcd: the `Txn`'s `IsOwner()` guard). Simba's and etcd's holders write on a context of their own, so that the resource's check is what is measured: a Simba holder that writes on the term's `Context()` (the `Held` doc's \"or watch Context\") mostly never sends the write, since the term's context ends as soon as the process runs again (in a run so written, 2026-12-04 19:55 UTC, 6 rounds: 42 of 42 writes of Simba's rows; etcd's holder on the session's `Ctx()`: 6 of 6). The resource is a row of a PostgreSQL table (written in a transaction: Simba through `fencesql.Write`, the peers a plain `UPDATE`), a Redis key (Simba through `fenceredis.Set`, the peers a plain `SET`; on the Cluster for Simba's Cluster row) or, for etcd's Mutex, a key in the same etcd. One round per row per round of the run, all rows at once, each with its own lock name and resource.\n\n", (mustTTL(r.TTL) * 3 / 2).String())
	if s := staleSummary(r.Stale); s != "" {
		b.WriteString(s + "\n\n")
	}
	b.WriteString("| server | library | resource | rounds | **stale write landed** | holder learned it lost the lock (no write) | refused by the resource | other error | paused ×TTL (median) | what the holder checks, and how it writes | notes |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Stale {
		landed := strconv.Itoa(s.Landed)
		if s.Landed > 0 {
			landed = "**" + landed + "**"
		}
		var notes []string
		if s.Lost > 0 && s.LastLost != "" {
			notes = append(notes, "learned: "+clip(s.LastLost, 200))
		}
		if s.Refused > 0 && s.LastRefusal != "" {
			notes = append(notes, "refused: "+clip(s.LastRefusal, 200))
		}
		if s.Failed > 0 && s.LastFailure != "" {
			notes = append(notes, "write failed: "+clip(s.LastFailure, 200))
		}
		if e := errNote(s.Errors, s.LastError); e != "" {
			notes = append(notes, "rounds "+e)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %d | %d | %d | %s | %s | %s |\n", s.Group, s.Name, s.Resource, s.Rounds, landed, s.Lost, s.Refused, s.Failed, f2(pct(s.PauseTTLs, 50)), strings.ReplaceAll(s.Check, "|", "/"), strings.Join(notes, "; "))
	}
}

// clip is s on one line, without pipes, cut to n bytes at most.
func clip(s string, n int) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", "/")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// staleSummary is the stale-write section's first line: the stale writes that landed, Simba's
// rows and the peers' apart ("" without rounds).
func staleSummary(rows []*staleRes) string {
	var simbaWrites, simbaLanded, simbaRows int
	var peers []string
	for _, s := range rows {
		if s.Rounds == 0 {
			continue
		}
		if strings.Contains(s.Name, "Simba") {
			simbaRows++
			simbaWrites += s.Rounds
			simbaLanded += s.Landed
			continue
		}
		peers = append(peers, fmt.Sprintf("%s %d of %d", plain(s.Name), s.Landed, s.Rounds))
	}
	if simbaRows == 0 && len(peers) == 0 {
		return ""
	}
	var parts []string
	if simbaRows > 0 {
		parts = append(parts, fmt.Sprintf("Simba `Lock`: %d of %d paused holders' writes landed, on %d backends", simbaLanded, simbaWrites, simbaRows))
	}
	if len(peers) > 0 {
		parts = append(parts, "the peers': "+strings.Join(peers, ", "))
	}
	return "**" + strings.Join(parts, "; ") + ".**"
}

// writeKeepAlive writes the keep-alive section.
func writeKeepAlive(b *strings.Builder, r *report) {
	b.WriteString("\n## Keep-alive: Simba's calls per renewal interval while holding N leases\n\n")
	b.WriteString("One client holds N locks (taken by 32 goroutines); its backend calls are counted from just after a keep-alive over 3.5 renewal intervals (TTL/3) and divided by 3. Cells: KeepAlive calls / all calls, per interval. On Redis, also the round trips per interval counted by a go-redis hook on each server's client: the most pipelines any one server (on a Cluster: master) got, and the single commands to all servers; \"on m\" is the number of servers that got any.\n\n")
	var sizes []int
	seen := map[int]bool{}
	for _, k := range r.KeepAlive {
		if !seen[k.Leases] {
			seen[k.Leases] = true
			sizes = append(sizes, k.Leases)
		}
	}
	b.WriteString("| server |")
	for _, n := range sizes {
		fmt.Fprintf(b, " %d leases |", n)
	}
	b.WriteString("\n|---|")
	for range sizes {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	var groups []string
	for _, k := range r.KeepAlive {
		if len(groups) == 0 || groups[len(groups)-1] != k.Group {
			groups = append(groups, k.Group)
		}
	}
	for _, g := range groups {
		fmt.Fprintf(b, "| %s |", g)
		for _, n := range sizes {
			for _, k := range r.KeepAlive {
				if k.Group == g && k.Leases == n {
					if k.Error != "" {
						e := k.Error
						if len(e) > 80 {
							e = e[:80] + "…"
						}
						fmt.Fprintf(b, " not measured: %s |", strings.ReplaceAll(strings.ReplaceAll(e, "\n", " "), "|", "/"))
					} else if k.Servers > 0 {
						fmt.Fprintf(b, " %.2f / %.2f; ≤ %.2f pipelines per server + %.2f single commands, on %d |", k.KeepAlivePerRenew, k.CallsPerRenew, k.MaxPipesPerServer, k.SinglesPerRenew, k.Servers)
					} else {
						fmt.Fprintf(b, " %.2f / %.2f |", k.KeepAlivePerRenew, k.CallsPerRenew)
					}
				}
			}
		}
		b.WriteString("\n")
	}
}

// writeWaiting writes the waiting-cost section.
func writeWaiting(b *strings.Builder, r *report) {
	b.WriteString("\n## Waiting: what a waiting process costs while the holder lives\n\n")
	fmt.Fprintf(b, "A holder process takes a lock; a second process (this binary re-executed) calls `Lock` on it and, after %v, is watched for %v: its CPU time (getrusage, user + system, as a share of one core; the Go runtime's own work included; SQLite on a file of its own, which only the holder and the waiter write) and its backend calls (counted by the spi.Backend decorator), per TTL. Beside it, over the same seconds, an idle process: the same client and TTL, its session open and kept alive, waiting for nothing (SQLite on another file of its own): what any process pays for its session. Waiting adds the difference. Once per run, every backend at once.\n\n", waitSettle, waitWatch(mustTTL(r.TTL)))
	b.WriteString("| server | watched s | CPU waiting (% of a core) | CPU idle, session open | waiting adds | acquire calls per TTL | all calls per TTL | notes |\n|---|---|---|---|---|---|---|---|\n")
	for _, w := range r.Waiting {
		if w.Error != "" {
			fmt.Fprintf(b, "| %s | – | – | – | – | – | – | %s |\n", w.Group, errNote(1, w.Error))
			continue
		}
		idle, added, note := "–", "–", ""
		if a, ok := w.addedCPU(); ok {
			idle, added = fmt.Sprintf("%.2f", 100*w.IdleCPUShare), fmt.Sprintf("%.2f", 100*a)
		} else {
			note = "idle process: " + errNote(1, w.IdleError)
		}
		fmt.Fprintf(b, "| %s | %.1f | %.2f | %s | %s | %.2f | %.2f | %s |\n", w.Group, w.Seconds, 100*w.CPUShare, idle, added, w.AcqPerTTL, w.AllPerTTL, note)
	}
}

func write(r *report, out string) error {
	md := markdown(r)
	fmt.Print(md)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "latest.md"), []byte(md), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "latest.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var labels []string
	var vals plotter.Values
	for _, c := range r.Cycle {
		if c.Baseline || c.MedianRatio == 0 {
			continue
		}
		labels = append(labels, c.Group+": "+plain(c.Name))
		vals = append(vals, c.MedianRatio)
	}
	if err := barChart(filepath.Join(out, "cycle.png"), "Cycle cost (acquire + release) in same-run baseline ops, TTL "+r.TTL, "baseline ops", labels, []plotter.Values{vals}, nil, false); err != nil {
		return err
	}
	labels = nil
	var p50, p99 plotter.Values
	for _, h := range r.Handover {
		if len(h.MS) == 0 {
			continue
		}
		labels = append(labels, h.Group+": "+plain(h.Name))
		p50 = append(p50, max(h.P50, 0.01))
		p99 = append(p99, max(h.P99, 0.01))
	}
	return barChart(filepath.Join(out, "handover.png"), "Graceful handover latency (ms, log scale)", "ms", labels, []plotter.Values{p50, p99}, []string{"p50", "p99"}, true)
}

// logBase is the value at the left edge of a log-scaled bar chart.
const logBase = 0.01

// decadeTicks labels a log10(v/logBase) axis with v at every decade.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for k := math.Floor(lo); k <= math.Ceil(hi); k++ {
		t = append(t, plot.Tick{Value: k, Label: strconv.FormatFloat(logBase*math.Pow(10, k), 'g', -1, 64)})
	}
	return t
}

func plain(s string) string { return strings.NewReplacer("**", "", "`", "").Replace(s) }

// barChart draws horizontal bars, one series per vals entry, one row per label.
func barChart(path, title, unit string, labels []string, vals []plotter.Values, legend []string, logScale bool) error {
	if len(labels) == 0 {
		return nil
	}
	// The first row on top: NominalY counts from the bottom.
	labels = slices.Clone(labels)
	slices.Reverse(labels)
	for i := range vals {
		vals[i] = slices.Clone(vals[i])
		slices.Reverse(vals[i])
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = unit
	if logScale {
		// Bars start at zero, which a log scale cannot show: plot log10(v/logBase) on a
		// linear axis and label its ticks with v.
		for _, v := range vals {
			for i := range v {
				v[i] = math.Log10(max(v[i], logBase) / logBase)
			}
		}
		p.X.Tick.Marker = decadeTicks{}
		p.X.Min = 0
	}
	w := vg.Points(14) / vg.Length(len(vals))
	for i, v := range vals {
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Offset = vg.Length(i)*w - vg.Length(len(vals)-1)*w/2
		bars.Color = plotter.DefaultLineStyle.Color
		if i > 0 {
			bars.Color = plotter.DefaultGlyphStyle.Color
		}
		if i == 1 {
			bars.Color = colorOrange
		}
		p.Add(bars)
		if legend != nil {
			p.Legend.Add(legend[i], bars)
		}
	}
	p.Legend.Top = true
	p.NominalY(labels...)
	return p.Save(9*vg.Inch, vg.Length(len(labels))*vg.Points(20)+vg.Inch*1.5, path)
}

var colorOrange = color.RGBA{R: 230, G: 130, B: 30, A: 255}

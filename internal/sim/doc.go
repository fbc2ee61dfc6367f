// Package sim is Simba's deterministic simulator (DESIGN.md §8): N pure engines
// (internal/engine) as clients against one model backend (simbatest.Model, the same model the
// in-memory backend serves) on virtual time, with faults, and invariant checks over the whole
// run. Every source of nondeterminism — the configuration and fault mix, latencies, fates of
// calls and hints, user actions, clock rates and origins, the Jitter of every event, session
// ids — comes from one seed (a math/rand/v2 PCG stream), so a seed replays exactly.
//
// # A run
//
// Sim.Run(seed, 0) plays DefaultShape: 60 s of backend (virtual) time, 5 clients × 3
// elections (e0..e2) × 1 group g of 8 partitions, plus a lock lk, TTL 3 s (renewal interval
// and call timeout 1 s). A discrete-event scheduler (a heap of (time, seq) items) delivers
// requests to the backend after a request latency, replies back after a reply latency (or a
// timeout error after one renewal interval), engine timers from Arm effects (stale firings are
// dropped by arm sequence), hints, the exits of leader work, user actions and faults. Each
// client has its own clock, client time = origin + rate × backend time, with |rate − 1| within
// the engine's Options.Drift (1%, 5% or 20% by seed); the engine is stepped with client time,
// and checks convert back to backend time through the same mapping.
//
// The first 45 s are the safety phase, with faults chosen per seed (see Faults): lost
// requests; lost replies (the call takes effect, the client sees a timeout); call timeouts
// whose requests may still reach the backend after the client gave up (Sim.LandAfterTimeout);
// late replies (a backend that ignores the call's context: past the deadline); slow legs;
// sessions expired by force at the backend (Model.ExpireSession); backend outages (in half
// the seeds with outages, their quick errors are permanent refusals: Faults.Refusals); client
// pauses mostly longer than the TTL (nothing is processed, then everything queued at once at
// the late time); crashes (the engine is dropped, its session expires at the backend) and
// restarts (a fresh engine); lost hints, no hints, expiry hints or not, keep-alives that report
// every held lease; leases with an expiry of their own, as on Redis (Faults.LeaseExpiry, half
// the seeds: simbatest.WithLeaseExpiry), with keep-alive requests slowed so that an acquire
// sent after one may reach the backend first (Faults.SlowKeepAlive); waiter entries that live
// with their session, as on ZooKeeper and etcd (Faults.SessionWaiters, half the seeds without
// lease expiry: simbatest.WithSessionWaiters, with the engines told so through
// engine.Options.QueueLivesWithSession, and each client's backend running a failed withdrawal
// again with its session's next keep-alive, as spi.SessionQueue requires); HeldBy replies
// that leave the time left unknown, with the end of a waiter entry hinted, as on ZooKeeper
// and etcd (Faults.UnknownRemaining, half the session-waiter seeds with hints and expiry
// hints: simbatest.WithUnknownRemaining, with the engines told that hints are steady through
// engine.Options.SteadyHints, so that a waiter that hears no hint tries again two TTLs after a
// HeldBy; steady means not lost to a reconnect, not never lost, so LostHint still drops
// hints before healing and the liveness check bounds what the fallback retry costs); leader
// work that exits on its own, soon after revocation, slowly or never;
// and users that Start, Stop, StepDown, Lock, TryLock (then unlock), Join, Leave and Close at
// random points. Then the faults heal: paused clients resume, crashed clients due to restart
// do (others stay dead), calls are normal, and only unlocks remain.
//
// # Checks
//
// Each check has a name (the Check* constants) and reports the backend time, the clients and
// the names involved:
//   - one-valid-term: at no instant do two clients hold a term they believe valid for one name
//     (valid from Elected until Revoked, while the client's clock is before the session
//     deadline it last published); checked whenever a term starts, which suffices because a
//     lapsed term never becomes valid again (no-revival). Partitions are names like any other.
//     Terms of sessions the backend expired by force are exempt (the backend broke the promise
//     the engine relies on); expired-session-revoked then checks that the client revokes them
//     as soon as any reply tells it the session expired (rule 4).
//   - valid-term-holds-lease, polled every 100 ms at the model: a term its client believes
//     valid has its lease held at the backend by the term's session with the term's token
//     (forced expiries exempt). one-valid-term needs another client to be granted the lease
//     while the term is wrongly believed valid; this sees the window itself.
//   - tokens-increase, adopt-before-deadline, revoke-before-release (rule 2),
//     elected-revoked-pairs (exactly one Revoked per Elected, or the end of the run).
//   - handover (rule 5): a new holder never starts while an earlier holder's work still runs
//     and its client's clock is before the deadline as of the stop (or the revocation, for a
//     lost term).
//   - unwanted-lease-released (rule 3), polled every 100 ms at the model: a lease held by the
//     live current session of a running client none of whose elections wants it (candidate,
//     leader, handover or acquire in flight) is released within one renewal interval plus a
//     round trip, counted from the later of when it became unwanted and the last fault that
//     touched that client.
//   - futures-complete: every future completes exactly once, by the end of the run.
//   - join-after-leave: the user joins again only after its Leave completed, and the engine
//     takes that Join at once, never refusing it nor keeping it waiting for the group's leave
//     (a Leave that completes while still leaving would be caught).
//   - liveness: 3 TTLs after healing and again at the end, every running client has a live
//     session, every election some client wants has a leader whose session holds the lease,
//     the group's members at the backend are exactly the running clients that joined it, and
//     each partition is held by a valid term of its rendezvous owner (wire.Owner).
//
// # Running it
//
//	go test ./internal/sim                                        # 500 seeds (CI), ~1-3 s here
//	go test ./internal/sim -run TestSimulate -seeds=N [-seedbase=B] [-all] -v
//	go test ./internal/sim -run TestSimulate -seed=S -v [-lines=N] # replay one seed
//	make sim                                                      # 10,000 seeds
//
// The options drawn from the seed's first stream (newRand) are those of the seeds recorded
// below; LeaseExpiry, SlowKeepAlive, SessionWaiters and UnknownRemaining come from a second
// stream (newAuxRand) and draw from the run's stream only when enabled, so a seed with
// lease-expiry=false and session-waiters=false replays exactly as it did before they were
// added, and one with unknown-remaining=false as before that was (of the seeds named
// below, 1, 6, 87, 892, 1545, 4725, 6218, 1711, 5778 and 75172 now run with lease expiry, and
// 4 and 9837 with session waiters, and replay differently).
//
// A failure prints the seed, the configuration derived from it, the exact replay command and
// the last 400 lines (-lines) of events, effects and driver notes before the violation,
// printed with the engine's stable Event.String and Effect.String.
//
// TestMutations breaks each of rules 1–6 in turn (engine.Options.Break) and asserts that the
// default seeds find a violation; with the seeds of this commit rule 1 is caught by
// tokens-increase (seed 17), rule 2 by revoke-before-release (seed 1), rule 3 by
// unwanted-lease-released (seed 3), rule 4 by expired-session-revoked (seed 4), rule 5 by
// handover (seed 1) and rule 6 by valid-term-holds-lease (seed 91, on the lease-expiry
// model). TestCheckersFire shows that one-valid-term fires when clocks drift three times
// beyond the bound, and liveness when given no time to settle. TestSessionWaitersMutations
// shows that the session-waiter runs are checked: engines told that entries live with their
// session while the model's lapse (a false spi.SessionQueue claim) are caught by fair-queue
// (seed 1: a waiter that no longer re-attempts is passed over), and a backend that does not
// run failed withdrawals again by liveness (seed 198).
//
// # Speed
//
// On this 2-core machine, shared with other engineers' builds (load average 3–8), BenchmarkSeed
// runs 355–730 seeds/s on both cores (about 1,600 engine steps, 230 KB and 2,300 allocations
// per seed, most of them the engine's), and TestSimulate 70–180 seeds/s under the race
// detector: the 500 CI seeds take 1.5–3 s, or 3–7 s with -race. `make sim` (10,000 seeds)
// takes 14–24 s of wall time. Items, calls
// and terms live in slices reused from run to run, the scheduler is a heap of small structs,
// and the transcript ring copies events and effects and formats them only on failure.
//
// # Engine issues the simulator found
//
// With LandAfterTimeout (the default) the simulator found three engine bugs sharing one cause,
// an outcome left unknown by a timeout and forgotten while the abandoned request could still
// land. Each has a reproduction that now passes:
//   - an adoption cleared the unknown outcome of an earlier, abandoned acquire, so after the
//     term was released the abandoned request could grant the lease again unasked-about
//     (TestEngineReleasesLateGrantAfterAdoption; seeds 892, 1545, 4725, 6218, 7469, 9837);
//   - a Leave did not wait out a Join of unknown outcome, which could land after it
//     (TestEngineLeaveAfterLateJoin; seeds 1711, 3236, 5207, 5778);
//   - a timed-out Leave landing after the group was joined again left the engine believing
//     it was a member: a keep-alive sent after the Join that does not list the session now
//     makes the engine join again (TestEngineRejoinAfterLateLeave; seeds 36882, 75172), and
//     a Join now sends its call only once a timed-out Leave of the group can no longer land,
//     so the late Leave deletes nothing (TestEngineJoinWaitsOutLateLeave, found by reading);
//   - a Join of unknown outcome outlived its session, so a Leave while the next session
//     opened never finished and the group could never be joined again (futures-complete once
//     Leave waited for its work; seed 87; testdata/leave.txt in package engine).
//
// With the fixes, `make sim` (seeds 1..10,000) runs clean in about 20 s here.
//
// With session waiters the simulator found a fifth: a queued acquire that timed out and
// landed after its election had stopped waiting (its withdrawal already done) registered the
// session as a waiter, and an entry that lives with its session then held the free lease back
// for as long as the session lived (liveness; 11 of seeds 1..5000, listed in
// TestSessionWaiterSeeds). With QueueLivesWithSession the keep-alive that settles such an
// acquire's unknown outcome (rule 3) now withdraws it when the election no longer waits
// (testdata/queue-session.txt in package engine); 20,000 seeds run clean.
//
// With the lease-expiry model the simulator found a fourth engine bug, since fixed (chaos finding
// 2026-12-03-redis-seed-32405): the engine gives a term its session's deadline and extends it
// with every keep-alive reply, including one sent before the acquire (so it does not name the
// lease) that ran at the backend after the grant; the lease's own expiry stays one renewal
// interval behind, and if the next keep-alives fail the lease lapses and another client may
// take it while the term is believed valid. Seeds 91, 140, 486 (valid-term-holds-lease) and
// 175, 209, 337 (one-valid-term) of the default 500 fail on it, and 2796, 2929 and 9610
// through a handover (the work's cover outlives the lease); TestLeaseExpirySeeds lists them
// with the others of seeds 1..2000. The engine's rule 6 (a term's deadline bounded by its
// grant's own time left until a keep-alive reply lists the lease held) fixed it: those seeds
// pass, and 30,000 seeds run clean.
//
// With Faults.Refusals covering a group's Leave the simulator found another: a Leave refused
// for good returned its error and the engine let the group go, while the membership stayed
// with the session (as the model's memberships do), so the other members kept assigning
// partitions to a member that led none of them (liveness; 9 of seeds 1..5000: 260, 1030,
// 1410, 1579, 1646, 1871, 2775, 3489, 4293). The engine now retries such a leave in the
// background while the session lives (testdata/leave-refused.txt in package engine), and
// seeds 1..5000 run clean with Leave refusals.
package sim

package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// slotOf returns the Redis Cluster hash slot of every key whose hash tag is tag (CRC16/XMODEM
// of the tag, mod 16384). Simba's keys are tagged with the whole name, which contains no
// braces, so the slot of wire.LeaseKey(name) is slotOf(name).
func slotOf(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^tag[i]]
	}
	return crc & 16383
}

// namesBySlot groups names by the Cluster hash slot of their keys (slotOf): the calls and
// transactions that take several names' keys go one per slot.
func namesBySlot(names []string) map[uint16][]string {
	bySlot := map[uint16][]string{}
	for _, n := range names {
		slot := slotOf(n)
		bySlot[slot] = append(bySlot[slot], n)
	}
	return bySlot
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// sessionView is a copy of a routeBySlot session's state taken under b.mu.
type sessionView struct {
	owner   string
	expires int64
	expired bool
}

// clusterSession returns what the backend knows of sid. A session this backend did not open
// (another backend's, or one from before a restart) is read once from its hash; a session
// that no longer exists is reported expired.
func (b *Backend) clusterSession(ctx context.Context, sid spi.SessionID) (sessionView, error) {
	b.mu.Lock()
	st := b.sessions[sid]
	if st != nil {
		v := sessionView{st.owner, st.expires, st.expired}
		b.mu.Unlock()
		return v, nil
	}
	b.mu.Unlock()
	vals, err := b.c.HMGet(ctx, wire.SessionKey(string(sid)), wire.SessionFieldOwner, wire.SessionFieldExpires).Result()
	if err != nil {
		return sessionView{}, b.fail("read session", err)
	}
	owner, _ := vals[0].(string)
	e, _ := vals[1].(string)
	expires, perr := strconv.ParseInt(e, 10, 64)
	b.mu.Lock()
	defer b.mu.Unlock()
	if st = b.sessions[sid]; st == nil {
		st = &session{owner: owner, expires: expires}
		st.expired = vals[0] == nil || perr != nil
		b.sessions[sid] = st
	}
	return sessionView{st.owner, st.expires, st.expired}, nil
}

// renewed records a session expiry from a successful renewal (expiries only move forward) and
// reports the latest.
func (b *Backend) renewed(sid spi.SessionID, expires int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.sessions[sid]
	if st == nil {
		st = &session{}
		b.sessions[sid] = st
	}
	st.expires = max(st.expires, expires)
	return st.expires
}

// expiredNow records that sid no longer exists at the server.
func (b *Backend) expiredNow(sid spi.SessionID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.sessions[sid]; st != nil {
		// Its leases and memberships expired with it: nothing is left to release on close.
		st.expired = true
		st.leases.clear()
		st.groups.clear()
		return
	}
	b.sessions[sid] = &session{expired: true}
}

// trackedSet is a set of names — a session's leases or its groups — recorded so that
// CloseSession releases or leaves them (the session's sets are not maintained in Cluster mode).
// A name is recorded when its acquire or join is sent, so that one whose reply is lost, or
// that lands while CloseSession is under way, is released or left too. Each recording carries
// a number (gen), and a release or leave removes the name only if it was not recorded again
// after it looked: an acquire or join of the name may be sent while its release or leave is
// in flight (the engine sends a name's acquire while its release is; a Leave whose caller left
// goes on after bounded returned), and the release's or leave's reply, handled after that
// acquire or join was recorded, must leave it recorded. The zero value is an empty set.
type trackedSet struct {
	gens map[string]uint64
	last uint64 // the latest gen handed out; never reset, so that a gen is never reused
}

// add records name and returns the number of this recording.
func (t *trackedSet) add(name string) uint64 {
	if t.gens == nil {
		t.gens = map[string]uint64{}
	}
	t.last++
	t.gens[name] = t.last
	return t.last
}

// remove drops name unless it was recorded again after gen (0 when it was not recorded).
func (t *trackedSet) remove(name string, gen uint64) {
	if g, ok := t.gens[name]; ok && g == gen {
		delete(t.gens, name)
	}
}

// clear drops every name, keeping the numbering.
func (t *trackedSet) clear() { clear(t.gens) }

// nameSet selects one of a session's tracked sets.
type nameSet int

const (
	leaseNames nameSet = iota // session.leases
	groupNames                // session.groups
)

// set returns the session's set which.
func (st *session) set(which nameSet) *trackedSet {
	if which == groupNames {
		return &st.groups
	}
	return &st.leases
}

// track records name in sid's set which and returns the number of this recording, for
// untrack (0 for a session the backend no longer knows).
func (b *Backend) track(sid spi.SessionID, which nameSet, name string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.sessions[sid]; st != nil {
		return st.set(which).add(name)
	}
	return 0
}

// trackedGen returns the number of name's latest recording in sid's set which (0: none), for
// a release or leave to pass to untrack after its reply.
func (b *Backend) trackedGen(sid spi.SessionID, which nameSet, name string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.sessions[sid]; st != nil {
		return st.set(which).gens[name]
	}
	return 0
}

// untrack drops name from sid's set which unless it was recorded again after gen.
func (b *Backend) untrack(sid spi.SessionID, which nameSet, name string, gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.sessions[sid]; st != nil {
		st.set(which).remove(name, gen)
	}
}

// latest returns the session's latest known expiry.
func (b *Backend) latest(sid spi.SessionID) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.sessions[sid]; st != nil {
		return st.expires
	}
	return 0
}

// onNode returns the client of the master that serves key when replies must be followed by a
// WAIT on the same connection (a *redis.ClusterClient pipeline would send WAIT to any node);
// otherwise the backend's client.
func (b *Backend) onNode(ctx context.Context, key string) (goredis.Cmdable, error) {
	if b.cc == nil || b.waitN == 0 {
		return b.c, nil
	}
	n, err := b.cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// script is a generated Lua script (package luascripts) with keys K, arguments A and reply R,
// for runOnNode.
type script[K, A, R any] interface {
	Run(ctx context.Context, c goredis.Scripter, keys K, args A) (R, error)
	EvalSha(ctx context.Context, c goredis.Scripter, keys K, args A) *goredis.Cmd
	Eval(ctx context.Context, c goredis.Scripter, keys K, args A) *goredis.Cmd
	Decode(v any) (R, error)
}

// runOnNode runs s through the backend's client, or WithWaitReplicas on the master of key
// (onNode) followed by WAIT (waited, with wrote saying which replies wrote).
func runOnNode[K, A, R any](ctx context.Context, b *Backend, ttl time.Duration, key string, s script[K, A, R], keys K, args A, wrote func(R) bool) (R, error) {
	if b.waitN == 0 {
		return s.Run(ctx, b.c, keys, args)
	}
	node, err := b.onNode(ctx, key)
	if err != nil {
		var zero R
		return zero, err
	}
	return waited(ctx, b, ttl, node, s.EvalSha, s.Eval, s.Decode, keys, args, wrote)
}

// acquireAt is Acquire under routeBySlot: acquire_at on the lease key alone, with the owner and
// the session's expiry (Redis time) from the latest keep-alive.
//
// One race needs a second call: a keep-alive that renewed the session (expiry E2) and ran its
// keep_alive_leases on this lease's slot before this grant landed there did not move the lease,
// which then carries the older expiry E1 the acquire sent, while the engine adopts the term under
// the session deadline of E2. When the session's expiry moved while the acquire was in flight,
// the grant is therefore followed by keep_alive_leases(E2) on the lease before it is reported.
//
// That follow-up may find the grant gone: the engine sends a name's acquire without waiting for
// the reply of the same session's release of the name's previous term, so acquire_at can land
// first and answer as a re-acquire (the released term's token), and the release then lands
// before keep_alive_leases. The grant it would report is one the engine refuses anyway (rule 1:
// not above a token it released); what the caller asked is the lease now, so acquire_at is sent
// again (a fresh grant, the holder that came in between, or the re-acquire of a term that is
// still held) rather than the call failing as an outage (a backend error, an early keep-alive).
func (b *Backend) acquireAt(ctx context.Context, sid spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	// Each retry needs a renewal during the previous attempt and the grant gone: two in a row
	// are already unlikely; the bound only keeps a broken server from looping.
	const attempts = 3
	for try := 1; ; try++ {
		r, gone, err := b.acquireAtOnce(ctx, sid, name, queued)
		if !gone || try == attempts {
			return r, err
		}
	}
}

// acquireAtOnce is one attempt of acquireAt. gone reports a grant that the follow-up
// keep_alive_leases no longer found held with its token (err says so too).
func (b *Backend) acquireAtOnce(ctx context.Context, sid spi.SessionID, name string, queued bool) (_ spi.Acquire, gone bool, _ error) {
	st, err := b.clusterSession(ctx, sid)
	if err != nil {
		return spi.Acquire{}, false, err
	}
	if st.expired {
		return spi.Acquire{Kind: spi.SessionExpired}, false, nil
	}
	// Tracked before sending, so that CloseSession also releases a grant whose reply is lost.
	gen := b.track(sid, leaseNames, name)
	key := wire.LeaseKey(name)
	keys := luascripts.AcquireAtKeys{Lease: key, Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)}
	args := luascripts.AcquireAtArgs{SessionID: string(sid), Owner: st.owner, ExpiresMS: st.expires, Queued: flag(queued)}
	// A slot being migrated refuses acquire_at (its keys are never all on one side): wait for
	// the migration here rather than fail and wait out the engine's backoff (followSlotMove).
	r, err := followSlotMove(ctx, b, 0, func() (luascripts.AcquireAtReply, error) {
		return runOnNode(ctx, b, 0, key, luascripts.AcquireAt, keys, args,
			func(r luascripts.AcquireAtReply) bool { return r.Status == luascripts.StatusOK })
	})
	if err != nil {
		return spi.Acquire{}, false, b.clusterFailKeys(ctx, "acquire "+name, err, scriptKeys(luascripts.AcquireAt.Build(keys, args)))
	}
	if r.Status != luascripts.StatusOK {
		if r.Status == luascripts.StatusHeldBy {
			b.untrack(sid, leaseNames, name, gen)
		}
		a, err := acquireReply(r.Status, r.Token, r.RemainingMS, r.Holder, r.Owner)
		return a, false, err
	}
	if latest := b.latest(sid); latest > st.expires {
		kr, err := b.keepAliveLeases(ctx, sid, latest, []string{name})
		if err != nil {
			return spi.Acquire{}, false, b.clusterFailKeys(ctx, "acquire "+name, err, []string{key})
		}
		if kr.Status != luascripts.StatusOK || len(kr.Held) != 1 || kr.Held[0].Token != r.Token {
			// Status ok (the session lives) and the lease not held with the grant's token: the
			// grant is gone (see acquireAt); an expired session or a malformed reply is not.
			gone = kr.Status == luascripts.StatusOK
			return spi.Acquire{}, gone, spi.Unavailable("redis acquire "+name, fmt.Errorf("moving the grant to the session's renewed expiry: %+v", kr))
		}
		r.RemainingMS = kr.RemainingMS
	}
	a, err := acquireReply(r.Status, r.Token, r.RemainingMS, r.Holder, r.Owner)
	return a, false, err
}

// keepAliveLeases runs keep_alive_leases on names (one slot), followed by WAIT when configured.
func (b *Backend) keepAliveLeases(ctx context.Context, sid spi.SessionID, expires int64, names []string) (luascripts.KeepAliveLeasesReply, error) {
	keys := luascripts.KeepAliveLeasesKeys{Leases: make([]string, len(names))}
	for i, n := range names {
		keys.Leases[i] = wire.LeaseKey(n)
	}
	args := luascripts.KeepAliveLeasesArgs{SessionID: string(sid), ExpiresMS: expires, Names: names}
	return followSlotMove(ctx, b, 0, func() (luascripts.KeepAliveLeasesReply, error) {
		return runOnNode(ctx, b, 0, keys.Leases[0], luascripts.KeepAliveLeases, keys, args,
			func(r luascripts.KeepAliveLeasesReply) bool { return r.Status == luascripts.StatusOK })
	})
}

// clusterFail classifies err and, for a redirection (the slot moved) or a failure with no reply
// from the server (a refused connection, a timeout: the master may be down and its slots
// failed over), has the Cluster client reload its slot map (in the background, at most one
// reload at a time) so that the retry goes to the right master. go-redis reloads it by itself
// only after a MOVED or READONLY reply, or once a minute (ClusterStateReloadInterval): without
// this, a client kept sending to a killed master for up to a minute after its replica had taken
// over (TestClusterFailoverLosesStateWithoutWait).
func (b *Backend) clusterFail(op string, err error) error {
	return b.clusterFailKeys(context.Background(), op, err, nil)
}

// clusterFailKeys is clusterFail for a script call on keys: a WRONGTYPE error goes to failKeys,
// which names the key of another type.
func (b *Backend) clusterFailKeys(ctx context.Context, op string, err error, keys []string) error {
	if keys != nil && goredis.HasErrorPrefix(err, "WRONGTYPE") {
		return b.failKeys(ctx, op, err, keys)
	}
	var reply goredis.Error
	if b.cc != nil && (goredis.HasErrorPrefix(err, "MOVED") || goredis.HasErrorPrefix(err, "ASK") ||
		goredis.HasErrorPrefix(err, "CLUSTERDOWN") || goredis.HasErrorPrefix(err, "READONLY") ||
		(err != nil && !errors.As(err, &reply))) {
		b.cc.ReloadState(context.Background())
	}
	return b.fail(op, err)
}

// joinAt is Join under routeBySlot: join_at with the session's expiry from its latest
// keep-alive (redone with the newer expiry if a keep-alive renewed the session meanwhile, so
// that a late join never lowers the membership's score below the session's expiry).
func (b *Backend) joinAt(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	st, err := b.clusterSession(ctx, sid)
	if err != nil {
		return 0, err
	}
	if st.expired {
		return spi.Expired, nil
	}
	expires := st.expires
	// Recorded before sending, so that a CloseSession under way when the join lands, or one
	// after a join whose reply was lost, leaves the group too (see trackedSet).
	gen := b.track(sid, groupNames, group)
	for {
		r, err := followSlotMove(ctx, b, 0, func() (luascripts.JoinAtReply, error) {
			return luascripts.JoinAt.Run(ctx, b.c, luascripts.JoinAtKeys{Group: wire.GroupKey(group)},
				luascripts.JoinAtArgs{SessionID: string(sid), ExpiresMS: expires, GroupName: group})
		})
		if err != nil {
			return 0, b.clusterFailKeys(ctx, "join "+group, err, []string{wire.GroupKey(group)})
		}
		if r.Status != luascripts.StatusOK {
			b.untrack(sid, groupNames, group, gen)
			return spi.Expired, nil
		}
		latest := b.latest(sid)
		if latest <= expires {
			return spi.OK, nil
		}
		expires = latest
	}
}

// leaveAt is Leave under routeBySlot.
func (b *Backend) leaveAt(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	st, err := b.clusterSession(ctx, sid)
	if err != nil {
		return 0, err
	}
	gen := b.trackedGen(sid, groupNames, group)
	r, err := followSlotMove(ctx, b, 0, func() (luascripts.LeaveAtReply, error) {
		return luascripts.LeaveAt.Run(ctx, b.c, luascripts.LeaveAtKeys{Group: wire.GroupKey(group)},
			luascripts.LeaveAtArgs{SessionID: string(sid), ExpiresMS: st.expires, GroupName: group})
	})
	if err != nil {
		return 0, b.clusterFailKeys(ctx, "leave "+group, err, []string{wire.GroupKey(group)})
	}
	b.untrack(sid, groupNames, group, gen)
	if st.expired {
		return spi.Expired, nil
	}
	return status(r.Status), nil
}

// call is one script call of a pipelined round: its routing key (and all its keys, which
// failKeys reads after a WRONGTYPE; nil: not read), its script, how to queue it with EVALSHA
// and with EVAL, its command once sent, and its failure (the command's error, or its
// pipeline's WAIT falling short) once the round is over.
type call struct {
	key    string
	keys   []string
	script luascripts.Info
	sha    func(goredis.Pipeliner) *goredis.Cmd
	eval   func(goredis.Pipeliner) *goredis.Cmd
	cmd    *goredis.Cmd
	err    error
	// bestEffort: the call's failure does not fail a close (a withdraw: see waitSet).
	bestEffort bool
}

// round sends calls as one pipelined round: one pipeline per master, on that master's own
// client, all at once (with WithWaitReplicas each ending with WAIT). Calls that met NOSCRIPT are
// sent again once their scripts are loaded (see pipeline). Each call's outcome is its own
// (call.err): a master that is down fails its part of the round only, so that the keep-alive can
// still report what the others renewed.
//
// Not the Cluster client's pipeline: it retries the part of a master that is down (with
// backoff, up to MaxRedirects times) before it returns anything, and on running out of time it
// marks every call failed, those the other masters answered too. A keep-alive through it with
// one master killed took 3.3 s on a private Cluster (ReadTimeout 1 s, MaxRedirects 3): longer
// than the 3 s TTL, so that the masters that answered ran their part after the session's new
// expiry, and with a call timeout of one renewal interval it failed as a whole
// (TestClusterKeepAliveSurvivesAMaster). The node's own client retries a refused connection as
// its options say, delaying no other master's part. A call that a master refuses because its
// slot is being migrated (MOVED, ASK, or TRYAGAIN when the slot's keys it names are split
// between two masters) is sent again until the slot settles, for half the time left at most
// (followSlotMove): through the Cluster client, which follows the redirection, or
// WithWaitReplicas on the masters' own clients. Without TRYAGAIN's retry, a keep-alive of two
// leases of one slot whose keys were half migrated named both unrenewed, and the client revoked
// both terms (TestClusterKeepAliveFollowsSlotMigration).
//
// Nothing is loaded beforehand: the scripts are in the servers' caches from the first call that
// used them until a restart, a failover or SCRIPT FLUSH, and a round is usually a keep-alive,
// which must end within its timeout — the first one after a grant within the grant's own bound
// (less than a renewal interval). Loading every script before the first round
// (luascripts.LoadAll: 18 SCRIPT LOADs one after the other, each on every master) made that
// keep-alive 20 round trips instead of 2 and up to ~100 ms long on a loaded 2-CPU machine, and
// it timed out there (TestTermNotPastRedisLease/cluster, TestClusterFirstKeepAliveRoundTrips).
func (b *Backend) round(ctx context.Context, calls []*call) {
	if len(calls) == 0 {
		return
	}
	if b.cc == nil {
		_ = b.pipeline(ctx, b.c, calls) // each call's outcome is in call.err
		return
	}
	b.onMasters(ctx, calls)
	moving, _ := slotMovingCalls(calls)
	if len(moving) == 0 {
		return
	}
	// Sent again until their slots settle (followSlotMove), for half the time left at most, so
	// that the keep-alive reports what it renewed before its timeout; a call still refused then
	// fails alone (its leases unrenewed). Through the Cluster client, which follows MOVED and
	// ASK; WithWaitReplicas on the masters' own clients again (WAIT must follow each call on its
	// master's connection), the slot map reloaded after a MOVED.
	_, _ = followSlotMove(ctx, b, halfLeft(ctx), func() (struct{}, error) {
		if b.waitN > 0 {
			b.onMasters(ctx, moving)
		} else {
			_ = b.pipeline(ctx, b.c, moving)
		}
		var first error
		moving, first = slotMovingCalls(moving)
		return struct{}{}, first
	})
}

// slotMovingCalls returns those of calls refused because their slot is being migrated
// (slotMoving), to send again, and the first such refusal.
func slotMovingCalls(calls []*call) (moving []*call, first error) {
	for _, c := range calls {
		if slotMoving(c.err) {
			moving = append(moving, c)
			if first == nil {
				first = c.err
			}
		}
	}
	return moving, first
}

// onMasters sends calls in one pipeline per master, on that master's own client, all at once
// (see round); each call's outcome is left in call.err.
func (b *Backend) onMasters(ctx context.Context, calls []*call) {
	byNode := map[*goredis.Client][]*call{}
	for _, c := range calls {
		n, err := b.cc.MasterForKey(ctx, c.key)
		if err != nil {
			c.err = err
			continue
		}
		byNode[n] = append(byNode[n], c)
	}
	var wg sync.WaitGroup
	for n, cs := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = b.pipeline(ctx, n, cs)
		}()
	}
	wg.Wait()
}

// pipeline sends calls in one pipeline on c (followed by WAIT when configured and c is not a
// Cluster client). Calls that met NOSCRIPT are sent again in a second pipeline: with EVALSHA
// once loadScripts has loaded their scripts (one SCRIPT LOAD per script and master whatever the
// number of calls, rather than resending every call's source), with EVAL if a load failed;
// on a Cluster client, those still NOSCRIPT then go once more with EVAL (the load went to the
// master a stale slot map names, after a slot moved).
// Each call's outcome is left in call.err; pipeline returns the first failure.
func (b *Backend) pipeline(ctx context.Context, c goredis.Cmdable, calls []*call) error {
	_, isCluster := c.(*goredis.ClusterClient)
	wait := b.waitN > 0 && !isCluster
	var ms int64
	if wait {
		ms = b.waitMS(ctx, 0)
	}
	send := func(cs []*call, eval bool) *goredis.Cmd {
		pipe := c.Pipeline()
		for _, x := range cs {
			if eval {
				x.cmd = x.eval(pipe)
			} else {
				x.cmd = x.sha(pipe)
			}
		}
		var w *goredis.Cmd
		if wait {
			w = b.wait(ctx, pipe, ms)
		}
		_, _ = pipe.Exec(ctx)
		return w
	}
	w := send(calls, false)
	var again []*call
	for _, x := range calls {
		if luascripts.IsNoScript(x.cmd.Err()) {
			again = append(again, x)
		}
	}
	if len(again) > 0 {
		w = send(again, loadScripts(ctx, c, again) != nil)
		if isCluster {
			// Still NOSCRIPT: loaded on the master the client's slot map names, while the
			// slot had moved to another (the map is reloaded lazily after a migration), which
			// ran the call. With EVAL, whichever master runs it caches it.
			var still []*call
			for _, x := range again {
				if luascripts.IsNoScript(x.cmd.Err()) {
					still = append(still, x)
				}
			}
			if len(still) > 0 {
				send(still, true)
			}
		}
	}
	var werr error
	if wait {
		werr = b.waitShortfall(w, ms, "")
	}
	var first error
	for _, x := range calls {
		// A WAIT that fell short fails every call of its pipeline: none of their writes is
		// known to survive a failover.
		if x.err = x.cmd.Err(); x.err == nil {
			x.err = werr
		}
		if first == nil {
			first = x.err
		}
	}
	return first
}

// loadScripts loads the scripts of calls (SCRIPT LOAD, once per script and server) where they
// run: on c, or, for a Cluster client, on the master of each call's key only, so that a master
// that is down, or a replica, does not fail the load.
func loadScripts(ctx context.Context, c goredis.Cmdable, calls []*call) error {
	done := map[[2]string]bool{}
	for _, x := range calls {
		node, addr := c, ""
		if cc, ok := c.(*goredis.ClusterClient); ok {
			n, err := cc.MasterForKey(ctx, x.key)
			if err != nil {
				return err
			}
			node, addr = n, n.Options().Addr
		}
		if k := [2]string{addr, x.script.SHA1}; !done[k] {
			done[k] = true
			if err := node.ScriptLoad(ctx, x.script.Source).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// keepAliveCluster is KeepAlive under routeBySlot: keep_alive with the session's keys only
// (its slot) gives the session's new expiry E; then one pipelined round per master renews the
// asked leases to E (keep_alive_leases, one call per slot) and, per group, refreshes the
// membership's score to E and reads the live members (keep_alive_group).
//
// The keep-alive fails as a whole, as a retryable error, when the session's own call fails: then
// nothing was renewed that the client may count on. Once the session is renewed, a master that
// fails its part of the round (down, paused, cut off, its WAIT short: any retryable failure)
// costs only what lives on it: the reply leaves out its leases and names them Unrenewed, and the
// client revokes their terms at once, as not renewed (rule 3; a term missing from the reply
// without that word is taken over) — safe, since those leases were not
// moved to E and lapse at their older expiry, while every lease the reply lists was renewed to E
// by a call that succeeded, and so lives as long as the session. A term adopted from a grant
// after the request was sent is not revoked by its absence, but stays bounded by its grant's own
// remaining time until a keep-alive lists it (rule 6), so it never outlives a lease left at an
// older expiry either. A group whose call failed is left out of Members (the client keeps its
// last view; its partitions are leases, guarded as above). Failing as a whole instead, as this
// once did, let the client's session deadline pass although the session was renewed, and one
// master's failure cost every lease on every master (TestClusterKeepAliveSurvivesAMaster). A
// permanent failure of any call still fails the whole keep-alive, so it is reported rather than
// read as a lost lease.
func (b *Backend) keepAliveCluster(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	// A session this backend did not open is read once (for the owner acquire_at needs).
	st, err := b.clusterSession(ctx, sid)
	if err != nil {
		return spi.KeepAlive{}, err
	}
	if st.expired {
		return spi.KeepAlive{Expired: true}, nil
	}
	s := string(sid)
	skeys := luascripts.KeepAliveKeys{Session: wire.SessionKey(s), SessionLeases: wire.SessionLeasesKey(s), SessionGroups: wire.SessionGroupsKey(s)}
	sargs := luascripts.KeepAliveArgs{SessionID: s}
	// The session's keys are split while its slot's keys are being migrated: wait, for half the
	// time left at most, so that the round has its share.
	r, err := followSlotMove(ctx, b, halfLeft(ctx), func() (luascripts.KeepAliveReply, error) {
		return runOnNode(ctx, b, 0, skeys.Session, luascripts.KeepAlive, skeys, sargs,
			func(r luascripts.KeepAliveReply) bool { return r.Status == luascripts.StatusOK })
	})
	if err != nil {
		return spi.KeepAlive{}, b.clusterFailKeys(ctx, "keep-alive", err, scriptKeys(luascripts.KeepAlive.Build(skeys, sargs)))
	}
	if r.Status != luascripts.StatusOK {
		b.expiredNow(sid)
		return spi.KeepAlive{Expired: true}, nil
	}
	b.renewed(sid, r.ExpiresMS)
	e := r.ExpiresMS

	bySlot := namesBySlot(names)
	ctx2 := ctx
	leaseCalls := make([]*call, 0, len(bySlot))
	leaseNames := make([][]string, 0, len(bySlot)) // the names of each of leaseCalls
	for _, ns := range bySlot {
		leaseNames = append(leaseNames, ns)
		keys := luascripts.KeepAliveLeasesKeys{Leases: make([]string, len(ns))}
		for i, n := range ns {
			keys.Leases[i] = wire.LeaseKey(n)
		}
		args := luascripts.KeepAliveLeasesArgs{SessionID: s, ExpiresMS: e, Names: ns}
		leaseCalls = append(leaseCalls, &call{
			key:    keys.Leases[0],
			keys:   keys.Leases,
			script: luascripts.KeepAliveLeases.Info(),
			sha:    func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.KeepAliveLeases.EvalSha(ctx2, p, keys, args) },
			eval:   func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.KeepAliveLeases.Eval(ctx2, p, keys, args) },
		})
	}
	// Per group: refresh the membership's score to E if the session is a member (never a join,
	// never lowering a score a newer keep-alive set) and read the live members.
	groupCalls := make([]*call, 0, len(groups))
	for _, g := range groups {
		keys := luascripts.KeepAliveGroupKeys{Group: wire.GroupKey(g)}
		gargs := luascripts.KeepAliveGroupArgs{SessionID: s, ExpiresMS: e, GroupName: g}
		groupCalls = append(groupCalls, &call{
			key:    keys.Group,
			keys:   []string{keys.Group},
			script: luascripts.KeepAliveGroup.Info(),
			sha:    func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.KeepAliveGroup.EvalSha(ctx2, p, keys, gargs) },
			eval:   func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.KeepAliveGroup.Eval(ctx2, p, keys, gargs) },
		})
	}
	all := append(append([]*call(nil), leaseCalls...), groupCalls...)
	b.round(ctx, all)
	for _, c := range all {
		if c.err == nil {
			continue
		}
		// clusterFailKeys has the slot map reloaded, so that the next call goes to whichever master
		// serves the slot by then.
		if f := b.clusterFailKeys(ctx, "keep-alive", c.err, c.keys); spi.Classify(f) == spi.Permanent || !errors.Is(f, spi.ErrUnavailable) {
			return spi.KeepAlive{}, f
		}
	}
	ka := spi.KeepAlive{Remaining: ms(r.RemainingMS)}
	for i, c := range leaseCalls {
		if c.err != nil {
			// Not renewed: left out, so the client revokes its term now, and named as such,
			// so that it revokes it as not renewed rather than taken over.
			ka.Unrenewed = append(ka.Unrenewed, leaseNames[i]...)
			continue
		}
		lr, err := luascripts.KeepAliveLeases.Decode(c.cmd.Val())
		if err != nil {
			return spi.KeepAlive{}, b.fail("keep-alive", err)
		}
		if lr.Status != luascripts.StatusOK {
			return spi.KeepAlive{}, spi.Unavailable("redis keep-alive", fmt.Errorf("the session's expiry %d has passed by the clock of the master of %s", e, c.key))
		}
		ka.Held = append(ka.Held, heldList(lr.Held)...)
	}
	if len(groups) > 0 {
		ka.Members = make(map[string][]spi.SessionID, len(groups))
	}
	for i, g := range groups {
		if groupCalls[i].err != nil {
			continue // no view: the client keeps the one it has
		}
		mr, err := luascripts.KeepAliveGroup.Decode(groupCalls[i].cmd.Val())
		if err != nil {
			return spi.KeepAlive{}, b.fail("keep-alive", err)
		}
		ka.Members[g] = b.memberIDs(g, mr.Members)
		setLapse(&ka, g, mr.LapseMS)
	}
	return ka, nil
}

// closeCluster is CloseSession under routeBySlot: release_leases (any token of this session)
// per slot of the names this backend acquired for the session and leave_at per group it
// joined, in one pipelined round per master, then close_session with the session's keys only.
func (b *Backend) closeCluster(ctx context.Context, sid spi.SessionID) error {
	s := string(sid)
	b.mu.Lock()
	var names, groups []string
	var e int64
	expired := false
	if st := b.sessions[sid]; st != nil {
		for n := range st.leases.gens {
			names = append(names, n)
		}
		for g := range st.groups.gens {
			groups = append(groups, g)
		}
		e, expired = st.expires, st.expired
	}
	b.mu.Unlock()
	// The withdraws of the names the session may wait for (see waitSet) go first in the same
	// round, ahead of close_session (none for a session known expired: its entries lapsed with
	// it); their failure does not fail the close.
	var waited []string
	if !expired {
		waited = b.queued.names(sid)
	}
	withdraws := b.withdrawCalls(ctx, sid, waited)
	calls := append([]*call(nil), withdraws...)
	bySlot := namesBySlot(names)
	for _, ns := range bySlot {
		keys := luascripts.ReleaseLeasesKeys{Leases: make([]string, len(ns))}
		for i, n := range ns {
			keys.Leases[i] = wire.LeaseKey(n)
		}
		args := luascripts.ReleaseLeasesArgs{SessionID: s, Names: ns, Tokens: make([]int64, len(ns))}
		calls = append(calls, &call{
			key:    keys.Leases[0],
			script: luascripts.ReleaseLeases.Info(),
			sha:    func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.ReleaseLeases.EvalSha(ctx, p, keys, args) },
			eval:   func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.ReleaseLeases.Eval(ctx, p, keys, args) },
		})
	}
	for _, g := range groups {
		keys := luascripts.LeaveAtKeys{Group: wire.GroupKey(g)}
		args := luascripts.LeaveAtArgs{SessionID: s, ExpiresMS: e, GroupName: g}
		calls = append(calls, &call{
			key:    keys.Group,
			script: luascripts.LeaveAt.Info(),
			sha:    func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.LeaveAt.EvalSha(ctx, p, keys, args) },
			eval:   func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.LeaveAt.Eval(ctx, p, keys, args) },
		})
	}
	if len(calls) > 0 {
		// Those refused while their slots move are sent again until they settle (withdraws
		// only while a release or leave waits too: they alone do not hold the close up); any
		// other failure of a release or leave fails the close, a withdraw's is logged.
		pending := calls
		_, _ = followSlotMove(ctx, b, 0, func() (struct{}, error) {
			_ = b.pipeline(ctx, b.c, pending)
			var moving error
			pending, moving = slotMovingCalls(pending)
			if !slices.ContainsFunc(pending, func(c *call) bool { return !c.bestEffort }) {
				moving = nil
			}
			return struct{}{}, moving
		})
		for _, c := range calls {
			if c.err != nil && !c.bestEffort {
				return b.clusterFail("close session", c.err)
			}
		}
		b.warnUnwithdrawn(sid, waited, func(i int) error { return withdraws[i].err })
	}
	ckeys := luascripts.CloseSessionKeys{Session: wire.SessionKey(s), SessionLeases: wire.SessionLeasesKey(s), SessionGroups: wire.SessionGroupsKey(s)}
	cargs := luascripts.CloseSessionArgs{SessionID: s}
	if _, err := followSlotMove(ctx, b, 0, func() (luascripts.CloseSessionReply, error) {
		return luascripts.CloseSession.Run(ctx, b.c, ckeys, cargs)
	}); err != nil {
		return b.clusterFailKeys(ctx, "close session", err, scriptKeys(luascripts.CloseSession.Build(ckeys, cargs)))
	}
	b.mu.Lock()
	delete(b.sessions, sid) // a later call reads the (deleted) hash and finds it expired
	b.mu.Unlock()
	return nil
}

package redis

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// waitSet is, per session of this backend, the names whose waiter queue may hold the
// session's entry: an AcquireQueued that replied HeldBy, or failed (its entry may have been
// written all the same), adds the name; a grant, a Withdraw that succeeded, the session's
// close or its expiry remove it. CloseSession withdraws these names before it deletes the
// session (withdrawCalls, withdrawStandalone): Redis keeps no per-session set of waited names
// and close_session touches no queue, so a session closed while it was a free lease's first
// waiter left its entry behind, the lease reserved for a dead session until the entry's
// expiry (up to a TTL), and the next waiter, told HeldBy naming it, slept that long. The
// client withdraws before it closes, but that withdraw may fail or be cut by Close's
// deadline, and an SPI user may call CloseSession directly.
//
// The hub's interest is not used for this: it is kept only while the backend has a Hints
// subscriber, and it lapses on a timer, while an entry lives until it is withdrawn or expires.
// A name kept after its entry went (a grant or withdraw whose reply was lost) costs one
// withdraw at close, which finds no entry and changes nothing.
type waitSet struct {
	mu sync.Mutex
	m  map[spi.SessionID]map[string]struct{}
}

// noteAcquire records what a queued or plain acquire of name by sid tells about its entry.
// An uncontended grant finds nothing to remove and allocates nothing.
func (w *waitSet) noteAcquire(sid spi.SessionID, name string, queued bool, r spi.Acquire, err error) {
	switch {
	case err != nil:
		if queued && !errors.Is(err, spi.ErrInvalidName) && !errors.Is(err, spi.ErrBackendClosed) {
			w.add(sid, name)
		}
	case r.Kind == spi.HeldBy:
		if queued {
			w.add(sid, name)
		}
	case r.Kind == spi.Granted:
		w.done(sid, name) // a grant removes the grantee's entry
	case r.Kind == spi.SessionExpired:
		w.drop(sid)
	}
}

func (w *waitSet) add(sid spi.SessionID, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[spi.SessionID]map[string]struct{}{}
	}
	names := w.m[sid]
	if names == nil {
		names = map[string]struct{}{}
		w.m[sid] = names
	}
	names[name] = struct{}{}
}

// done forgets sid's entry for name (granted or withdrawn).
func (w *waitSet) done(sid spi.SessionID, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.m) == 0 {
		return
	}
	if names := w.m[sid]; names != nil {
		delete(names, name)
		if len(names) == 0 {
			delete(w.m, sid)
		}
	}
}

// drop forgets every entry of sid (closed or expired: its entries lapsed or were withdrawn).
func (w *waitSet) drop(sid spi.SessionID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, sid)
}

// names returns the names sid may still wait for.
func (w *waitSet) names(sid spi.SessionID) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.m[sid]))
	for n := range w.m[sid] {
		out = append(out, n)
	}
	return out
}

// withdrawCalls are the withdraw script calls of a close of sid, one per name it may wait
// for, for a Cluster close's pipelined round (closeCluster). Each is best effort: its failure
// does not fail the close.
func (b *Backend) withdrawCalls(ctx context.Context, sid spi.SessionID, names []string) []*call {
	calls := make([]*call, 0, len(names))
	for _, n := range names {
		keys, args := withdrawRequest(sid, n)
		calls = append(calls, &call{
			key:        keys.Lease,
			script:     luascripts.Withdraw.Info(),
			sha:        func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.Withdraw.EvalSha(ctx, p, keys, args) },
			eval:       func(p goredis.Pipeliner) *goredis.Cmd { return luascripts.Withdraw.Eval(ctx, p, keys, args) },
			bestEffort: true,
		})
	}
	return calls
}

// queueWithdraws queues on pipe, for a standalone close, the withdraw calls of names (EVALSHA,
// or EVAL when eval), in the pipeline that reads the session's sets: no round trip of their
// own.
func (b *Backend) queueWithdraws(ctx context.Context, pipe goredis.Pipeliner, sid spi.SessionID, names []string, eval bool) []*goredis.Cmd {
	cmds := make([]*goredis.Cmd, len(names))
	for i, n := range names {
		keys, args := withdrawRequest(sid, n)
		if eval {
			cmds[i] = luascripts.Withdraw.Eval(ctx, pipe, keys, args)
		} else {
			cmds[i] = luascripts.Withdraw.EvalSha(ctx, pipe, keys, args)
		}
	}
	return cmds
}

// withdrawRequest is the withdraw script's keys and arguments for sid's entry in name's queue.
func withdrawRequest(sid spi.SessionID, name string) (luascripts.WithdrawKeys, luascripts.WithdrawArgs) {
	return luascripts.WithdrawKeys{Lease: wire.LeaseKey(name), Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)},
		luascripts.WithdrawArgs{SessionID: string(sid), Name: name}
}

// warnUnwithdrawn logs the names of a close's withdraws (names[i], whose outcome is errOf(i))
// that failed, with the first failure: the session closes all the same, and the next waiter of
// each such name, told HeldBy naming the closed session, tries again only when that entry
// lapses (its expiry as of the session's latest queued acquire: up to a TTL), as before
// CloseSession withdrew at all.
func (b *Backend) warnUnwithdrawn(sid spi.SessionID, names []string, errOf func(i int) error) {
	var failed []string
	var first error
	for i, n := range names {
		if err := errOf(i); err != nil {
			failed = append(failed, n)
			first = cmp.Or(first, err)
		}
	}
	if len(failed) == 0 {
		return
	}
	b.log.Warn("simba: redis: close session: withdrawing the session from the waiter queues it was in failed; the session is closed all the same, and each such lease stays reserved for it until its entry lapses (up to a TTL)",
		"session", string(sid), "leases", failed, "err", first.Error())
}

// withdrawHooks are test hooks, nil outside tests: sending runs before a Withdraw's script is
// sent, answered after its reply came, before the backend notes the wait ended, ended when the
// Withdraw's body has ended; waiting when an AcquireQueued starts waiting for a withdrawal of
// its session and name in flight.
type withdrawHooks struct {
	sending, answered, ended func(sid spi.SessionID, name string)
	waiting                  func()
}

// withdrawals orders a session's withdrawals of a name with its AcquireQueued of that name:
// an AcquireQueued waits for the Withdraws of its session and name in flight before it is sent
// (await), and a Withdraw ends (end) only after its bookkeeping (waitSet, the hub). A Withdraw
// whose caller gave up goes on to its end (bounded), so without this an AcquireQueued of the
// same session and name made meanwhile (the waiter came back for the name) could lose its wait
// either way: answered after the withdraw script ran, its entry was then forgotten by waitSet
// (the session's CloseSession no longer withdrew it: the lease stayed reserved for the closed
// session for up to a TTL) and by the hub; answered before the script ran (a withdraw still on
// its way), its entry was deleted by it (the waiter, told HeldBy, waited without a place, and a
// late comer could be granted the lease it was owed). backend/sql and backend/etcd order them
// alike.
type withdrawals struct {
	n       atomic.Int32 // Withdraws in flight: an AcquireQueued looks no further while 0
	mu      sync.Mutex
	running map[withdrawKey]*inflight
}

// errWithdrawAbandoned is the result of a Withdraw's body that found its caller gone before it
// began: it sends nothing, and nobody reads the result.
var errWithdrawAbandoned = errors.New("redis: withdraw: abandoned before it was sent")

// withdrawKey is one session's withdrawal from one name's queue.
type withdrawKey struct {
	sid  spi.SessionID
	name string
}

// inflight counts the Withdraws of one session and name in flight; done is closed when the
// last one has ended.
type inflight struct {
	n    int
	done chan struct{}
}

// withdrawal is one Withdraw begun (withdrawals.begin). Its body claims it before it sends
// anything (run); a Withdraw whose body never ran (its caller left first) ends it itself
// (abandon), and the body, if it starts later, sends nothing.
type withdrawal struct {
	key   withdrawKey
	state atomic.Int32 // 0 begun, 1 run by the body, 2 abandoned before the body ran
}

// run reports whether the body may go on: false once the Withdraw was abandoned.
func (w *withdrawal) run() bool { return w.state.CompareAndSwap(0, 1) }

// abandon reports whether the body never ran and now never will: the Withdraw ends it.
func (w *withdrawal) abandon() bool { return w.state.CompareAndSwap(0, 2) }

// begin notes a Withdraw of sid from name; end must follow.
func (ws *withdrawals) begin(sid spi.SessionID, name string) *withdrawal {
	w := &withdrawal{key: withdrawKey{sid, name}}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.running == nil {
		ws.running = map[withdrawKey]*inflight{}
	}
	r := ws.running[w.key]
	if r == nil {
		r = &inflight{done: make(chan struct{})}
		ws.running[w.key] = r
	}
	r.n++
	ws.n.Add(1)
	return w
}

// end notes the end of w: an AcquireQueued waiting for it goes on once no other Withdraw of
// its session and name is in flight.
func (ws *withdrawals) end(w *withdrawal) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.n.Add(-1)
	if r := ws.running[w.key]; r != nil {
		if r.n--; r.n == 0 {
			close(r.done)
			delete(ws.running, w.key)
		}
	}
}

// await waits, for an AcquireQueued of sid for name about to be sent, until no Withdraw of sid
// from name is in flight, or ctx is done (its error). waiting (a test hook, else nil) runs when
// it starts waiting.
func (ws *withdrawals) await(ctx context.Context, sid spi.SessionID, name string, waiting func()) error {
	if ws.n.Load() == 0 {
		return nil
	}
	k := withdrawKey{sid, name}
	for {
		ws.mu.Lock()
		r := ws.running[k]
		ws.mu.Unlock()
		if r == nil {
			return nil
		}
		if waiting != nil {
			waiting()
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

package sql

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/minttl"
	"github.com/simba-go/simba/spi"
)

// hintBuffer is each subscriber's channel capacity; a subscriber that falls further behind loses
// hints (hints only save latency, never safety).
const hintBuffer = 1024

// Reconnection backoff of the hint listener.
const (
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// listenRetryWait is how long the hint listener waits before its next connect, given the
// backoff (full jitter). A variable for tests.
var listenRetryWait = func(backoff time.Duration) time.Duration { return rand.N(backoff) + time.Millisecond }

// listenProbeEvery is how long the hint listener waits for a notification before it checks,
// with a round trip, that its connection is still alive: a connection the network dropped
// without a word (a NAT or firewall that forgot the flow, a server host gone) sends nothing,
// and without the check the listener waited on it forever and hints stopped for good. A
// variable for tests.
var listenProbeEvery = 15 * time.Second

// hintHub fans the hints of one background runner out to the Hints subscribers. The runner
// runs while there is at least one subscriber: it starts with the first and its context is
// cancelled when the last leaves (or the backend closes). PostgreSQL's runner LISTENs;
// SQLite's polls its change counter (sqlitewake.go).
type hintHub struct {
	mu     sync.Mutex
	subs   map[chan spi.Hint]struct{}
	cancel context.CancelFunc // stops the runner
	done   chan struct{}      // closed when the runner has exited
}

// subscribe adds a subscriber until ctx ends or stop closes, starting run with the first.
func (h *hintHub) subscribe(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup, run func(context.Context)) <-chan spi.Hint {
	ch := make(chan spi.Hint, hintBuffer)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[chan spi.Hint]struct{}{}
	}
	h.subs[ch] = struct{}{}
	if h.cancel == nil {
		rctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		wg.Add(1)
		go func(done chan struct{}) {
			defer wg.Done()
			defer close(done)
			run(rctx)
		}(h.done)
	}
	h.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-stop:
		}
		h.remove(ch)
	}()
	return ch
}

// remove ends one subscription, and the runner with the last one.
func (h *hintHub) remove(ch chan spi.Hint) {
	h.mu.Lock()
	if _, ok := h.subs[ch]; !ok {
		h.mu.Unlock()
		return
	}
	delete(h.subs, ch)
	close(ch)
	var done chan struct{}
	if len(h.subs) == 0 && h.cancel != nil {
		h.cancel()
		done = h.done
		h.cancel, h.done = nil, nil
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// deliver sends hint to every subscriber; a slow subscriber loses it (hints only save latency).
func (h *hintHub) deliver(hint spi.Hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- hint:
		default:
		}
	}
}

// pgHub is PostgreSQL's hub: its runner keeps one dedicated connection LISTENing on the release
// channel of each lease a session of the backend waits for and on the own channel of each group
// a session of the backend takes part in.
type pgHub struct {
	hintHub
	// listening is signalled (non-blocking) every time the listener has (re)subscribed, or has
	// brought its LISTENs in line with the waits; tests wait on it.
	listening chan struct{}
	// reached is signalled (non-blocking) when a session of the backend opened or was kept
	// alive: the server answers the pool again, and a listener backing off after failed
	// connects tries at once (see listen).
	reached chan struct{}

	imu     sync.Mutex
	running uint64                   // the generation of the running listener (0: none); waits are noted only while one runs
	gens    uint64                   // the listeners started
	ttls    map[string]time.Duration // open session id → its TTL
	waits   waitSet                  // lease name → the sessions of the backend that wait for it
	// groups: group name → the sessions of the backend that are members of it or have a Join
	// of it in flight (a Members read of it keeps it as a linger does: see read).
	groups waitSet
	dirty  bool               // a lease or group is wanted that the listener may not LISTEN on yet
	kick   context.CancelFunc // cuts the listener's wait short (nil while it does not wait)
	linger time.Duration      // pgLinger unless a test sets it

	// heard, when set (tests only), sees every notification the listener receives.
	heard func(channel, payload string)
}

// pgLinger is how long the listener stays LISTENing on a lease's channel after the last wait
// for it ended: a re-lock loop (wait, hold for a moment, wait again) keeps its LISTEN instead
// of sending UNLISTEN, LISTEN and the LISTEN's catch-up hint (see syncListens) on every cycle. A
// lingering channel costs at most one notification per release of that name for a second.
const pgLinger = time.Second

// pgSweepEvery bounds how often the listener looks for waits and lingers that are over (it
// looks whenever it wakes: a notification, a new wait, a probe).
const pgSweepEvery = pgLinger / 4

// pgWaitTTLs is how long a wait lasts without an acquire of its session renewing it, in the
// session's TTLs. The engine re-attempts a waiting candidate at the holder's remaining time
// (at most a TTL, clamped) plus a jitter, or sooner (internal/engine/election.go, the HeldBy
// branch of the attempt's reply: at = sent + min(max(Remaining, 0), TTL) + jitter, and no
// later than the waiter entry's expiry with a waiter queue); a retry that fails is retried
// after a backoff of at most a renewal interval (a third of the TTL). Two TTLs cover that with
// room to spare; a session that stopped waiting without a Withdraw (a TryLock, a cancelled
// Lock whose Withdraw failed) stops being listened for after them. A membership lasts as long
// past its Join or the latest keep-alive naming the group: a member keeps alive every renewal
// interval, a third of the TTL by default, and a Join retried after a failure comes within a
// backoff of at most a renewal interval.
const pgWaitTTLs = 2

// pgDefaultTTL stands for a session's TTL when the backend did not open it.
const pgDefaultTTL = 15 * time.Second

// opened notes a session's TTL (its waits last pgWaitTTLs of it).
func (h *pgHub) opened(sid string, ttl time.Duration) {
	h.imu.Lock()
	if h.ttls == nil {
		h.ttls = map[string]time.Duration{}
	}
	h.ttls[sid] = ttl
	h.imu.Unlock()
	h.reachedServer()
}

// reachedServer tells a listener that backs off that the server answered a session's call.
func (h *pgHub) reachedServer() {
	select {
	case h.reached <- struct{}{}:
	default:
	}
}

// acquired notes an acquire's reply: HeldBy starts (or renews) sid's wait for name, Granted
// ends it, SessionExpired ends every wait of sid.
func (h *pgHub) acquired(sid, name string, r spi.Acquire) {
	switch r.Kind {
	case spi.HeldBy:
		h.imu.Lock()
		defer h.imu.Unlock()
		if h.running == 0 {
			return
		}
		h.noteLocked(h.waits, name, sid, time.Now())
	case spi.Granted:
		h.endWait(sid, name)
	case spi.SessionExpired:
		h.closed(sid)
	}
}

// noteLocked starts or renews sid's wait in set (h.waits or h.groups) for name, for
// pgWaitTTLs of its TTL from now, and wakes the listener to LISTEN if name is new. A listener
// must run (h.running != 0).
func (h *pgHub) noteLocked(set waitSet, name, sid string, now time.Time) {
	ttl, ok := h.ttls[sid]
	if !ok {
		ttl = pgDefaultTTL
	}
	h.wantLocked(set, name).who[sid] = now.Add(pgWaitTTLs * ttl)
}

// wantLocked returns set's entry for name, made (and the listener woken to LISTEN) if new; it
// is no longer idle.
func (h *pgHub) wantLocked(set waitSet, name string) *nameWaits {
	w, isNew := set.entry(name)
	if isNew {
		h.dirty = true
		if h.kick != nil {
			h.kick()
		}
	}
	return w
}

// joining notes a Join of group by sid about to be sent: the group's channel is LISTENed from
// now, so that the Join's own change and those after it are heard (the catch-up hint once
// the LISTEN is in covers the ones before it; see syncListens).
func (h *pgHub) joining(sid, group string) {
	h.imu.Lock()
	defer h.imu.Unlock()
	if h.running != 0 {
		h.noteLocked(h.groups, group, sid, time.Now())
	}
}

// joined notes a Join's outcome: OK renews sid's membership, Expired ends everything of sid;
// a failed Join (its outcome unknown: it may have landed) keeps what joining noted until its
// time is up or a retry renews it.
func (h *pgHub) joined(sid, group string, st spi.Status, err error) {
	switch {
	case err != nil:
	case st == spi.OK:
		h.joining(sid, group)
	default:
		h.closed(sid)
	}
}

// left notes a Leave's outcome: sid is no longer a member of group (OK), or no longer anything
// (Expired); a failed Leave changes nothing (the engine retries it).
func (h *pgHub) left(sid, group string, st spi.Status, err error) {
	switch {
	case err != nil:
	case st == spi.OK:
		h.imu.Lock()
		defer h.imu.Unlock()
		h.groups.end(sid, group, time.Now())
	default:
		h.closed(sid)
	}
}

// members notes a keep-alive of sid that renewed it naming groups: sid is still a member of
// each (the engine names only the groups it joined), so its membership is renewed, or noted
// should the listener have started after the Join. (A keep-alive sent before a Leave and
// answered after it notes the group again: its channel is then LISTENed for two TTLs more,
// which costs only the notifications of that group.)
func (h *pgHub) members(sid string, groups []string) {
	if len(groups) == 0 {
		return
	}
	h.imu.Lock()
	defer h.imu.Unlock()
	if h.running == 0 {
		return
	}
	now := time.Now()
	for _, g := range groups {
		h.noteLocked(h.groups, g, sid, now)
	}
}

// read notes a Members read of group: its channel is LISTENed (or kept) for a linger from now,
// as after the last member left, so that a change right after the read is heard (the engine
// reads members after each Join and each group hint). The client's probe reads
// wire.ProbeGroup, which no member joins: Members does not note it.
func (h *pgHub) read(group string, _ []string) {
	h.imu.Lock()
	defer h.imu.Unlock()
	if h.running == 0 {
		return
	}
	w := h.wantLocked(h.groups, group)
	if len(w.who) == 0 {
		w.idle = time.Now()
	}
}

// withdrawn ends sid's wait for name (a Withdraw).
func (h *pgHub) withdrawn(sid, name string) { h.endWait(sid, name) }

// released: a release by one of the backend's sessions changes no wait (the holder was not
// waiting).
func (h *pgHub) released(string, string) {}

// localHubFor is the hub that a release of name by the backend is hinted to at once
// (releasedLocally), or nil when no session of the backend waits for name (waits are noted
// only while the listener runs, that is while the hub has subscribers to hint). A waiter whose
// HeldBy is not noted yet when the release comes misses this hint; the LISTEN that its wait
// starts delivers a catch-up hint once it is in (syncListens), or the server's notification
// does if the channel is LISTENed already.
func (h *pgHub) localHubFor(name string) *hintHub {
	return hubIfWaited(&h.imu, &h.waits, name, &h.hintHub)
}

// endWait ends sid's wait for name (a grant, a Withdraw).
func (h *pgHub) endWait(sid, name string) {
	h.imu.Lock()
	defer h.imu.Unlock()
	h.waits.end(sid, name, time.Now()) // the linger starts if it was the last
}

// closed ends every wait and membership of session sid (closed, or found expired) and forgets
// it.
func (h *pgHub) closed(sid string) {
	h.imu.Lock()
	defer h.imu.Unlock()
	delete(h.ttls, sid)
	now := time.Now()
	h.waits.endSession(sid, now)
	h.groups.endSession(sid, now)
}

// keptAlive ends the waits of a session that the keep-alive found expired.
func (h *pgHub) keptAlive(sid string, ka spi.KeepAlive) {
	h.reachedServer()
	if ka.Expired {
		h.closed(sid)
	}
}

// start and stop bracket a listener: waits are noted only while one runs, so that a backend
// without Hints subscribers keeps none. A listener's stop may come after the next one's start
// (the hub starts a runner for a new subscriber while the last one's is still returning): it
// then leaves the new one's waits alone.
func (h *pgHub) start() (gen uint64) {
	h.imu.Lock()
	defer h.imu.Unlock()
	h.gens++
	h.running, h.waits, h.groups = h.gens, waitSet{}, waitSet{}
	return h.gens
}

func (h *pgHub) stop(gen uint64) {
	h.imu.Lock()
	defer h.imu.Unlock()
	if h.running == gen {
		h.running, h.waits, h.groups, h.dirty, h.kick = 0, nil, nil, false, nil
	}
}

// pgChan is a channel the listener LISTENs on: a lease's release channel, or a group's own
// channel.
type pgChan struct {
	group bool
	name  string // the lease or group name
}

// plan sweeps the waits and memberships that are over and the lingers past their time (at
// most every pgSweepEvery, or when a lease or group became wanted), and returns the channels to
// LISTEN on and UNLISTEN from to bring listened in line with them. hint reports, for the
// channels to LISTEN on, which owe a catch-up hint once the LISTEN is in: a lease's while a
// session still waits for it (rather than the channel only lingering), a group's always (a
// spurious group hint costs a member one members read, and a non-member nothing).
func (h *pgHub) plan(listened map[pgChan]bool, lastSweep *time.Time) (listen, unlisten []pgChan, hint map[pgChan]bool) {
	h.imu.Lock()
	defer h.imu.Unlock()
	now := time.Now()
	linger := h.linger
	if linger == 0 {
		linger = pgLinger
	}
	sets := [2]waitSet{h.waits, h.groups}
	if h.dirty || now.Sub(*lastSweep) >= pgSweepEvery {
		*lastSweep = now
		for _, set := range sets {
			for name, w := range set {
				var ended time.Time // the last of the waits that are over ended then
				for sid, until := range w.who {
					if now.After(until) {
						delete(w.who, sid)
						if until.After(ended) {
							ended = until
						}
					}
				}
				if len(w.who) == 0 && ended.After(w.idle) {
					w.idle = ended
				}
				if len(w.who) == 0 && now.Sub(w.idle) >= linger {
					delete(set, name)
				}
			}
		}
		for c := range listened {
			if sets[b2i(c.group)][c.name] == nil {
				unlisten = append(unlisten, c)
			}
		}
	}
	h.dirty = false
	for i, set := range sets {
		for name, w := range set {
			c := pgChan{group: i == 1, name: name}
			if !listened[c] {
				listen = append(listen, c)
				if c.group || len(w.who) > 0 {
					if hint == nil {
						hint = map[pgChan]bool{}
					}
					hint[c] = true
				}
			}
		}
	}
	return listen, unlisten, hint
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitOrKicked arms cancel as the kick of the wait about to begin; false when a lease or group
// became wanted since plan (the caller plans again instead of waiting).
func (h *pgHub) waitOrKicked(cancel context.CancelFunc) bool {
	h.imu.Lock()
	defer h.imu.Unlock()
	if h.dirty {
		return false
	}
	h.kick = cancel
	return true
}

// waited disarms the kick once the wait is over.
func (h *pgHub) waited() {
	h.imu.Lock()
	h.kick = nil
	h.imu.Unlock()
}

// hints subscribes to the hub, starting the listener with the first subscriber. (Backend.Hints
// has checked, under the lock Close takes, that the backend is open.)
func (d *pgDialect) hints(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) (<-chan spi.Hint, error) {
	return d.hub.subscribe(ctx, stop, wg, d.listen), nil
}

// listen keeps one connection LISTENing on the release channels of the leases the backend's
// sessions wait for and the own channels of the groups they take part in until ctx ends,
// reconnecting with capped exponential backoff (full jitter) after any failure. The backoff
// starts over only after a connection that stayed up for at least the current backoff, so a
// connection that dies as soon as it LISTENs counts as a failed connect. Its connects have a
// patience of their own (see listenOnce).
//
// A session's open or keep-alive that succeeds while the listener backs off ends the wait at
// once (pgHub.reached): the server answers again, so the outage that failed the listener's
// connects is over. Through a long outage the backoff had grown to its cap (a third of the TTL,
// or 5 s before a session opened) and the listener stayed deaf for up to that long after the
// heal while the sessions worked, so waiters heard no release hint and waited for their retry.
// Only a call that succeeded since the listener's last attempt began counts, so a listener
// whose connects fail while the pool's calls succeed (the server refusing one more connection)
// tries again at most once per keep-alive, not in a loop.
func (d *pgDialect) listen(ctx context.Context) {
	defer d.hub.stop(d.hub.start())
	backoff := listenBackoffMin
	var pat connectPatience
	for ctx.Err() == nil {
		select {
		case <-d.hub.reached: // what came before this attempt says nothing of its failure
		default:
		}
		// The backoff starts over only after a connection that stayed up for at least as
		// long as the backoff it would have waited: one that connects, LISTENs and dies at
		// once (a server that accepts and then fails, a proxy that drops it) is a failure
		// like a failed connect, or the listener reconnected every 50 ms, about 20 times a
		// second, for as long as the server kept doing so.
		if since := d.listenOnce(ctx, &pat); !since.IsZero() && time.Since(since) >= backoff {
			backoff = listenBackoffMin
		}
		t := time.NewTimer(listenRetryWait(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-d.hub.reached:
			t.Stop()
		}
		// Once a session opened, the backoff stops at a third of the TTL: a listener that
		// failed through a long outage must not stay deaf for seconds after it ends.
		limit := listenBackoffMax
		if ttl := d.b.minTTL.Get(); ttl > 0 {
			limit = min(limit, max(ttl/3, listenBackoffMin))
		}
		backoff = min(2*backoff, limit)
	}
}

// probeEvery returns how long the listener waits for a notification before it pings, and how
// long that ping may take (bounded by timeout, the connect timeout): listenProbeEvery and
// timeout until a session opened, then at most the probe interval of the shortest TTL asked
// for and its reply's allowance (minttl.Probe and minttl.Reply: a sixth and a third of the
// TTL, at least 50 and 500 ms, so that a server busy for a few hundred milliseconds, a
// checkpoint's fsync, costs no reconnect). A connection gone silent (a blackhole: no byte,
// close or reset) is so given up within half a TTL (two thirds of a TTL of 1 s); with 15 s and the connect timeout it lasted 20 s, every release in that time
// went unheard, and each hand-over to the backend's waiters waited for their retry (an outside
// trial at TTL 1 s: Locks of 8 s while the waiter's link had been down for 3.6 s).
func (d *pgDialect) probeEvery(timeout time.Duration) (every, ping time.Duration) {
	every, ping = listenProbeEvery, timeout
	if ttl := d.b.minTTL.Get(); ttl > 0 {
		every = min(every, minttl.Probe(ttl))
		ping = min(ping, minttl.Reply(every))
	}
	return every, ping
}

// listenOnce connects, LISTENs and forwards notifications until the connection fails or ctx
// ends. It returns when it got as far as listening (the zero time: it did not).
//
// Connecting and LISTENing are bounded by the connect timeout (DefaultConnectTimeout when the
// pool has none), or one TTL if shorter; while the listener's connects keep failing, each
// gets twice the last one's bound, up to the connect timeout, and one that completes starts
// over (pat, as the pool's connects have; connectPatience). The wait is cut after a probe
// interval without a notification for a ping, bounded by the connect timeout or a third of
// the TTL (see probeEvery).
//
// Without the patience a server slower to set a connection up than one TTL (forking and
// authenticating under load) was never listened to: at TTL 1 s through a proxy that held
// each new connection 1.5 s, the listener's connects all gave up at 1 s while the pool's,
// patient, went through, so sessions worked and hints had stopped for good.
func (d *pgDialect) listenOnce(ctx context.Context, pat *connectPatience) (listening time.Time) {
	cfg := d.pool.Config().ConnConfig.Copy()
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	// Connecting and LISTENing take at most one TTL once a session opened: an attempt made
	// into a blackhole would otherwise keep the listener deaf for the connect timeout after
	// the network healed.
	setup := timeout
	if ttl := d.b.minTTL.Get(); ttl > 0 {
		setup = min(setup, max(ttl, 100*time.Millisecond))
	}
	if setup < timeout {
		setup = pat.bound(time.Now(), setup, timeout)
	}
	cctx, cancel := context.WithTimeout(ctx, setup)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return time.Time{}
	}
	pat.connected()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	wd, _ := wire.SQLDialectByName(wire.SQLPostgres)
	for _, listen := range wd.Listen {
		if _, err := conn.Exec(cctx, listen); err != nil {
			return time.Time{}
		}
	}
	cancel()
	listening = time.Now()
	listened := map[pgChan]bool{} // the channels LISTENed on this connection
	var lastSweep time.Time
	signalled := false
	for {
		every, pingTimeout := d.probeEvery(timeout)
		changed, err := d.syncListens(ctx, conn, wd, listened, &lastSweep, pingTimeout)
		if err != nil {
			return listening
		}
		if changed || !signalled {
			signalled = true
			select {
			case d.hub.listening <- struct{}{}:
			default:
			}
		}
		wctx, cancel := context.WithTimeout(ctx, every)
		if !d.hub.waitOrKicked(cancel) {
			cancel() // a lease or group became wanted: LISTEN first
			continue
		}
		n, err := conn.WaitForNotification(wctx)
		d.hub.waited()
		kicked := errors.Is(wctx.Err(), context.Canceled)
		cancel()
		if err != nil {
			if ctx.Err() != nil || conn.IsClosed() {
				return listening
			}
			if kicked {
				continue // a lease or group became wanted (a wait cut short leaves the connection usable)
			}
			if !pgconn.Timeout(err) {
				return listening
			}
			// Nothing for a while: prove the connection still answers (a wait cut short by
			// its own deadline leaves the connection usable).
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return listening
			}
			continue
		}
		if d.hub.heard != nil {
			d.hub.heard(n.Channel, n.Payload)
		}
		switch {
		case strings.HasPrefix(n.Channel, wire.SQLGroupChannelPrefix):
			d.hub.deliver(spi.Hint{Kind: spi.GroupChanged, Name: n.Payload})
		case strings.HasPrefix(n.Channel, wire.SQLLeaseChannelPrefix):
			d.hub.deliver(spi.Hint{Kind: spi.Released, Name: n.Payload})
		}
	}
}

// syncListens brings the connection's LISTENs in line with the waits and memberships
// (pgHub.plan), in one round trip bounded by timeout, and reports whether it sent any. listened
// is what conn LISTENs on, and is updated.
//
// A wait starts with an acquire's HeldBy reply, and its LISTEN takes effect a round trip or so
// later: a release committed in between notifies nobody here. So once the LISTEN is in, the
// listener delivers one Released hint for each name a session still waits for, and the engine
// attempts again at once (a spurious hint costs one acquire, which finds the lease still
// held; a LISTEN is sent once per wait, not per attempt, as later attempts find it in place,
// and a lingering channel is reused without one). The alternative, LISTENing before an
// acquire is sent, needs to know that the name is wanted before its first HeldBy, which only
// the reply tells; and reading the lease after the LISTEN (Redis's confirmation read) would add
// a statement to the wire. Likewise a group's LISTEN, sent when a Join starts, may take effect
// after the Join and after the members read that follows it: a change in between would go
// unheard until the next keep-alive, so once the LISTEN is in the listener delivers one
// GroupChanged hint for the group, and a member reads the members again. The same hints after
// a reconnect cover the releases and changes the listener missed while it was down.
func (d *pgDialect) syncListens(ctx context.Context, conn *pgx.Conn, wd wire.SQLDialect, listened map[pgChan]bool, lastSweep *time.Time, timeout time.Duration) (bool, error) {
	listen, unlisten, hint := d.hub.plan(listened, lastSweep)
	if len(listen) == 0 && len(unlisten) == 0 {
		return false, nil
	}
	stmts := make([]string, 0, len(listen)+len(unlisten))
	for _, c := range unlisten {
		if c.group {
			stmts = append(stmts, wd.UnlistenGroup(c.name))
		} else {
			stmts = append(stmts, wd.UnlistenLease(c.name))
		}
	}
	for _, c := range listen {
		if c.group {
			stmts = append(stmts, wd.ListenGroup(c.name))
		} else {
			stmts = append(stmts, wd.ListenLease(c.name))
		}
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// One simple-protocol round trip: every statement is a LISTEN or UNLISTEN of a plain
	// identifier (wire.SQLLeaseChannel, wire.SQLGroupOwnChannel), so the texts join safely.
	if _, err := conn.Exec(sctx, strings.Join(stmts, "; ")); err != nil {
		return false, err
	}
	for _, c := range unlisten {
		delete(listened, c)
	}
	for _, c := range listen {
		listened[c] = true
		if !hint[c] {
			continue
		}
		if c.group {
			d.hub.deliver(spi.Hint{Kind: spi.GroupChanged, Name: c.name})
		} else {
			d.hub.deliver(spi.Hint{Kind: spi.Released, Name: c.name})
		}
	}
	return true, nil
}

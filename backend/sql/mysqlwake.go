package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	genmysql "github.com/simba-go/simba/generated/sqlc/mysql"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/spareconn"
	"github.com/simba-go/simba/spi"
)

// MySQL and MariaDB push nothing when a lease is released, so without help a waiter retries
// only when the holder's lease would run out: a graceful hand-over took up to a TTL. The waker
// closes that gap with the server's named locks (spec/sql.yaml: wake_lock, wake_unlock), which
// cost nothing while nobody waits and no query per waiter per few milliseconds while someone
// does:
//
//   - Holder side (mark): while this backend holds a lease (for longer than mysqlMarkDelay, so
//     that a short acquire–release cycle sends nothing and wakes no goroutine), one connection
//     of the waker's holds the lease's named lock: GET_LOCK(lock(name), 1). It lets it go
//     (RELEASE_LOCK) after the lease's release, its session's close or a keep-alive that no
//     longer lists it; if the connection dies (a crash) the server lets every lock of it go
//     while the lease lives on until its session expires. A connection the waker gave up on
//     while the server may keep it (a silenced link: no reply, no close) would keep its locks
//     until the server's wait_timeout (8 h by default): the waker ends it (wake_kill) from a
//     working one (reap). A lock the marker cannot take for its whole timeout is kept by a
//     stuck connection (a waiter holds it for a round trip; a waiter's connection silenced
//     after the server gave it the lock keeps it for good): the waker ends that one too
//     (wake_lock_conn, unstick). One connection holds the locks of every lease of the backend,
//     whatever their number.
//   - Waiter side: for each name an acquire of this backend found held (for two session TTLs
//     after, like SQLite's waker), a connection of the waker's probes the lock,
//     GET_LOCK(lock(name), 0): taken (1) means the holder keeps none (yet) — it is let go at
//     once, the waker reads the lease row (the acquire's read, generated from the spec) and
//     sends a Released hint if the lease is free (the holder released, or its session expired)
//     and owed to none of another backend's sessions (sessionSet.wakes: the waiter queue
//     gives a free lease to its first live waiter alone), then probes again after a backoff
//     (5 ms, ×4 up to 500 ms, started over whenever the read shows a new tenure, so that a
//     lease changing hands faster than its holders mark it is followed closely). A holder that
//     does not mark — a crashed one (its locks went with its connection), or a backend
//     without Hints subscribers — thus costs a waiter three cheap statements per 500 ms, and
//     no acquire, until its lease is released or expires.
//     Not taken (0) means the holder marks it: the connection then blocks in GET_LOCK(lock(name),
//     up to a TTL) and, when it gets the lock, reads the lease row, sends a Released hint if
//     the lease is free (and owed to none of another backend's sessions) and lets the lock go;
//     a wait that times out reads the lease row too (the lock may be kept by a stuck
//     connection rather than the holder's marker), so a release is heard of within a TTL
//     whatever keeps the lock. The read tells a release (the row is updated
//     before the holder lets the lock go) from a crash (the lease still live): a crash's
//     hint would cost every waiter an acquire that finds the lease held; instead the probes
//     take over until the lease is free (crash failover on MariaDB: 3 acquires per waiter
//     from the kill to the grant before, 2 after, in bench-peers).
//   - Watch (names beyond the blocking places): at most mysqlMaxWaits names are waited for on
//     named locks at once per backend, since each blocks a connection. While (and only while)
//     more are waited for, one more connection watches the rest (watch): every mysqlWatchEvery
//     it reads which of them are free in one statement (spec/sql.yaml: wake_free_leases, one
//     parameter per name, mysqlWatchBatch names a statement at most), a plain read that takes
//     no lock, and sends a Released hint for each free lease owed to none of another backend's
//     sessions, once per free spell (the lease's last token names it) and again every
//     mysqlProbeMax while it stays free (a hint can be lost: hintHub.deliver; hinting again
//     after 5 ms, as the probes do, sent 31 hints for 20 releases, acquires being in flight).
//     Before the watch such a waiter woke at its retry, the holder's remaining time (up to a
//     TTL): with 8 names held for good waited for first, 0 of 20 released names were handed
//     over within 20 s at TTL 1 min; with the watch 20 of 20, and 50 of 50, in 11–13 ms median
//     (BenchmarkMySQLHandOverManyNames, beside 10 ms for 8 names on blocking places). Its cost
//     does not grow with the names: one statement per mysqlWatchEvery (90 a second on the
//     server, Questions, for 12 or 42 watched names alike: ~5% of a core of MariaDB's on the
//     2-CPU VM; 170 a second and ~8% at 5 ms, for no hand-over measurably faster) and one
//     connection (Threads_connected 14 → 15). More blocking places would cost a connection per
//     name instead (50 names: 51 per process, of MariaDB's default max_connections of 151). The
//     blocking waits cost nothing while the lock stays held, so the first names keep them, and a
//     watched name moves to a blocking place as soon as one is free (startWaits).
//   - Ending a wait: a blocking wait nobody needs any more ends without closing its
//     connection. One its own session's grant overtook is asked to stop at its statement's
//     end (stopWait: it gets the lock when the old holder's marker lets it go); a withdrawn
//     one (a Lock whose context ended — a Lock's timeout —, Withdraw, a TryLock that gave up),
//     and one still blocked mysqlWaitGrace after it was asked to stop, is interrupted at once
//     by KILL QUERY (spec/sql.yaml: wake_kill_query) sent from another of the waker's
//     connections (block, interrupt): its GET_LOCK ends without the lock (MariaDB returns NULL,
//     MySQL fails with 1317) and its connection goes back to the pool. Ending the statement's
//     context instead made go-sql-driver close the connection, and the next wait dialled a new
//     one: 100 Locks that timed out while their waker blocked for them opened 100 new
//     connections (a TCP connection, an authentication and a server thread each), 0 now
//     (TestMySQLWithdrawnWaitKeepsItsConnection). When the waker cannot interrupt (the server
//     refuses: a proxy that does not pass KILL on; logged once), it closes the connection as
//     before; the waker's shutdown (Close) still cuts every wait at once.
//
// The named lock and the watch are only hints: every decision is the table statements'. Open
// gives the waker a pool of its own (the user's pool limits stay whole); on a pool given to
// NewMySQL it pins at most a quarter of a bounded pool's connections (the marker's and the
// blocking waits'), one more while it watches, and wakes nothing when that is none; each
// connection it holds takes one of the calls' slots (keepAliveConn), so that the keep-alives'
// connection stays free.
const (
	// mysqlMarkDelay is how long a lease is held before its named lock is taken.
	mysqlMarkDelay = 2 * time.Millisecond
	// mysqlMarkTimeout bounds the wait of the marking GET_LOCK (a waiter's probe holds the lock
	// for a round trip).
	mysqlMarkTimeout = 1
	// mysqlProbeBackoff is the first pause after a probe found the lock unmarked; it is
	// multiplied by 4 up to mysqlProbeMax while the lock stays unmarked.
	mysqlProbeBackoff = 5 * time.Millisecond
	// mysqlProbeMax caps the pause between probes of an unmarked lock.
	mysqlProbeMax = 500 * time.Millisecond
	// mysqlMaxWaits bounds the names waited for on named locks at once (one connection each);
	// the watch takes the others.
	mysqlMaxWaits = 8
	// mysqlWaitTTLs is how long a name counts as waited for after an acquire found it held, in
	// session TTLs (a waiting client acquires again at least once per TTL, which renews it).
	mysqlWaitTTLs = 2
	// mysqlRetry is the pause before a failed connection is replaced.
	mysqlRetry = time.Second
	// mysqlWatchEvery is the pause between the watch's reads of the names beyond the blocking
	// waits (see watch): a release is hinted within it and a round trip.
	mysqlWatchEvery = 10 * time.Millisecond
	// mysqlWatchBatch bounds the names one watch statement reads (one parameter each).
	mysqlWatchBatch = 256
)

// mysqlWaker delivers wake-up hints to the Hints subscribers of one MySQL/MariaDB backend and
// marks the leases it holds; its hub's runner is run.
type mysqlWaker struct {
	hub                    hintHub
	sessions               sessionSet
	db                     *sql.DB            // where its connections come from (see ownPool)
	own                    bool               // db is the waker's own pool, not the user's
	lock, unlock           string             // wire.SQLDialect.WakeLock, WakeUnlock
	connID, connHost, kill string             // wire.SQLDialect.WakeConnID, WakeConnHost, WakeKill
	lockConn               string             // wire.SQLDialect.WakeLockConn
	killQuery              string             // wire.SQLDialect.WakeKillQuery
	freeLeases             func(n int) string // wire.SQLDialect.WakeFreeLeases
	log                    func() *slog.Logger
	// slots are the slots of the backend's calls on a user's bounded pool (keepAliveConn):
	// each connection the waker takes from it (conn) holds one until put, so that the calls'
	// connections and the waker's leave one to the keep-alives whatever their mix. Zero on the
	// waker's own pool, and on an unbounded one.
	slots spareconn.Slots

	mu      sync.Mutex
	ttl     time.Duration        // the longest session TTL opened (15 s until one is)
	ttlSet  bool                 // a session was opened: ttl is the longest of theirs
	held    map[string]heldLease // name → this backend's tenure
	waiting waitSet              // name → the sessions of the backend that wait for it, and until when
	waits   map[string]*waitCtl  // running waits by name
	// watching: the watch runs (watch), for the names waited for that have no wait in waits.
	watching bool
	kick     chan struct{} // held or waiting changed (capacity 1)
	stats    mysqlStats
	// markDelay is mysqlMarkDelay (a test's may differ); markTimer pokes run when a tenure is
	// markDelay old (armed by acquired unless already pending, stopped by released once
	// nothing is held), so that run is not woken at each grant.
	markDelay time.Duration
	markTimer *time.Timer
	markDue   time.Time // when markTimer fires (zero: stopped, or not armed yet)
	// pokes counts the pokes of run (for the tests: an uncontended acquire and release of a
	// lease held shorter than markDelay pokes it none).
	pokes atomic.Int64
	kaGen uint64 // keep-alives seen by keptAlive

	// ids maps each connection the waker has used (its driver connection) to its id and
	// client address at the server (wake_conn_id), asked once per connection. abandoned holds
	// the ones it gave up on that the server may keep (see reap); reapFailed is when reap last
	// failed on its connection, cannotKill that the server refused (logged once), and
	// cannotInterrupt that it refused a wait's interruption (interrupt; logged once).
	ids             map[any]connRef
	abandoned       map[connRef]struct{}
	reapFailed      time.Time
	cannotKill      bool
	cannotInterrupt bool
}

// connRef is a connection at the server: its id and its client's address (host:port) as the
// server sees it.
type connRef struct {
	id   int64
	host string
}

// mysqlMaxIDs bounds mysqlWaker.ids: connections the pool closed on its own leave entries
// behind, pruned past it.
const mysqlMaxIDs = 64

// mysqlStats counts the waker's statements: marking GET_LOCKs, probes, lease reads, blocking
// waits, and the hints they sent; the watch's statements (watches) and the hints among hints
// that it sent (watchHints); the abandoned connections it ended (reap), and the connections it
// ended that kept a held lease's named lock (unstick); the KILL QUERYs it sent to end blocking
// waits nobody needed any more, keeping their connections (interrupts), and the waits it cut
// instead, closing their connections (cuts: see block).
type mysqlStats struct {
	marks, probes, reads, blocks, hints int64
	watches, watchHints                 int64
	kills, unsticks                     int64
	interrupts, cuts                    int64
}

// snapshot returns the counts so far.
func (w *mysqlWaker) snapshot() mysqlStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// heldLease is one tenure of this backend's: its session and since when; seen is the last
// keep-alive generation (mysqlWaker.kaGen) that listed it.
type heldLease struct {
	sid   string
	since time.Time
	seen  uint64
}

func newMySQLWaker(db *sql.DB, wd wire.SQLDialect) *mysqlWaker {
	return &mysqlWaker{db: db, lock: wd.WakeLock, unlock: wd.WakeUnlock, connID: wd.WakeConnID,
		connHost: wd.WakeConnHost, kill: wd.WakeKill, lockConn: wd.WakeLockConn,
		killQuery: wd.WakeKillQuery, freeLeases: wd.WakeFreeLeases, log: slog.Default, ttl: 15 * time.Second,
		held: map[string]heldLease{}, waiting: waitSet{}, waits: map[string]*waitCtl{},
		kick: make(chan struct{}, 1), ids: map[any]connRef{}, abandoned: map[connRef]struct{}{},
		markDelay: mysqlMarkDelay}
}

// ownPool makes db (a pool of the waker's own, closed by the backend's Close) the waker's.
func (w *mysqlWaker) ownPool(db *sql.DB) {
	w.db, w.own = db, true
}

// poke wakes run (if it runs) to look at held and waiting again.
func (w *mysqlWaker) poke() {
	w.pokes.Add(1)
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// localHubFor is the hub of the waker's subscribers while a session of the backend waits for
// name, else nil (releasedLocally). A wait noted after the release misses its hint; the probe
// that the wait starts with reads the lease and hints it instead (wait).
func (w *mysqlWaker) localHubFor(name string) *hintHub {
	return hubIfWaited(&w.mu, &w.waiting, name, &w.hub)
}

func (w *mysqlWaker) opened(sid string, ttl time.Duration) {
	w.sessions.add(sid)
	w.mu.Lock()
	// The 15 s before the first session is a default, not a TTL: kept as a floor it made every
	// blocking wait last 15 s and every name count as waited for 30 s after a 1 s session's
	// acquire.
	if !w.ttlSet {
		w.ttl, w.ttlSet = ttl, true
	}
	w.ttl = max(w.ttl, ttl)
	w.mu.Unlock()
}

// acquired notes an acquire's reply. A grant does not poke run: the marker takes a lease's
// named lock only once it has been held for markDelay, so a timer (markTimer) pokes run then,
// and a release before it stops the timer and pokes nothing (released). Run used to be poked
// at every grant and release, to find nothing to do when the tenure was short: two
// goroutine hand-offs per uncontended Lock and Unlock (go test -trace, BenchmarkLockCycle/mariadb).
func (w *mysqlWaker) acquired(sid, name string, r spi.Acquire) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.Kind {
	case spi.Granted:
		if h, ok := w.held[name]; !ok || h.sid != sid {
			w.held[name] = heldLease{sid: sid, since: time.Now()}
			w.armMark()
		}
		// Another session of the backend may still wait for name: its wait goes on. A wait
		// running for it is asked to stop (stopWait); its goroutine pokes run as it ends.
		w.waiting.forget(sid, name)
		w.stopWait(name)
		return
	case spi.HeldBy:
		w.waiting.wait(sid, name, time.Now().Add(mysqlWaitTTLs*w.ttl))
	case spi.SessionExpired:
		w.waiting.endSession(sid, time.Now())
	default:
		return
	}
	w.poke()
}

// keptAlive forgets the tenures of sid that ka no longer lists (or all of them, when the
// session expired). It marks the listed ones with a new generation instead of building a set of
// ka's names: a keep-alive of 10,000 leases then allocates nothing (the set cost MariaDB's
// keep-alive about a tenth of its time).
func (w *mysqlWaker) keptAlive(sid string, ka spi.KeepAlive) {
	if ka.Expired {
		w.sessions.remove(sid)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ka.Expired {
		w.waiting.endSession(sid, time.Now())
	}
	if len(w.held) == 0 {
		return
	}
	w.kaGen++
	if !ka.Expired {
		for _, h := range ka.Held {
			if l, ok := w.held[h.Name]; ok && l.sid == sid {
				l.seen = w.kaGen
				w.held[h.Name] = l
			}
		}
	}
	for n, l := range w.held {
		if l.sid == sid && l.seen != w.kaGen {
			delete(w.held, n)
			w.poke()
		}
	}
}

// armMark arms markTimer to poke run when the tenure just noted is markDelay old, unless it
// is armed already (for an older tenure, which is due first). w.mu is held.
func (w *mysqlWaker) armMark() {
	now := time.Now()
	if w.markDue.After(now) {
		return // pending, and due first
	}
	w.markDue = now.Add(w.markDelay)
	if w.markTimer == nil {
		w.markTimer = time.AfterFunc(w.markDelay, w.poke)
		return
	}
	w.markTimer.Reset(w.markDelay) // fired or stopped
}

// released forgets this backend's tenure of name. Only a tenure held for markDelay or longer
// may have been marked, so only its release pokes run (to let the named lock go); when no
// tenure is left, the mark timer is stopped (it would wake run for nothing).
func (w *mysqlWaker) released(sid, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.held[name]
	if !ok || h.sid != sid {
		return
	}
	delete(w.held, name)
	if len(w.held) == 0 && w.markTimer != nil {
		w.markTimer.Stop()
		w.markDue = time.Time{}
	}
	if time.Since(h.since) >= w.markDelay {
		w.poke()
	}
}

// withdrawn ends sid's wait for name (a Withdraw, a Lock whose context ended, or a TryLock
// that gave up: EndWait); the name's entry goes with its last wait, and so does its blocking
// wait, which would otherwise hold a connection and one of the waker's mysqlMaxWaits places
// until the wait lapsed: it is ended at once (waitCtl.end), and keeps its connection.
func (w *mysqlWaker) withdrawn(sid, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting.forget(sid, name)
	if c := w.waits[name]; c != nil && !w.waiting.waited(name, time.Now()) {
		c.end()
	}
}

func (w *mysqlWaker) closed(sid string) {
	w.sessions.remove(sid)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting.endSession(sid, time.Now())
	for n, h := range w.held {
		if h.sid == sid {
			delete(w.held, n)
			w.poke()
		}
	}
}

func (w *mysqlWaker) hints(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) (<-chan spi.Hint, error) {
	return w.hub.subscribe(ctx, stop, wg, w.run), nil
}

// budget is how many connections the waker may pin: the marker's and the blocking waits'
// (the watch takes one more while it runs, and none when no blocking wait is allowed).
func (w *mysqlWaker) budget() int {
	if w.own {
		return 1 + mysqlMaxWaits
	}
	if n := w.db.Stats().MaxOpenConnections; n > 0 {
		return min(n/4, 1+mysqlMaxWaits)
	}
	return 1 + mysqlMaxWaits
}

// run marks the held leases and starts the waits, while the backend has Hints subscribers
// (until ctx ends); it returns once every wait it started has ended.
func (w *mysqlWaker) run(ctx context.Context) {
	var waits sync.WaitGroup
	m := marker{w: w}
	defer func() {
		w.mu.Lock()
		for _, c := range w.waits {
			c.cancel()
		}
		w.mu.Unlock()
		waits.Wait()
		m.drop()
	}()
	budget := w.budget()
	if budget == 0 {
		<-ctx.Done()
		return
	}
	for {
		next := min(m.sync(ctx), w.reap(ctx))
		w.startWaits(ctx, &waits, budget-1)
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// startWaits starts a wait for every name waited for that has none, within limit, and the
// watch when some are left over (and limit allows a blocking wait at all), and forgets the
// names whose wait ended.
func (w *mysqlWaker) startWaits(ctx context.Context, waits *sync.WaitGroup, limit int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := w.waiting.sweep(time.Now())
	for n := range w.waits {
		if w.waiting[n] == nil {
			w.stopWait(n)
		}
	}
	for _, n := range names {
		if _, ok := w.waits[n]; ok || len(w.waits) >= limit {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		c := &waitCtl{cancel: cancel, stop: make(chan struct{}, 1), intr: make(chan struct{}, 1)}
		w.waits[n] = c
		waits.Add(1)
		go func() {
			defer waits.Done()
			w.wait(wctx, c, n)
			cancel()
			w.mu.Lock()
			delete(w.waits, n)
			if c.cut != nil {
				c.cut.Stop()
			}
			w.mu.Unlock()
			w.poke() // a wait that failed is started again on the next run (after mysqlRetry)
		}()
	}
	if w.watching || limit == 0 || len(names) <= len(w.waits) || w.freeLeases(1) == "" {
		return
	}
	w.watching = true
	waits.Add(1)
	go func() {
		defer waits.Done()
		w.watch(ctx)
		w.mu.Lock()
		w.watching = false
		w.mu.Unlock()
		w.poke() // a watch that failed is started again on the next run (after mysqlRetry)
	}()
}

// waitCtl is a running wait (startWaits).
type waitCtl struct {
	// cancel ends the wait at once: a statement in flight is cut, and go-sql-driver closes its
	// connection with it (the waker's shutdown).
	cancel func()
	// stop asks the wait to end at the end of its statement in flight, or at once if it sleeps
	// (stopWait; capacity 1).
	stop chan struct{}
	// intr asks the wait to end its blocking GET_LOCK now, keeping its connection (block; a
	// withdrawn wait, and stopWait's last resort; capacity 1).
	intr chan struct{}
	// cut is stopWait's timer, which ends the wait (end) if it still runs, unwaited, after
	// mysqlWaitGrace; nil when not armed. Under mysqlWaker.mu.
	cut *time.Timer
}

// end asks the wait to end now: a sleep at once, a blocking GET_LOCK by its interruption
// (block), any other statement at its end.
func (c *waitCtl) end() {
	for _, ch := range []chan struct{}{c.stop, c.intr} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// mysqlWaitGrace is how long a wait nobody needs any more may take to end by itself
// (stopWait) before it is cut: a blocked GET_LOCK that the grant overtook gets the lock when
// the old holder's marker lets it go, a round trip or two after the release.
const mysqlWaitGrace = time.Second

// stopWait ends name's running wait, if any and if no session of the backend waits for name
// any more. A wait is most often stopped by its own session's grant, while it blocks in
// GET_LOCK: cutting it there closed its connection (go-sql-driver closes a connection whose
// context ends mid-statement), and the next wait dialled a new one. Under lock churn on
// MariaDB (bench/cmd/rtts -churn, 3 clients) that was 477 of the waker pools' 615 new
// connections in 8 s. So the wait is asked to stop at its statement's end (that GET_LOCK gets
// the lock as soon as the old holder's marker lets it go), and cut only if it still runs
// after mysqlWaitGrace (the lock kept by a stuck connection, or by this backend's own marker
// when the wait blocked just after the grant): then it is interrupted (waitCtl.end, block), which
// keeps its connection too. w.mu is held.
func (w *mysqlWaker) stopWait(name string) {
	c := w.waits[name]
	if c == nil || w.waiting.waited(name, time.Now()) {
		return
	}
	select {
	case c.stop <- struct{}{}:
	default:
	}
	if c.cut != nil {
		return
	}
	c.cut = time.AfterFunc(mysqlWaitGrace, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		c.cut = nil
		if !w.waiting.waited(name, time.Now()) {
			c.end()
		}
	})
}

// sleepWait sleeps for d or until ctx ends or the wait is asked to stop (stopWait), and
// reports whether it slept the whole d.
func sleepWait(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// watched returns the names waited for now that have no blocking wait (nil if none).
func (w *mysqlWaker) watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	var names []string
	for n := range w.waiting {
		if _, ok := w.waits[n]; !ok && w.waiting.waited(n, now) {
			names = append(names, n)
		}
	}
	return names
}

// freeSpell is the watch's record of a free lease it hinted: the spell (the lease's last
// token), and when to hint it again while it stays free.
type freeSpell struct {
	token int64
	next  time.Time
}

// watch watches the names waited for beyond the blocking waits on one connection (see the
// comment at the top) until there are none, ctx ends, or the connection fails (after
// mysqlRetry).
func (w *mysqlWaker) watch(ctx context.Context) {
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			w.put(conn)
		}
	}()
	hinted, free := map[string]freeSpell{}, map[string]freeSpell{}
	for {
		names := w.watched()
		if len(names) == 0 || ctx.Err() != nil {
			return
		}
		if conn == nil {
			c, err := w.conn(ctx)
			if err != nil {
				sleepCtx(ctx, mysqlRetry)
				return
			}
			conn = c
		}
		clear(free) // this read's free leases (a map kept, not one made every mysqlWatchEvery)
		for len(names) > 0 {
			batch := names[:min(len(names), mysqlWatchBatch)]
			names = names[len(batch):]
			if err := w.readFree(ctx, conn, batch, free); err != nil {
				w.abandon(conn) // a silenced link: see abandon
				sleepCtx(ctx, mysqlRetry)
				return
			}
		}
		now := time.Now()
		for n, h := range hinted {
			if f, ok := free[n]; !ok || f.token != h.token {
				delete(hinted, n) // taken since, or no longer watched
			}
		}
		for n, f := range free {
			if h, ok := hinted[n]; ok && now.Before(h.next) {
				continue
			}
			hinted[n] = freeSpell{token: f.token, next: now.Add(mysqlProbeMax)}
			w.count(&w.stats.watchHints)
			w.wake(n)
		}
		if !sleepCtx(ctx, mysqlWatchEvery) {
			return
		}
	}
}

// readFree reads which of names are free (wake_free_leases) into free, with their spells:
// those owed to none of another backend's sessions (sessionSet.wakes).
func (w *mysqlWaker) readFree(ctx context.Context, conn *sql.Conn, names []string, free map[string]freeSpell) error {
	w.count(&w.stats.watches)
	ctx, cancel := context.WithTimeout(ctx, mysqlStmtTimeout)
	defer cancel()
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := conn.QueryContext(ctx, w.freeLeases(len(names)), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, waiter string
		var token int64
		if err := rows.Scan(&name, &token, &waiter); err != nil {
			return err
		}
		if w.sessions.wakes("", 0, waiter) {
			free[name] = freeSpell{token: token}
		}
	}
	return rows.Err()
}

// waitedFor reports whether name is still waited for, and until when (the last of its
// sessions' waits).
func (w *mysqlWaker) waitedFor(name string) (time.Time, time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var until time.Time
	if e := w.waiting[name]; e != nil {
		for _, u := range e.who {
			if u.After(until) {
				until = u
			}
		}
	}
	return until, w.ttl, time.Now().Before(until)
}

// wait waits for name's release on a connection of its own while name is waited for (see the
// comment at the top); it returns when it is not (at the end of a statement, of a sleep that
// c.stop interrupts, or of a blocking GET_LOCK that c.intr interrupts: see stopWait, withdrawn),
// ctx ends, or the connection fails (after mysqlRetry).
func (w *mysqlWaker) wait(ctx context.Context, c *waitCtl, name string) {
	stop := c.stop
	conn, err := w.conn(ctx)
	if err != nil {
		sleepCtx(ctx, mysqlRetry)
		return
	}
	defer w.put(conn)
	fail := func() {
		w.abandon(conn) // it may hold the lock, or be blocked in GET_LOCK at the server
		sleepCtx(ctx, mysqlRetry)
	}
	backoff, tenure := mysqlProbeBackoff, ""
	for {
		until, ttl, ok := w.waitedFor(name)
		if !ok || ctx.Err() != nil {
			return
		}
		got, err := w.getLock(ctx, conn, name, 0)
		if err != nil {
			fail()
			return
		}
		w.count(&w.stats.probes)
		if got {
			if err := w.release(ctx, conn, name); err != nil {
				fail()
				return
			}
			// Unmarked: the holder released, died (its locks went with its connection), has
			// not marked yet (a tenure is marked mysqlMarkDelay into it, or as soon as the
			// marker gets to it) or does not mark at all. The lease row tells. While the
			// lease keeps changing hands (tenures shorter than a probe's pause) each new
			// tenure starts the pauses over: otherwise they grow on every lease whose tenures
			// outpace their marks, and a waiter slept up to mysqlProbeMax through many
			// releases (a contended lock on MariaDB took 80 ms a grant, 2026-12-03).
			st := w.leaseState(ctx, conn, name)
			if st.wake {
				w.wake(name)
			}
			if st.tenure != tenure {
				tenure, backoff = st.tenure, mysqlProbeBackoff
			}
			if !sleepWait(ctx, stop, backoff) && ctx.Err() != nil {
				return
			}
			backoff = min(4*backoff, mysqlProbeMax, ttl)
			continue
		}
		backoff, tenure = mysqlProbeBackoff, ""
		// An interruption asked for before is stale (the name is waited for again, or the
		// check below ends the wait); one asked for from now on ends the GET_LOCK.
		select {
		case <-c.intr:
		default:
		}
		// A grant since the probe (this backend's marker may hold the lock now): blocking
		// would wait on it until stopWait ends the wait.
		if _, _, ok := w.waitedFor(name); !ok {
			return
		}
		secs := int64(math.Ceil(min(ttl, time.Until(until)).Seconds()))
		w.count(&w.stats.blocks)
		got, err = w.block(ctx, c.intr, conn, name, max(secs, 1))
		if errors.Is(err, errWaitInterrupted) {
			continue // the connection is clean; the loop's check ends the wait
		}
		if err != nil {
			fail()
			return
		}
		if !got {
			// Held for the whole wait: by the holder's marker, or by a connection that keeps
			// it without being the holder's (a waiter's that its link silenced after the
			// server gave it the lock: it never lets it go, and the holder cannot mark). In
			// the second case the lease may have been released long since and nobody said
			// so: read the row, so that a waiter learns of a release within a TTL whatever
			// holds the lock (MariaDB in bench/results/outage.md, 2026-12-05: a silenced
			// waiter's lock cost every hand-over a retry while its link was down).
			if w.leaseState(ctx, conn, name).wake {
				w.wake(name)
			}
			continue
		}
		// The holder let the lock go after its release, or the server did when the holder's
		// connection closed: a crashed holder, whose lease lives on until its session
		// expires. The lease row tells them apart (a release has updated it by then); a crash
		// wakes nobody, or every waiter would pay an acquire that finds the lease still held,
		// and the probes above take over until the lease is free.
		if w.leaseState(ctx, conn, name).wake {
			w.wake(name)
		}
		if err := w.release(ctx, conn, name); err != nil {
			fail()
			return
		}
	}
}

// errWaitInterrupted is a blocking GET_LOCK that block interrupted: it took no lock, and its
// connection is open and clean.
var errWaitInterrupted = errors.New("sql mysql waker: wait interrupted")

// mysqlQueryInterrupted is the server's error for a statement that KILL QUERY ended
// (ER_QUERY_INTERRUPTED): MySQL's GET_LOCK fails with it, where MariaDB's returns NULL.
const mysqlQueryInterrupted = 1317

// block runs a wait's blocking wake_lock on conn (as getLock) and ends it early when intr
// is signalled (a withdrawn wait, or one stopWait gave up on). Ending its context would make
// go-sql-driver close conn, and the next wait dial a new connection (a TCP connection, an
// authentication and a server thread per Lock that timed out while its waker blocked), so
// it is interrupted instead by wake_kill_query (KILL QUERY) from another connection of the
// waker's (interrupt): the GET_LOCK then ends without the lock and conn stays open and usable
// (errWaitInterrupted). The interruption may race the GET_LOCK's own return: a GET_LOCK that
// got the lock just before returns true (the caller lets it go, as after any wait), one
// interrupted between taking the lock and answering is followed by a RELEASE_LOCK (block sends
// one after every interruption), and the server ignores a KILL QUERY that finds the connection
// between statements; block sends no other statement on conn until the KILL has been answered. When the waker cannot interrupt
// (no id for conn, a dialect without the statement, a server or proxy that refuses it, no
// connection to send it from) or the GET_LOCK still runs mysqlReleaseTimeout after the KILL
// (it reached the server after it), the GET_LOCK's context is ended: conn is closed, as
// before. The waker's shutdown (ctx) still cuts it at once.
func (w *mysqlWaker) block(ctx context.Context, intr <-chan struct{}, conn *sql.Conn, name string, timeoutSecs int64) (bool, error) {
	ref := w.ref(conn) // before the statement: conn is busy during it
	qctx, cut := context.WithCancel(ctx)
	defer cut()
	done, ended := make(chan struct{}), make(chan struct{})
	var interrupted, cutOff bool // the helper's, read after ended
	go func() {
		defer close(ended)
		select {
		case <-done:
			return
		case <-intr:
		}
		if interrupted = w.interrupt(ctx, ref); !interrupted {
			cutOff = true
			cut()
			return
		}
		t := time.NewTimer(mysqlReleaseTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			cutOff = true
			cut()
		}
	}()
	got, err := w.getLock(qctx, conn, name, timeoutSecs)
	close(done)
	<-ended
	if cutOff && ctx.Err() == nil {
		w.count(&w.stats.cuts)
	}
	var me *mysqldriver.MySQLError
	if interrupted && !cutOff && (errors.Is(err, errWakeLockNull) || errors.As(err, &me) && me.Number == mysqlQueryInterrupted) {
		// The KILL may have come after the server gave the GET_LOCK the lock, and before it
		// answered: let the lock go whatever the answer said (nothing if not held).
		if err := w.release(ctx, conn, name); err != nil {
			return false, err
		}
		return false, errWaitInterrupted
	}
	return got, err
}

// ref returns conn's id and client address at the server (zero if unknown: see idConn).
func (w *mysqlWaker) ref(conn *sql.Conn) connRef {
	var ref connRef
	_ = conn.Raw(func(dc any) error {
		w.mu.Lock()
		ref = w.ids[dc]
		w.mu.Unlock()
		return nil
	})
	return ref
}

// interrupt ends the statement that the waker's connection ref runs (wake_kill_query) from
// another of its connections, if the server still shows ref's id with ref's address (as reap
// checks before it ends one), and reports whether it did. A server that refuses (another
// user's connection, a proxy that does not pass KILL on) is logged once and asked no more:
// block then cuts, as before.
func (w *mysqlWaker) interrupt(ctx context.Context, ref connRef) bool {
	w.mu.Lock()
	refused := w.cannotInterrupt
	w.mu.Unlock()
	if w.killQuery == "" || ref.id == 0 || refused {
		return false
	}
	conn, err := w.conn(ctx)
	if err != nil {
		return false
	}
	defer w.put(conn)
	killed, err := w.end(ctx, conn, ref, w.killQuery)
	var me *mysqldriver.MySQLError
	switch {
	case err == nil:
	case errors.As(err, &me) && me.Number == mysqlUnknownThread:
	case errors.As(err, &me):
		w.refusedOnce(&w.cannotInterrupt, "sql mysql waker: cannot interrupt its own waits (KILL QUERY); a wait nobody needs any more closes its connection instead",
			ref.id, err)
	default:
		w.abandon(conn)
	}
	if killed {
		w.count(&w.stats.interrupts)
	}
	return killed
}

// leaseState is what a read of name's lease row tells a waiter.
type leaseState struct {
	// wake: the lease is free and owed to none of another backend's sessions (sessionSet.wakes).
	wake bool
	// tenure names the holder's tenure (holder and token), to tell a new one from the last.
	tenure string
}

// leaseState reads name's lease row. A failed read counts as free (a hint only costs an
// acquire).
func (w *mysqlWaker) leaseState(ctx context.Context, conn *sql.Conn, name string) leaseState {
	w.count(&w.stats.reads)
	ctx, cancel := context.WithTimeout(ctx, mysqlStmtTimeout)
	defer cancel()
	r, err := genmysql.New(conn).AcquireReadLease(ctx, name)
	if err != nil {
		return leaseState{wake: true}
	}
	return leaseState{wake: w.sessions.wakes(r.HolderID, r.HolderRemainingMs, r.WaiterID),
		tenure: r.HolderID + "/" + strconv.FormatInt(r.Token, 10)}
}

// wake sends a Released hint for name to the subscribers.
func (w *mysqlWaker) wake(name string) {
	w.count(&w.stats.hints)
	w.hub.deliver(spi.Hint{Kind: spi.Released, Name: name})
}

func (w *mysqlWaker) count(c *int64) {
	w.mu.Lock()
	*c++
	w.mu.Unlock()
}

// mysqlStmtTimeout bounds each of the waker's round trips beyond what the server may wait in
// it (a GET_LOCK's timeout): the waker's contexts last as long as it runs, and a connection the
// network dropped without a word (no reply, no close) held a statement, and the marker or a
// wait with it, forever. go-sql-driver closes a connection whose context ends mid-statement,
// and the waker then replaces it.
const mysqlStmtTimeout = 5 * time.Second

// mysqlReleaseTimeout bounds a RELEASE_LOCK, which the server answers at once: one that runs
// out of time is as good as done, since its connection is then abandoned and ended (reap),
// which lets the lock go. A holder's marker connection silenced while idle is found out only
// by its next statement, the release after the tenure ended; with mysqlStmtTimeout its lock
// outlived the tenure by 5 s more (a waiter woke that much later).
const mysqlReleaseTimeout = time.Second

// conn takes a connection of the waker's pool, within mysqlStmtTimeout, after a slot of the
// calls' (w.slots) when it has them, and learns its id and client address at the server (once
// per connection) so that it can be ended once abandoned. The connection goes back with put.
func (w *mysqlWaker) conn(ctx context.Context) (*sql.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, mysqlStmtTimeout)
	defer cancel()
	took, err := w.slots.Enter(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := w.idConn(ctx)
	if err != nil {
		w.slots.Leave(took)
	}
	return conn, err
}

// put closes a connection conn took and lets its slot go.
func (w *mysqlWaker) put(c *sql.Conn) {
	c.Close()
	w.slots.Leave(w.slots.Cap() > 0) // conn took a slot whenever there are any
}

// idConn is conn's connection, once it has a slot.
func (w *mysqlWaker) idConn(ctx context.Context) (*sql.Conn, error) {
	conn, err := w.db.Conn(ctx)
	if err != nil || w.connID == "" {
		return conn, err
	}
	var known bool
	var key any
	_ = conn.Raw(func(dc any) error {
		key = dc
		w.mu.Lock()
		_, known = w.ids[dc]
		w.mu.Unlock()
		return nil
	})
	if known {
		return conn, nil
	}
	var ref connRef
	var host sql.NullString
	if err := conn.QueryRowContext(ctx, w.connID).Scan(&ref.id, &host); err != nil {
		if errors.Is(err, sql.ErrNoRows) || errors.As(err, new(*mysqldriver.MySQLError)) {
			// Not shown (a proxy in between?): the connection works, it cannot be ended.
			ref.id = 0
		} else {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			conn.Close()
			return nil, err
		}
	}
	ref.host = host.String
	w.mu.Lock()
	if len(w.ids) >= mysqlMaxIDs {
		for dc := range w.ids {
			if v, ok := dc.(driver.Validator); !ok || !v.IsValid() {
				delete(w.ids, dc) // closed
			}
		}
		if len(w.ids) >= mysqlMaxIDs {
			clear(w.ids)
		}
	}
	w.ids[key] = ref
	w.mu.Unlock()
	return conn, nil
}

// abandon discards conn (the pool never hands it out again) and notes its id for reap: the
// waker gives up on a connection when a statement on it failed or timed out, and a silenced
// one (no reply, no close: a blackholed link) lives on at the server, with its named locks,
// until the server's own timeouts (wait_timeout, 8 h by default): a holder's named lock then
// kept every waiter from its hints for as long (bench/results/outage.md, 2026-12-05). conn
// is closed by its taker.
func (w *mysqlWaker) abandon(conn *sql.Conn) {
	_ = conn.Raw(func(dc any) error {
		w.mu.Lock()
		if ref, ok := w.ids[dc]; ok {
			delete(w.ids, dc)
			// Only a TCP connection can be silenced (over a Unix socket, "localhost", the
			// server always hears of a close); its port tells it from a connection that took
			// its id after a restart of the server.
			if !w.cannotKill && ref.id != 0 && strings.Contains(ref.host, ":") {
				w.abandoned[ref] = struct{}{}
			}
		}
		w.mu.Unlock()
		return driver.ErrBadConn
	})
}

// reap ends the connections the waker abandoned (abandon) from a working one of its pool:
// wake_kill, which a user may run on its own connections without privileges (the waker's are
// all its user's). It ends only a connection that the server shows (wake_conn_host) with the
// id and the client address (host:port) that the waker noted when it took it: the server
// numbers its connections anew only when it restarts (or another server took over), when
// another client's connection could have the id, not the address too. An id the server no
// longer shows (the connection closed, as most abandoned ones have) is done with. When the
// server refuses (a user with no right to it, or a proxy such as ProxySQL in between that does
// not pass KILL on), it logs that once and ends none again: those connections then last until
// the server's wait_timeout, and the waiters of their locks fall back on their retries. It
// returns when it wants to run again.
func (w *mysqlWaker) reap(ctx context.Context) time.Duration {
	w.mu.Lock()
	refs := make([]connRef, 0, len(w.abandoned))
	for ref := range w.abandoned {
		refs = append(refs, ref)
	}
	retry := time.Until(w.reapFailed.Add(mysqlRetry))
	w.mu.Unlock()
	if len(refs) == 0 {
		return time.Hour
	}
	if retry > 0 {
		return retry
	}
	conn, err := w.conn(ctx)
	if err != nil {
		w.mu.Lock()
		w.reapFailed = time.Now()
		w.mu.Unlock()
		return mysqlRetry
	}
	defer w.put(conn)
	for _, ref := range refs {
		killed, err := w.end(ctx, conn, ref, w.kill)
		var me *mysqldriver.MySQLError
		switch {
		case err == nil, errors.As(err, &me) && me.Number == mysqlUnknownThread:
			// Ended now, gone, or not the one abandoned.
		case errors.As(err, &me):
			w.refused("sql mysql waker: cannot end the connections it abandoned; a silenced one keeps its named locks until the server's wait_timeout, and hints wait for it",
				ref.id, err)
			return time.Hour
		default: // the connection failed: try again later
			w.abandon(conn)
			w.mu.Lock()
			w.reapFailed = time.Now()
			w.mu.Unlock()
			return mysqlRetry
		}
		w.mu.Lock()
		delete(w.abandoned, ref)
		if killed {
			w.stats.kills++
		}
		w.mu.Unlock()
	}
	return time.Hour
}

// end runs kill (wake_kill: the connection ref; wake_kill_query: its statement) on conn if the
// server still shows ref (see reap), and reports whether it did.
func (w *mysqlWaker) end(ctx context.Context, conn *sql.Conn, ref connRef, kill string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, mysqlStmtTimeout)
	defer cancel()
	var host sql.NullString
	switch err := conn.QueryRowContext(ctx, w.connHost, ref.id).Scan(&host); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil // gone
	case err != nil:
		return false, err
	case host.String != ref.host:
		return false, nil // another connection's id now
	}
	if _, err := conn.ExecContext(ctx, kill, ref.id); err != nil {
		return false, err
	}
	return true, nil
}

// unstick ends the connection that holds name's named lock, found held by it for a whole
// mysqlMarkTimeout while this backend believes it holds the lease for session sid (see
// marker.sync), using conn (the marker's). It first reads the lease row: a backend that lost
// the lease without knowing it yet would otherwise end its new holder's marker. The id comes
// from the server at the time (wake_lock_conn), so unlike reap it needs no check of the
// address. A connection that no longer holds the lock when it is ended is a
// waker's (only wakers take these locks), which costs its waker a new connection. An error is
// the connection's; the server's refusal is logged once (see reap) and ends nothing again.
func (w *mysqlWaker) unstick(ctx context.Context, conn *sql.Conn, name, sid string) error {
	w.mu.Lock()
	refused := w.cannotKill
	w.mu.Unlock()
	if w.lockConn == "" || refused {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, mysqlStmtTimeout)
	defer cancel()
	r, err := genmysql.New(conn).AcquireReadLease(ctx, name)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if err != nil || r.HolderID != sid || r.HolderRemainingMs <= 0 {
		return nil // not ours (any more): its keep-alive will tell
	}
	var id sql.NullInt64
	if err := conn.QueryRowContext(ctx, w.lockConn, name).Scan(&id); err != nil {
		return err
	}
	if !id.Valid {
		return nil // let go since
	}
	_, err = conn.ExecContext(ctx, w.kill, id.Int64)
	var me *mysqldriver.MySQLError
	switch {
	case err == nil:
		w.count(&w.stats.unsticks)
	case errors.As(err, &me) && me.Number == mysqlUnknownThread:
		// Gone since.
	case errors.As(err, &me):
		w.refused("sql mysql waker: cannot end the connection that keeps a held lease's named lock; its waiters fall back on their retries",
			id.Int64, err)
	default:
		return err
	}
	return nil
}

// refused records that the server refused to end connection id (err: another user's, or a
// proxy that does not pass KILL on): the waker tries to end none again (reap, unstick) and logs
// msg the first time.
func (w *mysqlWaker) refused(msg string, id int64, err error) {
	w.refusedOnce(&w.cannotKill, msg, id, err)
	w.mu.Lock()
	clear(w.abandoned)
	w.mu.Unlock()
}

// refusedOnce sets flag (cannotKill or cannotInterrupt, under w.mu) and logs msg the first
// time the server refuses that kind of KILL.
func (w *mysqlWaker) refusedOnce(flag *bool, msg string, id int64, err error) {
	w.mu.Lock()
	first := !*flag
	*flag = true
	w.mu.Unlock()
	if first {
		w.log().Warn(msg, "connection", id, "error", err)
	}
}

// mysqlUnknownThread is the server's error for a KILL of a connection id it does not know
// (ER_NO_SUCH_THREAD).
const mysqlUnknownThread = 1094

// getLock runs the wake_lock statement: true when the lock was taken. A NULL (an error the
// server reports that way, e.g. the wait was killed) is an error. The statement may take
// timeoutSecs at the server, and mysqlStmtTimeout more.
func (w *mysqlWaker) getLock(ctx context.Context, conn *sql.Conn, name string, timeoutSecs int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeoutSecs)*time.Second+mysqlStmtTimeout)
	defer cancel()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, w.lock, name, timeoutSecs).Scan(&got); err != nil {
		return false, err
	}
	if !got.Valid {
		return false, errWakeLockNull
	}
	return got.Int64 == 1, nil
}

// release runs the wake_unlock statement (its result, 1, 0 or NULL, tells nothing the waker
// needs), within mysqlReleaseTimeout.
func (w *mysqlWaker) release(ctx context.Context, conn *sql.Conn, name string) error {
	ctx, cancel := context.WithTimeout(ctx, mysqlReleaseTimeout)
	defer cancel()
	var r sql.NullInt64
	return conn.QueryRowContext(ctx, w.unlock, name).Scan(&r)
}

// errWakeLockNull is a GET_LOCK that returned NULL.
var errWakeLockNull = errors.New("sql mysql waker: GET_LOCK returned NULL")

// marker holds the named locks of the leases the backend holds on one connection.
type marker struct {
	w      *mysqlWaker
	conn   *sql.Conn
	marked map[string]bool
	failed time.Time // when the connection last failed
}

// sync takes the locks of the leases held for at least mysqlMarkDelay and lets go of those no
// longer held; it returns when it wants to run again.
func (m *marker) sync(ctx context.Context) time.Duration {
	next := time.Hour
	m.w.mu.Lock()
	now := time.Now()
	var take, drop []string
	for n, h := range m.w.held {
		if m.marked[n] {
			continue
		}
		if d := h.since.Add(m.w.markDelay).Sub(now); d > 0 {
			next = min(next, d)
			continue
		}
		take = append(take, n)
	}
	for n := range m.marked {
		if _, ok := m.w.held[n]; !ok {
			drop = append(drop, n)
		}
	}
	m.w.mu.Unlock()
	if len(take) == 0 && len(drop) == 0 {
		return next
	}
	if m.conn == nil {
		if d := time.Until(m.failed.Add(mysqlRetry)); d > 0 {
			return min(next, d)
		}
		if len(take) == 0 {
			m.marked = nil // a dropped connection holds nothing
			return next
		}
		c, err := m.w.conn(ctx)
		if err != nil {
			m.failed = time.Now()
			return min(next, mysqlRetry)
		}
		m.conn, m.marked = c, map[string]bool{}
		drop = nil
	}
	for _, n := range drop {
		if err := m.w.release(ctx, m.conn, n); err != nil {
			m.fail()
			return min(next, mysqlRetry)
		}
		delete(m.marked, n)
	}
	for _, n := range take {
		got, err := m.w.getLock(ctx, m.conn, n, mysqlMarkTimeout)
		if err != nil {
			m.fail()
			return min(next, mysqlRetry)
		}
		if got {
			m.marked[n] = true
			m.w.count(&m.w.stats.marks)
		}
		// Not got: another connection kept it past the timeout. A waiter's holds it for a
		// round trip, so that one is stuck: a waiter's silenced by its link after the server
		// gave it the lock (it never lets it go), or a previous holder's marker. End it, or
		// the waiters block on it and hear of no release; the next sync tries again.
		if !got {
			m.w.mu.Lock()
			sid := m.w.held[n].sid
			m.w.mu.Unlock()
			if err := m.w.unstick(ctx, m.conn, n, sid); err != nil {
				m.fail()
				return min(next, mysqlRetry)
			}
			next = min(next, mysqlProbeBackoff)
		}
	}
	if len(m.marked) == 0 {
		m.drop() // hold no connection while nothing is held
	}
	return next
}

// fail discards the connection: the server lets its locks go when it hears of it, or when reap
// ends it (a silenced connection).
func (m *marker) fail() {
	if m.conn != nil {
		m.w.abandon(m.conn) // its last GET_LOCK may have taken a lock, its reply lost
	}
	m.drop()
	m.failed = time.Now()
}

// drop closes the connection, discarding it if it holds locks.
func (m *marker) drop() {
	if m.conn == nil {
		return
	}
	if len(m.marked) > 0 {
		m.w.abandon(m.conn)
	}
	m.w.put(m.conn)
	m.conn, m.marked = nil, nil
}

// sleepCtx sleeps for d or until ctx ends, and reports whether it slept the whole d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

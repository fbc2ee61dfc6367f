package sql

import (
	"context"
	"database/sql"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// SQLite has no server to push a release to the processes that wait for a lease, so without
// help a waiter retries only when the holder's lease would run out: a graceful hand-over took a
// TTL. The waker closes that gap on one host, cheaply: while (and only while) this backend has
// names that an acquire found held, it reads the dialect's change counter (spec/sql.yaml:
// PRAGMA data_version) on a connection of its own — a counter SQLite changes whenever another
// connection commits, read from the file's header without touching a table — and on a change
// reads each of those leases (the acquire's own read, generated from the spec) and delivers a
// Released hint for each that is free and owed to none of another backend's sessions
// (sessionSet.wakes: the waiter queue gives a free lease to its first live waiter alone).
// Commits that free nothing (other sessions' keep-alives) cost a read on the waker's
// connection, not an acquire. For two TTLs after a session of the backend joined a group it
// likewise reads the group's members and delivers a GroupChanged hint when they changed
// (groupWatch); while only groups are watched, it reads at most every sqliteGroupReadGap.
//
// When to read: on Linux an inotify watch on the file's directory wakes the waker when the
// file, its WAL or its journal is written (by any process), and it reads then and again 2, 4,
// 8 … 64 ms later (a commit writes and syncs the WAL before it publishes the new version) —
// but only until a read after the first sees the counter change (see chainDone), plus a
// safety-net read every sqliteWakeWatchedPoll. A read costs far more than its statement (the
// wake-up of an idle process: 0.2–0.4 ms of CPU on a small VM), so a commit costs two reads
// (at the write, and 2 ms later once the WAL is synced) rather than seven — when the read at
// the write comes before the commit is published; a waker that wakes late (a loaded CPU) sees
// the commit at its first read, which proves nothing, and makes all seven. Elsewhere it wakes
// every sqliteWakePoll, stats the file and its WAL, and reads only when one changed (or every
// sqliteWakeFullPoll): about 4–5% of a core, mostly the wake-ups themselves.
const (
	// sqliteWakePoll is the polling period while someone waits when there is no file watch
	// (a hand-over is seen within it), and the delay of the second read after a file event.
	sqliteWakePoll = 2 * time.Millisecond
	// sqliteWakeFullPoll bounds how long the poll trusts the file fingerprint (see
	// fileChanged): the change counter is read at least this often while someone waits.
	sqliteWakeFullPoll = 50 * time.Millisecond
	// sqliteWakeWatchedPoll is the period of the safety-net read when a file watch (inotify)
	// wakes the poll on writes: it only covers an event lost or missed.
	sqliteWakeWatchedPoll = 250 * time.Millisecond
	// sqliteWakeRecheckMax bounds the doubling delays of the reads after a file event.
	sqliteWakeRecheckMax = 64 * time.Millisecond
	// sqliteWaitTTLs is how long a name counts as waited for after an acquire found it held,
	// in session TTLs: a waiting client acquires again at least once per TTL, which renews it.
	sqliteWaitTTLs = 2
	// sqliteGroupReadGap is the least time between two reads of the watched groups' members
	// (and, while nothing is waited for, of the change counter).
	sqliteGroupReadGap = 20 * time.Millisecond
	// sqliteGroupWatchTTLs is how long, in session TTLs, the waker watches a group's
	// membership after a session of the backend joined it (see groupWatch).
	sqliteGroupWatchTTLs = 2
)

// groupWatch is a group whose membership the waker watches: for sqliteGroupWatchTTLs TTLs
// after a session of the backend joined it, poll reads its members whenever the change counter
// changes and delivers a GroupChanged hint when they differ from the last the backend knows of.
// Members that join a new group together each read the members once their own Join is in, and
// the first to read saw only the members that had joined before it: without a hint it took the
// partitions of those that joined after it, and kept them until its next keep-alive showed them
// (one renewal interval: 5 s at the default TTL), while their owners found them held. Only
// the first TTLs after a join are watched, so that a member of a settled group costs no more
// than it did: a member that joins later is heard of at the others' next keep-alive.
type groupWatch struct {
	sids  map[string]time.Time // the joined sessions of the backend, each watched until then
	seen  []string             // the members last read (poll's or a Members read of the backend)
	known bool                 // seen is set
	fresh bool                 // joined since poll's last read: read its members whatever the counter says
}

// sqliteWaker delivers wake-up hints to the Hints subscribers of one SQLite backend: its hub's
// runner is poll.
type sqliteWaker struct {
	hub      hintHub
	sessions sessionSet
	db       *sql.DB // the backend's pool: only to find the file
	counter  string  // wire.SQLDialect.ChangeCounter
	file     string  // wire.SQLDialect.DatabaseFile

	mu      sync.Mutex
	ttl     time.Duration // the longest session TTL opened (15 s until one is)
	waiting waitSet       // name → the sessions of the backend that wait for it, and until when
	fresh   []string      // names newly waited for that poll has not taken yet
	kick    chan struct{} // a name started to be waited for, or a group joined (capacity 1)
	// groups are the groups sessions of the backend joined in the last sqliteGroupWatchTTLs
	// TTLs, whose membership poll watches (see groupWatch).
	groups map[string]*groupWatch

	// Only poll's goroutine uses these.
	path  string     // the database file ("" until open, or when not a file)
	print [2]fileKey // the last fingerprint of the database file and its WAL

	// followUps counts the change counter's reads other than at a file event: the reads that
	// follow one, and the safety net's (for the tests).
	followUps atomic.Int64
	// events counts the file events poll woke for, reads all its reads of the change counter,
	// and watchWakes the file watch's wake-ups (each read of the inotify descriptor, whether
	// or not it named the database's files): for the tests and the waiting-CPU benchmark.
	events, reads, watchWakes atomic.Int64
}

// fileKey is what a commit changes in a file: its size or its modification time.
type fileKey struct {
	size  int64
	mtime time.Time
}

func newSQLiteWaker(db *sql.DB, wd wire.SQLDialect) *sqliteWaker {
	return &sqliteWaker{db: db, counter: wd.ChangeCounter, file: wd.DatabaseFile, ttl: 15 * time.Second,
		waiting: waitSet{}, kick: make(chan struct{}, 1), groups: map[string]*groupWatch{}}
}

// opened notes a session and its TTL.
func (w *sqliteWaker) opened(sid string, ttl time.Duration) {
	w.sessions.add(sid)
	w.mu.Lock()
	w.ttl = max(w.ttl, ttl)
	w.mu.Unlock()
}

// acquired notes an acquire's reply: a held name is waited for by the session, a granted one
// no longer (another session of the backend may still wait for it); an expired session waits
// for nothing. A name newly waited for is read at poll's next read (fresh), whatever the
// change counter says: the holder may have released it between the acquire's read and this
// note, when the release's own hint (releasedLocally) found nobody waiting.
func (w *sqliteWaker) acquired(sid, name string, r spi.Acquire) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.Kind {
	case spi.HeldBy:
		if w.waiting.wait(sid, name, time.Now().Add(sqliteWaitTTLs*w.ttl)) {
			w.fresh = append(w.fresh, name)
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
	case spi.Granted:
		w.waiting.forget(sid, name)
	case spi.SessionExpired:
		w.waiting.endSession(sid, time.Now())
	}
}

// keptAlive and closed keep the account of the backend's sessions and end the waits of one
// that is gone; the change counter sees every commit, so the waker needs none of what they
// hold.
func (w *sqliteWaker) keptAlive(sid string, ka spi.KeepAlive) {
	if ka.Expired {
		w.closed(sid)
	}
}
func (w *sqliteWaker) released(string, string) {}

// withdrawn ends sid's wait for name (a Withdraw, or a TryLock that gave up: EndWait); the
// name's entry goes with its last wait.
func (w *sqliteWaker) withdrawn(sid, name string) {
	w.mu.Lock()
	w.waiting.forget(sid, name)
	w.mu.Unlock()
}

func (w *sqliteWaker) closed(sid string) {
	w.sessions.remove(sid)
	w.mu.Lock()
	w.waiting.endSession(sid, time.Now())
	for g, gw := range w.groups {
		delete(gw.sids, sid)
		if len(gw.sids) == 0 {
			delete(w.groups, g)
		}
	}
	w.mu.Unlock()
}

// joining notes a Join about to be sent: the group is watched once the Join is in (joined).
func (w *sqliteWaker) joining(string, string) {}

// joined notes a Join's outcome: OK has the group's membership watched for
// sqliteGroupWatchTTLs TTLs from now (groupWatch), Expired ends sid's watches; a failed Join
// changes nothing (the engine retries it).
func (w *sqliteWaker) joined(sid, group string, st spi.Status, err error) {
	switch {
	case err != nil:
	case st == spi.OK:
		now := time.Now()
		w.mu.Lock()
		w.sweepGroupsLocked(now) // (poll sweeps too, but runs only while the backend has subscribers)
		gw := w.groups[group]
		if gw == nil {
			gw = &groupWatch{sids: map[string]time.Time{}}
			w.groups[group] = gw
		}
		gw.sids[sid] = now.Add(sqliteGroupWatchTTLs * w.ttl)
		gw.fresh = true
		w.mu.Unlock()
		select {
		case w.kick <- struct{}{}:
		default:
		}
	default:
		w.closed(sid)
	}
}

// left notes a Leave's outcome: sid's watch of group ends (OK), or all of sid's (Expired); a
// failed Leave changes nothing (the engine retries it).
func (w *sqliteWaker) left(sid, group string, st spi.Status, err error) {
	switch {
	case err != nil:
	case st == spi.OK:
		w.mu.Lock()
		if gw := w.groups[group]; gw != nil {
			delete(gw.sids, sid)
			if len(gw.sids) == 0 {
				delete(w.groups, group)
			}
		}
		w.mu.Unlock()
	default:
		w.closed(sid)
	}
}

// members notes a keep-alive naming groups: the waker's watches run from the joins alone.
func (w *sqliteWaker) members(string, []string) {}

// read notes the members a Members read of the backend found: the client has them, so poll
// hints only at members that differ from them.
func (w *sqliteWaker) read(group string, members []string) {
	w.mu.Lock()
	if gw := w.groups[group]; gw != nil {
		gw.seen, gw.known = slices.Clone(members), true
	}
	w.mu.Unlock()
}

// watchedGroups returns the groups watched now (nil if none), forgetting the watches that
// ended, and whether one was joined since the last call (fresh).
func (w *sqliteWaker) watchedGroups() (groups []string, fresh bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sweepGroupsLocked(time.Now())
	for g, gw := range w.groups {
		groups = append(groups, g)
		fresh = fresh || gw.fresh
		gw.fresh = false
	}
	return groups, fresh
}

// sweepGroupsLocked forgets the watches that ended by now (w.mu held).
func (w *sqliteWaker) sweepGroupsLocked(now time.Time) {
	for g, gw := range w.groups {
		for sid, until := range gw.sids {
			if !now.Before(until) {
				delete(gw.sids, sid)
			}
		}
		if len(gw.sids) == 0 {
			delete(w.groups, g)
		}
	}
}

// changedGroups reads the members of groups on conn and returns the groups whose members
// differ from the last the backend knows of (a read that fails counts as a change: a hint only
// costs a members read). A group read for the first time, before the client's own Members read
// of it noted any, is only noted.
func (w *sqliteWaker) changedGroups(ctx context.Context, conn *preparedConn, groups []string) []string {
	// Like the change counter's read, these do not wait for locks: no context to watch.
	ctx = context.WithoutCancel(ctx)
	q := sqlq.SQLite(conn)
	var out []string
	for _, g := range groups {
		ms, err := q.Members(ctx, sqlq.MembersParams{GroupName: g})
		w.mu.Lock()
		if gw := w.groups[g]; gw != nil {
			switch {
			case err != nil:
				out = append(out, g)
			case !gw.known:
				gw.seen, gw.known = ms, true
			case !slices.Equal(gw.seen, ms):
				gw.seen = ms
				out = append(out, g)
			}
		}
		w.mu.Unlock()
	}
	return out
}

// localHubFor is the hub of the waker's subscribers while a session of the backend waits for
// name, else nil (releasedLocally).
func (w *sqliteWaker) localHubFor(name string) *hintHub {
	return hubIfWaited(&w.mu, &w.waiting, name, &w.hub)
}

// hints subscribes to the waker (Backend.Hints has checked that the backend is open).
func (w *sqliteWaker) hints(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) (<-chan spi.Hint, error) {
	return w.hub.subscribe(ctx, stop, wg, w.poll), nil
}

// poll runs while the backend has subscribers (until ctx ends): it waits idle until a name is
// waited for, then polls the change counter until no name is.
func (w *sqliteWaker) poll(ctx context.Context) {
	var (
		db       *sql.DB
		conn     *preparedConn
		watch    *fileWatch // nil: none (not Linux, or inotify failed): poll every sqliteWakePoll
		last     int64      = -1
		lastRead time.Time
		// The watched groups' members are read after a read of the counter that saw it
		// change (groupsDirty), at most every sqliteGroupReadGap, and at once for a group
		// newly joined (freshGroup).
		lastGroupRead           time.Time
		groupsDirty, freshGroup bool
		series                  readSeries // the reads after a file event
		noWatch                 bool       // a file watch failed: poll
		// fresh: the names newly waited for whose lease no read has looked at yet (see
		// acquired); the next read looks, whether or not the counter changed.
		fresh = map[string]bool{}
	)
	defer func() {
		if watch != nil {
			watch.close()
		}
		if conn != nil {
			conn.close()
			db.Close()
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		names := w.waitedFor(fresh)
		groups, f := w.watchedGroups()
		freshGroup = freshGroup || f
		if names == nil && groups == nil {
			last = -1 // a new wait compares against the version when it began
			clear(fresh)
			if watch != nil {
				watch.close() // no wake-ups from writes while nobody waits
				watch = nil
			}
			groupsDirty, freshGroup = false, false
			select {
			case <-ctx.Done():
				return
			case <-w.kick:
			}
			continue
		}
		if names == nil && !freshGroup {
			// Only groups are watched: the counter is read at most every sqliteGroupReadGap
			// (a file event meanwhile waits in the watch), so that the commits of a burst
			// (a group's partitions taken at its start) cost a read per gap, not one or more
			// per commit.
			if wait := sqliteGroupReadGap - time.Since(lastRead); wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				case <-w.kick:
					timer.Stop()
				}
				continue
			}
		}
		// Wait for the next look: a file event, or the period (sqliteWakePoll without a
		// watch; with one, the recheck delay after an event, else sqliteWakeWatchedPoll).
		period := sqliteWakePoll
		var events <-chan struct{}
		if watch != nil {
			events = watch.events
			period = sqliteWakeWatchedPoll
			if d := series.delay(); d > 0 {
				period = d
			}
		} else if names == nil {
			period = sqliteGroupReadGap // only groups watched: no 2 ms stat poll
		}
		timer.Reset(period)
		event, kicked := false, false
		select {
		case <-ctx.Done():
			return
		case <-events:
			event = true
		case <-timer.C:
		case <-w.kick: // a name newly waited for: read its lease now (no step of a series)
			kicked = true
		}
		timer.Stop()
		names = w.waitedFor(fresh)
		groups, f = w.watchedGroups()
		freshGroup = freshGroup || f
		if names == nil && groups == nil {
			continue
		}
		if conn == nil {
			var err error
			if db, conn, err = w.open(ctx); err != nil {
				// Hints only save latency: without them the client retries on its timing.
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				continue
			}
		}
		if watch == nil && w.path != "" && !noWatch {
			var err error
			if watch, err = watchFile(w.path, &w.watchWakes); err != nil {
				noWatch = true // poll instead (e.g. out of inotify instances)
			}
		}
		if (kicked || !series.woke(event)) && watch == nil && last >= 0 && len(fresh) == 0 && !freshGroup && !w.fileChanged() && time.Since(lastRead) < sqliteWakeFullPoll {
			continue
		}
		lastRead = time.Now()
		w.reads.Add(1)
		if event {
			w.events.Add(1)
		} else {
			w.followUps.Add(1)
		}
		var v int64
		// A context that cannot end: the read does not wait for locks (the waker's
		// connection has no busy timeout), and a cancellable one costs two goroutines per
		// read (database/sql's and the driver's watch on it).
		if err := conn.QueryRowContext(context.WithoutCancel(ctx), w.counter).Scan(&v); err != nil {
			conn.close()
			db.Close()
			conn, db, last = nil, nil, -1
			continue
		}
		// On a wait's first read, look at the leases too: the holder may have released
		// between the acquire that found the lease held and this read. Likewise a name newly
		// waited for while others were: its release may have come before the counter's last
		// read (and its local hint before its wait was noted).
		look := names
		if last >= 0 && v == last {
			look = look[:0:0]
			for n := range fresh {
				look = append(look, n)
			}
		}
		for _, n := range w.free(ctx, conn, look) {
			w.hub.deliver(spi.Hint{Kind: spi.Released, Name: n})
		}
		// The watched groups' members likewise: on a change of the counter, or a group's
		// first read after its join.
		groupsDirty = groupsDirty || last < 0 || v != last
		if freshGroup || (groupsDirty && time.Since(lastGroupRead) >= sqliteGroupReadGap) {
			lastGroupRead = time.Now()
			for _, g := range w.changedGroups(ctx, conn, groups) {
				w.hub.deliver(spi.Hint{Kind: spi.GroupChanged, Name: g})
			}
			groupsDirty, freshGroup = false, false
		}
		clear(fresh)
		series.read(event, last, v)
		last = v
	}
}

// readSeries is when poll reads the change counter after a file event. A commit writes the
// WAL, syncs it (milliseconds on a slow disk), then publishes the new version: poll reads at
// the event and again 2, 4, 8 … 64 ms later (sqliteWakePoll doubling up to
// sqliteWakeRecheckMax: six reads after the event's own, 126 ms in all), but only until a read
// after the event's own sees the counter change (chainDone). It holds no clock and does no
// I/O, so that a test can step it read by read: whether the event's own read comes before the
// commit is published depends on the scheduler (a waker woken late sees it published and
// makes the whole series).
type readSeries struct {
	next  time.Duration // the delay of the series' next read (0: no series under way)
	after bool          // the event's own read is done: a change seen now ends the series
}

// woke notes a wake-up before a read, by a file event (event) or by a timer; it reports
// whether the read is one of a series (the event's own, or one at the series' delay).
func (s *readSeries) woke(event bool) bool {
	switch {
	case event:
		s.next = sqliteWakePoll
	case s.next > 0:
		if s.next *= 2; s.next > sqliteWakeRecheckMax {
			s.next = 0 // this read is the series' last
		}
	default:
		return false
	}
	return true
}

// read notes that the read after the wake-up saw the counter at v, the read before it at last
// (-1 if none).
func (s *readSeries) read(event bool, last, v int64) {
	switch {
	case event:
		s.after = true // the event's own read: a change here ends nothing
	case s.next == 0:
		s.after = false
	case s.after && chainDone(last, v):
		s.next, s.after = 0, false
	}
}

// delay is the delay of the series' next read (0: no series under way).
func (s *readSeries) delay() time.Duration { return s.next }

// chainDone reports whether a read after a file event's first read, which saw the counter go
// from last to v, ends the event's reads (v is not last): every commit that wrote to the file
// before the event was taken is visible now. SQLite lets one writer at a time write and
// publish, so when the event's first read ran, every commit that had written before it was
// visible but for at most one still syncing; the first change seen after that read is that
// commit's (no later commit could write before it published). A commit that writes after the
// event is taken brings an event of its own. The event's first read itself cannot end them:
// its change may be a commit published just before another one wrote, in the same wake-up.
func chainDone(last, v int64) bool { return last >= 0 && v != last }

// open opens a connection of the waker's own to the backend's file (the change counter counts
// the commits of every other connection, the backend's pool included), which prepares the
// statements it runs there once.
func (w *sqliteWaker) open(ctx context.Context) (*sql.DB, *preparedConn, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var seq int
	var name, file string
	if err := w.db.QueryRowContext(ctx, w.file).Scan(&seq, &name, &file); err != nil {
		return nil, nil, err
	}
	w.path = file
	db, err := sql.Open("sqlite", file)
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, &preparedConn{conn: conn, stmts: map[string]*sql.Stmt{}}, nil
}

// preparedConn is the waker's connection: it prepares each statement once (parsing a
// statement costs as much as running the waker's reads) and keeps it until close.
type preparedConn struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
}

func (p *preparedConn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := p.stmts[query]; ok {
		return s, nil
	}
	s, err := p.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	p.stmts[query] = s
	return s, nil
}

// ExecContext runs query, prepared once.
func (p *preparedConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// PrepareContext prepares query afresh (the caller closes it).
func (p *preparedConn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.conn.PrepareContext(ctx, query)
}

// QueryContext runs query, prepared once.
func (p *preparedConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// QueryRowContext runs query, prepared once (unprepared if preparing fails: the row carries
// the error).
func (p *preparedConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := p.stmt(ctx, query)
	if err != nil {
		return p.conn.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

func (p *preparedConn) close() {
	for _, s := range p.stmts {
		s.Close()
	}
	p.conn.Close()
}

// free returns the names whose lease is free now (no holder, or the holder's session expired)
// and owed to none of another backend's sessions (sessionSet.wakes).
func (w *sqliteWaker) free(ctx context.Context, conn *preparedConn, names []string) []string {
	// Like the change counter's read, these do not wait for locks: no context to watch.
	ctx = context.WithoutCancel(ctx)
	q := sqlq.SQLite(conn)
	var out []string
	for _, n := range names {
		r, err := q.AcquireReadLease(ctx, sqlq.AcquireReadLeaseParams{Name: n})
		if err != nil || w.sessions.wakes(r.HolderID, r.HolderRemainingMs, r.WaiterID) {
			out = append(out, n) // unknown counts as free: a hint only costs an acquire
		}
	}
	return out
}

// waitedFor returns the names waited for now (nil if none), forgetting those whose waits all
// ended, and adds the names newly waited for since the last call to fresh (keeping only the
// ones still waited for).
func (w *sqliteWaker) waitedFor(fresh map[string]bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := w.waiting.sweep(time.Now())
	for _, n := range w.fresh {
		fresh[n] = true
	}
	w.fresh = w.fresh[:0]
	for n := range fresh {
		if w.waiting[n] == nil {
			delete(fresh, n)
		}
	}
	return names
}

// fileChanged reports whether the database file or its WAL changed size or modification time
// since the last call: a stat each, far cheaper than a statement on the connection, so the
// change counter is read only when a commit may have happened (and at least every
// sqliteWakeFullPoll, since a commit within the file system's timestamp granularity that
// keeps the size can go unseen). With no file to look at it reports true.
func (w *sqliteWaker) fileChanged() bool {
	if w.path == "" {
		return true
	}
	changed := false
	for i, p := range [2]string{w.path, w.path + "-wal"} {
		var k fileKey
		if fi, err := os.Stat(p); err == nil {
			k = fileKey{size: fi.Size(), mtime: fi.ModTime()}
		}
		if k != w.print[i] {
			w.print[i] = k
			changed = true
		}
	}
	return changed
}

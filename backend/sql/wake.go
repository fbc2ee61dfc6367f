package sql

import (
	"context"
	"sync"
	"time"

	"github.com/simba-go/simba/spi"
)

// sessionNotes is told what the backend's sessions open, acquire, renew, release, withdraw from
// and close: the SQLite and MySQL/MariaDB wakers (waker) and PostgreSQL's hint listener
// (pgHub: the release channels it LISTENs on) each use what they need (Backend.notes).
type sessionNotes interface {
	// opened notes a session and its TTL.
	opened(sid string, ttl time.Duration)
	// acquired notes an acquire's reply (the one the caller gets): a held name is waited for,
	// a granted one is held, an expired session waits for and holds nothing.
	acquired(sid, name string, r spi.Acquire)
	// keptAlive notes a keep-alive's reply: the leases the session still holds, or its expiry.
	keptAlive(sid string, ka spi.KeepAlive)
	// released notes a release by session sid (whether or not it held the lease).
	released(sid, name string)
	// withdrawn notes that session sid no longer waits for name: it withdrew from name's
	// waiter queue, or a TryLock that found name held gave up (Backend.EndWait).
	withdrawn(sid, name string)
	// closed notes that session sid was closed: it holds and waits for nothing.
	closed(sid string)
	// localHubFor is the hub that a release of name by the backend is hinted to at once
	// (releasedLocally), or nil when no session of the backend waits for name.
	localHubFor(name string) *hintHub
}

// waker delivers wake-up hints to the Hints subscribers of a backend whose server pushes none
// (SQLite: sqlitewake.go; MySQL/MariaDB: mysqlwake.go), from what the Backend notes of its
// sessions.
type waker interface {
	sessionNotes
	// hints subscribes to the waker (Backend.Hints has checked that the backend is open).
	hints(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) (<-chan spi.Hint, error)
}

// releasedLocally wakes the backend's own waiters at once after a release by this backend:
// two clients of one process sharing a backend hand a lease over without waiting for the
// server's hint (PostgreSQL), the change-counter poll (SQLite) or the named lock (MySQL). A
// waiter that gets the same hint again from the server pays at most one acquire for it (the
// engine damps hints that prove false). Only a name that a session of the backend waits for
// is hinted (sessionNotes.localHubFor, from the backend's waitSet): then a client that locks
// and unlocks a name nobody here waits for sends no hint to itself. Every Unlock used to wake
// the client's own hint reader on another thread, which found no waiter and dropped the hint:
// on the 2-CPU VM about 50–100 µs of the process's CPU per uncontended Lock and Unlock
// (BenchmarkLockCycle/postgres, /sqlite, /mariadb). A waiter whose HeldBy is not noted yet
// when the release comes misses this hint; what notes its wait delivers a catch-up hint
// instead (PostgreSQL's LISTEN, SQLite's first read of a newly waited name, MySQL's first
// probe of its named lock).
func (b *Backend) releasedLocally(sid, name string) {
	if b.notes == nil {
		return
	}
	b.notes.released(sid, name)
	if hub := b.notes.localHubFor(name); hub != nil {
		hub.deliver(spi.Hint{Kind: spi.Released, Name: name})
	}
}

// waitSet is the sessions of one backend that wait for each name (name → its waits), kept per
// session rather than per name: when two sessions of the backend wait for one name, the grant
// to one ends its wait alone, and the other's wait, and the release hint owed to it, stay.
// Every dialect keeps one: PostgreSQL's hint listener LISTENs on its names (pgHub.waits, and
// likewise the groups its sessions take part in: pgHub.groups), the SQLite and MySQL/MariaDB
// wakers watch them, and a release by the backend hints its own subscribers only for a name in
// it (releasedLocally). Its owner's lock guards it.
type waitSet map[string]*nameWaits

// nameWaits is the sessions of a backend that wait for one lease (or take part in one group).
type nameWaits struct {
	// who maps each waiting session to when its wait ends unless an acquire renews it (for a
	// group: each member, or joiner, to when its membership is let go unless a Join or a
	// keep-alive naming the group renews it).
	who map[string]time.Time
	// idle is when who became empty (zero while it is not): the linger's start (PostgreSQL).
	idle time.Time
}

// entry returns name's entry, made if new (and reports whether it was); it is no longer idle.
func (s waitSet) entry(name string) (w *nameWaits, isNew bool) {
	w = s[name]
	if w == nil {
		w = &nameWaits{who: map[string]time.Time{}}
		s[name] = w
		isNew = true
	}
	w.idle = time.Time{}
	return w, isNew
}

// wait starts or renews sid's wait for name until until, and reports whether no session
// waited for name before (no entry, or one whose waits all ended).
func (s waitSet) wait(sid, name string, until time.Time) (first bool) {
	w, _ := s.entry(name)
	first = len(w.who) == 0
	w.who[sid] = until
	return first
}

// end ends sid's wait for name; the entry stays, idle from now if that was its last wait (an
// owner without lingers drops idle entries in its sweep).
func (s waitSet) end(sid, name string, now time.Time) {
	w := s[name]
	if w == nil {
		return
	}
	if _, ok := w.who[sid]; !ok {
		return
	}
	delete(w.who, sid)
	if len(w.who) == 0 {
		w.idle = now
	}
}

// forget ends sid's wait for name and drops name's entry once no session waits for it: for the
// wakers, which keep no linger, so that a name nobody waits for leaves nothing behind (and a
// MySQL/MariaDB blocking wait for it ends at the waker's next round).
func (s waitSet) forget(sid, name string) {
	w := s[name]
	if w == nil {
		return
	}
	delete(w.who, sid)
	if len(w.who) == 0 {
		delete(s, name)
	}
}

// live counts the names some session waits for at now (entries only lingering, or whose
// waits all lapsed, are not counted): for the tests.
func (s waitSet) live(now time.Time) int {
	n := 0
	for name := range s {
		if s.waited(name, now) {
			n++
		}
	}
	return n
}

// endSession ends every wait of sid (closed, or found expired).
func (s waitSet) endSession(sid string, now time.Time) {
	for name := range s {
		s.end(sid, name, now)
	}
}

// waited reports whether a session waits for name at now (its wait not over).
func (s waitSet) waited(name string, now time.Time) bool {
	w := s[name]
	if w == nil {
		return false
	}
	for _, until := range w.who {
		if now.Before(until) {
			return true
		}
	}
	return false
}

// hubIfWaited is hub while a session waits for name in *s (s itself guarded by mu: a hub
// replaces its set when a listener starts), else nil: each dialect's localHubFor, so that a
// release hints the backend's own subscribers only for a waited-for name.
func hubIfWaited(mu *sync.Mutex, s *waitSet, name string, hub *hintHub) *hintHub {
	mu.Lock()
	defer mu.Unlock()
	if !s.waited(name, time.Now()) {
		return nil
	}
	return hub
}

// sweep ends the waits over at now and drops the names no session waits for any more; it
// returns the names still waited for (nil if none). For the wakers, which keep no linger.
func (s waitSet) sweep(now time.Time) []string {
	var names []string
	for name, w := range s {
		for sid, until := range w.who {
			if !now.Before(until) {
				delete(w.who, sid)
			}
		}
		if len(w.who) == 0 {
			delete(s, name)
			continue
		}
		names = append(names, name)
	}
	return names
}

// sessionSet is the open sessions of one backend, kept by its waker to tell whether a free lease
// is owed to one of them.
type sessionSet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func (s *sessionSet) add(sid string) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]struct{}{}
	}
	s.m[sid] = struct{}{}
	s.mu.Unlock()
}

func (s *sessionSet) remove(sid string) {
	s.mu.Lock()
	delete(s.m, sid)
	s.mu.Unlock()
}

// wakes reports whether a lease read so (acquire_read_lease's row) should wake the backend's
// waiters: it is free (no holder, or the holder's session expired) and the waiter queue owes
// it to none of another backend's sessions (no live waiter, or the first one is a session of
// this backend). A free lease owed to another session goes to that session alone, so waking
// this backend's waiters for it would only cost each an acquire that finds it held, contending
// for the lease row with the session it is owed to: 18 goroutines of three processes locking
// three names took 30-60 locks/s on MariaDB and ~50 on SQLite that way, 2026-12-03.
func (s *sessionSet) wakes(holderID string, holderRemainingMs int64, waiterID string) bool {
	if holderID != "" && holderRemainingMs > 0 {
		return false
	}
	if waiterID == "" {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ours := s.m[waiterID]
	return ours
}

package zookeeper

import (
	"context"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// hintBuffer is each subscriber's channel capacity; a subscriber that falls further behind
// loses hints (hints only save latency, never safety).
const hintBuffer = 1024

// Hints delivers hints until ctx is done or the backend is closed, then closes the channel:
// Released when a lease node is deleted (a release, or a holder session that closed or
// expired) and GroupChanged when a member joins or leaves a group, whichever client made the
// change, for the names this backend's sessions wait for and the groups they use.
//
// A Released hint is promised only for a name one of the backend's sessions waits for: one
// whose last acquire of it (queued or not) answered HeldBy, until a grant, a withdrawal, a
// release, the session's close, or one linger (two of the session's TTLs) without another
// acquire of it. A GroupChanged hint is promised only for a group of interest: one a session
// of the backend is a member of or has a Join of in flight (until it leaves, its Join fails,
// or it ends, and one linger more), or whose members a session read (KeepAlive, Members)
// within a linger. While there are subscribers and something is waited for or of interest,
// the backend keeps one extra connection with a persistent watch (ZooKeeper 3.6+ addWatch) on
// each waited-for lease node and on each group node of interest (whose children are the
// members); a watch is removed when its wait or interest ends, and the connection is closed
// after about a TTL with nothing to watch. So another client's lock and unlock of a name no
// one here waits for, or join and leave of a group no one here uses, costs this backend
// nothing. On older servers, or while that connection is down, hints come from the watches of
// the backend's own sessions (on leases they hold or found held, waiter nodes they found first
// in a queue, and groups they read). A hint may repeat.
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	ch := make(chan spi.Hint, hintBuffer)
	b.hmu.Lock()
	if err := b.checkOpen(); err != nil {
		b.hmu.Unlock()
		return nil, err
	}
	b.subs[ch] = struct{}{}
	if b.watcher == nil {
		b.watcher = newWatcher(b)
	}
	b.hmu.Unlock()
	// Unsubscribe when ctx ends or the backend closes (whose Close then closes ch, if this has
	// not): a subscription whose ctx never ends must not outlive the backend. If the backend
	// is closed by now, its Close closes ch.
	b.background(func() {
		select {
		case <-ctx.Done():
		case <-b.stop.Done():
		}
		var stop *watcher
		b.hmu.Lock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
		if len(b.subs) == 0 {
			stop, b.watcher = b.watcher, nil
			clear(b.waits)
			clear(b.groups)
		}
		b.hmu.Unlock()
		if stop != nil {
			stop.close()
		}
	})
	return ch, nil
}

// hint publishes a hint seen by one of the backend's sessions (a watch on a lease or group it
// touched, or its own release) unless the watcher connection is up and answering
// (watcher.hearing) with its watch on that lease or group node set (watcher.covers). A
// Released hint of a name no session waits for is dropped: every waiter of a subscriber
// acquires through this backend, so no one would act on it.
func (b *Backend) hint(kind spi.HintKind, name string) {
	b.hmu.Lock()
	w := b.watcher
	_, waited := b.waits[name]
	b.hmu.Unlock()
	if kind == spi.Released && !waited {
		return
	}
	if w != nil && w.covers(kind, name) {
		return
	}
	b.publish(kind, name)
}

// waitMark is one session's wait for a lease name.
type waitMark struct {
	until time.Time // the wait ends unless the session asks again by then (linger)
	// node: the session found the lease node itself held (not only a waiter ahead of it in
	// the queue), so the node's absence when the watch is set means it was released meanwhile.
	node bool
}

// waitFor records that session sid waits for name (an acquire of it answered HeldBy) for
// linger from now, unless it asks again: the watcher then watches the name's lease node. It
// records nothing while Hints has no subscriber.
func (b *Backend) waitFor(sid spi.SessionID, name string, linger time.Duration, node bool) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	if len(b.subs) == 0 {
		return
	}
	m := b.waits[name]
	if m == nil {
		m = map[spi.SessionID]waitMark{}
		b.waits[name] = m
		b.kickLocked()
	}
	prev := m[sid]
	m[sid] = waitMark{until: time.Now().Add(linger), node: node || prev.node}
}

// doneWaiting records that session sid no longer waits for name (granted, withdrawn or
// released).
func (b *Backend) doneWaiting(sid spi.SessionID, name string) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	if m := b.waits[name]; m != nil {
		delete(m, sid)
		if len(m) == 0 {
			delete(b.waits, name)
			b.kickLocked()
		}
	}
}

// sessionDone ends every wait and membership of session sid (its close or loss).
func (b *Backend) sessionDone(sid spi.SessionID) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	for _, u := range b.groups {
		delete(u.members, sid) // watchSet drops the group if nothing else keeps it
	}
	for name, m := range b.waits {
		if _, ok := m[sid]; ok {
			delete(m, sid)
			if len(m) == 0 {
				delete(b.waits, name)
				b.kickLocked()
			}
		}
	}
}

// groupUse is the backend's interest in one group: the watcher watches the group's node while
// a session is a member of it (or joining it), or read its members within a linger.
type groupUse struct {
	// members maps each session that joined the group (or has a Join of it in flight) to
	// when its interest ends: zero while it is a member, a linger's end once it left.
	members map[spi.SessionID]time.Time
	// readUntil is when the interest of the last read of its members ends (linger).
	readUntil time.Time
	// base is the lowest cversion (the group node's count of child changes; -1: no node) a
	// read of its members found since the group's last GroupChanged hint (hasBase): a
	// subscriber may still act on that read, so a change since then must be hinted.
	base    int32
	hasBase bool
	// checked: the watcher's watch on the group node is set and an exists sent behind it was
	// answered with cversion cv (see groupChecked), on its current connection.
	checked bool
	cv      int32
}

// live reports whether the interest lasts at now, dropping the memberships that lingered past
// their time.
func (u *groupUse) live(now time.Time) bool {
	for sid, until := range u.members {
		if !until.IsZero() && now.After(until) {
			delete(u.members, sid)
		}
	}
	return len(u.members) > 0 || !now.After(u.readUntil)
}

// groupLocked returns the interest in group g, making it (and kicking the watcher) if there
// was none; nil while Hints has no subscriber. hmu held.
func (b *Backend) groupLocked(g string) *groupUse {
	if len(b.subs) == 0 {
		return nil
	}
	u := b.groups[g]
	if u == nil {
		u = &groupUse{members: map[spi.SessionID]time.Time{}}
		b.groups[g] = u
		b.kickLocked()
	}
	return u
}

// joining records that session sid joins group g (a Join is in flight): the watcher watches the
// group's node until the session leaves, ends, or the Join fails (joinEnded).
func (b *Backend) joining(sid spi.SessionID, g string) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	if u := b.groupLocked(g); u != nil {
		u.members[sid] = time.Time{}
	}
}

// joinEnded records that session sid is no longer a member of group g (it left, or its Join
// failed); its interest lingers for linger, so that a session joining again soon does not
// cost the watch's removal and a new one.
func (b *Backend) joinEnded(sid spi.SessionID, g string, linger time.Duration) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	if u := b.groups[g]; u != nil {
		if _, ok := u.members[sid]; ok {
			u.members[sid] = time.Now().Add(linger)
		}
	}
}

// groupRead records that a session read the members of group g, finding its node at cversion
// cv (-1: no node): the watcher watches the node for linger from now. If the watch was already
// set and checked at a later cversion, a change between the read and the watch may have gone
// unheard, and the group is hinted.
func (b *Backend) groupRead(g string, cv int32, linger time.Duration) {
	if g == wire.ProbeGroup {
		return // the client's probe: no member joins it, and a watch would only open the hint connection
	}
	b.hmu.Lock()
	u := b.groupLocked(g)
	if u == nil {
		b.hmu.Unlock()
		return
	}
	u.readUntil = later(u.readUntil, time.Now().Add(linger))
	stale := u.checked && cv < u.cv
	if !stale && (!u.hasBase || cv < u.base) {
		u.base, u.hasBase = cv, true
	}
	b.hmu.Unlock()
	if stale {
		b.publish(spi.GroupChanged, g)
	}
}

// groupChecked records that the watcher's watch on group g's node is set and an exists sent
// behind it found the node at cversion cv (-1: no node). A read of the members at an earlier
// cversion (base) missed a change that the watch, set after it, may not have heard: the group
// is hinted. It reports whether the group is still of interest.
func (b *Backend) groupChecked(g string, cv int32) bool {
	b.hmu.Lock()
	u := b.groups[g]
	if u == nil {
		b.hmu.Unlock()
		return false
	}
	u.checked, u.cv = true, cv
	stale := u.hasBase && cv > u.base
	b.hmu.Unlock()
	if stale {
		b.publish(spi.GroupChanged, g)
	}
	return true
}

// groupsUnchecked records that the watcher's connection ended, with every watch on it.
func (b *Backend) groupsUnchecked() {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	for _, u := range b.groups {
		u.checked = false
	}
}

// groupWatched reports whether group g is of interest.
func (b *Backend) groupWatched(g string) bool {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	_, ok := b.groups[g]
	return ok
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// watchKind is what the watcher's persistent watch on a path is for, and what it checks once
// the watch is set.
type watchKind uint8

const (
	// leaseWatch: a lease node that a waiter found only behind a waiter ahead of it in the
	// queue; nothing is checked.
	leaseWatch watchKind = iota
	// leaseNodeWatch: a lease node that a session found held; an exists behind the watch finds
	// a release that landed before it.
	leaseNodeWatch
	// groupWatch: a group node (its children are the members); an exists behind the watch
	// finds a change that landed after a read of the members and before it (groupChecked).
	groupWatch
)

// watchSet ends the waits and group interests that lingered past their time and returns what
// the watcher must watch: the lease node paths of the names waited for and the group node
// paths of the groups of interest.
func (b *Backend) watchSet(now time.Time) map[string]watchKind {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	out := make(map[string]watchKind, len(b.waits)+len(b.groups))
	for name, m := range b.waits {
		node := false
		for sid, w := range m {
			if now.After(w.until) {
				delete(m, sid)
				continue
			}
			node = node || w.node
		}
		if len(m) == 0 {
			delete(b.waits, name)
			continue
		}
		if node {
			out[b.lay.lease(name)] = leaseNodeWatch
		} else {
			out[b.lay.lease(name)] = leaseWatch
		}
	}
	for g, u := range b.groups {
		if !u.live(now) {
			delete(b.groups, g)
			continue
		}
		out[b.lay.group(g)] = groupWatch
	}
	return out
}

// waited reports whether a session waits for name.
func (b *Backend) waited(name string) bool {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	_, ok := b.waits[name]
	return ok
}

// kickLocked, under hmu, tells the watcher that what it must watch changed.
func (b *Backend) kickLocked() {
	if b.watcher != nil {
		select {
		case b.watcher.kick <- struct{}{}:
		default:
		}
	}
}

// publish sends a hint to every subscriber without blocking. A GroupChanged hint makes every
// subscriber read the group again, so the reads before it need no more checking (base).
func (b *Backend) publish(kind spi.HintKind, name string) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	if u := b.groups[name]; kind == spi.GroupChanged && u != nil {
		u.hasBase = false
	}
	for ch := range b.subs {
		select {
		case ch <- spi.Hint{Kind: kind, Name: name}:
		default:
		}
	}
}

// stopHints closes every subscriber's channel and stops the watcher (on Close).
func (b *Backend) stopHints() {
	b.hmu.Lock()
	for ch := range b.subs {
		close(ch)
		delete(b.subs, ch)
	}
	w := b.watcher
	b.watcher = nil
	b.hmu.Unlock()
	if w != nil {
		w.close()
	}
}

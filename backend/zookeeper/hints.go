package zookeeper

import (
	"context"
	"time"

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
// acquire of it. While there are subscribers and something is waited for (or a session has
// joined or read a group), the backend keeps one extra connection with a persistent watch
// (ZooKeeper 3.6+ addWatch) on each waited-for lease node and a persistent recursive watch on
// the groups node; a lease's watch is removed when its wait ends, and the connection is closed
// after about a TTL with nothing to watch. So another client's lock and unlock of a name no
// one here waits for costs this backend nothing. On older servers, or while that connection
// is down, hints come from the watches of the backend's own sessions (on leases they hold or
// found held, waiter nodes they found first in a queue, and groups they read). A hint may
// repeat.
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
			b.groupsUsed = false
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
// (watcher.hearing) with its watch on that lease or on the groups set (watcher.covers). A
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

// sessionDone ends every wait of session sid (its close or loss).
func (b *Backend) sessionDone(sid spi.SessionID) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
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

// useGroups records that a session joined or read a group: the watcher then watches the
// groups node (recursively: membership changes are rare, so all of them are cheap to hear).
func (b *Backend) useGroups() {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	if len(b.subs) > 0 && !b.groupsUsed {
		b.groupsUsed = true
		b.kickLocked()
	}
}

// watchSet ends the waits that lingered past their time and returns what the watcher must
// watch: the lease node paths of the names waited for (with whether a session found the node
// itself held) and whether the groups node is.
func (b *Backend) watchSet(now time.Time) (leases map[string]bool, groups bool) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	leases = make(map[string]bool, len(b.waits))
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
		leases[b.lay.lease(name)] = node
	}
	return leases, b.groupsUsed
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

// publish sends a hint to every subscriber without blocking.
func (b *Backend) publish(kind spi.HintKind, name string) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
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

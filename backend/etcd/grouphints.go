package etcd

import (
	"context"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// groupWatch is the interest of the backend's sessions in one group, and the watch of its
// member keys that serves it.
type groupWatch struct {
	// who maps each session that is a member of the group (or has a Join of it in flight) to
	// when its interest ends: zero while it is a member, a linger's end once it left.
	who map[spi.SessionID]time.Time
	// readUntil is when the interest of the last read of the group's members ends.
	readUntil time.Time
	// baseRev and baseCount are the revision and member count of the oldest read of the
	// members before the watch was first made (baseRev 0: none): a change after it and before
	// the watch is found by one read once the watch is made (see closeGroupGap).
	baseRev   int64
	baseCount int
	// since is the revision after which the watch hears every change (0: not made yet).
	since  int64
	wake   chan struct{}      // an interest's end moved: sweep again
	cancel context.CancelFunc // ends the watch
}

// linger is how long an interest of session id outlasts its end (a Leave) or a read: two of
// its TTLs and waitSlack (waitTTLs), or of the shortest TTL asked of the backend, or of
// simba's default TTL while none was.
func (b *Backend) linger(id spi.SessionID) time.Duration {
	ttl := time.Duration(b.minTTL.Load())
	b.mu.Lock()
	if s := b.sessions[id]; s != nil {
		ttl = s.ttl
	}
	b.mu.Unlock()
	if ttl <= 0 {
		ttl = 15 * time.Second
	}
	return waitTTLs*ttl + waitSlack
}

// groupLocked returns the interest in group g, starting its watch if there was none; nil
// while Hints has no subscriber. h.mu held.
func (b *Backend) groupLocked(cli *clientv3.Client, g string) *groupWatch {
	h := &b.hints
	if len(h.subs) == 0 {
		return nil
	}
	if w := h.groups[g]; w != nil {
		return w
	}
	ctx, cancel := context.WithCancel(b.ctx)
	w := &groupWatch{who: map[spi.SessionID]time.Time{}, wake: make(chan struct{}, 1), cancel: cancel}
	h.groups[g] = w
	go b.watchGroup(ctx, cli, g, w)
	return w
}

// joining notes that session id joins group g (a Join is in flight): the backend watches the
// group's member keys until the session leaves, ends, or the Join fails (joinEnded).
func (b *Backend) joining(cli *clientv3.Client, id spi.SessionID, g string) {
	b.hints.mu.Lock()
	defer b.hints.mu.Unlock()
	if w := b.groupLocked(cli, g); w != nil {
		w.who[id] = time.Time{}
	}
}

// joinEnded notes that session id is no longer a member of group g (it left, or its Join
// failed); its interest lingers, so that a session joining again soon keeps the watch.
func (b *Backend) joinEnded(id spi.SessionID, g string) {
	until := time.Now().Add(b.linger(id))
	h := &b.hints
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.groups[g]; w != nil {
		if _, ok := w.who[id]; ok {
			w.who[id] = until
			w.nudge()
		}
	}
}

// groupRead notes that session id (or the backend, for Members) read the members of group g,
// count of them, at revision rev: the backend watches them for a linger. If the watch was made
// after rev, a change between them may have gone unheard: the group is hinted.
func (b *Backend) groupRead(cli *clientv3.Client, id spi.SessionID, g string, rev int64, count int) {
	if g == wire.ProbeGroup {
		return // the client's probe: no member joins it, nothing to watch
	}
	until := time.Now().Add(b.linger(id))
	h := &b.hints
	h.mu.Lock()
	w := b.groupLocked(cli, g)
	if w == nil {
		h.mu.Unlock()
		return
	}
	if until.After(w.readUntil) {
		w.readUntil = until
	}
	stale := w.since != 0 && rev < w.since
	if w.since == 0 && (w.baseRev == 0 || rev < w.baseRev) {
		w.baseRev, w.baseCount = rev, count
	}
	h.mu.Unlock()
	if stale {
		h.send(spi.Hint{Kind: spi.GroupChanged, Name: g})
	}
}

// nudge makes the watch's goroutine sweep again (h.mu held).
func (w *groupWatch) nudge() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// sweepGroup ends the interests in group g that are past their time, and returns when the
// next one ends (zero: none is timed) and whether any is left (false: the watch ends).
func (h *hub) sweepGroup(g string, w *groupWatch) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	var next time.Time
	for id, until := range w.who {
		switch {
		case until.IsZero():
		case !until.After(now):
			delete(w.who, id)
		case next.IsZero() || until.Before(next):
			next = until
		}
	}
	read := w.readUntil.After(now)
	if read && (next.IsZero() || w.readUntil.Before(next)) {
		next = w.readUntil
	}
	live := len(w.who) > 0 || read
	if !live && h.groups[g] == w {
		w.cancel()
		delete(h.groups, g)
	}
	return next, live
}

// beforeGroupWatch, when set (by tests), runs before a group's watch is first made.
var beforeGroupWatch atomic.Pointer[func(group string)]

// watchGroup watches the member keys of group g until ctx is done (the last interest ended,
// the last subscriber left, the backend closed), making the watch again whenever it ends,
// from the revision after the last it reported, so that nothing is lost meanwhile unless that
// revision was compacted (the group is then hinted once). The first watch starts from the
// current revision (see watchName for why not from a read's); a change between the oldest
// read of the members and that revision is found by one read (closeGroupGap).
func (b *Backend) watchGroup(ctx context.Context, cli *clientv3.Client, g string, w *groupWatch) {
	h := &b.hints
	members := wire.EtcdMembersPrefix(b.prefix, g)
	if f := beforeGroupWatch.Load(); f != nil {
		(*f)(g)
	}
	var from int64 // 0 until the first watch is made: watch from the current revision
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sweep := func() {
		next, _ := h.sweepGroup(g, w)
		if next.IsZero() {
			timer.Reset(time.Hour) // nothing timed: a wake comes with the first
		} else {
			timer.Reset(time.Until(next))
		}
	}
	sweep()
	for ctx.Err() == nil {
		rctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wc := cli.Watch(rctx, members, clientv3.WithPrefix(), watchFrom(from))
	watching:
		for {
			select {
			case r, open := <-wc:
				if !open || ctx.Err() != nil { // ended, or the interest did: what came since is not wanted
					break watching
				}
				if r.Created {
					from = r.Header.Revision + 1
					b.closeGroupGap(ctx, cli, g, w, r.Header.Revision)
					continue
				}
				var ok bool
				if from, ok = h.heard(spi.GroupChanged, g, r, open, from); !ok {
					break watching
				}
			case <-w.wake:
				sweep()
			case <-timer.C:
				sweep()
			case <-ctx.Done():
				break watching
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(remakePause):
		}
	}
}

// closeGroupGap records that group g's first watch hears every change after revision since,
// and checks that none landed between the oldest read of its members before (baseRev, which
// found baseCount of them) and since: a member key written after that read, or fewer of them
// (one left), is a change the watch did not hear, and the group is hinted (as it is if the
// read fails).
func (b *Backend) closeGroupGap(ctx context.Context, cli *clientv3.Client, g string, w *groupWatch, since int64) {
	h := &b.hints
	h.mu.Lock()
	if w.since == 0 {
		w.since = since
	}
	rev, count := w.baseRev, w.baseCount
	h.mu.Unlock()
	if rev == 0 || since <= rev {
		return // no read, or no revision between it and the watch
	}
	r, err := cli.Get(ctx, wire.EtcdMembersPrefix(b.prefix, g), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err == nil && len(r.Kvs) == count {
		changed := false
		for _, kv := range r.Kvs {
			changed = changed || kv.ModRevision > rev
		}
		if !changed {
			return
		}
	}
	h.send(spi.Hint{Kind: spi.GroupChanged, Name: g})
}

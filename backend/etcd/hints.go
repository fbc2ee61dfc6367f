package etcd

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// hintBuffer is how many hints wait for a slow reader before more are dropped (a lost hint
// costs latency, never safety).
const hintBuffer = 1024

// waitTTLs is how long, in the session's TTLs, a session uses a group after a read of its
// members or the end of a Join (see groupWatch); leaseWaitTTLs is how long a session waits for
// a name after its latest acquire of that name replied HeldBy, unless a grant, a Withdraw or
// the session's end ends the wait sooner. A waiting client that hears no hint acquires again
// two TTLs after the reply: the backend's HeldBy has its time left unknown and its hints are
// steady (HintsSteady), so the engine's fallback retry comes two TTLs after it
// (internal/engine, Engine.unknownRetry), and it does not retry sooner for its queue entry,
// which lives with the session (QueueEntriesLiveWithSession). The wait must outlast that
// retry, or a release between the wait's end and the retry would go unheard. The backend's TTL
// is the asked TTL rounded down to whole seconds, more than half of it and at least the asked
// TTL less a second: three of them, plus waitSlack for a slow reply, outlast two asked TTLs
// (of at least a second).
const (
	waitTTLs      = 2
	leaseWaitTTLs = 3
	waitSlack     = time.Second
)

// remakePause is the pause before a watch that ended (a lost leader, a compaction) is made
// again.
const remakePause = 50 * time.Millisecond

// hub holds a backend's Hints subscribers and the per-name and per-group watches they share.
type hub struct {
	mu   sync.Mutex
	subs map[chan spi.Hint]struct{}
	// names holds the names a session of the backend waits for, groups the groups its
	// sessions use (see groupWatch), while there are subscribers.
	names  map[string]*nameWatch
	groups map[string]*groupWatch
}

// nameWatch is the interest of the backend's sessions in one name, and the watch that serves
// it.
type nameWatch struct {
	// who maps each waiting session to when its wait ends unless an acquire renews it.
	who    map[spi.SessionID]time.Time
	cancel context.CancelFunc // ends the watch
}

// Hints delivers, until ctx is done or the backend is closed (then it closes the channel), a
// Released hint for every deletion of the lease key of a name that a session of this backend
// waits for (by Release, CloseSession or the expiry of its holder's lease) and of any of that
// name's waiter keys (by a grant, Withdraw or the end of the waiter's session: the next waiter
// may now be the oldest, and a lease reserved for a waiter that left is free), and a
// GroupChanged hint for every change of a member key of a group the backend's sessions use, by
// any client of the cluster. Every subscriber gets every hint; a hint may repeat, and may come
// for a name or group shortly after the wait or use ended.
//
// A session waits for a name from an Acquire or AcquireQueued of this backend that replies
// HeldBy, while the backend has subscribers, until the session is granted the name, withdraws
// (Withdraw), closes or is found expired, or makes no acquire of it for three TTLs (see
// leaseWaitTTLs). While any session waits for a name the backend keeps one watch of its lease key
// and one of its waiter keys' prefix (deletions only), on the backend's client (gRPC carries
// them on one stream); the watches end with the last wait. A release that lands between the
// HeldBy reply and the watches' start is hinted too: if the watches start after the reply's
// revision, one read finds whether the key the reply found in the way (the lease key, or the
// oldest waiter's) is gone or was made again since (see watchName). So a client hears of the
// releases it waits for, not of every release in the cluster. Waits noted before the first
// subscriber, or while none is left, are not watched.
//
// A session uses a group while it is a member of it or has a Join of it in flight (until it
// leaves, the Join fails, or it ends, and a linger of two TTLs more), and for two TTLs after
// it (a keep-alive) or the backend (Members) read its members. While the backend has
// subscribers and a session uses a group, it keeps one watch of the group's member keys,
// shared by every subscriber; a change between a read of the members and the watch's start is
// found by one read once it is made (see closeGroupGap). So a client hears of the joins and
// leaves of the groups it uses, not of every group in the cluster (the watch used to cover the
// whole groups prefix, one per subscriber).
//
// Every watch requires a leader (clientv3.WithRequireLeader): a member cut off from the quorum
// ends it, and it is made again after a pause, on whichever member the client reaches. A
// name's or group's watch resumes after the last revision it reported, so nothing is lost
// meanwhile, unless that revision was compacted: the name or group is then hinted once, since
// a release or change may have been missed.
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	if _, err := b.check(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan spi.Hint, hintBuffer)
	h := &b.hints
	h.mu.Lock()
	if h.subs == nil {
		h.subs, h.names, h.groups = map[chan spi.Hint]struct{}{}, map[string]*nameWatch{}, map[string]*groupWatch{}
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-b.ctx.Done():
		}
		h.remove(ch)
	}()
	return ch, nil
}

// remove closes subscriber ch; the last one's leaving ends every name's and group's watch.
func (h *hub) remove(ch chan spi.Hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, ch)
	close(ch)
	if len(h.subs) > 0 {
		return
	}
	for n, w := range h.names {
		w.cancel()
		delete(h.names, n)
	}
	for g, w := range h.groups {
		w.cancel()
		delete(h.groups, g)
	}
}

// send gives h to every subscriber that has room for it.
func (h *hub) send(hint spi.Hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- hint:
		default:
		}
	}
}

// waitFor notes that session id (of TTL ttl) found name held (or reserved for another waiter)
// in a reply read at revision rev, where the key in its way (the lease key, or the oldest
// waiter's) was blocker, starting the name's watch if no session of the backend waited for it
// yet.
func (b *Backend) waitFor(cli *clientv3.Client, id spi.SessionID, name string, ttl time.Duration, rev int64, blocker *mvccpb.KeyValue) {
	h := &b.hints
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		return
	}
	until := time.Now().Add(leaseWaitTTLs*ttl + waitSlack)
	if w := h.names[name]; w != nil {
		w.who[id] = until
		return
	}
	ctx, cancel := context.WithCancel(b.ctx)
	w := &nameWatch{who: map[spi.SessionID]time.Time{id: until}, cancel: cancel}
	h.names[name] = w
	go b.watchName(ctx, cli, name, w, rev, blocker, until)
}

// stopWaiting ends session id's wait for name (a grant, a withdrawal).
func (h *hub) stopWaiting(id spi.SessionID, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.names[name]; w != nil {
		delete(w.who, id)
		h.idle(name, w)
	}
}

// dropSession ends every wait and membership of session id (it closed or expired).
func (h *hub) dropSession(id spi.SessionID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for n, w := range h.names {
		delete(w.who, id)
		h.idle(n, w)
	}
	for _, w := range h.groups {
		if _, ok := w.who[id]; ok {
			delete(w.who, id)
			w.nudge() // the watch's goroutine ends it if nothing else keeps it
		}
	}
}

// sweep ends the waits for name that are past their time, and returns when the next one ends
// (false: none is left, the watch ends).
func (h *hub) sweep(name string, w *nameWatch) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	var next time.Time
	for id, until := range w.who {
		switch {
		case !until.After(now):
			delete(w.who, id)
		case next.IsZero() || until.Before(next):
			next = until
		}
	}
	h.idle(name, w)
	return next, len(w.who) > 0
}

// idle ends name's watch once no session waits for it (h.mu held).
func (h *hub) idle(name string, w *nameWatch) {
	if len(w.who) == 0 && h.names[name] == w {
		w.cancel()
		delete(h.names, name)
	}
}

// beforeWatch, when set (by tests), runs before a name's watches are first made. Atomic: a
// watch goroutine of an earlier test's backend may still read it while a test sets it.
var beforeWatch atomic.Pointer[func(name string)]

// watchName watches name's lease key and waiter keys until ctx is done (the last wait ended,
// the last subscriber left, the backend closed), making the watches again whenever one ends,
// each from the revision after the last it reported; until is when the first wait ends unless
// renewed.
//
// The first watches start from the current revision, not from the reply's (read, which found
// blocker in the way): etcd serves a watch that starts at a revision it has passed from its
// history, as an unsynced watcher that catches up on a 100 ms loop, so on a cluster with any
// other write between the reply and the watch's start a release soon after would be hinted up
// to 100 ms late. The release that may have landed between read and the revision the watches
// start after is found instead by one read of blocker once both are made, if they start after
// read: if the key is gone or was made again (another create revision), the name is hinted.
func (b *Backend) watchName(ctx context.Context, cli *clientv3.Client, name string, w *nameWatch, read int64, blocker *mvccpb.KeyValue, until time.Time) {
	h := &b.hints
	lease, queue := wire.EtcdLeaseKey(b.prefix, name), wire.EtcdQueuePrefix(b.prefix, name)
	if f := beforeWatch.Load(); f != nil {
		(*f)(name)
	}
	var lrev, qrev int64 // 0 until the first watches are made: watch from the current revision
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for ctx.Err() == nil {
		rctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		lw := cli.Watch(rctx, lease, clientv3.WithFilterPut(), watchFrom(lrev))
		qw := cli.Watch(rctx, queue, clientv3.WithPrefix(), clientv3.WithFilterPut(), watchFrom(qrev))
		for lw != nil && qw != nil {
			var ok bool
			select {
			case r, open := <-lw:
				if ctx.Err() != nil { // the wait ended: what came since is not waited for
					break
				}
				if open && r.Created {
					lrev = r.Header.Revision + 1
					b.closeGap(ctx, cli, name, read, blocker, lrev, qrev)
					continue
				}
				lrev, ok = h.heard(spi.Released, name, r, open, lrev)
				if !ok {
					lw = nil
				}
			case r, open := <-qw:
				if ctx.Err() != nil {
					break
				}
				if open && r.Created {
					qrev = r.Header.Revision + 1
					b.closeGap(ctx, cli, name, read, blocker, lrev, qrev)
					continue
				}
				qrev, ok = h.heard(spi.Released, name, r, open, qrev)
				if !ok {
					qw = nil
				}
			case <-timer.C:
				if next, live := h.sweep(name, w); live {
					timer.Reset(time.Until(next))
				}
			case <-ctx.Done():
				lw = nil
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(remakePause):
		}
	}
}

// closeGap checks, once both first watches of name are made (lrev and qrev: the revisions they
// report from), that no release landed after read, the revision of the reply that found
// blocker in the way, and before them: blocker, read again, must still be there with its
// create revision. Otherwise (or if the read fails) the name is hinted.
func (b *Backend) closeGap(ctx context.Context, cli *clientv3.Client, name string, read int64, blocker *mvccpb.KeyValue, lrev, qrev int64) {
	if lrev == 0 || qrev == 0 || max(lrev, qrev) <= read+1 {
		return // not made yet, or no revision between the reply and the watches
	}
	r, err := cli.Get(ctx, string(blocker.Key))
	if err == nil && len(r.Kvs) > 0 && r.Kvs[0].CreateRevision == blocker.CreateRevision {
		return
	}
	b.hints.send(spi.Hint{Kind: spi.Released, Name: name})
}

// watchFrom is the option that starts a watch at revision rev, or at the current revision with
// a created notification (which reports it) while rev is 0: no watch made yet.
func watchFrom(rev int64) clientv3.OpOption {
	if rev == 0 {
		return clientv3.WithCreatedNotify()
	}
	return clientv3.WithRev(rev)
}

// heard delivers a response of one of name's watches (kind Released: its lease key's and
// waiter keys' deletions; GroupChanged: its member keys' changes), watching from revision from,
// as one hint of kind if the response carries events (they all concern name: more would only
// repeat it), and returns the revision to watch from next and whether the watch goes on (open:
// the channel was open).
func (h *hub) heard(kind spi.HintKind, name string, r clientv3.WatchResponse, open bool, from int64) (int64, bool) {
	if !open {
		return from, false
	}
	for _, ev := range r.Events {
		from = max(from, ev.Kv.ModRevision+1)
	}
	if len(r.Events) > 0 {
		h.send(spi.Hint{Kind: kind, Name: name})
	}
	if r.CompactRevision != 0 {
		// The revisions from `from` on were compacted: a change may have gone unseen.
		h.send(spi.Hint{Kind: kind, Name: name})
		return max(from, r.CompactRevision), false
	}
	return from, r.Err() == nil && !r.Canceled
}

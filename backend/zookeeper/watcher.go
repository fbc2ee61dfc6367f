package zookeeper

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/internal/connbound"
	"github.com/simba-go/simba/internal/minttl"
	"github.com/simba-go/simba/spi"
)

// The watcher's own protocol constants (go-zookeeper has no addWatch).
const (
	opExists           = 3
	opRemoveWatches    = 18
	opAddWatch         = 106
	opSetAuth          = 100
	xidAuth            = -4
	addWatchPersistent = 0 // AddWatchMode.PERSISTENT: the node itself, even before it exists
	// watcherTypeAny is Watcher.WatcherType.Any, for removeWatches: on servers 3.6-3.8 it removes
	// the session's watch on the path of whatever mode, a persistent one included, while
	// WatcherType.Persistent (4) is only known from 3.9 (ZooKeeper 3.8.0 answers it with
	// MARSHALLINGERROR). The watcher sets no other kind of watch on a lease path, so Any
	// removes just the one.
	watcherTypeAny         = 3
	eventNodeCreated       = 1
	eventNodeDeleted       = 2
	eventChildrenChanged   = 4
	statCversionOffset     = 36 // in a Stat: czxid, mzxid, ctime, mtime (int64), version (int32)
	errUnimplemented       = -6
	errNoNodeCode          = -101
	errNoWatcher           = -121
	watcherSessionTimeout  = 30 * time.Second
	watcherMaxBackoff      = 5 * time.Second
	watcherInitialBackoff  = 50 * time.Millisecond
	watcherMaxFrame        = 1 << 20
	watcherConnectRespHead = 4 + 4 + 8
)

// watcher keeps, while Hints has subscribers and the backend's sessions wait for a lease or
// use a group (Backend.watchSet), one connection of its own with a persistent watch (ZooKeeper
// 3.6+ addWatch, mode PERSISTENT) on each waited-for lease node and on each group node of
// interest (a member is a child of its group's node, and a persistent watch on a node hears
// its child changes), so that the subscribers hear every release of what they wait for and
// every membership change of the groups they use, whoever made it, while other clients' locks
// and unlocks of other names, and joins and leaves of other groups, cost the server and this
// process nothing (a recursive watch on the leases node sent every lease node's create and
// delete to every client, and one on the groups node every member's). A watch is removed
// (removeWatches) when its wait or interest ends; all are set again after a reconnect; the
// connection is closed after about a TTL with nothing to watch. go-zookeeper does not offer
// addWatch, so the watcher speaks the few requests it needs itself (connect, auth, addWatch,
// removeWatches, exists, ping). It reconnects with backoff; events lost meanwhile are lost,
// which costs latency only. On a server without addWatch it stops, and hints then come only
// from the sessions' own watches.
//
// A lease's watch stands for the sessions' own watches on it (covers) once it is set and an
// exists sent behind it has been answered: a release between the session's HeldBy read and
// the watch being set is then either heard by the watch or found by the exists (the node is
// gone: a Released hint), so muting the sessions' watches loses none. A group's likewise: the
// exists finds the group node's cversion, and one greater than a read of the members found
// (since the group's last hint) is a change the watch may have missed: a GroupChanged hint
// (Backend.groupChecked). After a reconnect the same check finds the changes made while the
// connection was down.
//
// A connection gone silent (a blackhole: no bytes, close or reset either way, for good) would
// keep the watches "set" while no event arrives, and the sessions' own watches are muted
// while the watcher is live, so every hint would be lost until the read timeout (2/3 of the
// watcher's 30 s session): a waiter then learns of each release only at its fallback retry,
// two TTLs after its last HeldBy.
// So the watcher pings every probe interval (a sixth of the shortest TTL asked of the backend,
// see probe) and gives the connection up when it has read nothing for an interval and a
// reply's allowance (minttl.Reply: two intervals, at least 500 ms, so that a server or client
// busy for a few hundred milliseconds costs no reconnect); and hearing, which mutes the
// sessions' watches, holds only while a reply came within 1.5 intervals, so that they speak
// again as soon as the connection falls silent.
//
// A connection dialled during such an outage may be swallowed too (taken and never answered,
// and silent for good after the heal), so a dial and its handshake are given up after
// connectBound, at most a TTL, and the backoff between attempts is at most a probe interval
// (see backoffCap): hints come back within about a TTL of the heal, where an attempt waited
// for its connect response for Config.Timeout (10 s by default) and the backoff grew to 5 s.
type watcher struct {
	b        *Backend
	stop     chan struct{}
	done     chan struct{}
	kick     chan struct{} // what to watch changed (Backend.kickLocked)
	live     atomic.Bool   // the connection is established
	born     time.Time     // lastRead counts from it (monotonic)
	lastRead atomic.Int64  // when the connection last read a frame, as time.Since(born)
	timeout  atomic.Int64  // the current connection's negotiated session timeout
	cut      atomic.Int32  // connection attempts given up at connectBound in a row
	sessions atomic.Int32  // connections that got a session (tests count them)
	dials    atomic.Int32  // connection attempts begun (tests wait for them)

	mu sync.Mutex
	// covered holds the lease and group node paths whose watch is set on the current
	// connection and checked (see watcher).
	covered map[string]bool
}

func newWatcher(b *Backend) *watcher {
	w := &watcher{b: b, stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1),
		born: time.Now(), covered: map[string]bool{}}
	go w.run()
	return w
}

// probe returns the interval between the watcher's pings on a connection whose negotiated
// session timeout is timeout: a third of it, or the probe interval of the shortest TTL the
// backend's sessions asked for (minttl.Probe: a sixth of it, at least 50 ms) if that is
// shorter, at least minttl.MinProbe.
func (w *watcher) probe(timeout time.Duration) time.Duration {
	p := timeout / 3
	if ttl := w.b.minTTL.Get(); ttl > 0 {
		p = min(p, minttl.Probe(ttl))
	}
	return max(p, minttl.MinProbe)
}

// connectBound is how long a dial and its session handshake may take: as long as a session's
// (connbound.Bound of the shortest TTL: a sixth of it, doubled after each round of the servers
// in which every attempt was given up), but at most that TTL, and at most Config.Timeout
// (which alone bounds it while no session has opened).
func (w *watcher) connectBound() time.Duration {
	ttl := w.b.minTTL.Get()
	limit := w.b.cfg.Timeout
	if limit <= 0 {
		limit = DefaultTimeout
	}
	if ttl > 0 {
		limit = min(limit, max(ttl, connbound.Min))
	}
	return connbound.Bound(ttl, limit, int(w.cut.Load()), len(w.b.cfg.Servers))
}

// backoffCap is the longest wait between two connection attempts: watcherMaxBackoff, or the
// probe interval of the shortest TTL (minttl.Probe) if that is shorter.
func (w *watcher) backoffCap() time.Duration {
	if ttl := w.b.minTTL.Get(); ttl > 0 {
		return min(watcherMaxBackoff, minttl.Probe(ttl))
	}
	return watcherMaxBackoff
}

// sinceRead returns how long ago the connection last read a frame.
func (w *watcher) sinceRead() time.Duration {
	return time.Since(w.born) - time.Duration(w.lastRead.Load())
}

// read notes that the connection read a frame now.
func (w *watcher) read() { w.lastRead.Store(int64(time.Since(w.born))) }

// hearing reports whether the connection is established and answered lately (within 1.5
// probe intervals; a ping goes out every interval): only then do its watches' events stand for
// the sessions' own watches (covers).
func (w *watcher) hearing() bool {
	if !w.live.Load() {
		return false
	}
	p := w.probe(time.Duration(w.timeout.Load()))
	return w.sinceRead() <= p+p/2
}

// covers reports whether the watcher hears, for now, the hints of kind about name that a
// session's own watch gave (Backend.hint): it is hearing, and its watch on name's lease node
// (Released) or group node (GroupChanged) is set and checked.
func (w *watcher) covers(kind spi.HintKind, name string) bool {
	if !w.hearing() {
		return false
	}
	path := w.b.lay.lease(name)
	if kind == spi.GroupChanged {
		path = w.b.lay.group(name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.covered[path]
}

// close stops the watcher and waits for it.
func (w *watcher) close() {
	close(w.stop)
	<-w.done
}

// sweepEvery is how often the watcher looks for waits that lingered past their time.
func (w *watcher) sweepEvery() time.Duration {
	if ttl := w.b.minTTL.Get(); ttl > 0 {
		return max(ttl/2, minttl.MinProbe)
	}
	return watcherSessionTimeout / 6
}

// idleLinger is how long the connection stays up with nothing to watch: about a TTL, so that
// a name waited for again soon (contention comes in bursts) does not cost a new session.
func (w *watcher) idleLinger() time.Duration {
	if ttl := w.b.minTTL.Get(); ttl > 0 {
		return ttl
	}
	return watcherSessionTimeout / 3
}

// needed reports whether anything is to be watched.
func (w *watcher) needed() bool {
	return len(w.b.watchSet(time.Now())) > 0
}

// errIdle ends a connection that had nothing to watch for idleLinger.
var errIdle = errors.New("zookeeper watcher: nothing to watch")

func (w *watcher) run() {
	defer close(w.done)
	backoff := watcherInitialBackoff
	for i := 0; ; i++ {
		// Connect only while something is to be watched (with nothing waited for, there is
		// nothing to sweep either: only a kick can change that).
		for !w.needed() {
			select {
			case <-w.stop:
				return
			case <-w.kick:
			}
		}
		start := time.Now()
		err := w.connection(w.b.cfg.Servers[i%len(w.b.cfg.Servers)])
		w.live.Store(false)
		w.mu.Lock()
		clear(w.covered)
		w.mu.Unlock()
		w.b.groupsUnchecked()
		if errors.Is(err, errNoAddWatch) {
			w.b.log.Warn("simba: ZooKeeper: hints come from per-session watches only", "reason", err.Error())
			return
		}
		if errors.Is(err, errIdle) || time.Since(start) > watcherSessionTimeout {
			backoff = watcherInitialBackoff
		}
		if errors.Is(err, errIdle) {
			continue
		}
		backoff = min(backoff, w.backoffCap())
		select {
		case <-w.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, w.backoffCap())
	}
}

var errNoAddWatch = errors.New("zookeeper: the server does not support addWatch (ZooKeeper < 3.6)")

// watchReq is a request of the watcher awaiting its reply.
type watchReq struct {
	op   int32
	path string
	// last: the request whose reply makes path's watch covered (an addWatch, or the exists
	// behind it); gen: the sent entry the request belongs to.
	last bool
	gen  int32
}

// connection runs one connection until it fails, has had nothing to watch for idleLinger
// (errIdle), or the watcher stops.
func (w *watcher) connection(server string) error {
	bound := w.connectBound()
	w.dials.Add(1)
	// Close (b.stop) ends a dial still hanging at a server that drops the SYN: Close waits for
	// the watcher, and the dial's bound (up to Config.Timeout) could exceed Close's own (3 s).
	c, err := dialTransport(w.b.stop, w.b.dialer, w.b.tls, "tcp", server, bound)
	if err != nil {
		w.noteAttempt(err)
		return err
	}
	var wmu sync.Mutex
	write := func(frame []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		c.SetWriteDeadline(time.Now().Add(w.b.cfg.Timeout))
		_, err := c.Write(frame)
		return err
	}
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-w.stop:
			// End the watcher's session at once rather than leave it to expire.
			write(closeFrame(3))
		case <-ended:
		}
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(bound))
	if err := write(connectFrame(int32(watcherSessionTimeout/time.Millisecond), 0, make([]byte, 16))); err != nil {
		return err
	}
	resp, err := readZKFrame(c)
	w.noteAttempt(err)
	if err != nil {
		return err
	}
	if len(resp) < watcherConnectRespHead {
		return fmt.Errorf("zookeeper watcher: short connect response")
	}
	timeout := time.Duration(int32(binary.BigEndian.Uint32(resp[4:]))) * time.Millisecond
	if binary.BigEndian.Uint64(resp[8:]) == 0 || timeout <= 0 {
		return fmt.Errorf("zookeeper watcher: no session")
	}
	w.timeout.Store(int64(timeout))
	w.sessions.Add(1)
	w.read()
	if w.b.cfg.User != "" {
		var a frameBuilder
		a.i32(xidAuth).i32(opSetAuth).i32(0).str("digest").buf([]byte(w.b.cfg.User + ":" + w.b.cfg.Password))
		if err := write(a.frame()); err != nil {
			return err
		}
	}
	c.SetDeadline(time.Time{})
	w.live.Store(true)

	// The watches are set and removed by the sync goroutine, which sends the requests, and
	// the reading loop below, which takes their replies; sent (path -> generation: the xid of
	// the addWatch that set it) and pending (xid -> request) are shared under w.mu.
	sent := map[string]int32{}
	pending := map[int32]watchReq{}
	var xid int32
	next := func() int32 {
		if xid++; xid <= 0 {
			xid = 1
		}
		return xid
	}
	failed := make(chan error, 2)
	go func() {
		var idleSince time.Time
		for {
			want := w.b.watchSet(time.Now())
			if len(want) == 0 {
				if idleSince.IsZero() {
					idleSince = time.Now()
				} else if time.Since(idleSince) >= w.idleLinger() {
					failed <- errIdle
					c.Close()
					return
				}
			} else {
				idleSince = time.Time{}
			}
			var out []byte
			w.mu.Lock()
			// Removals go first: a watch set later in the batch is then answered after them.
			for path := range sent {
				if _, ok := want[path]; ok {
					continue
				}
				delete(sent, path)
				delete(w.covered, path)
				var r frameBuilder
				x := next()
				r.i32(x).i32(opRemoveWatches).str(path).i32(watcherTypeAny)
				out = append(out, r.frame()...)
				pending[x] = watchReq{op: opRemoveWatches, path: path}
			}
			for path, kind := range want {
				if _, ok := sent[path]; ok {
					continue
				}
				check := kind != leaseWatch
				var a frameBuilder
				gen := next()
				a.i32(gen).i32(opAddWatch).str(path).i32(addWatchPersistent)
				out = append(out, a.frame()...)
				sent[path] = gen
				pending[gen] = watchReq{op: opAddWatch, path: path, last: !check, gen: gen}
				if check {
					// ZooKeeper answers a session's requests in order: this exists sees the
					// node as it is once the watch is set.
					var e frameBuilder
					x := next()
					e.i32(x).i32(opExists).str(path).u8(0)
					out = append(out, e.frame()...)
					pending[x] = watchReq{op: opExists, path: path, last: true, gen: gen}
				}
			}
			w.mu.Unlock()
			if len(out) > 0 {
				if err := write(out); err != nil {
					failed <- err
					return
				}
			}
			select {
			case <-ended:
				return
			case <-w.kick:
			case <-time.After(w.sweepEvery()):
			}
		}
	}()
	// reply takes the reply of a watch request (body: the reply after its header).
	reply := func(r watchReq, code int32, body []byte) error {
		if r.op == opExists && (code == 0 || code == errNoNodeCode) {
			if g, ok := w.b.lay.groupName(r.path); ok {
				cv := int32(-1) // no node: no read found one either, or the group was deleted
				if code == 0 {
					if len(body) < statCversionOffset+4 {
						return fmt.Errorf("zookeeper watcher: short exists reply")
					}
					cv = int32(binary.BigEndian.Uint32(body[statCversionOffset:]))
				}
				w.mu.Lock()
				current := sent[r.path] == r.gen
				w.mu.Unlock()
				if current && !w.b.groupChecked(g, cv) {
					// The interest ended meanwhile: the watch's removal is on its way.
					return nil
				}
			} else if code == errNoNodeCode {
				// Released before the watch was set: the event the watch missed.
				if name, ok := w.b.lay.leaseName(r.path); ok {
					w.b.publish(spi.Released, name)
				}
			}
			code = 0
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case r.op == opAddWatch && code == errUnimplemented:
			return errNoAddWatch
		case r.op == opRemoveWatches:
			if code != 0 && code != errNoWatcher {
				// Drop the connection, and every watch with it, rather than keep one unwanted.
				return fmt.Errorf("zookeeper watcher: removeWatches %s failed (%d)", r.path, code)
			}
			return nil
		case code != 0:
			return fmt.Errorf("zookeeper watcher: watch on %s failed (%d)", r.path, code)
		}
		if r.last && sent[r.path] == r.gen {
			w.covered[r.path] = true
		}
		return nil
	}
	// Ping every probe interval (re-read at each ping: the backend learns the TTL when its
	// first session opens, after the watcher started); a connection that read nothing for an
	// interval and a reply's allowance (minttl.Reply) has gone silent and is closed. Reads also
	// time out after two thirds of the timeout.
	go func() {
		var p frameBuilder
		p.i32(xidPing).i32(opPing)
		ping := p.frame()
		for {
			every := w.probe(timeout)
			select {
			case <-ended:
				return
			case <-time.After(every):
			}
			if since := w.sinceRead(); since > every+minttl.Reply(every) {
				failed <- fmt.Errorf("zookeeper watcher: the connection read nothing for %v (pings every %v): gone silent", since.Round(time.Millisecond), every)
				c.Close()
				return
			}
			if err := write(ping); err != nil {
				failed <- err
				return
			}
		}
	}()
	for {
		c.SetReadDeadline(time.Now().Add(timeout * 2 / 3))
		f, err := readZKFrame(c)
		if err == nil {
			w.read()
		}
		if err != nil {
			select {
			case ferr := <-failed:
				return ferr
			default:
			}
			return err
		}
		if len(f) < replyHeaderLen {
			return fmt.Errorf("zookeeper watcher: short reply")
		}
		xid := int32(binary.BigEndian.Uint32(f))
		code := int32(binary.BigEndian.Uint32(f[12:]))
		switch {
		case xid == xidWatchEvent:
			w.event(f[replyHeaderLen:])
		case xid == xidAuth && code != 0:
			return fmt.Errorf("zookeeper watcher: auth failed (%d)", code)
		case xid > 0:
			w.mu.Lock()
			r, ok := pending[xid]
			delete(pending, xid)
			w.mu.Unlock()
			if ok {
				if err := reply(r, code, f[replyHeaderLen:]); err != nil {
					return err
				}
			}
		}
	}
}

// noteAttempt counts a connection attempt that ended with err (nil: its connect response
// arrived) for connectBound: one given up at the bound (a timeout) lengthens the next one's,
// any other outcome starts the count over.
func (w *watcher) noteAttempt(err error) {
	if err != nil && isTimeout(err) {
		w.cut.Add(1)
	} else {
		w.cut.Store(0)
	}
}

// testHookWatchEvent, when set, sees the path of every watch event a watcher reads (tests
// count them).
var testHookWatchEvent atomic.Pointer[func(w *watcher, path string)]

// event handles a WatcherEvent {type int32, state int32, path string}.
func (w *watcher) event(body []byte) {
	if len(body) < 12 {
		return
	}
	typ := int32(binary.BigEndian.Uint32(body))
	n := int(int32(binary.BigEndian.Uint32(body[8:])))
	if n < 0 || 12+n > len(body) {
		return
	}
	path := string(body[12 : 12+n])
	if h := testHookWatchEvent.Load(); h != nil {
		(*h)(w, path)
	}
	if typ == eventNodeDeleted {
		if name, ok := w.b.lay.leaseName(path); ok {
			// Not if the wait ended and the watch's removal is still on its way.
			if w.b.waited(name) {
				w.b.publish(spi.Released, name)
			}
			return
		}
	}
	if typ == eventChildrenChanged {
		// A member joined or left (the group node's own creation, on a first join, is no
		// change of members: the member's creation follows); not if the interest ended and
		// the watch's removal is still on its way.
		if g, ok := w.b.lay.groupName(path); ok && w.b.groupWatched(g) {
			w.b.publish(spi.GroupChanged, g)
		}
	}
}

// frameBuilder encodes a jute record with its length prefix.
type frameBuilder struct{ b []byte }

func (f *frameBuilder) i32(v int32) *frameBuilder {
	f.b = binary.BigEndian.AppendUint32(f.b, uint32(v))
	return f
}
func (f *frameBuilder) i64(v int64) *frameBuilder {
	f.b = binary.BigEndian.AppendUint64(f.b, uint64(v))
	return f
}
func (f *frameBuilder) u8(v byte) *frameBuilder { f.b = append(f.b, v); return f }
func (f *frameBuilder) buf(v []byte) *frameBuilder {
	f.i32(int32(len(v)))
	f.b = append(f.b, v...)
	return f
}
func (f *frameBuilder) str(s string) *frameBuilder { return f.buf([]byte(s)) }
func (f *frameBuilder) frame() []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(f.b)), uint32(len(f.b)))
	return append(out, f.b...)
}

// readZKFrame reads one length-prefixed frame.
func readZKFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > watcherMaxFrame {
		return nil, fmt.Errorf("zookeeper watcher: frame of %d bytes", size)
	}
	buf := make([]byte, size)
	_, err := io.ReadFull(r, buf)
	return buf, err
}

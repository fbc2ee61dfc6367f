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
	opAddWatch             = 106
	opSetAuth              = 100
	xidAuth                = -4
	addWatchRecursive      = 1 // AddWatchMode.PERSISTENT_RECURSIVE
	eventNodeCreated       = 1
	eventNodeDeleted       = 2
	errUnimplemented       = -6
	watcherSessionTimeout  = 30 * time.Second
	watcherMaxBackoff      = 5 * time.Second
	watcherInitialBackoff  = 50 * time.Millisecond
	watcherMaxFrame        = 1 << 20
	watcherConnectRespHead = 4 + 4 + 8
)

// watcher keeps, while Hints has subscribers, one connection of its own with persistent
// recursive watches (ZooKeeper 3.6+ addWatch) on the leases and groups nodes, so that every
// subscriber sees every release and membership change under this chroot, whoever made it,
// with one watch each instead of one per lease. go-zookeeper does not offer addWatch, so the
// watcher speaks the few requests it needs itself (connect, auth, addWatch, ping). It
// reconnects with backoff; events lost meanwhile are lost, which costs latency only. On a
// server without addWatch it stops, and hints then come only from the sessions' own watches.
//
// A connection gone silent (a blackhole: no bytes, close or reset either way, for good) would
// keep the watches "set" while no event arrives, and the sessions' own watches are muted
// while the watcher is live, so every hint would be lost until the read timeout (2/3 of the
// watcher's 30 s session): a waiter then learns of each release only at its one-TTL retry.
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
	live     atomic.Bool  // the watches are set
	born     time.Time    // lastRead counts from it (monotonic)
	lastRead atomic.Int64 // when the connection last read a frame, as time.Since(born)
	timeout  atomic.Int64 // the current connection's negotiated session timeout
	cut      atomic.Int32 // connection attempts given up at connectBound in a row
}

func newWatcher(b *Backend) *watcher {
	w := &watcher{b: b, stop: make(chan struct{}), done: make(chan struct{}), born: time.Now()}
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

// hearing reports whether the watches are set and the connection answered lately (within
// 1.5 probe intervals; a ping goes out every interval): only then do its events stand for
// the sessions' own watches (Backend.hint).
func (w *watcher) hearing() bool {
	if !w.live.Load() {
		return false
	}
	p := w.probe(time.Duration(w.timeout.Load()))
	return w.sinceRead() <= p+p/2
}

// close stops the watcher and waits for it.
func (w *watcher) close() {
	close(w.stop)
	<-w.done
}

func (w *watcher) run() {
	defer close(w.done)
	backoff := watcherInitialBackoff
	for i := 0; ; i++ {
		start := time.Now()
		err := w.connection(w.b.cfg.Servers[i%len(w.b.cfg.Servers)])
		w.live.Store(false)
		if errors.Is(err, errNoAddWatch) {
			w.b.log.Warn("simba: ZooKeeper: hints come from per-session watches only", "reason", err.Error())
			return
		}
		if time.Since(start) > watcherSessionTimeout {
			backoff = watcherInitialBackoff
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

// connection runs one connection until it fails or the watcher stops.
func (w *watcher) connection(server string) error {
	bound := w.connectBound()
	c, err := dialTransport(w.b.dialer, w.b.tls, "tcp", server, bound)
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
	// connect: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly
	var req frameBuilder
	req.i32(0).i64(0).i32(int32(watcherSessionTimeout / time.Millisecond)).i64(0).buf(make([]byte, 16)).u8(0)
	if err := write(req.frame()); err != nil {
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
	w.read()
	if w.b.cfg.User != "" {
		var a frameBuilder
		a.i32(xidAuth).i32(opSetAuth).i32(0).str("digest").buf([]byte(w.b.cfg.User + ":" + w.b.cfg.Password))
		if err := write(a.frame()); err != nil {
			return err
		}
	}
	for i, root := range []string{w.b.lay.leasesRoot(), w.b.lay.groupsRoot()} {
		var a frameBuilder
		a.i32(int32(i + 1)).i32(opAddWatch).str(root).i32(addWatchRecursive)
		if err := write(a.frame()); err != nil {
			return err
		}
	}
	c.SetDeadline(time.Time{})
	// Ping every probe interval (re-read at each ping: the backend learns the TTL when its
	// first session opens, after the watcher started); a connection that read nothing for an
	// interval and a reply's allowance (minttl.Reply) has gone silent and is closed. Reads also
	// time out after two thirds of the timeout.
	pingErr := make(chan error, 1)
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
				pingErr <- fmt.Errorf("zookeeper watcher: the connection read nothing for %v (pings every %v): gone silent", since.Round(time.Millisecond), every)
				c.Close()
				return
			}
			if err := write(ping); err != nil {
				pingErr <- err
				return
			}
		}
	}()
	set := 0
	for {
		c.SetReadDeadline(time.Now().Add(timeout * 2 / 3))
		f, err := readZKFrame(c)
		if err == nil {
			w.read()
		}
		if err != nil {
			select {
			case perr := <-pingErr:
				return perr
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
		case xid == 1 || xid == 2:
			switch code {
			case 0:
			case errUnimplemented:
				return errNoAddWatch
			default:
				// The root does not exist yet: retry after the backoff.
				return fmt.Errorf("zookeeper watcher: addWatch failed (%d)", code)
			}
			if set++; set == 2 {
				w.live.Store(true)
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
	if typ == eventNodeDeleted {
		if name, ok := w.b.lay.leaseName(path); ok {
			w.b.publish(spi.Released, name)
			return
		}
	}
	if typ == eventNodeCreated || typ == eventNodeDeleted {
		if g, _, ok := w.b.lay.memberOf(path); ok {
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

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/internal/spi"
)

// session is one Simba session: one ZooKeeper session on its own *zk.Conn, which the tap
// keeps from ever carrying another session.
type session struct {
	b     *Backend
	id    spi.SessionID
	zid   int64
	owner []byte
	tap   *tap
	conn  *zk.Conn // set before the session is shared; never changes
	ended atomic.Bool
	// renewed is the send time (on the backend's clock) of the last acknowledged renewal:
	// the request that opened the session or a keep-alive.
	renewed atomic.Int64
	once    sync.Once
	setUp   chan struct{} // closed when connect has set conn, id and zid (or failed)

	mu        sync.Mutex
	held      map[string]*heldLease // leases this session holds, kept exact by watches
	uncertain map[string]struct{}   // names whose acquire or release had an unknown outcome
}

// heldLease is one lease node of the session.
type heldLease struct {
	token   int64
	watched chan struct{} // closed once the exists watch is set (or failed)
	watchOK bool          // the watch is set (guarded by session.mu, valid once watched is closed)
}

// connect opens a ZooKeeper session asking for ttl and waits until it is established.
func (b *Backend) connect(ctx context.Context, owner string, ttl time.Duration) (*session, error) {
	s := &session{
		b:         b,
		owner:     []byte(owner),
		held:      map[string]*heldLease{},
		uncertain: map[string]struct{}{},
		setUp:     make(chan struct{}),
	}
	defer close(s.setUp)
	s.tap = newTap(b.cfg.Timeout, s.onGone)
	conn, _, err := zk.Connect(b.cfg.Servers, ttl,
		zk.WithDialer(s.tap.dial),
		zk.WithEventCallback(s.onEvent),
		zk.WithLogger(b.zlog),
		zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("%w: zookeeper: %v", spi.ErrInvalidOption, err)
	}
	s.conn = conn
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.Timeout)
		defer cancel()
	}
	// The first request waits for the session; with digest auth it is the auth itself
	// (go-zookeeper re-sends it after every reconnect).
	first := func() error {
		if b.cfg.User != "" {
			return conn.AddAuth("digest", []byte(b.cfg.User+":"+b.cfg.Password))
		}
		_, _, err := conn.Exists("/")
		return err
	}
	// go-zookeeper fails queued requests with ErrNoServer whenever it has tried every server
	// once; the connection keeps trying, so the first request is re-sent until ctx ends.
	var sentAt time.Duration
	for {
		sentAt = b.clock.Now()
		err = callErr(ctx, first)
		if err == nil || !(errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed)) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err != nil {
		go conn.Close()
		if errors.Is(err, zk.ErrAuthFailed) {
			return nil, spi.AsPermanent(fmt.Errorf("zookeeper: authentication: %w", err))
		}
		return nil, spi.Unavailable("open session", err)
	}
	select {
	case <-s.tap.ready:
	default:
		go conn.Close()
		return nil, spi.Unavailable("open session", errors.New("no session handshake seen"))
	}
	s.renew(sentAt)
	zid, _ := s.tap.credentials()
	s.zid = zid
	s.id = SessionIDString(zid)
	return s, nil
}

// gone reports whether the session has ended (expired at the server, or closed).
func (s *session) gone() bool { return s.ended.Load() || s.tap.gone.Load() }

// expiredBy notes err and reports whether the session has ended.
func (s *session) expiredBy(err error) bool {
	s.sawError(err)
	return s.gone()
}

// sawError notes a request's error: a server's SESSIONEXPIRED answer ends the session.
func (s *session) sawError(err error) {
	if errors.Is(err, zk.ErrSessionExpired) {
		s.tap.markGone()
	}
}

// renew records the send time of an acknowledged renewal request.
func (s *session) renew(sentAt time.Duration) {
	for {
		cur := s.renewed.Load()
		if int64(sentAt) <= cur || s.renewed.CompareAndSwap(cur, int64(sentAt)) {
			return
		}
	}
}

// remaining is the negotiated session timeout counted from the send time of the last
// acknowledged renewal, on the backend's monotonic clock. Every request that reaches the
// server renews a ZooKeeper session, so the session may live longer; counting only the
// renewals (the session's open and its keep-alives) keeps the figure a lower bound that
// shrinks between keep-alives, as on every other backend.
func (s *session) remaining() time.Duration {
	return max(0, time.Duration(s.renewed.Load())+s.tap.sessionTimeout()-s.b.clock.Now())
}

// onGone is called by the tap (on go-zookeeper's goroutine) when a reconnect finds the
// session expired: the session is dropped and its connection closed, since go-zookeeper
// would otherwise keep redialling.
func (s *session) onGone() {
	go func() {
		<-s.setUp
		s.end(false)
	}()
}

// end ends the session once and drops it from the backend. Normally it closes the ZooKeeper
// session (if still live and connected), which deletes its ephemeral nodes at once; when
// abandon is set it just drops the connection, as a crashed client would, and ZooKeeper
// expires the session after its timeout. The tap then refuses every later dial.
func (s *session) end(abandon bool) {
	s.once.Do(func() {
		s.ended.Store(true)
		if s.id != "" {
			s.b.forget(s)
		}
		if abandon {
			s.tap.abandon()
			if s.conn != nil {
				go s.conn.Close() // may wait for a close reply that never comes
			}
			return
		}
		if s.conn != nil {
			s.conn.Close()
		}
		s.tap.markGone()
	})
}

// fail classifies a failed request of operation op.
func (s *session) fail(op string, err error) error {
	s.sawError(err)
	switch {
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrInvalidACL), errors.Is(err, zk.ErrAuthFailed):
		return spi.AsPermanent(fmt.Errorf("zookeeper: %s: %w (the DSN's user:password must be the identity that created %s)", op, err, s.b.lay.root()))
	case errors.Is(err, zk.ErrClosing) && s.ended.Load():
		return fmt.Errorf("zookeeper: %s: %w", op, spi.ErrClosed)
	}
	return spi.Unavailable("zookeeper: "+op, err)
}

// onEvent runs on go-zookeeper's receive goroutine for every event of this connection; it
// must not block. Watch events keep the held set exact and become hints.
func (s *session) onEvent(ev zk.Event) {
	switch ev.Type {
	case zk.EventNodeDeleted:
		if name, ok := s.b.lay.leaseName(ev.Path); ok {
			// ZooKeeper orders this event before the reply to any later request of the
			// session, so it always concerns the node this session knows at this path.
			s.mu.Lock()
			delete(s.held, name)
			s.mu.Unlock()
			s.b.hint(spi.Released, name)
		}
	case zk.EventNodeChildrenChanged:
		if g, ok := s.b.lay.groupName(ev.Path); ok {
			s.b.hint(spi.GroupChanged, g)
		}
	case zk.EventSession:
		if ev.State == zk.StateExpired {
			s.tap.markGone()
		}
	}
}

// adopt records that the session holds name with token. When watched is false it sets the
// exists watch in the background (off the acquire's path; KeepAlive waits for it).
func (s *session) adopt(name string, token int64, watched bool) {
	s.mu.Lock()
	delete(s.uncertain, name)
	if h := s.held[name]; h != nil && h.token == token {
		s.mu.Unlock()
		return
	}
	h := &heldLease{token: token, watched: make(chan struct{})}
	if watched {
		h.watchOK = true
		close(h.watched)
	}
	s.held[name] = h
	s.mu.Unlock()
	if !watched {
		go s.watch(name, h)
	}
}

// watch sets the exists watch on a held lease node.
func (s *session) watch(name string, h *heldLease) {
	ok, stat, _, err := s.conn.ExistsW(s.b.lay.lease(name))
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(h.watched)
	switch {
	case err != nil:
		h.watchOK = false // KeepAlive checks it with a read
	case !ok || stat.Czxid != h.token || stat.EphemeralOwner != s.zid:
		if s.held[name] == h {
			delete(s.held, name) // deleted before the watch was set
		}
	default:
		h.watchOK = true
	}
}

// markUncertain records that a request on name had an unknown outcome.
func (s *session) markUncertain(name string) {
	s.mu.Lock()
	s.uncertain[name] = struct{}{}
	s.mu.Unlock()
}

// resolved records that name's state is known again (not held).
func (s *session) resolved(name string) {
	s.mu.Lock()
	delete(s.uncertain, name)
	s.mu.Unlock()
}

// forgetHeld drops name from the held set if it is held with token, reporting whether it was.
func (s *session) forgetHeld(name string, token int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[name]; h != nil && h.token == token {
		delete(s.held, name)
		return true
	}
	return false
}

func (s *session) heldNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.held))
	for n := range s.held {
		out = append(out, n)
	}
	return out
}

// heldAmong reports which of names the session holds. Held leases whose watch is being set
// are waited for; names with an unknown outcome, and held leases whose watch failed, are
// read (with a watch) to settle them.
func (s *session) heldAmong(ctx context.Context, names []string) ([]spi.Held, error) {
	var check []string
	var wait []chan struct{}
	s.mu.Lock()
	for _, n := range names {
		h := s.held[n]
		switch {
		case h != nil:
			select {
			case <-h.watched:
				if !h.watchOK {
					check = append(check, n)
				}
			default:
				wait = append(wait, h.watched)
			}
		default:
			if _, ok := s.uncertain[n]; ok {
				check = append(check, n)
			}
		}
	}
	s.mu.Unlock()
	for _, w := range wait {
		select {
		case <-w:
		case <-ctx.Done():
			return nil, spi.Unavailable("keep-alive", ctx.Err())
		}
	}
	if len(check) > 0 {
		errs := make([]error, len(check))
		var wg sync.WaitGroup
		for i, n := range check {
			wg.Go(func() { errs[i] = s.settle(ctx, n) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, s.fail("keep-alive: settle", err)
		}
	}
	var held []spi.Held
	s.mu.Lock()
	for _, n := range names {
		if h := s.held[n]; h != nil {
			held = append(held, spi.Held{Name: n, Token: h.token})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(held, func(a, b spi.Held) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return held, nil
}

// settle reads name's node with a watch and records whether this session holds it.
func (s *session) settle(ctx context.Context, name string) error {
	type got struct {
		ok   bool
		stat *zk.Stat
	}
	g, err := call(ctx, func() (got, error) {
		ok, stat, _, err := s.conn.ExistsW(s.b.lay.lease(name))
		return got{ok, stat}, err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.uncertain, name)
	if g.ok && g.stat.EphemeralOwner == s.zid {
		h := s.held[name]
		if h == nil || h.token != g.stat.Czxid {
			h = &heldLease{token: g.stat.Czxid, watched: make(chan struct{})}
			close(h.watched)
			s.held[name] = h
		}
		h.watchOK = true
		return nil
	}
	delete(s.held, name)
	return nil
}

package zookeeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/joinerr"
	"github.com/simba-go/simba/spi"
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
	// events is conn's event channel (nil for a Connector's connection), which go-zookeeper
	// closes once its goroutines of conn have ended (see Backend.retire).
	events <-chan zk.Event
	// leaseACL is the ACL of this session's lease nodes: all permissions for the session's
	// own digest identity (added at connect, known to no one else), read for the world.
	leaseACL []zk.ACL
	ended    atomic.Bool
	// closedByCaller is set when CloseSession ends the session: a request that fails because
	// of that close did not find the session expired (see expiredBy).
	closedByCaller atomic.Bool
	endDone        chan struct{} // closed when end has returned
	// closeMu (a lock that a waiter can give up on: a channel of one) guards closing, the
	// close of the session at the server that end began (nil if none: the session had ended
	// already, or was abandoned) or a later CloseSession's retry of it.
	closeMu chan struct{}
	closing *closeAttempt
	// heldAtClose is what the session held when CloseSession began to close it: Released
	// hints once the close is confirmed.
	heldAtClose atomic.Pointer[[]string]
	// touched is when, on the backend's clock, the last request that could renew the session
	// at the server was sent: the close that end began, or a retry's (see Backend.CloseSession).
	touched atomic.Int64
	// answered is when, on the backend's clock, the first request of this backend sent after
	// touched that a server answered was sent (at most touched: none yet). Until one session
	// timeout after it, a session whose close failed may still be at the server: a server
	// restarted in the outage reloads its sessions and expires them only one session timeout
	// after it starts (see Backend.sweepUnclosed).
	answered atomic.Int64
	// hasSession is set when the event callback sees StateHasSession (a check that a
	// Connector passed the callback on).
	hasSession atomic.Bool
	// renewed is the send time (on the backend's clock) of the last acknowledged renewal:
	// the request that opened the session or a keep-alive.
	renewed atomic.Int64
	once    sync.Once
	setUp   chan struct{} // closed when connect has set conn, id and zid (or failed)
	// retireOnce retires conn once (retireConn): connect's failure, end and the backend's
	// Close may each come to it.
	retireOnce sync.Once

	mu        sync.Mutex
	held      map[string]*heldLease // leases this session holds, kept exact by watches
	uncertain map[string]struct{}   // names whose acquire or release had an unknown outcome
	unstarted int                   // held leases whose watch waits for watchDelay (pending)
	// pendingWatches lists, in the order adopted, held leases whose exists watch waits for
	// watchDelay (some may have started or gone since); watchTimer, armed while watchArmed,
	// starts the due ones (startDueWatches).
	pendingWatches []pendingWatch
	watchTimer     *time.Timer
	watchArmed     bool
	// watching holds the paths with a data or child watch this session set that has not
	// fired yet: ZooKeeper keeps one watch per path and type, but go-zookeeper adds a channel
	// per call, so repeating a watching read (a HeldBy poll, a keep-alive's group read) would
	// grow its table without bound.
	watching map[string]watchState
	watchGen uint64 // numbers the entries of watching
	// members caches, per group node path, which children were verified to be members or
	// not (see groupMembers); groupGen counts the events on each group node, which drop its
	// entry.
	members  map[string]map[string]bool
	groupGen map[string]uint64
	// queues holds, per name, the waiter queue state the session's last grant check passed
	// with (see queue.go); waiters the path of the session's own waiter node per name.
	queues  map[string]queueState
	waiters map[string]string
	// paths holds the node paths of the names the session acquired or released lately
	// (pathsOf).
	paths map[string]leasePaths
	// withdrawals holds the names whose Withdraw failed: a waiter node lives as long as its
	// session, not one TTL after the waiter's last attempt (spi.Queuer), so the session's next
	// keep-alive withdraws again, or a waiter that stopped waiting would keep a free lease
	// reserved for as long as its process runs.
	withdrawals map[string]struct{}
	// claims holds the names with a lease request of this session in flight (see claim), each
	// with the channel that its end closes (nil until a request waits for it).
	claims map[string]chan struct{}
}

// watchState is a watch this session set (or is setting) on a path and that has not fired.
type watchState struct {
	gen   uint64 // a new number for every watch set, so that a fired and re-set one differs
	armed bool   // the read that set it has been answered: the watch is set at the server
}

// heldLease is one lease node of the session.
type heldLease struct {
	token int64
	// guarded by session.mu:
	// watched is closed once the watch is set (or failed, or not needed); made only for a
	// keep-alive that waits for it (heldAmong), and nil while no one does.
	watched chan struct{}
	pending bool          // in pendingWatches: the watch waits until due
	due     time.Duration // when the pending watch is to be set, on the backend's clock
	started bool          // the watch is being set (or not needed)
	done    bool          // watched is closed
	watchOK bool          // the watch is set
}

// connect opens a ZooKeeper session asking for ttl and waits until it is established.
func (b *Backend) connect(ctx context.Context, owner string, ttl time.Duration) (*session, error) {
	s := &session{
		b:         b,
		owner:     []byte(owner),
		held:      map[string]*heldLease{},
		uncertain: map[string]struct{}{},
		watching:  map[string]watchState{},
		members:   map[string]map[string]bool{},
		groupGen:  map[string]uint64{},
		queues:    map[string]queueState{},
		waiters:   map[string]string{},
		paths:     map[string]leasePaths{},
		setUp:     make(chan struct{}),
		endDone:   make(chan struct{}),
		closeMu:   make(chan struct{}, 1),

		withdrawals: map[string]struct{}{},
		claims:      map[string]chan struct{}{},
	}
	defer close(s.setUp)
	s.tap = newTap(b.clock.Now, b.cfg.Timeout, ttl, b.dialer, b.tls, s.onGone)
	s.tap.servers = len(b.cfg.Servers)
	s.tap.tokenRoot = b.lay.leasesRoot() + "/"
	var conn *zk.Conn
	var events <-chan zk.Event // nil with a Connector: it does not return the channel
	var err error
	var hosts *pacer // the servers as resolved (nil with a Connector)
	if b.connector != nil {
		conn, err = b.connector(ttl, s.tap.dial, s.onEvent)
		if err == nil && conn == nil {
			err = errors.New("the Connector returned no connection")
		}
		if err != nil {
			return nil, spi.Unavailable("zookeeper: Connector", err)
		}
	} else {
		hosts = s.newPacer(ttl)
		conn, events, err = zk.Connect(b.cfg.Servers, ttl,
			zk.WithDialer(s.tap.dial),
			zk.WithHostProvider(hosts), // see pacer: redial at once, then a short backoff
			zk.WithEventCallback(s.onEvent),
			zk.WithLogger(b.zlog),
			zk.WithLogInfo(false))
		if err != nil {
			// The server list was checked by ParseDSN: what fails here is resolving the hosts.
			return nil, spi.Unavailable("zookeeper: resolve servers", err)
		}
	}
	s.conn, s.events = conn, events
	// From now on Close knows of the session (and ends it, see Backend.Close) until its caller
	// hands it over (Backend.adoptSession) or it ends.
	if !b.connecting(s) {
		// Closed: on this (the caller's) goroutine, since Close may have returned.
		conn.Close()
		for range events {
		}
		return nil, spi.ErrBackendClosed
	}
	connected := false
	defer func() {
		if !connected {
			b.notConnecting(s) // after its retireConn, which Close's drop of s waits for
		}
	}()
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
	// once; the connection keeps trying, so the first request is re-sent until ctx ends —
	// unless no server has answered a connect request and an attempt at each has failed
	// (the dial refused or unreachable, or the connection closed before the server answered:
	// a server out of its quorum, or a proxy in front of a server that is down, which took
	// 10 s, Config.Timeout, to fail simba status): the wait then ends at once, and the call
	// fails with the last attempt's error, so
	// that a client at an ensemble that is down hears of it at its first attempt, not at the
	// call's timeout (the renewal interval: 5 s by default; the pacer keeps the request queued
	// for up to a session timeout), and retries with its backoff.
	waitCtx, stopWait := context.WithCancelCause(ctx)
	defer stopWait(nil)
	servers := int64(max(len(b.cfg.Servers), 1))
	if hosts != nil {
		servers = int64(max(hosts.Len(), 1))
	}
	allFailed := func(n int64) {
		if n >= servers {
			stopWait(errEveryDialFailed)
		}
	}
	s.tap.onFail.Store(&allFailed)
	defer s.tap.onFail.Store(nil)
	if n := s.tap.failed.Load(); n > 0 && !s.tap.answered.Load() {
		allFailed(n)
	}
	for {
		err = callErr(waitCtx, s.b, first)
		if errors.Is(context.Cause(waitCtx), errEveryDialFailed) && ctx.Err() == nil {
			err = zk.ErrNoServer
			break
		}
		if err == nil || !(errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed)) || ctx.Err() != nil || s.ended.Load() {
			break
		}
		if terr := s.tap.tlsFailure(); terr != nil {
			s.retireConn(true)
			return nil, spi.AsPermanent(fmt.Errorf("zookeeper: TLS with %v: %w", b.cfg.Servers, terr))
		}

		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if s.ended.Load() {
		return nil, spi.ErrBackendClosed // dropped by Close (see drop)
	}
	if err != nil {
		s.retireConn(true)
		if terr := s.tap.tlsFailure(); terr != nil {
			return nil, spi.AsPermanent(fmt.Errorf("zookeeper: TLS with %v: %w", b.cfg.Servers, terr))
		}
		if errors.Is(err, zk.ErrAuthFailed) {
			return nil, spi.AccessDenied("zookeeper: open session", fmt.Sprintf("authentication refused by %v: the servers refused the client's credentials (a SASL or certificate identity): fix them, or the servers' authentication settings", b.cfg.Servers), err)
		}
		if p := s.tap.dialErr.Load(); p != nil {
			// e.g. an EOF in a TLS handshake: a plain client port closes on a ClientHello, and
			// so does a server over its connection limit, so it stays retryable.
			err = fmt.Errorf("%w (last connection attempt: %v)", err, *p)
		}
		return nil, spi.Unavailable("zookeeper: open session", err)
	}
	// The session's own identity: its lease nodes grant write to it alone, so that a release,
	// which deletes in one multi with a write of the node, can never delete a node of another
	// session's tenure (see Backend.Release).
	user, pw := sessionIdentity()
	if err := callErr(ctx, s.b, func() error { return conn.AddAuth("digest", []byte(user+":"+pw)) }); err != nil {
		s.retireConn(true)
		return nil, spi.Unavailable("open session: add the session's identity", err)
	}
	s.leaseACL = append(zk.DigestACL(wire.LeaseNodeCreatorPerms, user, pw), s.b.acls.leaseWorld...)
	select {
	case <-s.tap.ready:
	default:
		s.retireConn(true)
		if b.connector != nil {
			return nil, spi.AsPermanent(fmt.Errorf("%w: zookeeper: the Connector's connection did not dial through the dialer it was given (pass zk.WithDialer(dialer) to zk.Connect, and no other dialer)", spi.ErrInvalidOption))
		}
		return nil, spi.Unavailable("zookeeper: open session", errors.New("no session handshake seen"))
	}
	if !s.hasSession.Load() {
		// go-zookeeper reports StateHasSession to the callback before any request's reply.
		s.retireConn(true)
		return nil, spi.AsPermanent(fmt.Errorf("%w: zookeeper: the Connector's connection does not report its events to the callback it was given (pass zk.WithEventCallback(callback) to zk.Connect, and no other callback)", spi.ErrInvalidOption))
	}
	// The session's first timeout runs from when the server got the connect request (an auth
	// request does not renew a session), so count from when that request was sent.
	s.renew(s.tap.opened())
	zid, _ := s.tap.credentials()
	s.zid = zid
	s.id = SessionIDString(zid)
	connected = true
	return s, nil
}

// retireConn retires the session's connection (see Backend.retire), once: closeIt as
// Backend.retire's.
func (s *session) retireConn(closeIt bool) {
	s.retireOnce.Do(func() { s.b.retire(s.conn, s.events, closeIt, nil) })
}

// retireAbandoned retires the session's connection once its tap is abandoned: when redial
// (the connection loop is to dial again, see tap.abandon), go-zookeeper's Conn.Close waits for
// the loop's stand-in.
func (s *session) retireAbandoned(redial bool) {
	var after <-chan struct{}
	if redial {
		after = s.tap.standInDialed()
	}
	s.retireOnce.Do(func() { s.b.retire(s.conn, s.events, true, after) })
}

// drop drops the connection of a session that connect has made and not yet handed to its
// caller (Backend.conning), for Close: as end(true) does, without end's use of the session's
// id, which connect may still be setting. A connect under way then fails at once (its
// requests fail with the connection), and so does a later end of s.
func (s *session) drop() {
	redial := s.tap.abandon() // first: the pacer then dials at once (see standIn)
	s.ended.Store(true)
	s.retireAbandoned(redial)
}

// sessionIdentity makes a session's own digest identity: the spec's user and 128 random bits of
// password, so the identity is the session's alone.
func sessionIdentity() (user, password string) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return wire.ZKSessionIdentityUser, hex.EncodeToString(b[:])
}

// gone reports whether the session has ended (expired at the server, or closed).
func (s *session) gone() bool { return s.ended.Load() || s.tap.gone.Load() }

// expiredBy notes err and reports whether the session has ended without its caller closing
// it: expired or replaced at the server, or ended by the backend (its open failed, the backend
// closed). A request that fails because CloseSession is closing the session (it closes the
// connection under the request) is not told the session expired while the server may not even
// have heard of the close: a keep-alive in flight when the engine closed its session used to
// answer Expired, and the engine took the session for gone, finishing the client's Close at
// once (nil) and cutting the close of the session short, so that its leases stayed held at the
// server for up to a session timeout.
func (s *session) expiredBy(err error) bool {
	s.sawError(err)
	return s.expired()
}

// errClosing is the failure of a request that CloseSession's close of its session cut short.
var errClosing = errors.New("the session is being closed")

// expired is gone, but for a session CloseSession ended and the server is not known to have
// expired: see expiredBy.
func (s *session) expired() bool {
	return s.tap.gone.Load() || (s.ended.Load() && !s.closedByCaller.Load())
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
	if s.ended.Load() {
		// end is under way (it marks the tap gone as it finishes): nothing to do, and no
		// goroutine to outlive the backend's Close.
		return
	}
	// On a goroutine Close waits for; once the backend is closed, Close ends the session.
	s.b.background(func() {
		<-s.setUp
		s.end(false)
	})
}

// end ends the session once and drops it from the backend. Normally it closes the ZooKeeper
// session (if still live), which deletes its ephemeral nodes at once: over go-zookeeper's
// connection if it has an established one or one whose handshake is under way, else over one
// of the tap's own (tap.beginClose says why); s.closing then follows the outcome. When
// abandon is set it just drops the connection, as a crashed client would, and ZooKeeper
// expires the session after its timeout. The tap then refuses every later dial.
func (s *session) end(abandon bool) {
	s.once.Do(func() {
		defer close(s.endDone)
		if abandon {
			s.tap.abandoned.Store(true) // before ended: the pacer then dials at once (see standIn)
		}
		s.ended.Store(true)
		s.touched.Store(int64(s.b.clock.Now()))
		s.stopWatchTimer()
		if s.id != "" {
			s.b.forget(s)
		} else {
			s.b.notConnecting(s)
		}
		if abandon {
			redial := s.tap.abandon()
			if s.conn != nil {
				s.retireAbandoned(redial)
			}
			return
		}
		live := !s.tap.gone.Load() // not known to have expired or been replaced
		onConn := s.tap.beginClose()
		var closing *closeAttempt
		if live && !onConn {
			closing = s.closeAlone()
		}
		if s.conn != nil {
			s.conn.Close()
			s.retireConn(false)
		}
		switch {
		case !live || closing != nil:
		case !s.tap.closeSent.Load():
			// The connection failed under go-zookeeper's close request, which it then drops.
			closing = s.closeAlone()
		default:
			done, err := s.tap.closeOutcome()
			closing = &closeAttempt{done: done, err: err}
		}
		s.closeMu <- struct{}{}
		s.closing = closing
		<-s.closeMu
		s.tap.markGone()
	})
}

// closeAttempt is one attempt to close a session at the server: done is closed once err
// returns its outcome (nil: the server closed the session, or had no such session left).
type closeAttempt struct {
	done <-chan struct{}
	err  func() error
}

// closeAlone closes the session at the server over a connection of the tap's own
// (tap.closeAlone), in the background; the backend's Close stops it.
func (s *session) closeAlone() *closeAttempt {
	s.touched.Store(int64(s.b.clock.Now()))
	done := make(chan struct{})
	a := &closeAttempt{done: done}
	var err error
	a.err = func() error { return err } // read once done is closed
	if !s.b.background(func() {
		defer close(done)
		err = s.tap.closeAlone(s.b.stop, s.b.cfg.Servers)
	}) {
		err = spi.ErrBackendClosed
		close(done)
	}
	return a
}

// closeOutcome waits, until ctx is done, for the outcome of the session's close at the
// server. When retry is set and the last attempt failed, it first makes another over a
// connection of its own (tap.closeAlone), and waits for that.
func (s *session) closeOutcome(ctx context.Context, retry bool) error {
	select {
	case <-s.endDone:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case s.closeMu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.closeMu }()
	a := s.closing
	if a == nil {
		return nil
	}
	if retry {
		select {
		case <-a.done:
			if a.err() != nil {
				a = s.closeAlone()
				s.closing = a
			}
		default:
		}
	}
	select {
	case <-a.done:
		return a.err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fail classifies a failed request of operation op: a node's ACL that refuses the session
// (ErrNoAuth) and refused credentials (ErrAuthFailed) match spi.ErrAccessDenied.
func (s *session) fail(op string, err error) error {
	s.sawError(err)
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		who := "a client without an identity (the DSN gives no user:password)"
		if s.b.cfg.User != "" {
			who = fmt.Sprintf("the digest identity of user %q", s.b.cfg.User)
		}
		return spi.AccessDenied("zookeeper: "+op, fmt.Sprintf("privilege refused by %v: a node's ACL does not grant %s what Simba needs (ZooKeeper takes any digest password, so a wrong one shows here): the DSN's user:password must be the identity that created %s, or the nodes' ACLs must grant it (setAcl)", s.b.cfg.Servers, who, s.b.lay.root()), err)
	case errors.Is(err, zk.ErrAuthFailed):
		return spi.AccessDenied("zookeeper: "+op, fmt.Sprintf("authentication refused by %v: fix the client's credentials, or the servers' authentication settings", s.b.cfg.Servers), err)
	case errors.Is(err, zk.ErrInvalidACL):
		return spi.AsPermanent(fmt.Errorf("zookeeper: %s: %w (the DSN's user:password must be the identity that created %s)", op, err, s.b.lay.root()))
	case s.ended.Load() && s.closedByCaller.Load() && !s.tap.gone.Load():
		// The request crossed CloseSession, which closed the connection under it (expiredBy):
		// its outcome is unknown, as for any request cut by a lost connection.
		if !errors.Is(err, errClosing) {
			err = fmt.Errorf("%w: %w", errClosing, err)
		}
	case errors.Is(err, zk.ErrClosing) && s.ended.Load():
		return fmt.Errorf("zookeeper: %s: %w", op, spi.ErrBackendClosed)
	}
	return spi.Unavailable("zookeeper: "+op, err)
}

// watchRead runs a read of path that leaves a watch on it: set (a watching read) unless a
// watch this session set on path is still pending, else plain (ZooKeeper keeps one watch per
// path and type, go-zookeeper one channel per call). It reports whether a watch is known to
// cover path from before the server processed this read until at least its reply: then every
// later change of the node reaches onEvent before the reply to any later request of the
// session. That holds for a watch set by this read, and for a pending one only if it was
// armed (its read answered) before this read was sent and has not fired since.
func (s *session) watchRead(path string, set, plain func() error) (watched bool, err error) {
	s.mu.Lock()
	w, pending := s.watching[path]
	if !pending {
		s.watchGen++
		w = watchState{gen: s.watchGen}
		s.watching[path] = w
	}
	s.mu.Unlock()
	if pending {
		err = plain()
	} else {
		err = set()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.watching[path]
	same := ok && cur.gen == w.gen // the watch has not fired (nor been dropped) meanwhile
	switch {
	case pending:
		return err == nil && w.armed && same, err
	case err != nil:
		if same {
			delete(s.watching, path) // the read failed: it set no watch (as far as we know)
		}
		return false, err
	case same:
		cur.armed = true
		s.watching[path] = cur
	}
	return same, nil
}

// groupMembers lists the members of group: the children of its node, with a child watch
// unless one is pending, that are members. A child is one only if its name has the form of a
// ZooKeeper session id and it is an ephemeral node of that very session; anything else
// (a persistent node, a node named otherwise, another session's ephemeral under a session's
// name) was not created by Simba and would leave the partitions it is assigned unled for as
// long as it stays, so it is skipped, with a warning. A child's verdict takes one exists,
// pipelined with the others', and is cached until the group's child watch fires (a member
// node's owner never changes while it exists; replacing it fires the watch).
func (s *session) groupMembers(group string) ([]spi.SessionID, error) {
	path := s.b.lay.group(group)
	s.mu.Lock()
	gen := s.groupGen[path]
	s.mu.Unlock()
	var ch []string
	var st *zk.Stat
	watched, err := s.watchRead(path,
		func() (err error) { ch, st, _, err = s.conn.ChildrenW(path); return err },
		func() (err error) { ch, st, err = s.conn.Children(path); return err })
	if errors.Is(err, zk.ErrNoNode) {
		s.b.groupRead(group, -1, s.waitLinger())
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The read's cversion lets the hint connection's watch on the group, set later, tell
	// whether a change landed between them (Backend.groupRead, groupChecked).
	s.b.groupRead(group, st.Cversion, s.waitLinger())
	type verdict struct {
		known, member, gone bool
		why                 string
	}
	vs := make([]verdict, len(ch))
	var check []int
	s.mu.Lock()
	cache := s.members[path]
	for i, c := range ch {
		if m, ok := cache[c]; ok {
			vs[i] = verdict{known: true, member: m}
		} else {
			check = append(check, i)
		}
	}
	s.mu.Unlock()
	if len(check) > 0 {
		errs := make([]error, len(check))
		var wg sync.WaitGroup
		for j, i := range check {
			c := ch[i]
			if !wire.IsZooKeeperSessionID(c) {
				vs[i] = verdict{why: "its name is not a ZooKeeper session id"}
				continue
			}
			wg.Go(func() {
				ok, st, err := s.conn.Exists(path + "/" + c)
				switch {
				case err != nil:
					errs[j] = err
				case !ok:
					vs[i] = verdict{gone: true}
				case st.EphemeralOwner == 0:
					vs[i] = verdict{why: "it is a persistent node"}
				case SessionIDString(st.EphemeralOwner) != spi.SessionID(c):
					vs[i] = verdict{why: "it is an ephemeral node of session " + string(SessionIDString(st.EphemeralOwner))}
				default:
					vs[i] = verdict{member: true}
				}
			})
		}
		wg.Wait()
		if err := joinerr.Join(errs...); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if watched && s.groupGen[path] == gen {
			if s.members[path] == nil {
				s.members[path] = map[string]bool{}
			}
			for _, i := range check {
				if !vs[i].gone {
					s.members[path][ch[i]] = vs[i].member
				}
			}
		}
		s.mu.Unlock()
		for _, i := range check {
			if v := vs[i]; !v.member && !v.gone {
				s.b.warnOnce(path+"/"+ch[i], "simba: ZooKeeper: skipping a child of a group node that is not a Simba member; it was not created by Simba and is neither used nor deleted",
					"group", group, "node", path+"/"+ch[i], "reason", v.why)
			}
		}
	}
	out := make([]spi.SessionID, 0, len(ch))
	for i, c := range ch {
		if vs[i].member {
			out = append(out, spi.SessionID(c))
		}
	}
	slices.Sort(out)
	return out, nil
}

// getData reads path's data and stat, with a data watch unless one is pending; watched is as
// for watchRead.
func (s *session) getData(path string) (data []byte, stat *zk.Stat, watched bool, err error) {
	watched, err = s.watchRead(path,
		func() (err error) { data, stat, _, err = s.conn.GetW(path); return err },
		func() (err error) { data, stat, err = s.conn.Get(path); return err })
	return data, stat, watched, err
}

// exists reads path's stat, with a watch unless one is pending; watched is as for watchRead.
func (s *session) exists(path string) (ok bool, stat *zk.Stat, watched bool, err error) {
	watched, err = s.watchRead(path,
		func() (err error) { ok, stat, _, err = s.conn.ExistsW(path); return err },
		func() (err error) { ok, stat, err = s.conn.Exists(path); return err })
	return ok, stat, watched, err
}

// waitLinger is how long this session's use of a group lasts after a read of its members
// (a keep-alive, a Members) or the end of a Join without another (Backend.groupRead,
// joinEnded): two session timeouts (about two TTLs), while a member's keep-alives read its
// groups every third of one.
func (s *session) waitLinger() time.Duration {
	return 2 * s.tap.sessionTimeout()
}

// leaseWaitLinger is how long a wait of this session for a name lasts without another acquire
// of it (Backend.waitFor): three session timeouts and waitSlack. A waiter that heard no hint
// tries again two TTLs after its last HeldBy (the backend reports spi.SteadyHints), and the
// wait must outlast that, or a release between the wait's end and the retry would go unheard
// (the release of a name no session waits for is not hinted, and the watcher stops watching
// it). The session timeout is the TTL less one tick at most (see Session timeout and tickTime
// in the package doc) and at least two ticks, so three of them are at least two TTLs; the
// slack covers the reply's way to the client, whose retry counts from its arrival.
func (s *session) leaseWaitLinger() time.Duration {
	return 3*s.tap.sessionTimeout() + waitSlack
}

// waitSlack is added to a lease wait's linger for the HeldBy reply's way to the client
// (leaseWaitLinger).
const waitSlack = time.Second

// onEvent runs on go-zookeeper's receive goroutine for every event of this connection; it
// must not block. Watch events keep the held set exact and become hints.
func (s *session) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession && ev.Path != "" {
		_, group := s.b.lay.groupName(ev.Path)
		s.mu.Lock()
		delete(s.watching, ev.Path) // the watch fired (or was dropped)
		if group {
			// The group's child watch fired: its cached member verdicts may be stale.
			delete(s.members, ev.Path)
			s.groupGen[ev.Path]++
		}
		s.mu.Unlock()
	}
	switch ev.Type {
	case zk.EventNodeDeleted:
		if name, _, _, ok := s.b.lay.waiterOf(ev.Path); ok {
			// A waiter this session found first in the queue is gone (granted, withdrawn or
			// expired): the next waiter may now have the lease. The watcher connection does
			// not watch waiter nodes, so this is published whether or not it is up.
			s.b.publish(spi.Released, name)
		}
		if name, ok := s.b.lay.leaseName(ev.Path); ok {
			// ZooKeeper orders this event before the reply to any later request of the
			// session, so it always concerns the node this session knows at this path.
			s.mu.Lock()
			_, held := s.held[name]
			delete(s.held, name)
			s.mu.Unlock()
			if held {
				// Someone else deleted this session's node: publish even if the watcher
				// connection is up, since its watch may have been set after the deletion (a
				// hint may repeat, but should not be lost when it can be helped).
				s.b.publish(spi.Released, name)
			} else {
				s.b.hint(spi.Released, name)
			}
		}
	case zk.EventNodeDataChanged, zk.EventNodeCreated:
		if name, ok := s.b.lay.leaseName(ev.Path); ok {
			// The node's watch has fired, so the session no longer sees its deletion: the
			// next keep-alive reads a held one again.
			s.mu.Lock()
			h := s.held[name]
			if h != nil && h.done {
				h.watchOK = false
			}
			s.mu.Unlock()
			if h == nil && ev.Type == zk.EventNodeDataChanged {
				// A release writes the node in the multi that deletes it (see
				// Backend.Release), and that write fires a data watch first.
				s.b.hint(spi.Released, name)
			}
		}
	case zk.EventNodeChildrenChanged:
		if g, ok := s.b.lay.groupName(ev.Path); ok {
			s.b.hint(spi.GroupChanged, g)
		}
	case zk.EventSession:
		switch ev.State {
		case zk.StateExpired:
			s.tap.markGone()
		case zk.StateHasSession:
			s.hasSession.Store(true)
		}
	}
}

// watchDelay is how long a newly adopted lease waits before its exists watch is set. A lease
// released sooner never costs the extra request (an acquire+release cycle stays at about one
// create+delete pair); KeepAlive sets every pending watch at once, pipelined with its own
// request, and waits for them, so the held set it reports is exact either way.
const watchDelay = 100 * time.Millisecond

// adopt records that the session holds name with token. Unless watched (the node was read
// with a watch) it arms the lease's exists watch after watchDelay. A record of a greater token
// is kept: an acquire that read the session's node outside the name's claim (see
// session.claim) may adopt it after a newer node of the session was created and recorded, and
// the record must never go back to an older term, whose release would then take the newer
// node for its own.
func (s *session) adopt(name string, token int64, watched bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[name]; h != nil && h.token > token {
		return
	}
	delete(s.uncertain, name)
	if h := s.held[name]; h != nil && h.token == token {
		return
	}
	if old := s.held[name]; old != nil && s.startLocked(old) {
		s.finishLocked(old, false)
	}
	h := &heldLease{token: token}
	s.held[name] = h
	if watched {
		s.startLocked(h)
		s.finishLocked(h, true)
		return
	}
	// One timer per session, not one per lease: a time.AfterFunc per acquire, stopped by the
	// release 1 ms later, allocated twice and added to and removed from the timer heap.
	s.unstarted++
	h.pending, h.due = true, s.b.clock.Now()+watchDelay
	s.pendingWatches = append(s.pendingWatches, pendingWatch{name, h})
	if !s.watchArmed {
		s.watchArmed = true
		if s.watchTimer == nil {
			s.watchTimer = time.AfterFunc(watchDelay, s.startDueWatches)
		} else {
			s.watchTimer.Reset(watchDelay)
		}
	}
}

// pendingWatch is a held lease whose watch waits for watchDelay.
type pendingWatch struct {
	name string
	h    *heldLease
}

// startDueWatches, the session's watch timer, sets the exists watch of each pending lease
// whose watchDelay is over, and arms the timer again for the next one, if any.
func (s *session) startDueWatches() {
	now := s.b.clock.Now()
	var start []pendingWatch
	s.mu.Lock()
	if s.ended.Load() { // see stopWatchTimer
		s.mu.Unlock()
		return
	}
	ps := s.pendingWatches
	i := 0
	for ; i < len(ps); i++ {
		p := ps[i]
		if !p.h.pending {
			continue // started already, or released
		}
		if p.h.due > now {
			break
		}
		s.startLocked(p.h)
		start = append(start, p)
	}
	n := copy(ps, ps[i:])
	clear(ps[n:])
	s.pendingWatches = ps[:n]
	if n > 0 {
		s.watchTimer.Reset(ps[0].h.due - now)
	} else {
		s.watchArmed = false
	}
	s.mu.Unlock()
	for _, p := range start {
		s.goWatch(p.name, p.h)
	}
}

// goWatch sets h's watch (watch) on a goroutine that the backend's Close waits for, or on the
// caller's once the backend is closed (its request then fails at once).
func (s *session) goWatch(name string, h *heldLease) {
	if !s.b.background(func() { s.watch(name, h) }) {
		s.watch(name, h)
	}
}

// stopWatchTimer stops the session's watch timer for end: no watch is set once it has ended.
func (s *session) stopWatchTimer() {
	s.mu.Lock()
	if s.watchTimer != nil {
		s.watchTimer.Stop()
	}
	s.watchArmed = true // never armed again
	s.mu.Unlock()
}

// startLocked claims the start of h's watch; it reports whether the caller must set it (or
// finish h).
func (s *session) startLocked(h *heldLease) bool {
	if h.started {
		return false
	}
	h.started = true
	if h.pending {
		h.pending = false // the timer skips it
		s.unstarted--
	}
	return true
}

// finishLocked records the outcome of h's watch.
func (s *session) finishLocked(h *heldLease, ok bool) {
	h.done, h.watchOK = true, ok
	if h.watched != nil {
		close(h.watched)
	}
}

// watch sets the exists watch on a held lease node.
func (s *session) watch(name string, h *heldLease) {
	ok, stat, watched, err := s.exists(s.b.lay.lease(name))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case h.done:
		// an event or Release settled h meanwhile
	case err != nil:
		s.sawError(err)
		s.finishLocked(h, false) // KeepAlive checks it with a read
	case !ok || stat.Czxid != h.token || stat.EphemeralOwner != s.zid:
		if s.held[name] == h {
			// Deleted before the watch was set, so no watch reported it: publish the hint
			// here (a hint may repeat, but should not be lost when it can be helped).
			delete(s.held, name)
			s.b.publish(spi.Released, name)
		}
		s.finishLocked(h, false)
	default:
		s.finishLocked(h, watched) // not watched: KeepAlive checks it with a read
	}
}

// testHookGranted, when set, runs when an acquire's create has succeeded, before the session
// has set any watch on the new node (tests use it to change the node in between).
var testHookGranted atomic.Pointer[func(path string)]

// testHookQueueRead, when set, runs when an acquire has read name's waiter queue and found that
// it lets the session in, before the multi-op that checks it (tests use it to change the queue
// in between); testHookQueueListed when a waiter has listed an existing queue, before the
// multi-op that adds its node.
var testHookQueueRead, testHookQueueListed atomic.Pointer[func(name string)]

// testHookReleasing, when set, runs when a release's multi-op is about to be sent (on the
// goroutine that sends it: a hop worker when the caller's context can end), after the
// release has checked that the session holds the node, and testHookReleased once it is
// answered (or failed); testHookNameBusy when a lease request
// of name finds another of the same session and name in flight and waits for it (see
// session.claim). Tests use them to order a late release against the session's next acquire.
var testHookReleasing, testHookReleased, testHookNameBusy atomic.Pointer[func(name string)]

// deleteOwn deletes r.path, a lease node at data version r.version, only if it is this
// session's: one multi-op writes the node (which only the creating session's identity may do,
// see Backend.Release) and deletes it. It fails with ErrNoAuth when the node is another
// session's, ErrBadVersion when its version differs, ErrNoNode when it is gone, and nothing is
// changed.
func (s *session) deleteOwn(r *leaseReq) error {
	if r.version == math.MaxInt32 {
		return zk.ErrBadVersion
	}
	if h := testHookReleasing.Load(); h != nil {
		(*h)(r.name)
	}
	r.set = zk.SetDataRequest{Path: r.path, Data: nil, Version: r.version}
	r.del = zk.DeleteRequest{Path: r.path, Version: r.version + 1}
	r.ops[0], r.ops[1] = &r.set, &r.del
	if r.early {
		s.tap.expectRelease(r)
	}
	mr, err := s.conn.Multi(r.ops[:2]...)
	if r.early {
		s.tap.unexpectRelease(r) // r.claimEnded is final from here on
	}
	if h := testHookReleased.Load(); h != nil {
		(*h)(r.name)
	}
	r.answered = err == nil || isAPIError(err)
	if err != nil {
		return err
	}
	// A failed multi-op is normally reported in the reply header (err above); should a server
	// report it only per operation, the failing operation's error is the answer.
	var first error
	for _, part := range mr {
		switch {
		case part.Error == nil:
		case errors.Is(part.Error, zk.ErrNoAuth), errors.Is(part.Error, zk.ErrBadVersion), errors.Is(part.Error, zk.ErrNoNode):
			return part.Error
		case first == nil:
			first = part.Error
		}
	}
	return first
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

// forgetHeld drops name from the held set if it is held with token, reporting whether it was,
// and whether that record is sure: no request on name had an unknown outcome since (see
// markUncertain).
func (s *session) forgetHeld(name string, token int64) (held, sure bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[name]; h != nil && h.token == token {
		delete(s.held, name)
		if s.startLocked(h) { // the watch is no longer needed
			s.finishLocked(h, false)
		}
		_, unsure := s.uncertain[name]
		return true, !unsure
	}
	return false, false
}

// claim waits, bounded by ctx, until no other lease request of name by this session is in
// flight, and then marks one (the caller's) as in flight until unclaim. Acquire holds the
// claim from before its create is sent until it has recorded the create's outcome (not over
// its read of a node that exists: adopt keeps the newest token), Release from its
// check that the session holds the node until its multi-op is written to the connection (see
// tap.releaseWritten; answered, when it read the node first), and a keep-alive's
// read of an uncertain name (settle) until it has recorded what it read; a withdrawal of the
// session's waiter node (Withdraw, the keep-alive's retry) from before it looks its node up
// until the delete is answered, so that it cannot delete the node of a wait begun meanwhile
// (see queue.go); a request whose caller gives up while it is in flight keeps the claim until
// it is over (see leaseReq.do).
//
// This is what keeps a release of an old term from deleting a newer term of the session. A
// release's multi-op can only check the node's data version, which is 0 for every lease node,
// so it would delete whatever node of this session is at the path when it arrives; and
// ZooKeeper applies one session's requests in the order they were sent. With the claim, the
// session's next create of the name is sent only after the release's multi-op was written
// ahead of it on the session's connection, or answered, or failed, or was never sent (see
// tap.releaseWritten), and the release's check sees every node of the session created before
// it: adopted into the held set with its token, or, for a create with an unknown outcome,
// the name marked uncertain, which makes the release read the node's czxid first.
func (s *session) claim(ctx context.Context, name string) error {
	return s.whenUnclaimed(ctx, name, func() { s.claims[name] = nil })
}

// whenUnclaimed waits, bounded by ctx, until no request of name by this session holds its claim,
// and then runs then under s.mu, in the same hold that saw the name unclaimed.
func (s *session) whenUnclaimed(ctx context.Context, name string, then func()) error {
	for {
		s.mu.Lock()
		w, busy := s.claims[name]
		if !busy {
			then()
			s.mu.Unlock()
			return nil
		}
		if w == nil {
			w = make(chan struct{})
			s.claims[name] = w
		}
		s.mu.Unlock()
		if h := testHookNameBusy.Load(); h != nil {
			(*h)(name)
		}
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// unclaim ends a claim of name (see claim) and wakes the requests waiting for it.
func (s *session) unclaim(name string) {
	s.mu.Lock()
	w := s.claims[name]
	delete(s.claims, name)
	s.mu.Unlock()
	if w != nil {
		close(w)
	}
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

// startWatches sets, at once, the pending watches of the held leases among names.
func (s *session) startWatches(names []string) {
	var start []string
	var hs []*heldLease
	s.mu.Lock()
	if s.unstarted > 0 {
		for _, n := range names {
			if h := s.held[n]; h != nil && s.startLocked(h) {
				start, hs = append(start, n), append(hs, h)
			}
		}
	}
	s.mu.Unlock()
	for i, n := range start {
		s.goWatch(n, hs[i])
	}
}

// heldAmong reports which of names the session holds, in the order of names. Held leases
// whose watch is being set are waited for; names with an unknown outcome, and held leases
// whose watch failed, are read (with a watch) to settle them.
func (s *session) heldAmong(ctx context.Context, names []string) ([]spi.Held, error) {
	var check []string
	var wait []chan struct{}
	s.mu.Lock()
	held := make([]spi.Held, 0, min(len(names), len(s.held)))
	for _, n := range names {
		h := s.held[n]
		switch {
		case h == nil:
			if len(s.uncertain) > 0 {
				if _, ok := s.uncertain[n]; ok {
					check = append(check, n)
				}
			}
		case !h.done:
			if h.watched == nil {
				h.watched = make(chan struct{})
			}
			wait = append(wait, h.watched)
		case !h.watchOK:
			check = append(check, n)
		default:
			held = append(held, spi.Held{Name: n, Token: h.token})
		}
	}
	s.mu.Unlock()
	if len(wait) == 0 && len(check) == 0 {
		return held, nil
	}
	for _, w := range wait {
		select {
		case <-w:
		case <-ctx.Done():
			return nil, spi.Unavailable("zookeeper: keep-alive", ctx.Err())
		}
	}
	if len(check) > 0 {
		errs := make([]error, len(check))
		var wg sync.WaitGroup
		for i, n := range check {
			wg.Go(func() { errs[i] = s.settle(ctx, n) })
		}
		wg.Wait()
		if err := joinerr.Join(errs...); err != nil {
			return nil, s.fail("keep-alive: settle", err)
		}
	}
	held = held[:0]
	s.mu.Lock()
	for _, n := range names {
		if h := s.held[n]; h != nil {
			held = append(held, spi.Held{Name: n, Token: h.token})
		}
	}
	s.mu.Unlock()
	return held, nil
}

// settle reads name's node with a watch and records whether this session holds it.
func (s *session) settle(ctx context.Context, name string) error {
	// Under the claim, so that what it records is not older than an acquire's or a release's
	// outcome recorded meanwhile (see claim).
	if err := s.claim(ctx, name); err != nil {
		return err
	}
	defer s.unclaim(name)
	type got struct {
		ok, watched bool
		stat        *zk.Stat
	}
	g, err := call(ctx, s.b, func() (got, error) {
		ok, stat, watched, err := s.exists(s.b.lay.lease(name))
		return got{ok: ok, watched: watched, stat: stat}, err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.uncertain, name)
	h := s.held[name]
	if h != nil && s.startLocked(h) {
		s.finishLocked(h, false)
	}
	if g.ok && g.stat.EphemeralOwner == s.zid {
		// The session holds it; watched unless the read could not vouch for a watch (the
		// next keep-alive then reads it again).
		h := &heldLease{token: g.stat.Czxid}
		s.startLocked(h)
		s.finishLocked(h, g.watched)
		s.held[name] = h
		return nil
	}
	delete(s.held, name)
	return nil
}

// errEveryDialFailed ends connect's wait for the first request: a dial to every server failed
// and none has succeeded.
var errEveryDialFailed = errors.New("every dial failed")

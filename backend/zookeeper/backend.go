package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/adoptlog"
	"github.com/simba-go/simba/internal/joinerr"
	"github.com/simba-go/simba/internal/minttl"
	"github.com/simba-go/simba/spi"
)

// ForeignHolder is the holder an Acquire reports for a lease node that is no session's: a
// persistent node that something other than Simba created at the lease's path. No ZooKeeper
// session has the id 0. Simba honours such a node as held (the name is free again once
// someone deletes it; a watch reports that), never takes it for its own and never deletes it.
const ForeignHolder spi.SessionID = "0000000000000000"

// ForeignOwner is the holder owner an Acquire reports for a lease node that Simba did not
// create: a persistent node, or one whose data is not an owner string.
const ForeignOwner = "<foreign node>"

// MaxOwnerLen bounds a session's owner string, in bytes.
const MaxOwnerLen = wire.MaxOwnerLen

// Option configures a Backend.
type Option func(*options)

type options struct {
	logger zk.Logger
	slog   *slog.Logger
	// slogSet: WithSlog was given (a nil slog then discards); without it the backend logs
	// through an adoptlog.Sink (see AdoptLogger).
	slogSet bool
	dialer  zk.Dialer
	tls     *tls.Config
	// connector, when set, makes each session's *zk.Conn (NewFromConnector).
	connector Connector
}

// WithLogger sends go-zookeeper's connection log lines to l (they are dropped by default).
func WithLogger(l zk.Logger) Option { return func(o *options) { o.logger = l } }

// WithSlog sends the backend's own warnings to l (by default the logger of the client the
// backend is given to, if it has one, simba.WithLogger: see AdoptLogger; else slog.Default()): open ACLs
// (a DSN without credentials, at the first OpenSession; once per logger), the hint watcher falling back to per-session
// watches (a server without addWatch: ZooKeeper before 3.6), and nodes at Simba's paths that
// Simba did not create (group children that are not members, foreign lease nodes), which the
// backend skips or honours but never deletes. A nil l discards them.
func WithSlog(l *slog.Logger) Option { return func(o *options) { o.slog, o.slogSet = l, true } }

// WithDialer makes every connection of the backend (its sessions' and the hint watcher's) with
// d instead of a net.Dialer: a proxy, a tunnel, a custom resolver. d takes no context, so
// Backend.Close cannot cut a dial of d's short as it does the default dialer's. The backend still reads
// the ZooKeeper protocol over the connection d returns (see the package doc), so d must return
// a connection that carries the client port's plain protocol, or one that TLS then wraps (with
// WithTLS or a zk+tls DSN). A d that does TLS itself should return crypto/tls errors as they
// are: a handshake or verification failure is then a permanent error of OpenSession.
func WithDialer(d zk.Dialer) Option { return func(o *options) { o.dialer = d } }

// WithTLS makes every connection TLS with cfg (ZooKeeper's secureClientPort), over the
// default dialer or WithDialer's. It overrides the DSN's TLS settings (Config.TLS). A server
// name left empty defaults to the host of the address dialled. A certificate that does not
// verify, a server that does not speak TLS or one that rejects the handshake (e.g. for a
// missing client certificate: ZooKeeper's ssl.clientAuth is "need" by default) is a permanent
// error of OpenSession.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// Backend is the ZooKeeper implementation of the Simba SPI (spi.Backend, spi.Hinter and
// spi.Inspector). Each Simba session is one ZooKeeper session on its own *zk.Conn. It is
// safe for concurrent use.
type Backend struct {
	cfg   Config
	lay   layout
	acls  acls
	clock monotonic
	zlog  zk.Logger
	log   *slog.Logger // the backend's own warnings
	// logSink is where log writes when no WithSlog was given (nil otherwise): AdoptLogger.
	logSink *adoptlog.Sink
	warned  sync.Map // keys already warned about (warnOnce)
	dialer  zk.Dialer
	tls     *tls.Config
	// connector, when set, makes each session's *zk.Conn (NewFromConnector).
	connector Connector

	mu       sync.Mutex
	closed   bool
	sessions map[spi.SessionID]*session
	observer *session // for Members and Inspect when no session is open
	// conning holds the sessions whose connection connect has made and whose caller has not
	// yet handed them over (to sessions or observer) nor ended them: Close drops their
	// connections too, so that a session still connecting when Close came (its handshake or
	// first request under way) leaves no goroutine behind, and its caller's connect fails at
	// once instead of at its deadline.
	conning map[*session]struct{}
	// unclosed holds the sessions CloseSession is closing or could not confirm closed, so that
	// a concurrent call waits for the close and a retry tries again (see CloseSession); each
	// until the close is confirmed or the server has surely expired the session (see
	// sweepUnclosed). It keeps their ids and passwords, which a close needs.
	unclosed map[spi.SessionID]*session
	// stop ends, and bg counts, the background closes of sessions (tap.closeAlone); Close
	// ends and waits for them. bg grows only under mu while the backend is open.
	stop       context.Context
	cancelStop context.CancelFunc
	bg         sync.WaitGroup
	// hops runs the requests of calls whose context can end (see call).
	hops *hops
	// ending holds a channel per go-zookeeper connection being closed (see retire), closed
	// once go-zookeeper's goroutines of it have ended, so that Close can wait for them.
	endingMu sync.Mutex
	ending   map[chan struct{}]struct{}

	rootsMu sync.Mutex
	rootsOK bool

	minTTL minttl.Shortest // the shortest TTL OpenSession was asked for (0: none yet); paces the watcher

	hmu     sync.Mutex
	subs    map[chan spi.Hint]struct{}
	watcher *watcher // while there are subscribers
	// waits holds, per lease name, the sessions waiting for it (see waitFor); groups, per
	// group, the backend's interest in it (see joining, groupRead). Both only while there are
	// subscribers.
	waits  map[string]map[spi.SessionID]waitMark
	groups map[string]*groupUse
}

var (
	_ spi.Backend        = (*Backend)(nil)
	_ spi.Hinter         = (*Backend)(nil)
	_ spi.Inspector      = (*Backend)(nil)
	_ spi.LeaseInspector = (*Backend)(nil)
	_ spi.Queuer         = (*Backend)(nil)

	_ spi.SessionQueue = (*Backend)(nil)
	_ spi.SteadyHints  = (*Backend)(nil)
	_ spi.TTLChecker   = (*Backend)(nil)
)

// New returns a Backend for the ZooKeeper ensemble named by dsn (see ParseDSN). It does no
// I/O: sessions connect when they are opened.
func New(dsn string, opts ...Option) (*Backend, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return NewFromConfig(cfg, opts...)
}

// NewFromConfig returns a Backend for cfg. It does no I/O.
//
// To make the sessions' connections with your own go-zookeeper set-up, see NewFromConnector.
func NewFromConfig(cfg Config, opts ...Option) (*Backend, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	o := options{logger: quietLogger{}, tls: cfg.TLS}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = quietLogger{}
	}
	var sink *adoptlog.Sink
	switch {
	case !o.slogSet: // slog.Default() until a client hands its own (AdoptLogger)
		o.slog, sink = adoptlog.New()
	case o.slog == nil:
		o.slog = slog.New(slog.DiscardHandler)
	}
	b := &Backend{
		cfg:      cfg,
		lay:      layout{chroot: cfg.Chroot},
		clock:    monotonic{origin: time.Now()},
		zlog:     o.logger,
		log:      o.slog,
		logSink:  sink,
		dialer:   o.dialer,
		tls:      o.tls,
		sessions: map[spi.SessionID]*session{},
		conning:  map[*session]struct{}{},
		unclosed: map[spi.SessionID]*session{},
		subs:     map[chan spi.Hint]struct{}{},
		waits:    map[string]map[spi.SessionID]waitMark{},
		groups:   map[string]*groupUse{},
	}
	b.stop, b.cancelStop = context.WithCancel(context.Background())
	b.hops = newHops(b.stop.Done())
	b.ending = map[chan struct{}]struct{}{}
	b.acls = newACLs(cfg.User != "")
	return b, nil
}

// Connector makes the *zk.Conn of one Simba session for NewFromConnector, with the caller's
// own go-zookeeper options (host provider, logger, buffer sizes...). It must call zk.Connect
// (or an equivalent) asking for sessionTimeout, with zk.WithDialer(dialer) and
// zk.WithEventCallback(callback) and no other dialer or event callback; the transport goes in
// the backend's options (WithDialer, WithTLS), under dialer. The backend calls it once per
// session it opens, again after a session expires.
//
// What the backend needs of the connection, and why it cannot take an arbitrary *zk.Conn: it
// reads the protocol through dialer (the negotiated session timeout, on which every reply's
// remaining time rests; the zxid of each create, which is the token; a reconnect answered with
// another session id, which must end the session rather than let go-zookeeper silently
// continue under a new one) and drops go-zookeeper's pings (a session lives exactly as long as
// its keep-alives); it learns of watch events through callback, in order with the replies, which
// keeps its record of the leases held exact. go-zookeeper exposes none of this on a connection
// made without them. OpenSession fails with a permanent spi.ErrInvalidOption error when the
// connection did not use dialer or callback.
//
// The connection then belongs to the backend: do not use it for anything else (a request of
// yours renews the session behind the engine's back; closing it ends the session), and do not
// share it. CloseSession closes it (ending the ZooKeeper session), Close drops it without
// ending the session (as a crashed client's, it expires after its timeout).
type Connector func(sessionTimeout time.Duration, dialer zk.Dialer, callback zk.EventCallback) (*zk.Conn, error)

// NewFromConnector returns a Backend whose sessions' connections connect makes (see
// Connector). cfg is used as by NewFromConfig: Servers (still required: the hint connection
// dials them itself, with the same transport), Chroot, the digest identity and Timeout. It
// does no I/O.
func NewFromConnector(cfg Config, connect Connector, opts ...Option) (*Backend, error) {
	if connect == nil {
		return nil, fmt.Errorf("%w: zookeeper: nil Connector", spi.ErrInvalidOption)
	}
	b, err := NewFromConfig(cfg, opts...)
	if err != nil {
		return nil, err
	}
	b.connector = connect
	return b, nil
}

// warnOnce logs a warning about key (a node path) once per backend.
func (b *Backend) warnOnce(key, msg string, args ...any) {
	if _, dup := b.warned.LoadOrStore(key, struct{}{}); !dup {
		b.log.Warn(msg, args...)
	}
}

// warnedOpenACL holds each *slog.Logger already told that a backend without credentials
// leaves its nodes open: the warning goes to every logger given with WithSlog (once each), and
// to slog.Default() once per process.
var warnedOpenACL sync.Map

// warnOpenACL warns, without credentials, that the nodes the backend is about to create are
// open to every client (once per logger, warnedOpenACL), at the debug level when the DSN says
// the open ACL is intended (acl=open, Config.OpenACL). OpenSession calls it: a backend that
// never opens a session creates no node (Inspect, for simba status, only reads), and has
// nothing to warn of.
func (b *Backend) warnOpenACL() {
	level := slog.LevelWarn
	if b.cfg.OpenACL {
		level = slog.LevelDebug
	}
	if b.cfg.User != "" || !b.log.Enabled(context.Background(), level) {
		return
	}
	key := b.log
	if b.logSink != nil {
		key = b.logSink.Target() // slog.Default() is told once per process, as before
	}
	if _, dup := warnedOpenACL.LoadOrStore(key, struct{}{}); !dup {
		if b.cfg.OpenACL {
			b.log.Debug("simba: ZooKeeper DSN with acl=open: Simba's nodes get the open ACL world:anyone (all perms), so any client can delete them, a held lease's included")
			return
		}
		b.log.Warn("simba: ZooKeeper DSN without user:password: Simba's nodes get the open ACL world:anyone (all perms), so any client can delete them, a held lease's included; put a user:password in the DSN (zk://user:password@host:2181/chroot: a digest identity, the same for every process sharing the leases) to protect them, or add ?acl=open to say the open ACL is intended (this warning then goes to the debug level)")
	}
}

// quietLogger drops go-zookeeper's log lines.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// monotonic is the backend's clock: Go's monotonic reading since origin, which wall-clock
// jumps do not move. The backend takes no injectable clock: its remaining times are server
// time (the negotiated timeout) measured locally, never client time.
type monotonic struct{ origin time.Time }

func (m monotonic) Now() time.Duration { return time.Since(m.origin) }

// SessionIDString formats a ZooKeeper session id the way Simba names sessions: 16 lowercase
// hex digits.
func SessionIDString(zid int64) spi.SessionID {
	return spi.SessionID(fmt.Sprintf("%016x", uint64(zid)))
}

// OpenSession connects a new ZooKeeper session that asks for ttl as its session timeout, or
// for ttl less one tick when Config.TickTime is set (a tick of half the TTL or more is refused
// with spi.ErrInvalidOption, before any I/O). The server clamps it into its
// [minSessionTimeout, maxSessionTimeout]: a timeout shorter than asked (the maximum) is refused
// with spi.ErrInvalidOption; a longer one (the minimum) is accepted, with a warning when
// TickTime is set. The reply's Remaining is based on the negotiated timeout. Without
// credentials in the DSN, a backend's first OpenSession warns that the nodes it creates are open
// to every client (see the package doc, ACLs).
func (b *Backend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	if err := spi.ValidateOwner(owner); err != nil {
		return spi.Session{}, fmt.Errorf("zookeeper: %w", err)
	}
	ask, err := b.sessionTimeoutFor(ttl)
	if err != nil {
		return spi.Session{}, err
	}
	b.minTTL.Note(ttl)
	if err := b.checkOpen(); err != nil {
		return spi.Session{}, err
	}
	b.warnOpenACL()
	s, err := b.connect(ctx, owner, ask)
	if err != nil {
		return spi.Session{}, err
	}
	neg := s.tap.sessionTimeout()
	if neg < ask-time.Millisecond {
		s.end(false)
		if tick := b.cfg.TickTime; tick > 0 {
			return spi.Session{}, fmt.Errorf("%w: zookeeper: ttl %v less the tickTime %v asks for a session timeout of %v, longer than the server's maxSessionTimeout (it granted %v)", spi.ErrInvalidOption, ttl, tick, ask, neg)
		}
		return spi.Session{}, fmt.Errorf("%w: zookeeper: ttl %v is longer than the server's maxSessionTimeout (it granted %v)", spi.ErrInvalidOption, ttl, neg)
	}
	if tick := b.cfg.TickTime; tick > 0 && neg > ask+time.Millisecond {
		// Still safe: Remaining runs on neg, the timeout the server enforces. Only the bound on
		// a crashed holder's leases is looser than the option promises.
		b.warnOnce(fmt.Sprintf("minSessionTimeout %v %v", ttl, neg),
			"simba: ZooKeeper granted a session timeout longer than asked (its minSessionTimeout): a crashed holder's leases may outlive the TTL by up to granted − asked",
			"ttl", ttl, "tickTime", tick, "asked", ask, "granted", neg, "goneBy", neg+tick)
	}
	if err := b.ensureRoots(ctx, s); err != nil {
		s.end(false)
		return spi.Session{}, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return spi.Session{}, spi.ErrBackendClosed // Close has dropped it (conning)
	}
	delete(b.conning, s)
	b.sessions[s.id] = s
	b.mu.Unlock()
	b.serverAnswered(s.tap.opened())
	return spi.Session{ID: s.id, Remaining: s.remaining()}, nil
}

// sessionTimeoutFor returns the session timeout a session of ttl asks for: ttl, or ttl less
// one tick when Config.TickTime is set. ZooKeeper expires a session in tick-sized buckets: each
// request moves the session's expiry to the first multiple of tickTime after the request's
// arrival + the session timeout (ExpiryQueue.roundToNextInterval), so asking for ttl − tick
// makes the server expire the session within (last request + ttl − tick, last request + ttl].
// A tick of half the TTL or more is refused: the timeout would be at most half the TTL, close
// to the keep-alives' interval (TTL/3), and at or below the server's default minSessionTimeout
// (2 × tick), which would make the option pointless.
//
// A ttl outside [1ms, 2³¹−1 ms] (ZooKeeper's session timeout is an int32 of milliseconds) is
// refused too, with spi.ErrInvalidOption.
func (b *Backend) sessionTimeoutFor(ttl time.Duration) (time.Duration, error) {
	if ttl < time.Millisecond || ttl > maxSessionTimeout {
		return 0, fmt.Errorf("%w: zookeeper: ttl %v outside [1ms, %v] (ZooKeeper counts a session timeout in milliseconds): use a TTL in that range (WithTTL, the CLI's -ttl)", spi.ErrInvalidOption, ttl, maxSessionTimeout)
	}
	tick := b.cfg.TickTime
	if tick <= 0 {
		return ttl, nil
	}
	if 2*tick >= ttl {
		return 0, fmt.Errorf("%w: zookeeper: tickTime %v must be less than half the ttl %v: lower the DSN's tickTime or raise the TTL (WithTTL, the CLI's -ttl) above %v", spi.ErrInvalidOption, tick, ttl, 2*tick)
	}
	return ttl - tick, nil
}

// maxSessionTimeout is the longest session timeout ZooKeeper's connect request can carry: an
// int32 of milliseconds.
const maxSessionTimeout = time.Duration(1<<31-1) * time.Millisecond

// CheckTTL implements spi.TTLChecker: it refuses, with an error matching
// spi.ErrInvalidOption and before any I/O, a ttl that OpenSession would refuse before any I/O
// on every attempt: one outside [1ms, 2³¹−1 ms], or one that is at most twice the DSN's
// tickTime (see Session timeout and tickTime in the package doc). The server's
// [minSessionTimeout, maxSessionTimeout] is not checked: only a session open learns it.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	_, err := b.sessionTimeoutFor(ttl)
	return err
}

func (b *Backend) checkOpen() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return spi.ErrBackendClosed
	}
	return nil
}

// lookup returns the live session sid, or nil if it is unknown or gone (expired or closed).
func (b *Backend) lookup(sid spi.SessionID) (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, spi.ErrBackendClosed
	}
	s := b.sessions[sid]
	if s == nil {
		return nil, nil
	}
	if s.gone() {
		delete(b.sessions, sid)
		return nil, nil
	}
	return s, nil
}

// connecting notes s, whose connection connect has just made, in conning (see there),
// unless the backend is closed; it reports whether it did.
func (b *Backend) connecting(s *session) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conning[s] = struct{}{}
	return true
}

// notConnecting drops s from conning: its connect failed.
func (b *Backend) notConnecting(s *session) {
	b.mu.Lock()
	delete(b.conning, s)
	b.mu.Unlock()
}

// forget drops s from the session table.
func (b *Backend) forget(s *session) {
	b.mu.Lock()
	delete(b.conning, s)
	if b.sessions[s.id] == s {
		delete(b.sessions, s.id)
	}
	if b.observer == s {
		b.observer = nil
	}
	b.mu.Unlock()
	b.sessionDone(s.id)
}

// ensureRoots creates the persistent nodes of the layout (once per backend, again after an
// acquire or join found them missing).
func (b *Backend) ensureRoots(ctx context.Context, s *session) error {
	b.rootsMu.Lock()
	defer b.rootsMu.Unlock()
	if b.rootsOK {
		return nil
	}
	for _, n := range b.lay.persistent(b.acls) {
		_, err := call(ctx, b, func() (string, error) { return s.conn.Create(n.path, nil, n.flags, n.acl) })
		switch {
		case errors.Is(err, zk.ErrNoChildrenForEphemerals):
			return underEphemeral(n.path, err)
		case errors.Is(err, zk.ErrNodeExists):
			// Someone may have put an ephemeral node where Simba needs a persistent one.
			type got struct {
				ok   bool
				stat *zk.Stat
			}
			g, err := call(ctx, b, func() (got, error) {
				ok, stat, err := s.conn.Exists(n.path)
				return got{ok, stat}, err
			})
			if err != nil {
				return s.fail("read "+n.path, err)
			}
			if g.ok && g.stat.EphemeralOwner != 0 {
				return spi.AsPermanent(fmt.Errorf("zookeeper: %s is an ephemeral node of session %s, where Simba needs a persistent node (its parent of leases or groups); something other than Simba created it: delete it",
					n.path, SessionIDString(g.stat.EphemeralOwner)))
			}
		case err != nil:
			return s.fail("create "+n.path, err)
		}
	}
	b.rootsOK = true
	return nil
}

// underEphemeral is the permanent error of a create that ZooKeeper refused because the parent
// of path is an ephemeral node, which can have no children: something other than Simba put it
// where Simba needs a persistent node.
func underEphemeral(path string, err error) error {
	parent := path[:max(strings.LastIndexByte(path, '/'), 1)]
	return spi.AsPermanent(fmt.Errorf("zookeeper: cannot create %s: its parent %s is an ephemeral node, where Simba needs a persistent node; something other than Simba created it: delete it: %w", path, parent, err))
}

func (b *Backend) rootsMissing() {
	b.rootsMu.Lock()
	b.rootsOK = false
	b.rootsMu.Unlock()
}

// KeepAlive renews the session with one cheap request (an exists on the leases node; its send
// time renews the session's remaining time), reads each group's members (one getChildren with
// a child watch per group) and reports, among names, the leases the session holds. Membership
// needs no refresh: a member node is ephemeral and lives as long as the session.
//
// Which leases are held comes from the session's own state rather than from one read per
// lease, so that the round trips do not grow with the leases held. That state is exact
// because (1) the session's connection can only ever carry this one ZooKeeper session (the
// tap refuses to let go-zookeeper open another), (2) a lease node is ephemeral, so it exists
// exactly while the session lives unless it is deleted, (3) only this session deletes its own
// nodes (Release, CloseSession) and ACLs keep clients without Simba's identity from deleting
// any, and (4) an exists watch on every held node reports the one remaining case, a deletion
// by a privileged outsider: ZooKeeper delivers the watch event before the reply to any later
// request of the session, so after this keep-alive's reply every deletion the server had
// applied when it answered is already reflected. Names whose acquire had an unknown outcome
// and held nodes whose watch could not be set are checked with one read each (these exist only
// after connection trouble).
func (b *Backend) KeepAlive(ctx context.Context, sid spi.SessionID, names []string, groups []string) (spi.KeepAlive, error) {
	for _, n := range names {
		if err := wire.ValidateName(n); err != nil {
			return spi.KeepAlive{}, err
		}
	}
	for _, g := range groups {
		if err := wire.ValidateName(g); err != nil {
			return spi.KeepAlive{}, err
		}
	}
	s, err := b.lookup(sid)
	if err != nil || s == nil {
		return spi.KeepAlive{Expired: s == nil && err == nil}, err
	}
	members := make([][]spi.SessionID, len(groups))
	errs := make([]error, len(groups)+1)
	var wg sync.WaitGroup
	// Held leases whose watch is still pending get it now (pipelined with this request);
	// heldAmong waits for them, so the reply reflects every deletion they saw.
	s.startWatches(names)
	sentAt := b.clock.Now()
	// A keep-alive that timed out gives up a silent connection, so that its retry goes out
	// on a fresh one while it still has time (see tap.dropIfTimedOut).
	defer s.tap.dropIfTimedOut(ctx, time.Now())
	wg.Go(func() {
		_, errs[0] = call(ctx, b, func() (bool, error) {
			ok, _, err := s.conn.Exists(b.lay.leasesRoot())
			return ok, err
		})
	})
	for i, g := range groups {
		wg.Go(func() {
			members[i], errs[i+1] = call(ctx, b, func() ([]spi.SessionID, error) {
				return s.groupMembers(g)
			})
		})
	}
	wg.Wait()
	if err := joinerr.Join(errs...); err != nil {
		if s.expiredBy(err) {
			return spi.KeepAlive{Expired: true}, nil
		}
		return spi.KeepAlive{}, s.fail("keep-alive", err)
	}
	s.renew(sentAt)
	b.serverAnswered(sentAt)
	reply := spi.KeepAlive{Members: make(map[string][]spi.SessionID, len(groups))}
	for i, g := range groups {
		reply.Members[g] = members[i]
	}
	held, err := s.heldAmong(ctx, names)
	if err != nil {
		if s.expiredBy(err) {
			return spi.KeepAlive{Expired: true}, nil
		}
		return spi.KeepAlive{}, err
	}
	if s.expired() {
		return spi.KeepAlive{Expired: true}, nil
	}
	if s.gone() { // CloseSession is closing it (see expiredBy): neither renewed nor expired
		return spi.KeepAlive{}, s.fail("keep-alive", errClosing)
	}
	reply.Held = held
	reply.Remaining = s.remaining()
	b.retryWithdrawals(ctx, s)
	return reply, nil
}

// CloseSession closes the ZooKeeper session, which deletes its ephemeral nodes (its leases
// and memberships) at once; watchers, including this backend's hints, see the deletions.
//
// It returns nil once the server has confirmed the close (or answered that the session had
// ended already). When no confirmation comes — the connection fails first, or ctx ends, or the
// server takes the connection but never answers (its read deadline then ends the wait within
// the reply timeout, 2/3 of the session timeout) — it fails with an spi.ErrUnavailable error:
// the session and its ephemeral nodes may still be at the server, until it expires them. The
// session's connection is closed either way, and later calls on the session reply as for an
// expired one. A retry of CloseSession (or a concurrent call) waits for the close under way,
// or, if that failed, closes the session over a connection of its own (with the session's id
// and password), until the server has surely expired it; from then on it returns nil. Surely
// expired means one session timeout after a request of this backend sent after the last
// attempt was answered, not one after the attempt: a server that was down meanwhile and
// restarted reloads the session from its snapshot and log and expires it only one session
// timeout after it starts, so the retry that follows the next session's open (the engine
// sends one after an outage) still closes it, and its lease nodes go at once rather than a
// TTL later. A server that expired the session already answers the retry's connect request
// without it, and the retry returns nil.
func (b *Backend) CloseSession(ctx context.Context, sid spi.SessionID) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return spi.ErrBackendClosed
	}
	b.sweepUnclosed()
	s, retry := b.sessions[sid], false
	if s != nil {
		delete(b.sessions, sid)
		s.touched.Store(int64(b.clock.Now()))
		b.unclosed[sid] = s
	} else {
		s, retry = b.unclosed[sid], true
	}
	b.mu.Unlock()
	if s == nil {
		return nil
	}
	if !retry {
		names := s.heldNames()
		s.heldAtClose.Store(&names)
		s.closedByCaller.Store(true)
		// On a goroutine Close waits for; once the backend is closed, Close ends s itself.
		b.background(func() { s.end(false) })
	}
	if err := s.closeOutcome(ctx, retry); err != nil {
		return spi.Unavailable("zookeeper: close session", err)
	}
	b.mu.Lock()
	first := b.unclosed[sid] == s // the first call to see the close confirmed
	if first {
		delete(b.unclosed, sid)
	}
	b.mu.Unlock()
	if first {
		if names := s.heldAtClose.Load(); names != nil {
			for _, n := range *names {
				b.hint(spi.Released, n)
			}
		}
	}
	return nil
}

// sweepUnclosed drops, under b.mu, the sessions whose close failed that the server has surely
// expired by now: one session timeout has passed since a request of this backend sent after
// the session's last close attempt was answered (session.answered). Counting from the attempt
// instead (as before) took a session for expired while the server was down: a restarted
// server reloads it and expires it one session timeout after it starts, and the close that
// would have ended it at once had nothing left to close with.
func (b *Backend) sweepUnclosed() {
	now := b.clock.Now()
	for sid, s := range b.unclosed {
		if a := s.answered.Load(); a > s.touched.Load() && time.Duration(a)+s.tap.sessionTimeout() < now {
			delete(b.unclosed, sid)
		}
	}
}

// serverAnswered notes that a server answered a request of this backend sent at sentAt (a
// session's open or a keep-alive): for each session whose close failed, the first such answer
// after its last attempt starts the session timeout after which the server has surely expired
// it (see sweepUnclosed).
func (b *Backend) serverAnswered(sentAt time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.unclosed {
		if t := s.touched.Load(); int64(sentAt) > t && s.answered.Load() <= t {
			s.answered.Store(int64(sentAt))
		}
	}
}

// background runs f on a goroutine of its own, which Close waits for, unless the backend is
// closed; it reports whether it did.
func (b *Backend) background(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.backgroundLocked(f)
}

// backgroundLocked is background for a caller that holds b.mu.
func (b *Backend) backgroundLocked(f func()) bool {
	if b.closed {
		return false
	}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		f()
	}()
	return true
}

// Acquire creates the lease's ephemeral node. If it exists it reads it (setting a watch, so
// that its deletion yields a Released hint): the session's own node is a Granted re-acquire
// with the same token; another session's is HeldBy with RemainingUnknown, since ZooKeeper
// cannot tell how long another session has left.
func (b *Backend) Acquire(ctx context.Context, sid spi.SessionID, name string) (spi.Acquire, error) {
	return b.acquire(ctx, sid, name, false)
}

// acquire is Acquire, and AcquireQueued when queued: the lease node is created in one
// multi-op with a check that the name's waiter queue lets this session have it (see
// session.createLease), so a free lease goes to the queue's first waiter.
func (b *Backend) acquire(ctx context.Context, sid spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	if err := wire.ValidateName(name); err != nil {
		return spi.Acquire{}, err
	}
	s, err := b.lookup(sid)
	if err != nil {
		return spi.Acquire{}, err
	}
	if s == nil {
		return spi.Acquire{Kind: spi.SessionExpired}, nil
	}
	if queued {
		s.setWithdrawal(name, false) // waiting again: its node, if any, is its place
	}
	paths := s.pathsOf(name)
	path := paths.lease
	for attempt := 0; attempt < 8; attempt++ {
		// The claim keeps a release of the name by this session from crossing the create (see
		// session.claim): one in flight is waited for, so that its multi-op is answered before
		// the create is sent, and the create's outcome is recorded before a release checks.
		if err := s.claim(ctx, name); err != nil {
			return spi.Acquire{}, s.fail("acquire", err)
		}
		q := s.queueGuess(name)
		r := newLeaseReq(s, name, paths)
		r.q = q
		token, kept, err := r.do(ctx)
		switch {
		case err == nil:
			if h := testHookGranted.Load(); h != nil {
				(*h)(path)
			}
			s.granted(name, q)
			s.adopt(name, token, false)
		case !errors.Is(err, errQueueChanged) && outcomeUnknown(err):
			s.markUncertain(name)
			s.forgetQueue(name) // the multi-op may have deleted the session's waiter node
		}
		if kept {
			s.unclaim(name)
		}
		switch {
		case err == nil:
			b.doneWaiting(sid, name)
			return spi.Acquire{Kind: spi.Granted, Token: token, Remaining: s.remaining()}, nil
		case errors.Is(err, errQueueChanged):
			head, err := s.readQueue(ctx, name)
			switch {
			case errors.Is(err, errQueueChanged):
				continue
			case err != nil:
				if s.expiredBy(err) {
					return spi.Acquire{Kind: spi.SessionExpired}, nil
				}
				return spi.Acquire{}, s.fail("acquire: read the waiters of "+name, err)
			case head == nil:
				if h := testHookQueueRead.Load(); h != nil {
					(*h)(name)
				}
				continue // the queue lets this session in: try again with its state
			}
			s.resolved(name)
			if queued {
				if err := s.ensureWaiter(ctx, name); err != nil {
					if s.expiredBy(err) {
						return spi.Acquire{Kind: spi.SessionExpired}, nil
					}
					return spi.Acquire{}, err
				}
			}
			b.waitFor(sid, name, s.leaseWaitLinger(), false)
			return *head, nil
		case errors.Is(err, zk.ErrNodeExists):
			type got struct {
				data    []byte
				stat    *zk.Stat
				watched bool
			}
			g, err := call(ctx, b, func() (got, error) {
				data, stat, watched, err := s.getData(path)
				return got{data, stat, watched}, err
			})
			switch {
			case errors.Is(err, zk.ErrNoNode):
				continue // released in between: try again
			case err != nil:
				if s.expiredBy(err) {
					return spi.Acquire{Kind: spi.SessionExpired}, nil
				}
				return spi.Acquire{}, s.fail("acquire: read "+path, err)
			case g.stat.EphemeralOwner == s.zid:
				s.adopt(name, g.stat.Czxid, g.watched)
				b.doneWaiting(sid, name)
				return spi.Acquire{Kind: spi.Granted, Token: g.stat.Czxid, Remaining: s.remaining()}, nil
			}
			var reply spi.Acquire
			if g.stat.EphemeralOwner == 0 {
				// Not any session's: honoured as held (the read's watch reports its deletion),
				// never taken for ours and never deleted by Simba.
				b.warnOnce(path, "simba: ZooKeeper: a persistent node that Simba did not create sits at a lease path; the name stays held until someone deletes it",
					"name", name, "node", path)
				reply = spi.Acquire{Kind: spi.HeldBy, Holder: ForeignHolder, HolderOwner: ForeignOwner, RemainingUnknown: true}
			} else {
				owner := string(g.data)
				if wire.ValidateOwner(owner) != nil {
					b.warnOnce(path, "simba: ZooKeeper: a lease node's data is not an owner string; another session's node that Simba may not have created",
						"name", name, "node", path, "session", SessionIDString(g.stat.EphemeralOwner))
					owner = ForeignOwner
				}
				reply = spi.Acquire{Kind: spi.HeldBy, Holder: SessionIDString(g.stat.EphemeralOwner),
					HolderOwner: owner, RemainingUnknown: true}
			}
			s.resolved(name)
			if queued {
				if err := s.ensureWaiter(ctx, name); err != nil {
					if s.expiredBy(err) {
						return spi.Acquire{Kind: spi.SessionExpired}, nil
					}
					return spi.Acquire{}, err
				}
			}
			b.waitFor(sid, name, s.leaseWaitLinger(), true)
			return reply, nil
		case errors.Is(err, zk.ErrNoNode):
			b.rootsMissing()
			if err := b.ensureRoots(ctx, s); err != nil {
				if s.expiredBy(err) {
					return spi.Acquire{Kind: spi.SessionExpired}, nil
				}
				return spi.Acquire{}, err
			}
		case errors.Is(err, zk.ErrNoChildrenForEphemerals):
			return spi.Acquire{}, underEphemeral(path, err)
		default:
			if s.expiredBy(err) {
				return spi.Acquire{Kind: spi.SessionExpired}, nil
			}
			return spi.Acquire{}, s.fail("acquire", err) // an unknown outcome is marked above
		}
	}
	return spi.Acquire{}, spi.Contended("zookeeper: acquire", fmt.Errorf("lease node %s or its waiter queue kept changing", path))
}

// Release deletes the lease node if the session holds it with token, and never another
// session's node. ZooKeeper can make a delete conditional on the data version only, which is 0
// for every node Simba creates, so a bare delete sent on a stale record would delete whatever
// node is at the path: after an outsider deleted the holder's node and another session
// created the name again, the old holder's release used to delete the new holder's node.
//
// So a lease node grants write to the creating session's own digest identity alone (a random
// one, added when the session connects), and Release deletes in one multi-op that first writes
// the node (empty data, at the expected version) and then deletes it at the version that
// write gives it. ZooKeeper applies a multi-op atomically and checks each part's permission:
// on a node of any other session's tenure the write fails with NoAuth and nothing is deleted.
// When the session's record holds the node with that token, the multi goes out at once (one
// round trip, as a bare delete); otherwise Release reads the stat first and sends it only if
// the ephemeral owner is this session and the czxid is token.
//
// The ACL does not keep the multi-op off the session's own next node of the name (at version 0
// too), so Release and Acquire of one name by one session do not cross (see session.claim):
// a release waits for an acquire's create of the name in flight to be answered and recorded,
// and an acquire's create for a release in flight to be written to the session's connection
// (see tap.releaseWritten), or answered when the release read the node first.
//
// What this does not cover: a node created at the path by a client holding a write
// permission that this session's identities also hold (a Simba client of an earlier 5.x
// release, whose nodes grant all to the shared DSN identity, or a foreign client with an open
// ACL), and ZooKeeper super users. See the package doc.
func (b *Backend) Release(ctx context.Context, sid spi.SessionID, name string, token int64) error {
	if err := wire.ValidateName(name); err != nil {
		return err
	}
	s, err := b.lookup(sid)
	if err != nil || s == nil {
		return err
	}
	paths := s.pathsOf(name)
	path := paths.lease
	b.doneWaiting(sid, name)
	// The claim keeps the session's acquires of the name from crossing this release (see
	// session.claim): from the check that the session holds the node until the multi-op that
	// deletes it is answered, no create of the name by this session is sent.
	if err := s.claim(ctx, name); err != nil {
		return s.fail("release", err)
	}
	kept := true
	defer func() {
		if kept {
			s.unclaim(name)
		}
	}()
	held, sure := s.forgetHeld(name, token)
	if held && sure {
		// Simba never changes a lease node's data, so its version is 0. The claim ends as
		// the multi-op is written (see tap.releaseWritten): an acquire of the name waiting for
		// it sends its create right behind, not a round trip later.
		r := newLeaseReq(s, name, paths)
		r.release, r.early = true, true
		_, kept, err = r.do(ctx)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			b.hint(spi.Released, name)
			return nil
		case errors.Is(err, zk.ErrNoAuth):
			return nil // another session's node: ours is gone
		case errors.Is(err, zk.ErrBadVersion):
			// someone changed the node's data: fall back to the checked path
		default:
			if s.expiredBy(err) {
				return nil
			}
			s.markUncertain(name)
			return s.fail("release", err)
		}
	}
	for attempt := 0; attempt < 4; attempt++ {
		if !kept {
			// The early release above ended its claim when its multi-op was written: claim the
			// name again before the check (an acquire may have created a node since).
			if err := s.claim(ctx, name); err != nil {
				return s.fail("release", err)
			}
			kept = true
		}
		type got struct {
			ok   bool
			stat *zk.Stat
		}
		g, err := call(ctx, b, func() (got, error) {
			ok, stat, err := s.conn.Exists(path)
			return got{ok, stat}, err
		})
		if err != nil {
			if s.expiredBy(err) {
				return nil
			}
			if held {
				s.markUncertain(name) // the next keep-alive reads it
			}
			return s.fail("release: read "+path, err)
		}
		if !g.ok || g.stat.EphemeralOwner != s.zid || g.stat.Czxid != token {
			return nil
		}
		r := newLeaseReq(s, name, paths)
		r.release, r.version = true, g.stat.Version
		_, kept, err = r.do(ctx)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			s.resolved(name)
			b.hint(spi.Released, name)
			return nil
		case errors.Is(err, zk.ErrNoAuth):
			return nil // deleted and created again by another session since the read
		case errors.Is(err, zk.ErrBadVersion):
			continue
		default:
			if s.expiredBy(err) {
				return nil
			}
			s.markUncertain(name)
			return s.fail("release", err)
		}
	}
	return spi.Contended("zookeeper: release", fmt.Errorf("lease node %s kept changing", path))
}

// Join creates the session's ephemeral member node of group (and the group's node if
// missing).
func (b *Backend) Join(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	if err := wire.ValidateName(group); err != nil {
		return 0, err
	}
	s, err := b.lookup(sid)
	if err != nil {
		return 0, err
	}
	if s == nil {
		return spi.Expired, nil
	}
	// The group is of interest from the Join on, so that its watch is set as soon as may be.
	b.joining(s.id, group)
	st, err := b.join(ctx, s, group)
	if err != nil || st != spi.OK {
		b.joinEnded(s.id, group, s.waitLinger())
	}
	return st, err
}

func (b *Backend) join(ctx context.Context, s *session, group string) (spi.Status, error) {
	member := b.lay.member(group, string(s.id))
	for attempt := 0; attempt < 4; attempt++ {
		_, err := call(ctx, b, func() (string, error) { return s.conn.Create(member, s.owner, wire.MemberNodeFlags, b.acls.member) })
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			return spi.OK, nil
		case errors.Is(err, zk.ErrNoChildrenForEphemerals):
			return 0, underEphemeral(member, err)
		case errors.Is(err, zk.ErrNoNode):
			_, err := call(ctx, b, func() (string, error) {
				return s.conn.Create(b.lay.group(group), nil, wire.GroupNodeFlags, b.acls.group)
			})
			if errors.Is(err, zk.ErrNoNode) {
				b.rootsMissing()
				err = b.ensureRoots(ctx, s)
			}
			if errors.Is(err, zk.ErrNoChildrenForEphemerals) {
				return 0, underEphemeral(b.lay.group(group), err)
			}
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				if s.expiredBy(err) {
					return spi.Expired, nil
				}
				return 0, s.fail("join", err)
			}
		default:
			if s.expiredBy(err) {
				return spi.Expired, nil
			}
			return 0, s.fail("join", err)
		}
	}
	return 0, spi.Unavailable("zookeeper: join", fmt.Errorf("group node of %q kept vanishing", group))
}

// Leave deletes the session's member node of group.
func (b *Backend) Leave(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	if err := wire.ValidateName(group); err != nil {
		return 0, err
	}
	s, err := b.lookup(sid)
	if err != nil {
		return 0, err
	}
	if s == nil {
		return spi.Expired, nil
	}
	err = callErr(ctx, b, func() error { return s.conn.Delete(b.lay.member(group, string(s.id)), -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		if s.expiredBy(err) {
			b.joinEnded(s.id, group, s.waitLinger())
			return spi.Expired, nil
		}
		return 0, s.fail("leave", err)
	}
	b.joinEnded(s.id, group, s.waitLinger())
	return spi.OK, nil
}

// Members lists the live members of group (the children of its node), setting a child watch
// so that a change yields a GroupChanged hint.
func (b *Backend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	if err := wire.ValidateName(group); err != nil {
		return nil, err
	}
	s, err := b.anySession(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := call(ctx, b, func() ([]spi.SessionID, error) { return s.groupMembers(group) })
	if err != nil {
		return nil, s.fail("members", err)
	}
	return ms, nil
}

// anySession returns a live session for requests that belong to no session (Members,
// Inspect): an open one if any, else the backend's own observer session.
func (b *Backend) anySession(ctx context.Context) (*session, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, spi.ErrBackendClosed
	}
	for _, s := range b.sessions {
		if !s.gone() {
			b.mu.Unlock()
			return s, nil
		}
	}
	if o := b.observer; o != nil && !o.gone() {
		b.mu.Unlock()
		return o, nil
	}
	b.mu.Unlock()
	o, err := b.connect(ctx, "simba-observer", observerTTL)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, spi.ErrBackendClosed // Close has dropped it (conning)
	}
	delete(b.conning, o)
	if b.observer != nil && !b.observer.gone() {
		b.backgroundLocked(func() { o.end(false) }) // a goroutine Close waits for
		return b.observer, nil
	}
	b.observer = o
	return o, nil
}

// observerTTL is the session timeout the observer session asks for.
const observerTTL = 30 * time.Second

// CutSafe implements spi.CutSafe: every request of an acquire or a release is one ZooKeeper
// operation or multi-op, applied whole or not at all, and none holds anything at the server for
// the client, so a caller's context may cut the call short at any point.
func (b *Backend) CutSafe() bool { return true }

// QueueEntriesLiveWithSession implements spi.SessionQueue: a waiter's entry is an ephemeral
// sequential node of its session, created once and kept by later attempts (they never
// re-create or refresh it), so it lives exactly as long as the ZooKeeper session, which the
// session's keep-alives keep alive; it goes with a grant, a withdrawal or the session. A
// withdrawal that fails runs again after the session's next keep-alive.
func (b *Backend) QueueEntriesLiveWithSession() bool { return true }

// HintsSteady implements spi.SteadyHints: a released hint of a name a session waits for is not
// lost to a reconnect. The watcher connection sets its watches again after each reconnect
// (a new session of its own) and reads each lease node behind its watch, hinting a node found
// gone, so a release made while it was away is hinted then; a server without addWatch leaves
// the hints to the sessions' own watches, which go-zookeeper sends again (setWatches, with the
// session's last zxid) on each reconnect of the session, and the server fires each whose node
// changed since. Those watches go only with the session (go-zookeeper's invalidateWatches, on
// its expiry or Close), when the waiter's place goes too. The backend keeps a wait for a name
// for three session timeouts after the session's latest acquire of it (leaseWaitLinger),
// longer than the client's two-TTL fallback retry. A hint dropped for a subscriber too slow
// for its channel's buffer is still lost: that fallback retry bounds the cost.
func (b *Backend) HintsSteady() bool { return true }

// Close drops the connections of every session this backend opened, without closing the
// sessions at the server (use CloseSession for that): like a crashed client's, they expire
// after their timeout and only then free their leases, since a process that merely lost its
// backend must not let another take over while it may still be working. It also drops the
// connections of the sessions whose close CloseSession still awaits, stops the closes it runs
// over connections of their own and waits for them, stops the hints, and is idempotent.
// Only the observer session (the backend's own, for Members and Inspect), which holds
// nothing, is closed at the server, when its connection is established (see closeObserver).
// Sessions still connecting (an OpenSession or a Members under way) are dropped too, and their
// callers' calls fail with spi.ErrBackendClosed. It returns once every goroutine the backend
// started has ended (go-zookeeper's of the backend's connections, the hop workers that ran
// requests for calls with a deadline), about a round trip when the server answers (3 s at
// most; see tap.abandon and standIn for how go-zookeeper's Conn.Close is kept from waiting its
// one-second timer), so that a program's goroutine-leak check right after Close finds none of
// them. A dial under way (the hint connection's, a session's) is cut short, unless it is a
// WithDialer dialer's, which takes no context.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	all := make([]*session, 0, len(b.sessions))
	for _, s := range b.sessions {
		all = append(all, s)
	}
	observer := b.observer
	closing := make([]*session, 0, len(b.unclosed))
	for _, s := range b.unclosed {
		closing = append(closing, s)
	}
	conning := make([]*session, 0, len(b.conning))
	for s := range b.conning {
		conning = append(conning, s)
	}
	b.sessions = map[spi.SessionID]*session{}
	b.unclosed = map[spi.SessionID]*session{}
	b.conning = map[*session]struct{}{}
	b.observer = nil
	b.mu.Unlock()
	deadline := time.Now().Add(retireWait)
	b.cancelStop()
	if observer != nil {
		b.closeObserver(observer)
	}
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { s.end(true) })
	}
	for _, s := range closing {
		wg.Go(func() {
			s.tap.abandon() // a close still awaited on go-zookeeper's connection
			s.end(true)     // waits for CloseSession's end of s, if under way
		})
	}
	for _, s := range conning {
		wg.Go(s.drop)
	}
	wg.Wait()
	b.bg.Wait()
	b.stopHints()
	b.awaitRetired(time.Until(deadline))
	// The hop workers' requests have failed with their connections (or will, once go-zookeeper
	// ends them: awaitRetired gave up at its bound).
	b.hops.wait(max(time.Until(deadline), 0))
	return nil
}

// closeObserver ends the observer session o for Close. It holds nothing (it only reads, for
// Members and Inspect), so it is closed at the server when its connection is established:
// the server's answer ends go-zookeeper's connection in a round trip, and the server drops the
// session and its watches at once instead of one session timeout later. Should the answer not
// come within closeGrace (a server that stopped answering), the connection is dropped (the
// close request awaiting its answer then fails at once). Without an established connection o
// is dropped like the sessions. Close's wait for retired connections (awaitRetired) covers
// this close too.
func (b *Backend) closeObserver(o *session) {
	if !o.tap.established() {
		o.end(true)
		return
	}
	done := b.track()
	go func() {
		defer done()
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			o.end(false)
		}()
		grace := time.NewTimer(closeGrace)
		select {
		case <-ended:
		case <-grace.C:
			o.tap.abandon()
			<-ended
		}
		grace.Stop()
		// end retired the connection (retire) before it returned: awaitRetired waits for that.
	}()
}

// closeGrace bounds how long Close waits for the server's answer to the observer session's
// close (closeObserver) before it drops the connection.
const closeGrace = 500 * time.Millisecond

// track notes a go-zookeeper connection being ended that Close is to wait for
// (awaitRetired); the caller calls the function returned once its goroutines have ended.
func (b *Backend) track() (done func()) {
	ch := make(chan struct{})
	b.endingMu.Lock()
	b.ending[ch] = struct{}{}
	b.endingMu.Unlock()
	return func() {
		b.endingMu.Lock()
		delete(b.ending, ch)
		b.endingMu.Unlock()
		close(ch)
	}
}

// retireWait bounds how long Close waits for go-zookeeper's goroutines of the connections it
// dropped or closed: its Conn.Close waits up to a second for the close request's answer (a
// dropped connection's is go-zookeeper's own failure of it, as the connection ends, unless the
// request was queued after the connection's loop had ended: see tap.abandon), and its
// connection loop ends once that request is flushed.
const retireWait = 3 * time.Second

// standInWait bounds how long retire waits for a connection loop to dial its stand-in before
// it closes the connection anyway (a Connector's connection without the backend's pacer may
// wait between its rounds of dials).
const standInWait = 200 * time.Millisecond

// retire closes conn, a go-zookeeper connection of this backend (already closed when
// closeIt is false), and notes it until go-zookeeper's goroutines of it have ended, which
// Close waits for (awaitRetired): go-zookeeper's Conn.Close only queues the close request and
// waits for its answer, up to a second, and the connection's loop ends after that, so a
// Close that returned at once left them running, and a caller's goleak check right after
// Close (the root package's tests) found them. events is the connection's event channel,
// which go-zookeeper closes last, after its loop has ended; a Connector's connection has
// none (nil), and is taken for ended when its Conn.Close returns, about when its loop ends.
//
// When after is set, conn.Close waits for it (up to standInWait): a connection loop that is
// to dial again (see tap.abandon) first gets its stand-in, whose send loop then takes the close
// request, so that go-zookeeper's Conn.Close is answered at once. Closed earlier, the loop could
// see Close's flag between its connection's end and the queueing of the close request, and end
// without taking it: Conn.Close then waited out its one-second timer.
func (b *Backend) retire(conn *zk.Conn, events <-chan zk.Event, closeIt bool, after <-chan struct{}) {
	done := b.track()
	go func() {
		defer done()
		if closeIt {
			if after != nil {
				t := time.NewTimer(standInWait)
				select {
				case <-after:
				case <-t.C:
				}
				t.Stop()
			}
			conn.Close()
		}
		if events != nil {
			for range events { // nothing reads it otherwise (the backend uses the callback)
			}
		}
	}()
}

// awaitRetired waits, up to limit, for go-zookeeper's goroutines of the connections retired
// so far to end, and for those of the connections retired meanwhile (the observer's close,
// closeObserver, retires its connection while Close waits).
func (b *Backend) awaitRetired(limit time.Duration) {
	var timer *time.Timer
	for {
		b.endingMu.Lock()
		pending := make([]chan struct{}, 0, len(b.ending))
		for done := range b.ending {
			pending = append(pending, done)
		}
		b.endingMu.Unlock()
		if len(pending) == 0 {
			return
		}
		if timer == nil {
			timer = time.NewTimer(limit)
			defer timer.Stop()
		}
		for _, done := range pending {
			select {
			case <-done:
			case <-timer.C:
				return
			}
		}
	}
}

// outcomeUnknown reports whether a failed request may still have been applied.
func outcomeUnknown(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrClosing) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionExpired) ||
		!isAPIError(err)
}

// isAPIError reports whether err is a definite answer of the server to the request.
func isAPIError(err error) bool {
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrBadVersion,
		zk.ErrInvalidACL, zk.ErrNotEmpty, zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// call runs f, a blocking go-zookeeper request, and gives up waiting when ctx is done (the
// request's outcome is then unknown). With a context that can end, f runs on one of b's hop
// workers (see hops) and the caller waits for it or for ctx; otherwise on the caller's goroutine.
func call[T any](ctx context.Context, b *Backend, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	b.hops.run(func() {
		v, err := f()
		ch <- result{v, err}
	})
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// callErr is call for a request with no result but its error.
func callErr(ctx context.Context, b *Backend, f func() error) error {
	_, err := call(ctx, b, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// AdoptLogger implements spi.LoggerAdopter: a backend made without WithSlog logs its warnings
// to l from now on (simba.New hands it the client's simba.WithLogger), where it logged to
// slog.Default(); one given WithSlog keeps that logger.
func (b *Backend) AdoptLogger(l *slog.Logger) {
	b.logSink.Adopt(l)
}

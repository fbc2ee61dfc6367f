package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/simba-go/simba/generated/etcdtxn"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/adoptlog"
	"github.com/simba-go/simba/spi"
)

// maxGroupRanges is the most groups a keep-alive reads with a range each.
const maxGroupRanges = 64

// MaxTTL is the longest session TTL etcd grants (its MaxLeaseTTL, 9,000,000,000 s).
const MaxTTL = 9_000_000_000 * time.Second

// Backend is the etcd implementation of the Simba SPI (spi.Backend, spi.Hinter, spi.Inspector
// and spi.Queuer). It is safe for concurrent use.
type Backend struct {
	// logSink is where log writes when no WithSlog was given (nil otherwise): AdoptLogger.
	logSink   *adoptlog.Sink
	own       bool // Close closes cli
	prefix    string
	endpoints string // for errors

	// cli is the client; for a backend made from a Config it is made on first use (cfg),
	// since an etcd client with credentials authenticates as it is made. making is the making
	// under way (nil when none is), which calls wait for within their contexts.
	cliMu  sync.Mutex
	cli    *clientv3.Client
	cfg    *clientv3.Config
	making *making

	// conns dials and watches the connections of the backend's own client (nil for a client
	// passed to NewFromClient); minTTL is the shortest session TTL asked of the backend, which
	// bounds its connection attempts (see connWatch).
	conns  *connWatch
	minTTL atomic.Int64

	// ctx is cancelled by Close: it ends the hint watches.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	sessions map[spi.SessionID]*session
	// places holds, per session and name it waits for, the create revision of its waiter
	// key (its place in the queue), learnt by enqueue: take compares on it.
	places map[place]int64
	// withdrawals holds the withdrawals that failed: a waiter key lives as long as its
	// session, so the session's next keep-alive withdraws again (a waiter that stopped
	// waiting must not hold a free lease back while its client keeps the session alive).
	withdrawals map[place]bool
	// withdrawing counts, per session and name, the withdrawals being sent, which an
	// AcquireQueued of the same session and name waits for (awaitWithdrawals).
	withdrawing map[place]*inflight
	// Test hooks (nil outside tests): beforeRetry runs before a keep-alive's retried
	// withdrawal of name is sent; awaiting runs when an AcquireQueued starts waiting for a
	// withdrawal in flight.
	beforeRetry func(name string)
	awaiting    func()
	// moved holds, per session and name, the token of a held index entry whose lease key a
	// keep-alive found deleted or put on another etcd lease (see heldOf).
	moved map[place]int64

	// hints holds the Hints subscribers and the names the backend's sessions wait for.
	hints hub

	// log takes the backend's own warnings (WithSlog); warned holds the keys of those given.
	log    *slog.Logger
	warned sync.Map
}

// Option configures a Backend.
type Option func(*options)

type options struct {
	slog *slog.Logger
	// slogSet: WithSlog was given (a nil slog then discards); without it the backend logs
	// through an adoptlog.Sink (see AdoptLogger).
	slogSet bool
}

// WithSlog sends the backend's own warnings to l (by default the logger of the client the
// backend is given to, if it has one, simba.WithLogger: see AdoptLogger; else slog.Default()): a server that
// grants a session a longer lease TTL than asked (its minimum lease TTL, which follows its
// election timeout: 2 s with etcd's defaults), once per asked and granted TTL. A nil l
// discards them.
func WithSlog(l *slog.Logger) Option { return func(o *options) { o.slog, o.slogSet = l, true } }

// applyOptions returns the backend's logger, and the sink it writes through when no WithSlog
// was given (nil otherwise).
func applyOptions(opts []Option) (*slog.Logger, *adoptlog.Sink) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case !o.slogSet: // slog.Default() until a client hands its own (AdoptLogger)
		return adoptlog.New()
	case o.slog == nil:
		return slog.New(slog.DiscardHandler), nil
	}
	return o.slog, nil
}

// AdoptLogger implements spi.LoggerAdopter: a backend made without WithSlog logs its warnings
// to l from now on (simba.New hands it the client's simba.WithLogger), where it logged to
// slog.Default(); one given WithSlog keeps that logger.
func (b *Backend) AdoptLogger(l *slog.Logger) {
	b.logSink.Adopt(l)
}

// ForeignOwner is the holder owner an Acquire reports for a lease or waiter key whose value is
// not an owner string (written by something other than Simba): the value is never shown.
const ForeignOwner = "<foreign key>"

// maxForeignDropped bounds the foreign waiter keys one Acquire or AcquireQueued drops before it
// replies with what it finds.
const maxForeignDropped = 8

// errForeignWaiter says that an acquire dropped a foreign waiter key and is to run again.
var errForeignWaiter = errors.New("etcd: foreign waiter key dropped")

// warnOnce logs msg at warning level, once per key.
func (b *Backend) warnOnce(key, msg string, args ...any) {
	if _, dup := b.warned.LoadOrStore(key, struct{}{}); !dup {
		b.log.Warn(msg, args...)
	}
}

// place is a session waiting for a name.
type place struct {
	id   spi.SessionID
	name string
}

// session is what the backend remembers of a session it opened: its etcd lease, owner, TTL
// (whole seconds) and when the last renewal that etcd acknowledged was sent, from which its
// time left is counted (etcd renews a lease from when it handles the request, which is after
// the send).
type session struct {
	lease   clientv3.LeaseID
	owner   string
	ttl     time.Duration
	renewed time.Time // monotonic
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

// New returns a Backend for the etcd cluster named by dsn (see ParseDSN). Its client is its
// own: Close closes it. New does no network I/O (as NewFromConfig): a cluster that is down
// shows in the first call, which waits for a connection within its context.
func New(dsn string, opts ...Option) (*Backend, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return NewFromConfig(cfg, opts...)
}

// NewFromConfig returns a Backend for cfg, with a client of its own (Close closes it).
// Connecting happens in the background; calls wait for it within their contexts.
func NewFromConfig(cfg Config, opts ...Option) (*Backend, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: etcd: no endpoints", spi.ErrInvalidOption)
	}
	if cfg.Prefix != "" {
		if err := validatePrefix(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("%w: etcd: %v", spi.ErrInvalidOption, err)
		}
	}
	dt := cfg.DialTimeout
	if dt <= 0 {
		dt = DefaultDialTimeout
	}
	cc := &clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: dt,
		Username:    cfg.User,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
		// Keep-alive pings notice a dead member; the balancer then moves to another. gRPC
		// raises any ping interval below 10 s to 10 s, so that is what this is: a silent
		// connection is found sooner by the connection watch (conn.go, dropSilent).
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(), // errors reach the caller; the client's own logs are noise
	}
	b := newBackend(nil, cfg.Prefix, cfg.Endpoints, opts)
	b.conns = newConnWatch(dt, len(cfg.Endpoints), func() time.Duration { return time.Duration(b.minTTL.Load()) })
	b.conns.tls = cfg.TLS != nil
	cc.DialOptions = []grpc.DialOption{grpc.WithConnectParams(connectParams(dt)), grpc.WithContextDialer(b.conns.dial)}
	// The client lives within the backend: Close ends a client being made, whose
	// authentication (with credentials) waits for a connection for up to the dial timeout.
	cc.Context = b.ctx
	b.cfg, b.own = cc, true
	return b, nil
}

// Reconnect backoff of the gRPC connections of a backend's own client (New, NewFromConfig):
// after a connection is lost, gRPC dials again at once and, while dials fail, waits
// ReconnectBaseDelay, then 1.6 times longer after each failure (±20% jitter), at most
// ReconnectMaxDelay. gRPC's default (1 s, then 1.6 s, 2.56 s... up to 120 s) redials a server
// that refused connections for 1.5 s only 2.6 s after the outage began, when a session of TTL
// 3 s has usually lapsed. With these a session rides out a refused or reset connection that
// leaves it a renewal interval, at TTL 1 s too (see "Outages" in the package doc).
const (
	// ReconnectBaseDelay is the wait after the first failed dial.
	ReconnectBaseDelay = 50 * time.Millisecond
	// ReconnectMaxDelay is the longest wait between dials.
	ReconnectMaxDelay = 250 * time.Millisecond
)

// connectParams is the gRPC connection backoff of a backend's own client; dialTimeout bounds
// each connection attempt (gRPC's MinConnectTimeout, 20 s by default), so an attempt whose
// packets a partition swallowed is given up and made again (the backend's dialer gives it up
// sooner once sessions are open: see connWatch).
func connectParams(dialTimeout time.Duration) grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  ReconnectBaseDelay,
			Multiplier: backoff.DefaultConfig.Multiplier,
			Jitter:     backoff.DefaultConfig.Jitter,
			MaxDelay:   ReconnectMaxDelay,
		},
		MinConnectTimeout: dialTimeout,
	}
}

// NewFromClient returns a Backend on cli, a client the caller owns (Close leaves it open),
// keeping its keys under prefix (wire.EtcdPrefix if empty).
func NewFromClient(cli *clientv3.Client, prefix string, opts ...Option) (*Backend, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcd: nil client", spi.ErrInvalidOption)
	}
	if prefix != "" {
		if err := validatePrefix(prefix); err != nil {
			return nil, fmt.Errorf("%w: etcd: %v", spi.ErrInvalidOption, err)
		}
	}
	return newBackend(cli, prefix, cli.Endpoints(), opts), nil
}

func newBackend(cli *clientv3.Client, prefix string, endpoints []string, opts []Option) *Backend {
	ctx, cancel := context.WithCancel(context.Background())
	log, sink := applyOptions(opts)
	return &Backend{cli: cli, prefix: prefixOf(prefix), endpoints: strings.Join(endpoints, ","), ctx: ctx, cancel: cancel, sessions: map[spi.SessionID]*session{}, places: map[place]int64{}, withdrawals: map[place]bool{}, moved: map[place]int64{}, log: log, logSink: sink}
}

// making is one making of a backend's own client: done is closed when it ended, with err
// (nil: the client is the backend's cli).
type making struct {
	done chan struct{}
	err  error
}

// client returns the etcd client, making it on first use (a failure is retried by the next
// call). With credentials the making authenticates, which waits for a connection for up to the
// dial timeout: it runs on a goroutine of its own, which the calls that need the client wait
// for within their contexts (ctx ending fails the call, and the making goes on for the next),
// and which Close ends (the client's context is the backend's) and waits for.
func (b *Backend) client(ctx context.Context) (*clientv3.Client, error) {
	b.cliMu.Lock()
	if b.cli != nil {
		cli := b.cli
		b.cliMu.Unlock()
		return cli, nil
	}
	if b.ctx.Err() != nil {
		b.cliMu.Unlock()
		return nil, fmt.Errorf("etcd: %w", spi.ErrBackendClosed)
	}
	m := b.making
	if m == nil {
		m = &making{done: make(chan struct{})}
		b.making = m
		go b.makeClient(m)
	}
	b.cliMu.Unlock()
	select {
	case <-m.done:
	case <-ctx.Done():
		select {
		case <-m.done: // made meanwhile: the call's context ending is not a connect's failure
		default:
			return nil, b.classify("connect: waiting for the client to authenticate", context.Cause(ctx))
		}
	}
	if m.err != nil {
		return nil, m.err
	}
	b.cliMu.Lock()
	defer b.cliMu.Unlock()
	return b.cli, nil
}

// makeClient makes the backend's client for m, keeping it unless Close came first.
func (b *Backend) makeClient(m *making) {
	cli, err := clientv3.New(*b.cfg)
	if err == nil && b.cfg.Username != "" {
		b.warnIfAuthOff(cli)
	}
	b.cliMu.Lock()
	defer b.cliMu.Unlock()
	defer close(m.done)
	b.making = nil
	switch {
	case b.ctx.Err() != nil:
		if cli != nil {
			cli.Close()
		}
		m.err = fmt.Errorf("etcd: connect: %w", spi.ErrBackendClosed)
	case err != nil:
		m.err = b.classify("connect", err)
	default:
		b.cli = cli
	}
}

// warnIfAuthOff warns once when the DSN gives a user and password but the server's
// authentication is off: etcd's client then drops the credentials without a word (it takes
// the server's "authentication is not enabled" as success), so a wrong password works and
// any client that reaches the server can write Simba's keys, a held lease's included. It asks
// the server once, as the client is made (one round trip, within the dial timeout and the
// backend's life); a server without AuthStatus (before 3.5) or an error says nothing.
func (b *Backend) warnIfAuthOff(cli *clientv3.Client) {
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.DialTimeout)
	defer cancel()
	st, err := cli.AuthStatus(ctx)
	if err != nil || st.Enabled {
		return
	}
	b.warnOnce("auth off", "simba: etcd: the DSN gives a user and password, but the server's authentication is off: etcd does not check them (a wrong password works) and any client that reaches the server can write Simba's keys, a held lease's included; enable it (etcdctl auth enable) or leave the credentials out",
		"user", b.cfg.Username)
}

// Prefix returns the key prefix the backend keeps its keys under.
func (b *Backend) Prefix() string { return b.prefix }

// CutSafe implements spi.CutSafe: every request of an acquire or a release is one etcd
// transaction, applied whole or not at all, so a caller's context may cut the call short at any
// point.
func (b *Backend) CutSafe() bool { return true }

// QueueEntriesLiveWithSession implements spi.SessionQueue: a waiter's entry is a key attached
// to its session's etcd lease, put once (a put again keeps its create revision, its place) and
// not refreshed by later attempts, so it lives exactly as long as the session's lease, which
// the session's keep-alives keep alive; it goes with a grant, a withdrawal or the lease. A
// withdrawal that fails runs again with the session's next keep-alive.
func (b *Backend) QueueEntriesLiveWithSession() bool { return true }

// HintsSteady implements spi.SteadyHints: a released hint of a name a session waits for is not
// lost to a reconnect. The name's watches (on the backend's client, which fails over between
// the cluster's members by itself) resume after the last revision they reported whenever they
// end (a lost leader, a member cut off from the quorum), so a deletion made meanwhile is
// reported then; if that revision was compacted the name is hinted at once, since a release
// may have been missed (see Hints). A session waits for a name for three TTLs after its
// latest acquire of it (leaseWaitTTLs), longer than the client's two-TTL fallback retry. A
// hint dropped for a subscriber too slow for its channel's buffer is still lost: that
// fallback retry bounds the cost.
func (b *Backend) HintsSteady() bool { return true }

// Close makes later calls fail with spi.ErrBackendClosed, ends the hint watches and, when the
// backend made its client (New, NewFromConfig), closes it, or ends its making: a call making
// it (with credentials, waiting for a connection to authenticate) fails with
// spi.ErrBackendClosed, and Close does not wait out the dial timeout. Sessions are left to
// expire.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.cliMu.Lock()
	m := b.making
	b.cliMu.Unlock()
	if m != nil {
		<-m.done // the backend's context ended it
	}
	b.cliMu.Lock()
	defer b.cliMu.Unlock()
	if b.own && b.cli != nil {
		return b.cli.Close()
	}
	return nil
}

// check fails once the backend is closed and otherwise returns its client, waiting within ctx
// for it to be made (see client).
func (b *Backend) check(ctx context.Context) (*clientv3.Client, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("etcd: %w", spi.ErrBackendClosed)
	}
	return b.client(ctx)
}

// sessionID formats an etcd lease id as a session id.
func sessionID(id clientv3.LeaseID) spi.SessionID {
	return spi.SessionID(fmt.Sprintf("%016x", uint64(id)))
}

// leaseOf parses a session id back to its etcd lease id.
func leaseOf(id spi.SessionID) (clientv3.LeaseID, bool) {
	if !wire.IsZooKeeperSessionID(string(id)) { // the same form: 16 lowercase hex digits
		return 0, false
	}
	n, err := strconv.ParseUint(string(id), 16, 64)
	if err != nil || n == 0 {
		return 0, false
	}
	return clientv3.LeaseID(n), true
}

// CheckTTL implements spi.TTLChecker: a ttl outside [1s, MaxTTL] is refused, with an error
// matching spi.ErrInvalidOption, as OpenSession refuses it before any I/O (etcd leases count
// whole seconds; a TTL that is not a whole number of seconds is accepted and rounded down).
// The server's minimum lease TTL is not checked: a longer grant is accepted, with a warning.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	if ttl < time.Second || ttl > MaxTTL {
		return fmt.Errorf("%w: etcd: TTL %v outside [1s, %v] (etcd leases count whole seconds): use a TTL of at least 1s (WithTTL, the CLI's -ttl)", spi.ErrInvalidOption, ttl, MaxTTL)
	}
	return nil
}

// OpenSession grants an etcd lease of ttl (rounded down to whole seconds) and writes the
// session key on it.
func (b *Backend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	if err := spi.ValidateOwner(owner); err != nil {
		return spi.Session{}, err
	}
	if err := b.CheckTTL(ttl); err != nil {
		return spi.Session{}, err
	}
	secs := int64(ttl / time.Second)
	b.noteTTL(time.Duration(secs) * time.Second)
	cli, err := b.check(ctx)
	if err != nil {
		return spi.Session{}, err
	}
	sent := time.Now()
	// gRPC waits for a connection until the call's deadline (etcd's client calls wait for
	// ready): when no member can be reached (every dial refused or failed) the grant fails at
	// once instead, with the dial's error, so that a client at a cluster that is down hears of
	// it at its first attempt, not at the call's timeout (5 s by default), and retries with its
	// backoff.
	gctx, done := b.unlessUnreachable(ctx)
	defer done()
	g, err := cli.Grant(gctx, secs)
	if err != nil {
		if u := unreachable(ctx, gctx, "etcd: open session: grant"); u != nil {
			return spi.Session{}, u
		}
		b.timedOut(ctx, sent)
		return spi.Session{}, b.classify("open session: grant", err)
	}
	if g.TTL > secs {
		// The server raised the TTL to its minimum lease TTL. The session is as safe as any
		// (its time left is counted on the TTL asked, which is shorter), but a crashed
		// holder's keys go only when the longer lease does.
		b.warnOnce(fmt.Sprintf("min lease TTL %d %d", secs, g.TTL),
			"simba: etcd granted a session a longer lease TTL than asked (its minimum lease TTL): a crashed holder's leases may outlive the TTL by up to granted − asked",
			"ttl", time.Duration(secs)*time.Second, "granted", time.Duration(g.TTL)*time.Second)
	}
	sid := sessionID(g.ID)
	if _, err := cli.Put(ctx, wire.EtcdSessionKey(b.prefix, string(sid)), owner, clientv3.WithLease(g.ID)); err != nil {
		// Best effort: the lease would expire by itself.
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cli.Revoke(rctx, g.ID) //nolint:errcheck
		cancel()
		return spi.Session{}, b.classify("open session: put", err)
	}
	s := &session{lease: g.ID, owner: owner, ttl: time.Duration(secs) * time.Second, renewed: sent}
	b.mu.Lock()
	b.sessions[sid] = s
	b.mu.Unlock()
	return spi.Session{ID: sid, Remaining: s.remaining()}, nil
}

// noteTTL records a session TTL asked of the backend: the shortest bounds connection attempts.
func (b *Backend) noteTTL(ttl time.Duration) {
	for {
		cur := b.minTTL.Load()
		if cur != 0 && cur <= int64(ttl) || b.minTTL.CompareAndSwap(cur, int64(ttl)) {
			return
		}
	}
}

// timedOut closes the backend's own client's connections that went silent, when a session
// call (or Members, the client's probe) sent at sent failed because ctx ended (see
// connWatch.dropSilent).
func (b *Backend) timedOut(ctx context.Context, sent time.Time) {
	if b.conns != nil && ctx.Err() != nil {
		b.conns.dropSilent(sent)
	}
}

// remaining is the session's time left as the backend counts it: its TTL from the send time
// of the last acknowledged renewal (a lower bound of etcd's own count).
func (s *session) remaining() time.Duration {
	r := s.ttl - time.Since(s.renewed)
	return max(r, time.Millisecond)
}

// begin is the start of an operation on name by session id: name checked against the wire
// grammar, the backend open, and the session looked up (nil, with a nil error, when it is not
// live).
func (b *Backend) begin(ctx context.Context, id spi.SessionID, name string) (*clientv3.Client, *session, error) {
	if err := spi.ValidateName(name); err != nil {
		return nil, nil, err
	}
	cli, err := b.check(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, ok, err := b.lookup(ctx, cli, id)
	if err != nil || !ok {
		return nil, nil, err
	}
	return cli, s, nil
}

// lookup returns what the backend knows of session id, reading the owner from etcd for a
// session it did not open (the renewal time is then unknown: its time left is counted from
// now minus one TTL, i.e. as already spent, unless a keep-alive follows).
func (b *Backend) lookup(ctx context.Context, cli *clientv3.Client, id spi.SessionID) (*session, bool, error) {
	lease, ok := leaseOf(id)
	if !ok {
		return nil, false, nil
	}
	b.mu.Lock()
	s := b.sessions[id]
	var c session
	if s != nil {
		c = *s
	}
	b.mu.Unlock()
	if s != nil {
		return &c, true, nil
	}
	r, err := cli.Get(ctx, wire.EtcdSessionKey(b.prefix, string(id)))
	if err != nil {
		return nil, false, b.classify("read session", err)
	}
	if len(r.Kvs) == 0 || clientv3.LeaseID(r.Kvs[0].Lease) != lease {
		return nil, false, nil
	}
	ttl, err := cli.TimeToLive(ctx, lease)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, false, nil
		}
		return nil, false, b.classify("read session lease", err)
	}
	// TTL is whole seconds rounded down: a lower bound of the time left.
	return &session{lease: lease, owner: string(r.Kvs[0].Value), ttl: time.Duration(ttl.TTL) * time.Second, renewed: time.Now()}, true, nil
}

func (b *Backend) forget(id spi.SessionID) {
	b.mu.Lock()
	delete(b.sessions, id)
	for p := range b.places {
		if p.id == id {
			delete(b.places, p)
		}
	}
	for p := range b.withdrawals {
		if p.id == id {
			delete(b.withdrawals, p)
		}
	}
	for p := range b.moved {
		if p.id == id {
			delete(b.moved, p)
		}
	}
	b.mu.Unlock()
	b.hints.dropSession(id)
}

// inflight counts the withdrawals of one session and name being sent; done is closed when the
// last one has ended.
type inflight struct {
	n    int
	done chan struct{}
}

// beginWithdrawal notes a withdrawal of p about to be sent (b.mu held); endWithdrawal must
// follow.
func (b *Backend) beginWithdrawal(p place) {
	if b.withdrawing == nil {
		b.withdrawing = map[place]*inflight{}
	}
	r := b.withdrawing[p]
	if r == nil {
		r = &inflight{done: make(chan struct{})}
		b.withdrawing[p] = r
	}
	r.n++
}

// endWithdrawal notes the end of a withdrawal begun, recorded to retry at the next keep-alive
// when it failed, forgotten otherwise.
func (b *Backend) endWithdrawal(id spi.SessionID, name string, failed bool) {
	p := place{id, name}
	b.mu.Lock()
	defer b.mu.Unlock()
	if failed {
		b.withdrawals[p] = true
	} else {
		delete(b.withdrawals, p)
	}
	if r := b.withdrawing[p]; r != nil {
		if r.n--; r.n == 0 {
			close(r.done)
			delete(b.withdrawing, p)
		}
	}
}

// awaitWithdrawals is called by an AcquireQueued of id for name before it sends anything: it
// waits for the withdrawals of id from name in flight (or for ctx), then forgets a failed one
// (the session waits again: the key, if any, is its place). A withdrawal sent after the
// AcquireQueued's enqueue — a keep-alive's retry, read as pending and then sent, or a client's
// withdrawal still running (a call the client abandoned) — would delete the key it made: the
// waiter, told HeldBy, would wait on without a place, and a late comer be granted the lease
// it was owed. retryWithdrawals claims its withdrawals under b.mu, so an AcquireQueued either
// forgot the withdrawal first or waits for it.
func (b *Backend) awaitWithdrawals(ctx context.Context, id spi.SessionID, name string) error {
	p := place{id, name}
	for {
		b.mu.Lock()
		r := b.withdrawing[p]
		if r == nil {
			delete(b.withdrawals, p)
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		if h := b.awaiting; h != nil {
			h()
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return b.classify("acquire", ctx.Err())
		}
	}
}

// retryWithdrawals runs again the withdrawals of session id that failed (best effort: one that
// fails again stays pending). Each is claimed (begun, no longer pending) before it is sent (see
// awaitWithdrawals).
func (b *Backend) retryWithdrawals(ctx context.Context, id spi.SessionID) {
	b.mu.Lock()
	var names []string
	for p := range b.withdrawals {
		if p.id == id {
			names = append(names, p.name)
			delete(b.withdrawals, p)
			b.beginWithdrawal(p)
		}
	}
	b.mu.Unlock()
	for _, n := range names {
		if h := b.beforeRetry; h != nil {
			h(n)
		}
		_ = b.withdrawBegun(ctx, id, n) // a failure is recorded again
	}
}

// placeOf returns the create revision of the session's waiter key for name, if the backend
// learnt it.
func (b *Backend) placeOf(id spi.SessionID, name string) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rev, ok := b.places[place{id, name}]
	return rev, ok
}

// setPlace records (rev > 0) or forgets (rev 0) the session's place in name's queue.
func (b *Backend) setPlace(id spi.SessionID, name string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rev == 0 {
		delete(b.places, place{id, name})
	} else {
		b.places[place{id, name}] = rev
	}
}

// KeepAlive renews the session's lease with one LeaseKeepAliveOnce and reads what it holds
// and the members of groups with one read-only transaction.
func (b *Backend) KeepAlive(ctx context.Context, id spi.SessionID, names []string, groups []string) (spi.KeepAlive, error) {
	for _, g := range groups {
		if err := spi.ValidateName(g); err != nil {
			return spi.KeepAlive{}, err
		}
	}
	cli, err := b.check(ctx)
	if err != nil {
		return spi.KeepAlive{}, err
	}
	lease, ok := leaseOf(id)
	if !ok {
		return spi.KeepAlive{Expired: true}, nil
	}
	sent := time.Now()
	// A connection stalled for part of the call is not closed while the call waits (only once
	// it timed out, timedOut): see "Outages" in the package doc.
	ka, err := cli.KeepAliveOnce(ctx, lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		b.forget(id)
		return spi.KeepAlive{Expired: true}, nil
	case err != nil:
		b.timedOut(ctx, sent)
		return spi.KeepAlive{}, b.classify("keep-alive", err)
	case ka.TTL <= 0:
		b.forget(id)
		return spi.KeepAlive{Expired: true}, nil
	}
	cmps, then, _ := etcdtxn.Report(b.prefix, string(id))
	// One range per group while that keeps the transaction well under etcd's limit on
	// operations (--max-txn-ops, 128 by default); beyond, one range over every group.
	perGroup := len(groups) <= maxGroupRanges
	groupOps := 1
	if perGroup {
		groupOps = len(groups)
	}
	// The held index entries an earlier keep-alive found stale are deleted in this one's
	// transaction (nested drop_held transactions, after the reads: no round trip more, and the
	// report is a write only then), so that no backend that adopts the session lists them.
	drops := b.staleHeld(id)
	reserve := 0
	if len(drops) > 0 {
		reserve = len(drops) + dropHeldOps
	}
	// The lease key of each name asked about, read in the same transaction (no round trip
	// more): a name is held only while its lease key is attached to the session's lease.
	then, leaseReads := appendLeaseReads(then, b.prefix, names, maxTxnOps-len(then)-groupOps-reserve)
	for _, d := range drops {
		then = append(then, clientv3.OpTxn(etcdtxn.DropHeld(b.prefix, string(id), d.name, lease, d.tok)))
	}
	if perGroup {
		for _, g := range groups {
			then = append(then, etcdtxn.MembersRange(b.prefix, g))
		}
	} else {
		then = append(then, etcdtxn.GroupsRange(b.prefix))
	}
	r, err := cli.Txn(ctx).If(cmps...).Then(then...).Commit()
	if err != nil {
		b.timedOut(ctx, sent)
		return spi.KeepAlive{}, b.classify("keep-alive: report", err)
	}
	if !r.Succeeded {
		b.forget(id)
		return spi.KeepAlive{Expired: true}, nil
	}
	b.mu.Lock()
	s := b.sessions[id]
	if s == nil { // a session this backend did not open: adopt it
		s = &session{lease: lease, ttl: time.Duration(ka.TTL) * time.Second}
		b.sessions[id] = s
	}
	s.renewed = sent
	rem := s.remaining()
	retry := false
	for p := range b.withdrawals {
		retry = retry || p.id == id
	}
	b.mu.Unlock()
	if retry {
		b.retryWithdrawals(ctx, id)
	}

	out := spi.KeepAlive{Remaining: rem}
	b.heldOf(&out, id, lease, names, r.Responses[etcdtxn.ReportThenHeld].GetResponseRange().Kvs, leaseReads(r.Responses))
	b.dropped(id, drops)
	if len(groups) > 0 {
		out.Members = make(map[string][]spi.SessionID, len(groups))
		if perGroup {
			for i, g := range groups {
				out.Members[g] = memberIDs(r.Responses[len(then)-len(groups)+i].GetResponseRange().Kvs, wire.EtcdMembersPrefix(b.prefix, g))
			}
		} else {
			all := r.Responses[len(then)-1].GetResponseRange().Kvs
			for _, g := range groups {
				p := wire.EtcdMembersPrefix(b.prefix, g)
				var kvs []*mvccpb.KeyValue
				for _, kv := range all {
					if strings.HasPrefix(string(kv.Key), p) {
						kvs = append(kvs, kv)
					}
				}
				out.Members[g] = memberIDs(kvs, p)
			}
		}
		for _, g := range groups {
			b.groupRead(cli, id, g, r.Header.Revision, len(out.Members[g]))
		}
	}
	return out, nil
}

// maxTxnOps is etcd's default limit on the operations of a transaction (--max-txn-ops): of
// each branch, and of the branches of a nested transaction together with those of the
// transactions around it.
const maxTxnOps = 128

// appendLeaseReads appends to then the reads of the lease keys of names (whole keys: the lease
// and the create revision are what a keep-alive needs, and a keys-only read cannot carry the
// lease: etcd 3.7 (v3.7.3, the bench's embedded server) serves one from its in-memory index,
// whose entries have no lease, so every key would read as put on no lease; the values are
// owners, short), using at most room operations: one read per name when they fit, else one
// range over the lease keys from the least name's to the greatest's (every lease key at worst,
// as a keep-alive asking about more than maxGroupRanges groups reads every member key). It
// returns then and the function that picks the lease keys read out of the transaction's
// responses, by name.
func appendLeaseReads(then []clientv3.Op, prefix string, names []string, room int) ([]clientv3.Op, func([]*etcdserverpb.ResponseOp) map[string]*mvccpb.KeyValue) {
	first := len(then)
	if len(names) <= room {
		for _, n := range names {
			then = append(then, clientv3.OpGet(wire.EtcdLeaseKey(prefix, n)))
		}
		return then, func(rs []*etcdserverpb.ResponseOp) map[string]*mvccpb.KeyValue {
			m := make(map[string]*mvccpb.KeyValue, len(names))
			for i, n := range names {
				if kvs := rs[first+i].GetResponseRange().GetKvs(); len(kvs) > 0 {
					m[n] = kvs[0]
				}
			}
			return m
		}
	}
	lp := wire.EtcdLeasesPrefix(prefix)
	lo, hi := slices.Min(names), slices.Max(names)
	then = append(then, clientv3.OpGet(wire.EtcdLeaseKey(prefix, lo), clientv3.WithRange(wire.EtcdLeaseKey(prefix, hi)+"\x00")))
	return then, func(rs []*etcdserverpb.ResponseOp) map[string]*mvccpb.KeyValue {
		m := make(map[string]*mvccpb.KeyValue, len(names))
		for _, kv := range rs[first].GetResponseRange().GetKvs() {
			m[strings.TrimPrefix(string(kv.Key), lp)] = kv
		}
		return m
	}
}

// heldOf fills out.Held (and out.Corrupt) from a keep-alive's reads: the session's held index
// (held, whose create revisions are the tokens) and the lease keys of the names asked about
// (leaseKeys, by name). A name asked about is held only while its lease key is attached to
// the session's etcd lease, with the key's create revision as the token, whatever the index
// says: a lease key that was deleted, or put again on another etcd lease (etcdctl put
// --lease), is left out (taken over: the name is, or will be once that lease ends, anyone's),
// and one put again on no lease is named Corrupt (Simba never writes one; acquires honour it
// as held until someone deletes it), with one warning per key in both cases. A name of the
// index that was not asked about is listed with the index's token, unchecked (the client
// releases a lease it does not want, and the release compares the lease key's token and
// lease), unless a keep-alive found its lease key moved before: such an entry is left out,
// and the next keep-alive deletes it (staleHeld).
func (b *Backend) heldOf(out *spi.KeepAlive, id spi.SessionID, lease clientv3.LeaseID, names []string, held []*mvccpb.KeyValue, leaseKeys map[string]*mvccpb.KeyValue) {
	heldPrefix := wire.EtcdHeldPrefix(b.prefix, string(id))
	if len(held) > 0 {
		out.Held = make([]spi.Held, 0, len(held))
	}
	var indexed map[string]int64 // the index by name, made for the first name found not held
	for _, n := range names {
		kv := leaseKeys[n]
		switch {
		case kv != nil && clientv3.LeaseID(kv.Lease) == lease:
			out.Held = append(out.Held, spi.Held{Name: n, Token: kv.CreateRevision})
			continue
		case kv != nil && kv.Lease == 0:
			out.Corrupt = append(out.Corrupt, n)
		}
		if indexed == nil {
			indexed = make(map[string]int64, len(held))
			for _, h := range held {
				indexed[strings.TrimPrefix(string(h.Key), heldPrefix)] = h.CreateRevision
			}
		}
		tok, inIndex := indexed[n]
		if !inIndex {
			continue // not this session's: nothing moved
		}
		b.setMoved(id, n, tok)
		switch {
		case kv == nil:
			b.warnOnce(fmt.Sprintf("gone %s %d", wire.EtcdLeaseKey(b.prefix, n), tok), "simba: etcd: a held lease's key was deleted by something other than Simba; the session's term is revoked (taken over)",
				"name", n, "session", string(id), "token", tok)
		case kv.Lease == 0:
			b.warnOnce(fmt.Sprintf("moved %s %d", kv.Key, kv.ModRevision), "simba: etcd: a held lease's key was put again on no etcd lease by something other than Simba; the session's term is revoked (corrupt record), and the name stays held until someone deletes the key",
				"name", n, "session", string(id), "key", string(kv.Key))
		default:
			b.warnOnce(fmt.Sprintf("moved %s %d", kv.Key, kv.ModRevision), "simba: etcd: a held lease's key was put again on another etcd lease by something other than Simba; the session's term is revoked (taken over), and the name is free once that lease ends",
				"name", n, "session", string(id), "key", string(kv.Key), "lease", fmt.Sprintf("%016x", kv.Lease))
		}
	}
	// The index's names not asked about (the client sorts the names it asks about: a copy is
	// sorted only for another caller).
	asked := names
	if !slices.IsSorted(asked) {
		asked = slices.Sorted(slices.Values(names))
	}
	for _, kv := range held {
		n := strings.TrimPrefix(string(kv.Key), heldPrefix)
		if _, found := slices.BinarySearch(asked, n); !found && !b.wasMoved(id, n, kv.CreateRevision) {
			out.Held = append(out.Held, spi.Held{Name: n, Token: kv.CreateRevision})
		}
	}
}

// maxDrops bounds the stale held index entries one keep-alive deletes (the rest go in the
// next ones); dropHeldOps is the operations of a drop_held transaction (its compares): etcd
// allows a nested transaction only as many operations as its limit leaves to the transaction
// around it.
const (
	maxDrops    = 16
	dropHeldOps = 2
)

// stale is a held index entry of a session, for name and of create revision tok, whose lease
// key a keep-alive found deleted or put on another etcd lease (or none).
type stale struct {
	name string
	tok  int64
}

// staleHeld returns the stale held index entries of session id (see setMoved), at most
// maxDrops, by name.
func (b *Backend) staleHeld(id spi.SessionID) []stale {
	b.mu.Lock()
	var out []stale
	for p, tok := range b.moved {
		if p.id == id {
			out = append(out, stale{p.name, tok})
		}
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y stale) int { return strings.Compare(x.name, y.name) })
	return out[:min(len(out), maxDrops)]
}

// dropped forgets the stale held index entries of session id that a keep-alive's transaction,
// which succeeded, ran drop_held for: each is deleted, or was no longer stale (gone, or the
// name granted to the session again), unless the same keep-alive found it stale again with
// another token.
func (b *Backend) dropped(id spi.SessionID, drops []stale) {
	if len(drops) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range drops {
		if tok, ok := b.moved[place{id, d.name}]; ok && tok == d.tok {
			delete(b.moved, place{id, d.name})
		}
	}
}

// setMoved records that the held index entry of session id for name, of create revision tok,
// no longer matches its lease key: a later keep-alive that does not ask about name leaves the
// entry out rather than have the client release, at every renewal, a lease its session does
// not hold, and the next keep-alive of the session deletes the entry on the server (drop_held,
// in its transaction), for the backends that adopt the session. A grant of name to the
// session forgets it (settled).
func (b *Backend) setMoved(id spi.SessionID, name string, tok int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.moved[place{id, name}] = tok
}

// wasMoved reports whether a keep-alive found the lease key of session id's held index entry
// for name, of create revision tok, moved.
func (b *Backend) wasMoved(id spi.SessionID, name string, tok int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.moved[place{id, name}]
	return ok && t == tok
}

// memberIDs turns member keys under prefix into sorted session ids.
func memberIDs(kvs []*mvccpb.KeyValue, prefix string) []spi.SessionID {
	ids := make([]spi.SessionID, 0, len(kvs))
	for _, kv := range kvs {
		ids = append(ids, spi.SessionID(strings.TrimPrefix(string(kv.Key), prefix)))
	}
	slices.Sort(ids)
	return ids
}

// CloseSession revokes the session's lease: etcd deletes its session key, leases and
// memberships in one revision, which the watches of every client report.
func (b *Backend) CloseSession(ctx context.Context, id spi.SessionID) error {
	cli, err := b.check(ctx)
	if err != nil {
		return err
	}
	lease, ok := leaseOf(id)
	if !ok {
		return nil
	}
	_, err = cli.Revoke(ctx, lease)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return b.classify("close session", err)
	}
	b.forget(id)
	return nil
}

// Acquire runs the acquire transaction (spec/etcd.yaml): create the lease key and the held
// index on the session's lease if the session key exists, the lease key does not and no one
// waits for the name; otherwise read both and the oldest waiter to answer. A free lease is
// reserved for its oldest waiter (HeldBy that waiter); when that is the caller, Acquire runs
// take, as AcquireQueued does. Acquire never adds a waiter.
func (b *Backend) Acquire(ctx context.Context, id spi.SessionID, name string) (a spi.Acquire, err error) {
	defer func() { b.settled(id, name, a, err) }()
	return b.dropping(func() (spi.Acquire, error) { return b.acquireOnce(ctx, id, name) })
}

// dropping runs an acquire again after it dropped a foreign waiter key (errForeignWaiter), a
// few times; then, still meeting one, it fails as unavailable (the client retries).
func (b *Backend) dropping(f func() (spi.Acquire, error)) (spi.Acquire, error) {
	for range maxForeignDropped {
		a, err := f()
		if !errors.Is(err, errForeignWaiter) {
			return a, err
		}
	}
	return spi.Acquire{}, spi.Unavailable("acquire", fmt.Errorf("etcd: more than %d foreign waiter keys met in one acquire", maxForeignDropped))
}

func (b *Backend) acquireOnce(ctx context.Context, id spi.SessionID, name string) (spi.Acquire, error) {
	cli, s, err := b.begin(ctx, id, name)
	if err != nil {
		return spi.Acquire{}, err
	}
	if s == nil {
		return spi.Acquire{Kind: spi.SessionExpired}, nil
	}
	a, rev, err := b.acquire(ctx, cli, id, s, name)
	if err != nil || rev == 0 {
		return a, err
	}
	a, _, err = b.take(ctx, cli, id, s, name, rev)
	return a, err
}

// settled ends session id's wait for name when an acquire's reply a is a grant (or the session
// expired): answer began it on a HeldBy.
func (b *Backend) settled(id spi.SessionID, name string, a spi.Acquire, err error) {
	switch {
	case err != nil:
	case a.Kind == spi.Granted:
		b.hints.stopWaiting(id, name)
		b.mu.Lock()
		delete(b.moved, place{id, name})
		b.mu.Unlock()
	case a.Kind == spi.SessionExpired:
		b.hints.dropSession(id)
	}
}

// acquire runs the acquire transaction once. A non-zero rev means the lease is free and the
// caller is its oldest waiter, with that create revision: the caller's turn to take it.
func (b *Backend) acquire(ctx context.Context, cli *clientv3.Client, id spi.SessionID, s *session, name string) (a spi.Acquire, rev int64, err error) {
	cmps, then, els := etcdtxn.Acquire(b.prefix, string(id), name, s.owner, s.lease)
	r, err := cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		return spi.Acquire{}, 0, b.classify("acquire", err)
	}
	if r.Succeeded {
		// Both puts carry the transaction's revision: the lease key's create revision.
		return spi.Acquire{Kind: spi.Granted, Token: r.Header.Revision, Remaining: s.remaining()}, 0, nil
	}
	resp := func(i int) []*mvccpb.KeyValue { return r.Responses[i].GetResponseRange().Kvs }
	return b.answer(ctx, cli, id, s, name, r.Header.Revision, len(resp(etcdtxn.AcquireElseSession)) > 0, resp(etcdtxn.AcquireElseLease), resp(etcdtxn.AcquireElseQueue))
}

// answer reads the reply of an acquire that did not take the lease from the reads of revision
// read: the session key, the lease key and the oldest waiter key. A non-zero rev means the
// lease is free and the caller is the oldest waiter, with that create revision. A HeldBy reply
// makes the caller wait for name (see Hints). A lease key on no etcd lease (written by
// something other than Simba) is honoured as held, with a warning: the name is free again once
// someone deletes it. An oldest waiter key that is not on the etcd lease of the session its
// name gives (on none, or on another) is no waiter's: it would reserve the lease for nobody for
// as long as it stays, so answer drops it, with a warning, and returns errForeignWaiter (run
// the acquire again). A value that is not an owner string is reported as ForeignOwner.
func (b *Backend) answer(ctx context.Context, cli *clientv3.Client, id spi.SessionID, s *session, name string, read int64, live bool, lease, first []*mvccpb.KeyValue) (a spi.Acquire, rev int64, err error) {
	if !live {
		b.forget(id)
		return spi.Acquire{Kind: spi.SessionExpired}, 0, nil
	}
	if len(lease) > 0 {
		kv := lease[0]
		if clientv3.LeaseID(kv.Lease) == s.lease {
			return spi.Acquire{Kind: spi.Granted, Token: kv.CreateRevision, Remaining: s.remaining()}, 0, nil
		}
		if kv.Lease == 0 {
			b.warnOnce(string(kv.Key), "simba: etcd: a lease key on no etcd lease, which Simba never writes; the name stays held until someone deletes it",
				"name", name, "key", string(kv.Key))
		}
		b.waitFor(cli, id, name, s.ttl, read, kv)
		return spi.Acquire{Kind: spi.HeldBy, Holder: sessionID(clientv3.LeaseID(kv.Lease)), HolderOwner: ownerOf(kv.Value), RemainingUnknown: true}, 0, nil
	}
	if len(first) == 0 {
		// Unreachable: the guard failed on a live session and a free lease, so a waiter existed.
		return spi.Acquire{}, 0, spi.Unavailable("acquire", errors.New("etcd: waiter key vanished inside a transaction"))
	}
	kv := first[0]
	w := spi.SessionID(strings.TrimPrefix(string(kv.Key), wire.EtcdQueuePrefix(b.prefix, name)))
	if kv.Lease == 0 || sessionID(clientv3.LeaseID(kv.Lease)) != w {
		b.warnOnce(string(kv.Key), "simba: etcd: dropping a waiter key that is not on the etcd lease of the session its name gives; Simba never writes one, and it would keep the lease from everyone",
			"name", name, "key", string(kv.Key))
		cmps, then, _ := etcdtxn.Withdraw(b.prefix, string(w), name, clientv3.LeaseID(kv.Lease))
		if _, err := cli.Txn(ctx).If(cmps...).Then(then...).Commit(); err != nil {
			return spi.Acquire{}, 0, b.classify("acquire: drop a foreign waiter key", err)
		}
		return spi.Acquire{}, 0, errForeignWaiter
	}
	if w == id {
		return spi.Acquire{}, kv.CreateRevision, nil
	}
	// The free lease is reserved for the oldest waiter, whose key's deletion (a grant, a
	// withdrawal, its session's end) is a released hint.
	b.waitFor(cli, id, name, s.ttl, read, kv)
	return spi.Acquire{Kind: spi.HeldBy, Holder: w, HolderOwner: ownerOf(kv.Value), RemainingUnknown: true}, 0, nil
}

// ownerOf is the owner a lease or waiter key's value gives: ForeignOwner for a value that is not
// an owner string.
func ownerOf(v []byte) string {
	if wire.ValidateOwner(string(v)) != nil {
		return ForeignOwner
	}
	return string(v)
}

// take runs the take transaction for the caller's waiter key of create revision rev. gone
// reports that the key no longer has that revision (it was withdrawn or deleted by hand): the
// caller is no longer a waiter, and the reply is what it would be for a session outside the
// queue.
func (b *Backend) take(ctx context.Context, cli *clientv3.Client, id spi.SessionID, s *session, name string, rev int64) (a spi.Acquire, gone bool, err error) {
	cmps, then, els := etcdtxn.Take(b.prefix, string(id), name, s.owner, s.lease, rev)
	r, err := cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		// The outcome is unknown: enqueue again next time (it keeps an existing key's place).
		b.setPlace(id, name, 0)
		return spi.Acquire{}, false, b.classify("acquire: take", err)
	}
	if r.Succeeded {
		b.setPlace(id, name, 0)
		return spi.Acquire{Kind: spi.Granted, Token: r.Header.Revision, Remaining: s.remaining()}, false, nil
	}
	resp := func(i int) []*mvccpb.KeyValue { return r.Responses[i].GetResponseRange().Kvs }
	mine := resp(etcdtxn.TakeElseWaiter)
	gone = len(mine) == 0 || mine[0].CreateRevision != rev
	if gone {
		b.setPlace(id, name, 0)
	}
	a, first, err := b.answer(ctx, cli, id, s, name, r.Header.Revision, len(resp(etcdtxn.TakeElseSession)) > 0, resp(etcdtxn.TakeElseLease), resp(etcdtxn.TakeElseQueue))
	if err == nil && first != 0 {
		// Only a waiter key with another revision than rev can be the oldest and the caller's.
		return spi.Acquire{}, true, spi.Unavailable("acquire: take", errors.New("etcd: waiter key replaced inside a transaction"))
	}
	switch {
	case err != nil:
	case a.Kind == spi.Granted: // a re-acquire: a holder waits for nothing
		b.setPlace(id, name, 0)
		if !gone {
			err = b.Withdraw(ctx, id, name)
		}
	case !gone: // still waiting, in the place acquire may have just found
		b.setPlace(id, name, rev)
	}
	return a, gone, err
}

// AcquireQueued is Acquire for a session that waits for name (spi.Queuer): it takes the lease
// if the caller may, and otherwise makes it a waiter (enqueue), keeping its place. A session
// whose place the backend knows runs take; otherwise acquire_queued, which is acquire with
// enqueue nested in its else branch. Either is one transaction; a second, take, runs only when
// the lease is free and the caller turns out to be the oldest waiter already.
func (b *Backend) AcquireQueued(ctx context.Context, id spi.SessionID, name string) (a spi.Acquire, err error) {
	defer func() { b.settled(id, name, a, err) }()
	return b.dropping(func() (spi.Acquire, error) { return b.acquireQueuedOnce(ctx, id, name) })
}

func (b *Backend) acquireQueuedOnce(ctx context.Context, id spi.SessionID, name string) (spi.Acquire, error) {
	// Waiting again: the key, if a failed withdrawal left one, is its place; a withdrawal of it
	// in flight is let end first, so that it cannot delete the key this call makes.
	if err := b.awaitWithdrawals(ctx, id, name); err != nil {
		return spi.Acquire{}, err
	}
	cli, s, err := b.begin(ctx, id, name)
	if err != nil {
		return spi.Acquire{}, err
	}
	if s == nil {
		return spi.Acquire{Kind: spi.SessionExpired}, nil
	}
	if rev, ok := b.placeOf(id, name); ok {
		a, gone, err := b.take(ctx, cli, id, s, name, rev)
		if err != nil || !gone || a.Kind != spi.HeldBy {
			return a, err
		}
		// The session is no longer a waiter (its key was withdrawn or deleted by hand):
		// register it again, as on the first attempt.
		cmps, then, _ := etcdtxn.Enqueue(b.prefix, string(id), name, s.owner, s.lease)
		r, err := cli.Txn(ctx).If(cmps...).Then(then...).Commit()
		if err != nil {
			return spi.Acquire{}, b.classify("acquire: enqueue", err)
		}
		return b.enqueued(ctx, cli, id, s, name, r.Succeeded, r.Header.Revision, r.Responses)
	}
	cmps, then, els := etcdtxn.AcquireQueued(b.prefix, string(id), name, s.owner, s.lease)
	r, err := cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		return spi.Acquire{}, b.classify("acquire", err)
	}
	if r.Succeeded {
		return spi.Acquire{Kind: spi.Granted, Token: r.Header.Revision, Remaining: s.remaining()}, nil
	}
	n := r.Responses[etcdtxn.AcquireQueuedElseEnqueue].GetResponseTxn()
	return b.enqueued(ctx, cli, id, s, name, n.GetSucceeded(), r.Header.Revision, n.GetResponses())
}

// enqueued answers from the responses of an enqueue transaction (run alone or nested in
// acquire_queued) of revision rev. Registered: the session is a waiter for name, in the
// place the backend now remembers, and the reply is read in the same revision; when the
// lease is free and the caller is the oldest waiter, it runs take. Not registered: the session
// expired or holds the lease (a re-acquire), which acquire tells apart.
func (b *Backend) enqueued(ctx context.Context, cli *clientv3.Client, id spi.SessionID, s *session, name string, registered bool, rev int64, rs []*etcdserverpb.ResponseOp) (spi.Acquire, error) {
	if !registered {
		b.setPlace(id, name, 0)
		a, first, err := b.acquire(ctx, cli, id, s, name)
		if err != nil || first == 0 {
			return a, err
		}
		a, _, err = b.take(ctx, cli, id, s, name, first) // freed meanwhile, and the caller first
		return a, err
	}
	if len(rs) <= etcdtxn.EnqueueThenQueue {
		return spi.Acquire{}, spi.Unavailable("acquire: enqueue", errors.New("etcd: short transaction response"))
	}
	read, place := rev, rev
	if prev := rs[etcdtxn.EnqueueThenWaiter].GetResponsePut().GetPrevKv(); prev != nil {
		place = prev.CreateRevision // registered before: the key keeps its place
	}
	b.setPlace(id, name, place)
	resp := func(i int) []*mvccpb.KeyValue { return rs[i].GetResponseRange().Kvs }
	a, first, err := b.answer(ctx, cli, id, s, name, read, true, resp(etcdtxn.EnqueueThenLease), resp(etcdtxn.EnqueueThenQueue))
	if err != nil || first == 0 {
		return a, err
	}
	a, _, err = b.take(ctx, cli, id, s, name, first)
	return a, err
}

// EndWait implements spi.WaitEnder: id no longer waits for name (a TryLock that found it held
// gave up). It sends no request: the backend stops hinting the name to the session, and ends
// the name's watch once no session of the backend waits for it.
func (b *Backend) EndWait(id spi.SessionID, name string) {
	b.hints.stopWaiting(id, name)
}

// Withdraw runs the withdraw transaction: delete the session's waiter key for name, if it
// has one (spi.Queuer).
func (b *Backend) Withdraw(ctx context.Context, id spi.SessionID, name string) error {
	if err := spi.ValidateName(name); err != nil {
		return err
	}
	cli, err := b.check(ctx)
	if err != nil {
		return err
	}
	lease, ok := leaseOf(id)
	if !ok {
		return nil
	}
	b.mu.Lock()
	b.beginWithdrawal(place{id, name})
	b.mu.Unlock()
	return b.withdrawSend(ctx, cli, id, name, lease)
}

// withdrawBegun is Withdraw of a withdrawal begun (beginWithdrawal), which it ends.
func (b *Backend) withdrawBegun(ctx context.Context, id spi.SessionID, name string) error {
	cli, err := b.check(ctx)
	if err != nil {
		b.endWithdrawal(id, name, true)
		return err
	}
	lease, _ := leaseOf(id) // a session id this backend retried for: one of its own
	return b.withdrawSend(ctx, cli, id, name, lease)
}

// withdrawSend sends the withdraw transaction of a withdrawal begun, which it ends (an
// AcquireQueued waiting for it goes on then, after the place and hint are dropped here).
func (b *Backend) withdrawSend(ctx context.Context, cli *clientv3.Client, id spi.SessionID, name string, lease clientv3.LeaseID) error {
	b.setPlace(id, name, 0)
	b.hints.stopWaiting(id, name)
	cmps, then, _ := etcdtxn.Withdraw(b.prefix, string(id), name, lease)
	if _, err := cli.Txn(ctx).If(cmps...).Then(then...).Commit(); err != nil {
		b.endWithdrawal(id, name, true)
		return b.classify("withdraw", err)
	}
	b.endWithdrawal(id, name, false)
	return nil
}

// Release runs the release transaction: delete the lease key and the held index if the lease
// key carries token as its create revision and is attached to the session's lease.
func (b *Backend) Release(ctx context.Context, id spi.SessionID, name string, token int64) error {
	if err := spi.ValidateName(name); err != nil {
		return err
	}
	cli, err := b.check(ctx)
	if err != nil {
		return err
	}
	lease, ok := leaseOf(id)
	if !ok {
		return nil
	}
	cmps, then, _ := etcdtxn.Release(b.prefix, string(id), name, lease, token)
	if _, err := cli.Txn(ctx).If(cmps...).Then(then...).Commit(); err != nil {
		return b.classify("release", err)
	}
	return nil
}

// Join runs the join transaction: put the member key on the session's lease if the session
// key exists.
func (b *Backend) Join(ctx context.Context, id spi.SessionID, group string) (spi.Status, error) {
	cli, s, err := b.begin(ctx, id, group)
	if err != nil {
		return 0, err
	}
	if s == nil {
		return spi.Expired, nil
	}
	// The group is used from the Join on, so that its watch starts as soon as may be.
	b.joining(cli, id, group)
	cmps, then, _ := etcdtxn.Join(b.prefix, string(id), group, s.owner, s.lease)
	r, err := cli.Txn(ctx).If(cmps...).Then(then...).Commit()
	if err != nil {
		b.joinEnded(id, group)
		return 0, b.classify("join", err)
	}
	if !r.Succeeded {
		b.forget(id)
		return spi.Expired, nil
	}
	return spi.OK, nil
}

// Leave runs the leave transaction: delete the member key if the session key exists.
func (b *Backend) Leave(ctx context.Context, id spi.SessionID, group string) (spi.Status, error) {
	if err := spi.ValidateName(group); err != nil {
		return 0, err
	}
	cli, err := b.check(ctx)
	if err != nil {
		return 0, err
	}
	if _, ok := leaseOf(id); !ok {
		return spi.Expired, nil
	}
	cmps, then, _ := etcdtxn.Leave(b.prefix, string(id), group)
	r, err := cli.Txn(ctx).If(cmps...).Then(then...).Commit()
	if err != nil {
		return 0, b.classify("leave", err)
	}
	if !r.Succeeded {
		b.forget(id)
		return spi.Expired, nil
	}
	b.joinEnded(id, group)
	return spi.OK, nil
}

// Members reads the member keys of group (their leases are live: etcd deletes them with it).
func (b *Backend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	if err := spi.ValidateName(group); err != nil {
		return nil, err
	}
	cli, err := b.check(ctx)
	if err != nil {
		return nil, err
	}
	p := wire.EtcdMembersPrefix(b.prefix, group)
	sent := time.Now()
	r, err := cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		// A Members that timed out is evidence of a silent link as a session call's is: the
		// client probes a backend whose session calls fail with Members, and the probe must
		// not wait on a dead connection that only a session call's timeout would close.
		b.timedOut(ctx, sent)
		return nil, b.classify("members", err)
	}
	b.groupRead(cli, "", group, r.Header.Revision, len(r.Kvs))
	return memberIDs(r.Kvs, p), nil
}

// classify wraps an etcd client error for the SPI: authentication and permission failures,
// TLS failures and invalid requests are permanent; the rest (timeouts, lost leaders,
// unreachable members) retryable.
func (b *Backend) classify(op string, err error) error {
	return classifyAs(op+" ("+b.endpoints+")", b.user(), err)
}

// user is the user name the backend authenticates as ("" for none, or a client the caller
// made).
func (b *Backend) user() string {
	if b.cfg != nil {
		return b.cfg.Username
	}
	return ""
}

func classify(op string, err error) error { return classifyAs(op, "", err) }

// classifyAs is classify for a client that authenticates as user ("": none, or unknown).
// Refused credentials or permissions match spi.ErrAccessDenied (accessDenied).
func classifyAs(op, user string, err error) error {
	switch {
	case spi.IsTLSError(err):
		return spi.TLSFailure("etcd: "+op, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("etcd: %s: %w", op, err)
	case errors.Is(err, context.DeadlineExceeded):
		return spi.Unavailable("etcd: "+op, err)
	}
	if denied := accessDenied(op, user, err); denied != nil {
		return denied
	}
	switch {
	case errors.Is(err, rpctypes.ErrAuthNotEnabled), errors.Is(err, rpctypes.ErrTooManyOps):
		return spi.AsPermanent(fmt.Errorf("etcd: %s: %w", op, err))
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return spi.AsPermanent(fmt.Errorf("etcd: %s: %w", op, err))
	}
	return spi.Unavailable("etcd: "+op, err)
}

// unlessUnreachable returns, for a call that waits for a connection (gRPC waits for one until
// the call's deadline, or for ever without one), a context that also ends as soon as no member
// can be reached (connWatch.watchRefusals), and the function that releases it, which the call
// defers. On a client the caller owns it returns ctx.
func (b *Backend) unlessUnreachable(ctx context.Context) (context.Context, func()) {
	if b.conns == nil {
		return ctx, func() {}
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := b.conns.watchRefusals(func(err error) { cancel(&unreachableError{err}) })
	return cctx, func() {
		stop()
		cancel(nil)
	}
}

// unreachable returns the error of call op when an *unreachableError ended cctx (made by
// unlessUnreachable from ctx): a TLS failure (permanent) when the last dial found a member
// that does not speak TLS, else unavailable; nil if ctx ended, or neither did.
func unreachable(ctx, cctx context.Context, op string) error {
	var u *unreachableError
	switch {
	case ctx.Err() != nil || !errors.As(context.Cause(cctx), &u):
		return nil
	case errors.Is(u, spi.ErrTLS):
		return spi.TLSFailure(op, u)
	default:
		return spi.Unavailable(op, u)
	}
}

// unreachableError is why a call that waited for a connection ended: no member could be
// reached (err: the last dial's error).
type unreachableError struct{ err error }

func (e *unreachableError) Error() string {
	return "no endpoint could be reached (last connection attempt: " + e.err.Error() + ")"
}

func (e *unreachableError) Unwrap() error { return e.err }

// accessDenied is classify's answer for a refusal of the client's credentials (a wrong
// password, an unknown user, none given where authentication is on, a token the server no
// longer takes: authentication) or of a permission (a role without read or write on the
// backend's key prefix: privilege): a permanent error matching spi.ErrAccessDenied that says
// which, for which user, and what to do (op names the endpoints). It returns nil for any
// other error.
func accessDenied(op, user string, err error) error {
	who := "without credentials (the DSN gives no user:password)"
	if user != "" {
		who = fmt.Sprintf("for user %q", user)
	}
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrInvalidAuthToken),
		errors.Is(err, rpctypes.ErrUserEmpty), status.Code(err) == codes.Unauthenticated:
		return spi.AccessDenied("etcd: "+op, fmt.Sprintf("authentication refused %s: fix the DSN's user:password (etcd://user:password@host), or the user (etcdctl user add, user passwd)", who), err)
	case errors.Is(err, rpctypes.ErrPermissionDenied), status.Code(err) == codes.PermissionDenied:
		return spi.AccessDenied("etcd: "+op, fmt.Sprintf("privilege refused %s: its roles lack read and write on the backend's key prefix: grant a role readwrite on it (etcdctl role grant-permission --prefix=true ROLE readwrite PREFIX, then user grant-role)", who), err)
	}
	return nil
}

package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/luascripts"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/adoptlog"
	"github.com/simba-go/simba/internal/foreign"
	"github.com/simba-go/simba/internal/printable"
	"github.com/simba-go/simba/internal/silent"
	"github.com/simba-go/simba/spi"
)

// MaxOwnerLen bounds the owner string of a session, in bytes (wire.MaxOwnerLen, the same on
// every backend).
const MaxOwnerLen = wire.MaxOwnerLen

// Option configures a Backend.
type Option func(*config) error

type config struct {
	route       *bool
	waitN       int
	waitTimeout time.Duration
	logger      *slog.Logger
	strict      bool
	dropSilent  bool
}

// WithDropSilent gives a client of your own, passed to New, what a client Open makes has
// against a silent link (see the package doc, Outages): New adds a hook to it (AddHook; on a
// *redis.ClusterClient, to every node client it makes from then on, OnNewNode) that notes when
// each connection it dials last read and wrote, and closes the connections silent since a
// command began when that command runs out of time, so that go-redis dials new ones after the
// link heals instead of handing out, one call each, the connections the outage silenced. Pass
// it to a client that has not dialled yet: connections dialled before New are left as they are.
// The hook acts on every command of the client, yours too (a command of yours that runs out
// of time closes the silent connections as well, pub/sub ones included, which go-redis then
// reconnects; so does one of the backend's, and a blocking command of yours, BLPOP or XREAD
// BLOCK, that has waited without a byte since before that command began fails with it: keep
// those on another client), and stays on it after the backend's Close, which leaves the client open. Without it a client of your own is left as it
// is: after a burst of calls that left its pool several connections, blackholes of 0.2–1.2 s
// at TTL 3 s lost the session in 10 of 10 trials (0 of 10 with it).
func WithDropSilent() Option {
	return func(c *config) error {
		c.dropSilent = true
		return nil
	}
}

// WithRouteBySlot forces routeBySlot on or off. By default it is on exactly when the client is
// a *redis.ClusterClient. Turn it on for a client that reaches a Redis Cluster some other way (a
// cluster-aware proxy): every script call then stays inside one hash slot. Turning it off for a
// *redis.ClusterClient is refused (the combined standalone scripts span several slots).
func WithRouteBySlot(on bool) Option {
	return func(c *config) error {
		c.route = &on
		return nil
	}
}

// WithWaitReplicas makes every grant (an Acquire answered Granted) and every keep-alive wait,
// with Redis WAIT, until n replicas of the master that wrote it have acknowledged the write, for
// at most timeout. The WAIT is pipelined behind the script on the same connection, so it adds
// no round trip, only the replication delay. If fewer than n replicas acknowledge in time, the
// call fails with a retryable error (matching spi.ErrUnavailable): the grant or renewal happened
// on the master but is not reported, so the client never acts on it (the engine retries; a
// re-acquire by the holder is idempotent).
//
// What it buys: a grant or renewal the client was told about is on n replicas, so after a
// failover to one of them (Sentinel or Cluster promote a replica) the new master still has the
// lease held by the session with the same token and an expiry no earlier than the client
// believes; no second holder can be granted the lease, and no later grant reuses its token.
// Choose n so that every replica that can be promoted is among the acknowledging ones (with one
// replica per master, n = 1). Releases and joins do not wait: losing one in a failover costs
// availability (a lease stays held until its expiry), never safety. Session opens wait too:
// a session opened on a master short of replicas could never be renewed, and its open's
// success told the client the backend was reachable again once per session lost. The client's
// outage probe (Members of wire.ProbeGroup) also fails while a master (on a Cluster, any
// master) has fewer than n replicas that acknowledge a WAIT within the timeout, so a WAIT
// shortfall is one outage in the client's log, from the first failure until a replica
// rejoins, with one "simba backend reachable again" at its end.
//
// Without it, replication is asynchronous and a failover can lose the last writes the old
// master acknowledged: a grant (the new master has the lease free or held by the previous
// holder, so another session is granted it while the client still believes it holds it: two
// holders), a keep-alive (the lease's expiry on the new master is earlier than the client's
// deadline: again two holders for a while), or a release. A lost grant also loses its token:
// each grant writes max(token + 1, the master's TIME in µs), so the next grant on the new
// master hands out a greater token as long as the new master's clock is past the lost grant's
// (hosts in sync: the lost token is at most a failover's time old); with a new master's clock
// behind the old one's by more than that, it can hand out the same token again: two tenures
// with one token, which a fenced resource cannot tell apart. Fencing then protects nothing
// between those two holders; it still rejects every older token.
//
// The price is availability: while fewer than n replicas of a master are connected, every grant
// and renewal of the leases and sessions on it fails, and sessions there expire. With one
// replica per master that is the case right after a failover, until a replica (say, the old
// master restarted) rejoins the new master.
//
// WAIT is not a consensus protocol: a replica that acknowledged can still lose the write if it
// crashes too, and a failover may promote a replica that did not acknowledge unless n covers
// them all. n ≤ 0 turns the option off.
//
// The timeout bounds each WAIT. Zero (what a DSN without wait_timeout gives) is the default,
// which always fits: min(DefaultWaitTimeout, TTL/6, half the time left to the call's deadline),
// per call, where TTL is the session's (for an open) or the shortest this backend opened, so a
// client's grants and renewals (whose call timeout is its renewal interval, at most TTL/3) keep
// at least half of it for the script and the reply whatever its TTL and WithRenewEvery; it is
// at least 1 ms. An explicit timeout is used as given, in whole milliseconds: it must be at
// least 1 ms (Redis reads WAIT n 0 as "wait until n replicas acknowledge", so a WAIT that falls
// short would hold its call until its deadline) and should be well below the client's read
// timeout (go-redis: 5 s by default) and the engine's call timeout (the renewal interval),
// since the WAIT's time is part of each grant's and renewal's: one of at least TTL/3 (the
// longest renewal interval) is refused by simba.New and OpenSession (see CheckTTL), and one
// of at least the client's renewal interval (simba.WithRenewEvery) by simba.New (see
// CheckRenewal), each with an error matching spi.ErrInvalidOption. A negative timeout, or one
// in (0, 1 ms), is refused here the same way.
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(c *config) error {
		if n > 0 && (timeout < 0 || timeout > 0 && timeout < time.Millisecond) {
			return fmt.Errorf("%w: redis: WithWaitReplicas(%d, %v): the timeout must be 0 (the default) or at least 1ms: Redis counts WAIT's timeout in whole milliseconds, and WAIT %d 0 waits until the call's deadline",
				spi.ErrInvalidOption, n, timeout, n)
		}
		c.waitN, c.waitTimeout = max(n, 0), timeout
		return nil
	}
}

// DefaultWaitTimeout bounds the default WAIT timeout (WithWaitReplicas with a zero timeout, a
// DSN with wait_replicas and no wait_timeout): min(DefaultWaitTimeout, TTL/6, half the call's
// time left).
const DefaultWaitTimeout = time.Second

// Backend is the Redis implementation of the Simba SPI (spi.Backend, spi.Hinter,
// spi.Inspector). It is safe for concurrent use.
type Backend struct {
	c goredis.UniversalClient
	// logSink is where log writes when New was given no WithLogger (nil otherwise): see
	// AdoptLogger.
	logSink *adoptlog.Sink
	// deadlines: c reads and writes with a call's ctx deadline (ContextTimeoutEnabled); see
	// bounded.
	deadlines bool
	cc        *goredis.ClusterClient // set when c is a Cluster client
	// spare keeps a connection of c's pool for keep-alives (keepAliveConn).
	spare keepAliveConn
	owned bool // Close closes c
	// dials records the last failed dial of a client Open made, or one passed to New
	// WithDropSilent (nil for any other client passed to New, which the backend adds no hook
	// to), for fail's message, and drops its silent connections.
	dials   *lastDial
	cluster bool // routeBySlot
	waitN   int
	waitTO  time.Duration // WithWaitReplicas's timeout; 0: the default (waitMS)
	closed  atomic.Bool

	log *slog.Logger
	// undropped is the warning, once, for a client of the user's own passed to New without
	// WithDropSilent.
	undropped sync.Once
	strict    bool         // WithStrictDurability
	durCheck  settledCheck // the durability check (its verdict in strict mode)
	authCheck settledCheck // the password check (checkPassword)

	mu       sync.Mutex
	sessions map[spi.SessionID]*session // routeBySlot only

	// sessKeys are the keys of the session whose acquire or release came last (sessionKeys):
	// a client makes its calls on one session, so its keys are built once, not on every call.
	sessKeys atomic.Pointer[sessionKeys]

	hub hub

	// queued are the names each session may be a waiter for, which CloseSession withdraws
	// (see waitSet).
	queued waitSet

	// withdrawing are the Withdraws in flight, which an AcquireQueued of the same session and
	// name waits for (see withdrawals).
	withdrawing withdrawals

	// withdrawHooks are test hooks (zero outside tests).
	withdrawHooks withdrawHooks

	foreign *foreign.Filter // skips and reports foreign group members

	// tlsd is the TLS dialer of a client OpenConfig made from a TLS DSN (else nil): bounded
	// tells it each call's time (see tlsDialer.probeDelay).
	tlsd *tlsDialer

	// newID makes the id of a new session (nil: newSessionID); tests set it to open a session
	// whose keys fall in a slot they chose.
	newID func() (spi.SessionID, error)

	// kaFailed: the last keep-alive failed, so the way back from the server may be broken
	// while the way there works (a one-way partition): the next keep-alive proves a round trip
	// first (KeepAlive).
	kaFailed atomic.Bool

	// foreignWarned is when each lease found written over by another type was last warned
	// about (warnForeignLeases): a key left so is met by every keep-alive that names it, for as
	// long as the client retries its acquire.
	foreignMu     sync.Mutex
	foreignWarned map[string]time.Time
}

// foreignWarnEvery is how often a lease key that stays of another type is warned about again;
// the keep-alives in between log it at DEBUG.
const foreignWarnEvery = time.Minute

// warnForeignLeases logs the leases a keep-alive renewed without, their keys holding another
// type than a hash: at WARN for a name not warned about in the last foreignWarnEvery, else at
// DEBUG. An election or a partition whose key stays so retries its acquire once per renewal
// interval and each keep-alive meets the key again: undamped, that was a WARN line per
// keep-alive for as long as the key stayed.
func (b *Backend) warnForeignLeases(lost []string, err error) {
	b.log.Log(context.Background(), b.foreignLevel("", lost), "simba: redis: a lease key holds another type than a hash (written over by something else): the lease is lost, the session and its other leases renewed without it; the key needs an operator",
		"leases", lost, "err", err.Error())
}

// warnForeignGroups logs the groups a keep-alive renewed the session without, their keys
// holding another type than a sorted set, damped as warnForeignLeases damps leases.
func (b *Backend) warnForeignGroups(lost []string, err error) {
	b.log.Log(context.Background(), b.foreignLevel("group ", lost), "simba: redis: a group key holds another type than a sorted set (written over by something else): the session and its leases renewed without it, the group's view left as it was; the key needs an operator",
		"groups", lost, "err", err.Error())
}

// foreignLevel is the level of a line about the foreign keys of names (kind prefixes each in
// foreignWarned, so that a lease and a group of one name are told apart): WARN if one of them
// was not warned about in the last foreignWarnEvery (it is then marked warned), else DEBUG.
func (b *Backend) foreignLevel(kind string, names []string) slog.Level {
	now := time.Now()
	level := slog.LevelDebug
	b.foreignMu.Lock()
	defer b.foreignMu.Unlock()
	if b.foreignWarned == nil || len(b.foreignWarned) > 1024 {
		b.foreignWarned = map[string]time.Time{}
	}
	for _, n := range names {
		if at, ok := b.foreignWarned[kind+n]; !ok || now.Sub(at) >= foreignWarnEvery {
			b.foreignWarned[kind+n] = now
			level = slog.LevelWarn
		}
	}
	return level
}

// settledCheck is a check of the server that the first OpenSession runs until it has a
// verdict (the durability check, the password check): a call that could not reach the server
// leaves it for the next one. Calls are serialised.
type settledCheck struct {
	mu   sync.Mutex
	done bool
	err  error
}

// run returns the check's verdict, running check first while there is none: check says
// whether its error is the verdict (settled) or this call's alone.
func (c *settledCheck) run(check func() (settled bool, err error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return c.err
	}
	settled, err := check()
	if settled {
		c.done, c.err = true, err
	}
	return err
}

// session is what a routeBySlot backend remembers of a session it opened: the owner and expiry
// the Cluster scripts take from the client, and the names it acquired and groups it joined, for
// CloseSession (the session's sets are not maintained in Cluster mode).
type session struct {
	owner   string
	expires int64 // Redis TIME epoch ms, from the latest successful session renewal
	expired bool  // a keep-alive found the session gone: it never comes back
	// leases are the names acquired for the session and groups the groups it joined, each
	// recorded when its acquire or join is sent (see trackedSet).
	leases, groups trackedSet
}

var (
	_ spi.Backend        = (*Backend)(nil)
	_ spi.Hinter         = (*Backend)(nil)
	_ spi.Inspector      = (*Backend)(nil)
	_ spi.LeaseInspector = (*Backend)(nil)
	_ spi.Queuer         = (*Backend)(nil)
	_ spi.TTLChecker     = (*Backend)(nil)
	_ spi.RenewalChecker = (*Backend)(nil)
)

// New returns a backend on c: a *redis.Client (standalone, or Sentinel failover from
// redis.NewFailoverClient), a *redis.ClusterClient (routeBySlot is then on) or any other
// redis.UniversalClient. New does no I/O: the server's durability settings are checked at the
// first OpenSession (see CheckDurability). Close does not close c. Pass WithDropSilent to give
// c what a client Open makes has against a silent link (see the package doc, Outages).
func New(c goredis.UniversalClient, opts ...Option) (*Backend, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: redis: nil client", spi.ErrInvalidOption)
	}
	var cfg config
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	var sink *adoptlog.Sink
	if cfg.logger == nil { // no WithLogger: slog.Default() until a client hands its own (AdoptLogger)
		cfg.logger, sink = adoptlog.New()
	}
	b := &Backend{c: c, waitN: cfg.waitN, waitTO: cfg.waitTimeout, sessions: map[spi.SessionID]*session{},
		foreign: foreign.New(cfg.logger, "redis"), log: cfg.logger, logSink: sink, strict: cfg.strict}
	b.cc, b.cluster = c.(*goredis.ClusterClient)
	b.deadlines = honoursDeadlines(c)
	b.spare = newKeepAliveConn(c)
	if cfg.route != nil {
		if !*cfg.route && b.cc != nil {
			return nil, fmt.Errorf("%w: redis: routeBySlot cannot be off for a *redis.ClusterClient", spi.ErrInvalidOption)
		}
		b.cluster = *cfg.route
	}
	b.hub.b = b
	if cfg.dropSilent {
		b.dials = newLastDial()
		b.dials.watch(c)
	}
	return b, nil
}

// honoursDeadlines reports whether c was made with ContextTimeoutEnabled (a client type New
// does not know is taken not to honour them).
func honoursDeadlines(c goredis.UniversalClient) bool {
	switch c := c.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// RouteBySlot reports whether the backend keeps every script call inside one hash slot (Redis
// Cluster).
func (b *Backend) RouteBySlot() bool { return b.cluster }

// Client returns the go-redis client the backend uses.
func (b *Backend) Client() goredis.UniversalClient { return b.c }

// CutSafe implements spi.CutSafe: every server-side step of an acquire or a release is one
// script, applied whole or not at all, so a caller's context may cut the call short at any point.
func (b *Backend) CutSafe() bool { return true }

// Close stops the hint subscription and, if the backend opened its client itself (Open),
// closes it. A client passed to New is left open. Sessions are not closed: they expire after
// their TTL unless CloseSession ends them.
//
// Close waits for the hint hub's runner, which may be waiting for a server's reply (the lease
// read after a subscription's confirmation). go-redis cuts no read short but by closing its
// connection, so Close closes a client of its own first, and every connection that client
// dialled that is still open or being dialled (a pub/sub connection that go-redis reconnects
// on its own, waiting for a server's answer to its handshake without a context, included):
// every read in flight, the runner's and those of calls left behind at their ctx's end (see
// bounded), ends at once, and Close returns promptly even at a server that stopped answering
// or that accepts connections and never answers. With a client passed to New, which
// it leaves open, Close waits for that read's end: at most 5 s on a client
// with ContextTimeoutEnabled, else the client's read timeout.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	wait := b.hub.shutdown()
	var err error
	if b.owned {
		err = b.c.Close()
		// What go-redis still waits for on its own goroutines (a pub/sub connection's
		// handshake with a server that does not answer) ends now, not at a read timeout.
		b.dials.cut()
	}
	wait()
	return err
}

func (b *Backend) checkOpen() error {
	if b.closed.Load() {
		return spi.ErrBackendClosed
	}
	return nil
}

// fail classifies err from operation op: authentication and permission errors (WRONGPASS,
// NOAUTH, NOPERM: spi.ErrAccessDenied, the first two ErrAuth too; see denied), wrong-type
// keys (spi.ErrCorruptRecord; failKeys names the key), script argument errors, replies of the wrong shape, TLS failures (spi.ErrTLS), CROSSSLOT,
// MOVED or ASK met by a standalone client or a Cluster node found by the first OpenSession's
// check (the DSN names a Cluster node: see checkNotClusterNode) and the
// scripts' own errors are permanent (token_overflow and corrupt_token match spi.ErrTokenOverflow
// and spi.ErrCorruptToken); everything else (connection loss, timeouts, LOADING, BUSY, TRYAGAIN,
// CLUSTERDOWN, READONLY during a failover, MOVED or ASK met by a Cluster client during a
// resharding) is retryable and matches
// spi.ErrUnavailable. A DSN the server cannot serve is permanent too, with what to change: a
// database index out of range, or any but 0 on a Cluster node, matches spi.ErrInvalidOption; a
// Cluster client at a server without cluster support is told to use redis://.
func (b *Backend) fail(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, goredis.ErrClosed) && b.closed.Load():
		return fmt.Errorf("redis: %s: %w", op, spi.ErrBackendClosed)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("redis: %s: %w", op, err)
	case goredis.HasErrorPrefix(err, luascripts.ErrorTokenOverflow):
		return spi.AsPermanent(fmt.Errorf("redis: %s: %w: %w", op, spi.ErrTokenOverflow, err))
	case goredis.HasErrorPrefix(err, luascripts.ErrorCorruptToken):
		// The script quotes the stored token as it is: escaped, so that a forged one with
		// terminal escape sequences reaches no log or terminal raw.
		return spi.AsPermanent(fmt.Errorf("redis: %s: %w: %w", op, spi.ErrCorruptToken, printable.Error(err)))
	case authFailure(err), goredis.HasErrorPrefix(err, "NOPERM"):
		return b.denied(op, err)
	case errors.Is(err, luascripts.ErrReply), errors.Is(err, luascripts.ErrArgs),
		goredis.HasErrorPrefix(err, luascripts.ErrorPrefix): // HasErrorPrefix strips "ERR "
		return spi.AsPermanent(fmt.Errorf("redis: %s: %w", op, err))
	case goredis.HasErrorPrefix(err, "WRONGTYPE"):
		return spi.AsPermanent(fmt.Errorf("redis: %s: %w: a key of another type than Simba keeps there: %w", op, spi.ErrCorruptRecord, err))
	case spi.IsTLSError(err):
		return spi.TLSFailure("redis "+op, err)
	case b.cc == nil && (goredis.HasErrorPrefix(err, "MOVED") || goredis.HasErrorPrefix(err, "ASK") ||
		goredis.HasErrorPrefix(err, "CROSSSLOT") || errors.Is(err, errClusterNode)):
		// A standalone client talking to a Cluster node: every call would be redirected. The
		// DSN is wrong, as with a database the server does not have: ErrInvalidOption.
		return fmt.Errorf("%w: redis: %s: %w (the server is a Redis Cluster node: use a redis+cluster:// DSN)", spi.ErrInvalidOption, op, err)
	case goredis.HasErrorPrefix(err, "CROSSSLOT"):
		return spi.AsPermanent(fmt.Errorf("redis: %s: %w", op, err))
	case goredis.HasErrorPrefix(err, errDBRange):
		// The connection's SELECT of the DSN's /db: the server has fewer databases.
		return fmt.Errorf("%w: redis: %s: %w (the DSN's database %s does not exist: the server has as many as its databases setting, 16 by default, numbered from 0)",
			spi.ErrInvalidOption, op, err, b.db())
	case goredis.HasErrorPrefix(err, errSelectInCluster):
		return fmt.Errorf("%w: redis: %s: %w (the server is a Redis Cluster node, which has database 0 only: use a redis+cluster:// DSN without a database)",
			spi.ErrInvalidOption, op, err)
	case goredis.HasErrorPrefix(err, errNoCluster):
		// A Cluster client's CLUSTER SLOTS to a standalone server: the DSN is wrong.
		return fmt.Errorf("%w: redis: %s: %w (the server is not a Redis Cluster node: use a redis:// DSN, or redis+sentinel:// for a master behind Sentinel)", spi.ErrInvalidOption, op, err)
	}
	if b.dials == nil && silent.TimedOut(err) {
		b.undropped.Do(func() {
			b.log.Warn("simba: redis: a call ran out of time, and the client's connections do not note when they last read and wrote: those a silent link left are handed out again after it heals, each failing a call at its timeout, the session's keep-alive too; pass WithDropSilent to New")
		})
	}
	return spi.Unavailable("redis "+op, b.dials.explain(err))
}

// failKeys is fail for a script call on keys (the script's KEYS, as Build returns them): a
// WRONGTYPE error, by which Redis says a command of the script met a key of another type than
// it works on, becomes a permanent spi.ErrCorruptRecord that names the key and what it holds
// (read with TYPE after the failed call: Redis's own error names neither), so that the caller
// learns which key needs an operator; the script stopped at that key. Every other error goes
// to fail.
func (b *Backend) failKeys(ctx context.Context, op string, err error, keys []string) error {
	if !goredis.HasErrorPrefix(err, "WRONGTYPE") {
		return b.fail(op, err)
	}
	return spi.AsPermanent(fmt.Errorf("redis: %s: %w: %s (written by something other than Simba: the key needs an operator): %w",
		op, spi.ErrCorruptRecord, b.foreignKey(ctx, keys), err))
}

// foreignKey says which of keys holds a value of another type than Simba keeps there
// (wire.RedisKeyType), for failKeys: one TYPE per key, pipelined (on a Cluster, per master).
// When that read fails or finds none (the key was changed since), it says so, naming the keys.
func (b *Backend) foreignKey(ctx context.Context, keys []string) string {
	got, err := b.foreignTypes(ctx, keys)
	found := foreignFound(keys, got)
	switch {
	case len(found) > 0:
		return strings.Join(found, "; ")
	case err != nil:
		return fmt.Sprintf("one of the keys %q holds a value of another type than Simba keeps there (which one could not be read: %v)", keys, err)
	}
	return fmt.Sprintf("one of the keys %q held a value of another type than Simba keeps there (none does now)", keys)
}

// foreignTypes reads the type of each of keys (one TYPE per key, pipelined; on a Cluster, per
// master) and returns, per key, the type it holds where that is another than Simba keeps there
// (wire.RedisKeyType), "" otherwise (the key's own type, none, or a failed read), and the
// pipeline's error.
func (b *Backend) foreignTypes(ctx context.Context, keys []string) ([]string, error) {
	pipe := b.c.Pipeline()
	types := make([]*goredis.StatusCmd, len(keys))
	for i, k := range keys {
		types[i] = pipe.Type(ctx, k)
	}
	_, err := pipe.Exec(ctx)
	got := make([]string, len(keys))
	for i, k := range keys {
		want, t := wire.RedisKeyType(k), types[i].Val()
		if types[i].Err() == nil && want != "" && t != "none" && t != want {
			got[i] = t
		}
	}
	return got, err
}

// foreignFound says, for each of keys whose type foreignTypes found foreign (got), which
// type it holds and which Simba keeps there.
func foreignFound(keys, got []string) []string {
	var found []string
	for i, k := range keys {
		if got[i] != "" {
			found = append(found, fmt.Sprintf("key %q holds a %s where Simba keeps a %s", k, got[i], wire.RedisKeyType(k)))
		}
	}
	return found
}

// scriptKeys returns the KEYS of a script call's Build, for failKeys.
func scriptKeys(keys []string, _ []any, _ error) []string { return keys }

// The server's errors for a DSN it cannot serve (see fail): the connection's SELECT of a
// database the server does not have, or of any but 0 on a Cluster node; a Cluster client's
// CLUSTER SLOTS to a server without cluster support.
const (
	errDBRange         = "DB index is out of range"
	errSelectInCluster = "SELECT is not allowed in cluster mode"
	errNoCluster       = "This instance has cluster support disabled"
)

// unservable reports an error by which the server says it cannot serve the DSN at all (see
// fail): every command fails the same way.
func unservable(err error) bool {
	return goredis.HasErrorPrefix(err, errDBRange) || goredis.HasErrorPrefix(err, errSelectInCluster) ||
		goredis.HasErrorPrefix(err, errNoCluster)
}

// db names the database the client selects, for fail's message.
func (b *Backend) db() string {
	if c, ok := b.c.(*goredis.Client); ok {
		return strconv.Itoa(c.Options().DB)
	}
	return "index"
}

// newSessionID makes 128 random bits as 32 lowercase hex characters.
func newSessionID() (spi.SessionID, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return spi.SessionID(hex.EncodeToString(b[:])), nil
}

// ms converts a reply's milliseconds to a Duration, saturating (spi.Millis).
func ms(d int64) time.Duration { return spi.Millis(d) }

// CheckTTL implements spi.TTLChecker: Redis serves every TTL a client can ask for, so a ttl
// is refused only when it is not positive, or, with WithWaitReplicas and an explicit timeout,
// when that timeout is at least a third of it: a client's call timeout is its renewal
// interval, at most TTL/3, and the WAIT's time is part of every grant's and renewal's, so each
// WAIT that waits out its timeout would outlast its call, which then fails as a call timeout
// ("context deadline exceeded") instead of naming the replicas that did not acknowledge, and
// no grant or renewal could succeed while a replica lags. The default timeout (zero) always
// fits. Either error matches spi.ErrInvalidOption, and OpenSession refuses the same before any
// I/O.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: redis: session TTL %v is not positive", spi.ErrInvalidOption, ttl)
	}
	if b.waitN > 0 && b.waitTO >= ttl/3 {
		return fmt.Errorf("%w: redis: wait_timeout %v (WithWaitReplicas) must be below the renewal interval, at most TTL/3 = %v for a session TTL of %v: every WAIT that times out would outlast its call; use a WAIT timeout well below it, or leave it out for the default (min(%v, TTL/6))",
			spi.ErrInvalidOption, b.waitTO, ttl/3, ttl, DefaultWaitTimeout)
	}
	return nil
}

// CheckRenewal implements spi.RenewalChecker: with WithWaitReplicas and an explicit timeout,
// a renewal interval (simba.WithRenewEvery, each call's timeout) not above that timeout is
// refused with an error matching spi.ErrInvalidOption, for the reason CheckTTL gives; the
// default timeout (zero) takes half of each call's time at most and always fits.
func (b *Backend) CheckRenewal(ttl, every time.Duration) error {
	if err := b.CheckTTL(ttl); err != nil {
		return err
	}
	if b.waitN > 0 && b.waitTO >= every {
		return fmt.Errorf("%w: redis: wait_timeout %v (WithWaitReplicas) must be below the renewal interval %v (simba.WithRenewEvery), each grant's and renewal's call timeout: every WAIT that times out would outlast its call; use a WAIT timeout well below it, or leave it out for the default (min(%v, TTL/6, half the call's time))",
			spi.ErrInvalidOption, b.waitTO, every, DefaultWaitTimeout)
	}
	return nil
}

// waitMS is the timeout of a WAIT sent within ctx for a session of ttl (0: not known), in
// whole milliseconds, at least 1 (WAIT n 0 would block until the connection's deadline): the
// explicit timeout of WithWaitReplicas, or the default, min(DefaultWaitTimeout, TTL/6, half
// of what is left of ctx), with the shortest TTL the backend opened when ttl is not known.
func (b *Backend) waitMS(ctx context.Context, ttl time.Duration) int64 {
	to := b.waitTO
	if to == 0 {
		to = DefaultWaitTimeout
		if ttl == 0 {
			ttl = b.hub.minTTL.Get()
		}
		if ttl > 0 {
			to = min(to, ttl/6)
		}
		if dl, ok := ctx.Deadline(); ok {
			to = min(to, time.Until(dl)/2)
		}
	}
	return max(to.Milliseconds(), 1)
}

// OpenSession opens a session for owner expiring ttl (rounded down to whole milliseconds, at
// least 1 ms) after Redis TIME. The id is made here, so a retried open after a lost reply
// cannot leave a second session behind: open_session is safe to retry with the same id. The
// backend's first OpenSession also runs the durability check (see CheckDurability): it logs a
// warning, or with WithStrictDurability fails with ErrNotDurable.
func (b *Backend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	return boundedCancel(ctx, b, "open session", "", func() (spi.Session, error) { return b.openSessionCall(ctx, owner, ttl) })
}

// openSessionCall is OpenSession's body, run by bounded.
func (b *Backend) openSessionCall(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	if err := b.CheckTTL(ttl); err != nil {
		return spi.Session{}, err
	}
	if err := spi.ValidateOwner(owner); err != nil {
		return spi.Session{}, fmt.Errorf("redis: %w", err)
	}
	if err := b.checkOpen(); err != nil {
		return spi.Session{}, err
	}
	if err := b.durability(ctx); err != nil {
		return spi.Session{}, err
	}
	if err := b.passwordChecked(ctx); err != nil {
		return spi.Session{}, err
	}
	mkID := b.newID
	if mkID == nil {
		mkID = newSessionID
	}
	sid, err := mkID()
	if err != nil {
		return spi.Session{}, fmt.Errorf("redis: open session: %w", err)
	}
	s := string(sid)
	okeys := luascripts.OpenSessionKeys{Session: wire.SessionKey(s), SessionLeases: wire.SessionLeasesKey(s), SessionGroups: wire.SessionGroupsKey(s)}
	oargs := luascripts.OpenSessionArgs{Owner: owner, TTLMS: max(ttl.Milliseconds(), 1)}
	// On a Cluster, a slot being migrated refuses the new session's keys until it settles
	// (followSlotMove).
	// With WithWaitReplicas the open waits for the replicas too (pipelined, like a grant's):
	// a session opened on a master short of replicas could never be kept alive (every
	// keep-alive's WAIT falls short), and its open's success ended the client's outage in the
	// log ("simba backend reachable again") once per session lost (trial 28: 12 times in 10 s
	// while nothing worked).
	r, err := followSlotMove(ctx, b, 0, func() (luascripts.OpenSessionReply, error) {
		return runOnNode(ctx, b, ttl, okeys.Session, luascripts.OpenSession, okeys, oargs,
			func(luascripts.OpenSessionReply) bool { return true })
	})
	if err != nil {
		return spi.Session{}, b.failKeys(ctx, "open session", err, scriptKeys(luascripts.OpenSession.Build(okeys, oargs)))
	}
	if b.cluster {
		b.mu.Lock()
		b.sessions[sid] = &session{owner: owner, expires: r.ExpiresMS}
		b.mu.Unlock()
	}
	b.hub.opened(ttl)
	return spi.Session{ID: sid, Remaining: ms(r.RemainingMS)}, nil
}

// Acquire takes name for the session. Standalone: one acquire script call, which reads the
// session's expiry and owner from the session hash. routeBySlot: one acquire_at call touching
// only the lease key, with the session's expiry from its latest keep-alive (see the package
// documentation for the one case that needs a second call).
func (b *Backend) Acquire(ctx context.Context, sid spi.SessionID, name string) (spi.Acquire, error) {
	return b.acquireHinted(ctx, sid, name, false)
}

// AcquireQueued implements spi.Queuer: Acquire, with the session registered as a waiter for
// name when the reply is HeldBy (in the same script call).
func (b *Backend) AcquireQueued(ctx context.Context, sid spi.SessionID, name string) (spi.Acquire, error) {
	return b.acquireHinted(ctx, sid, name, true)
}

// acquireHinted is acquire, with its reply noted for Hints: a lease found held is waited for.
func (b *Backend) acquireHinted(ctx context.Context, sid spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	if queued {
		// A Withdraw of this wait still in flight (one whose caller gave up goes on) would
		// delete the entry this call makes, or forget it once answered: let it end first.
		if err := b.withdrawing.await(ctx, sid, name, b.withdrawHooks.waiting); err != nil {
			return spi.Acquire{}, b.fail(opAbout("acquire", name), err)
		}
	}
	var r spi.Acquire
	var err error
	if b.direct(ctx) {
		took, serr := b.spare.enter(ctx, "acquire")
		if serr != nil {
			return spi.Acquire{}, b.fail(opAbout("acquire", name), serr)
		}
		r, err = b.acquireNoted(ctx, sid, name, queued)
		b.spare.leave(took)
	} else {
		r, err = bounded(ctx, b, "acquire", name, func() (spi.Acquire, error) { return b.acquireNoted(ctx, sid, name, queued) })
	}
	if err == nil {
		b.hub.acquired(sid, name, r)
	}
	return r, err
}

// acquireNoted is acquire, with what its outcome tells of the session's waiter entry noted for
// CloseSession (waitSet) by the call's body itself, so that a body that goes on after its
// caller left (bounded) notes it too.
func (b *Backend) acquireNoted(ctx context.Context, sid spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	r, err := b.acquire(ctx, sid, name, queued)
	b.queued.noteAcquire(sid, name, queued, r, err)
	return r, err
}

// EndWait implements spi.WaitEnder: sid no longer waits for name (a TryLock that found it held
// gave up). It sends no command: the backend stops hinting the name to the session, and
// UNSUBSCRIBEs the lease's channel after its linger once no session of the backend waits for
// it.
func (b *Backend) EndWait(sid spi.SessionID, name string) {
	b.hub.withdrew(sid, name)
}

// Withdraw implements spi.Queuer: one withdraw script call on the lease's slot. When the lease
// was owed to the session's entry (free, no live waiter ahead), the script publishes the name on
// the lease's channel, so the next waiter's backend hints Released and it tries again at once.
// An AcquireQueued of the same session and name waits for the Withdraw's end, even one whose
// caller gave up (see withdrawals).
func (b *Backend) Withdraw(ctx context.Context, sid spi.SessionID, name string) error {
	w := b.withdrawing.begin(sid, name)
	err := bounded0(ctx, b, "withdraw", name, func() error {
		if !w.run() { // the caller left before this began: nothing is sent
			return errWithdrawAbandoned
		}
		err := b.withdrawCall(ctx, sid, name)
		b.withdrawing.end(w) // after withdrawCall's bookkeeping: see withdrawals
		if h := b.withdrawHooks.ended; h != nil {
			h(sid, name)
		}
		return err
	})
	if w.abandon() {
		b.withdrawing.end(w)
	}
	return err
}

// withdrawCall is Withdraw's body, run by bounded.
func (b *Backend) withdrawCall(ctx context.Context, sid spi.SessionID, name string) error {
	if err := wire.ValidateName(name); err != nil {
		return err
	}
	if err := b.checkOpen(); err != nil {
		return err
	}
	keys, args := withdrawRequest(sid, name)
	if h := b.withdrawHooks.sending; h != nil {
		h(sid, name)
	}
	_, err := followSlotMove(ctx, b, 0, func() (luascripts.WithdrawReply, error) {
		return luascripts.Withdraw.Run(ctx, b.c, keys, args)
	})
	if err != nil {
		return b.clusterFailKeys(ctx, "withdraw "+name, err, []string{keys.Lease, keys.Waiters, keys.Waiting})
	}
	if h := b.withdrawHooks.answered; h != nil {
		h(sid, name)
	}
	b.queued.done(sid, name)
	b.hub.withdrew(sid, name)
	return nil
}

func (b *Backend) acquire(ctx context.Context, sid spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	if err := wire.ValidateName(name); err != nil {
		return spi.Acquire{}, err
	}
	if err := b.checkOpen(); err != nil {
		return spi.Acquire{}, err
	}
	r, err := b.acquireOnce(ctx, sid, name, queued)
	if err != nil || r.Kind != spi.HeldBy || wire.IsClientSessionID(string(r.Holder)) {
		return r, err
	}
	// A foreign holder (no client makes such a session id): a record written by hand or by
	// something else, which no Simba holder relies on. It would block the name until its expires
	// field, possibly forever; free it, keeping the token, and acquire again.
	b.foreign.Warn("lease holder is not a client session id; freeing the lease (its token is kept)", "lease", name, "holder", string(r.Holder))
	_, err = luascripts.ClearForeign.Run(ctx, b.c, luascripts.ClearForeignKeys{Lease: wire.LeaseKey(name)}, luascripts.ClearForeignArgs{Holder: string(r.Holder)})
	if err != nil {
		return spi.Acquire{}, b.clusterFail("acquire "+name+": clear foreign holder", err)
	}
	return b.acquireOnce(ctx, sid, name, queued)
}

// sessionKeys are a session's keys that its acquires and releases name.
type sessionKeys struct {
	sid    string
	key    string // wire.SessionKey
	leases string // wire.SessionLeasesKey
}

// sessionKeys returns sid's keys, built anew only when sid is not the session of the last call.
func (b *Backend) sessionKeys(sid string) *sessionKeys {
	if k := b.sessKeys.Load(); k != nil && k.sid == sid {
		return k
	}
	k := &sessionKeys{sid: sid, key: wire.SessionKey(sid), leases: wire.SessionLeasesKey(sid)}
	b.sessKeys.Store(k)
	return k
}

// acquireOnce is one acquire script call: acquire (standalone) or acquire_at (routeBySlot).
func (b *Backend) acquireOnce(ctx context.Context, sid spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	if b.cluster {
		return b.acquireAt(ctx, sid, name, queued)
	}
	s := string(sid)
	sk := b.sessionKeys(s)
	keys := luascripts.AcquireKeys{Lease: wire.LeaseKey(name), Session: sk.key, SessionLeases: sk.leases,
		Waiters: wire.WaitersKey(name), Waiting: wire.WaitingKey(name)}
	args := luascripts.AcquireArgs{SessionID: s, Name: name, Queued: flag(queued)}
	var r luascripts.AcquireReply
	var err error
	if b.waitN > 0 {
		r, err = waited(ctx, b, 0, b.c, luascripts.Acquire.EvalSha, luascripts.Acquire.Eval, luascripts.Acquire.Decode, keys, args,
			func(r luascripts.AcquireReply) bool { return r.Status == luascripts.StatusOK })
	} else {
		r, err = luascripts.Acquire.Run(ctx, b.c, keys, args)
	}
	if err != nil {
		if b.lostSession(ctx, sid, err) {
			return spi.Acquire{Kind: spi.SessionExpired}, nil
		}
		return spi.Acquire{}, b.failKeys(ctx, "acquire "+name, err, scriptKeys(luascripts.Acquire.Build(keys, args)))
	}
	return acquireReply(r.Status, r.Token, r.RemainingMS, r.Holder, r.Owner)
}

// flag is a script's 0/1 argument.
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func acquireReply(status, token, remaining int64, holder, owner string) (spi.Acquire, error) {
	switch status {
	case luascripts.StatusOK:
		return spi.Acquire{Kind: spi.Granted, Token: token, Remaining: ms(remaining)}, nil
	case luascripts.StatusHeldBy:
		return spi.Acquire{Kind: spi.HeldBy, Token: 0, Remaining: ms(remaining), Holder: spi.SessionID(holder), HolderOwner: owner}, nil
	case luascripts.StatusExpired:
		return spi.Acquire{Kind: spi.SessionExpired}, nil
	}
	return spi.Acquire{}, spi.AsPermanent(fmt.Errorf("redis: acquire: %w: status %d", luascripts.ErrReply, status))
}

// Release frees name if the session holds it with token. Standalone: the release script;
// routeBySlot: release_leases with this one name and token. When a session of this backend
// waits for the name, the backend's own Hints subscribers (other clients of this process on
// this backend) get a Released hint at once, before the server's PUBLISH comes back.
func (b *Backend) Release(ctx context.Context, sid spi.SessionID, name string, token int64) error {
	if b.direct(ctx) {
		took, err := b.spare.enter(ctx, "release")
		if err != nil {
			return b.fail(opAbout("release", name), err)
		}
		defer b.spare.leave(took)
		return b.releaseCall(ctx, sid, name, token)
	}
	return bounded0(ctx, b, "release", name, func() error { return b.releaseCall(ctx, sid, name, token) })
}

// releaseCall is Release's body, run by bounded.
func (b *Backend) releaseCall(ctx context.Context, sid spi.SessionID, name string, token int64) error {
	if err := wire.ValidateName(name); err != nil {
		return err
	}
	if err := b.checkOpen(); err != nil {
		return err
	}
	if token <= 0 {
		return nil // tokens are positive: no tenure has it (and 0 would mean "any" to release_leases)
	}
	s := string(sid)
	if !b.cluster {
		keys := luascripts.ReleaseKeys{Lease: wire.LeaseKey(name), SessionLeases: b.sessionKeys(s).leases}
		args := luascripts.ReleaseArgs{SessionID: s, Name: name, Token: token}
		_, err := luascripts.Release.Run(ctx, b.c, keys, args)
		if err != nil {
			return b.failKeys(ctx, "release "+name, err, scriptKeys(luascripts.Release.Build(keys, args)))
		}
		b.hub.releasedLocally(name)
		return nil
	}
	keys := luascripts.ReleaseLeasesKeys{Leases: []string{wire.LeaseKey(name)}}
	gen := b.trackedGen(sid, leaseNames, name)
	r, err := followSlotMove(ctx, b, 0, func() (luascripts.ReleaseLeasesReply, error) {
		return luascripts.ReleaseLeases.Run(ctx, b.c, keys,
			luascripts.ReleaseLeasesArgs{SessionID: s, Names: []string{name}, Tokens: []int64{token}})
	})
	if err != nil {
		return b.failKeys(ctx, "release "+name, err, keys.Leases)
	}
	if r.Released > 0 {
		b.untrack(sid, leaseNames, name, gen)
		b.hub.releasedLocally(name)
	}
	return nil
}

// KeepAlive renews the session and the given leases it holds, refreshes its membership of the
// given groups and returns their live members. Standalone: one keep_alive call whatever the
// number of leases and groups. routeBySlot: one keep_alive call on the session's slot, then one
// pipelined round per master (keep_alive_leases per slot of the asked names, join_at per group);
// it succeeds only if every call did. After a failed keep-alive, the next one sends a PING
// first, and nothing more if that round trip fails. A named lease whose key holds another type
// than a hash (written over by something else) is left out of Held, with a warning: the
// session and its other leases are renewed without it (a second renewal, after a TYPE read of
// the named lease keys).
func (b *Backend) KeepAlive(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	ka, err := bounded(ctx, b, opKeepAlive, "", func() (spi.KeepAlive, error) { return b.keepAliveCall(ctx, sid, names, groups) })
	if err != nil && ctx.Err() != nil && !errors.Is(err, spi.ErrInvalidName) {
		// Left behind at ctx's end (bounded) before its body noted the failure: the next
		// keep-alive proves a round trip first. (A body that gets its reply later notes that.)
		b.kaFailed.Store(true)
	}
	return ka, err
}

// keepAliveCall is KeepAlive's body, run by bounded.
func (b *Backend) keepAliveCall(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	ka, err := b.keepAlive(ctx, sid, names, groups)
	if err == nil || !errors.Is(err, spi.ErrInvalidName) {
		b.kaFailed.Store(err != nil)
	}
	switch {
	case err != nil:
	case ka.Expired:
		b.queued.drop(sid)
		b.hub.forget(sid)
	default:
		b.hub.keptAlive(sid, groups)
	}
	return ka, err
}

func (b *Backend) keepAlive(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
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
	if err := b.checkOpen(); err != nil {
		return spi.KeepAlive{}, err
	}
	// When replies cannot come back but requests still arrive, a retried renewal sent on a
	// pooled connection would extend the session at the server while this client, seeing no
	// reply, gives its terms up at its deadline, leaving the leases held by nobody for up to a
	// TTL more. After a failure, a PING goes first: it fails instead, and nothing is renewed.
	if b.kaFailed.Load() {
		if err := b.c.Ping(ctx).Err(); err != nil {
			return spi.KeepAlive{}, b.clusterFail("keep-alive (round trip before a retried renewal)", err)
		}
	}
	ka, err := b.renew(ctx, sid, names, groups)
	if !errors.Is(err, spi.ErrCorruptRecord) {
		return ka, err
	}
	// The session's own record (its hash or one of its sets) of another type: the session
	// can never be renewed again. It ends, as an expired one does, and the log says why.
	if b.sessionLost(ctx, sid) {
		return spi.KeepAlive{Expired: true}, nil
	}
	// A lease key of another type (spi.ErrCorruptRecord: written over by something else)
	// would fail every keep-alive that names it, and so the session and all its other leases
	// with it. No session holds such a lease: renew the rest without it, leaving it out of
	// Held and naming it Corrupt, so that the client revokes that term alone, saying why. A
	// group key of another type is left out the same way: the client keeps its last view of
	// the group (spi.KeepAlive.Members).
	lost, lostGroups := b.foreignNames(ctx, wire.LeaseKey, names), b.foreignNames(ctx, wire.GroupKey, groups)
	if len(lost)+len(lostGroups) == 0 {
		return ka, err
	}
	if len(lost) > 0 {
		b.warnForeignLeases(lost, err)
	}
	if len(lostGroups) > 0 {
		b.warnForeignGroups(lostGroups, err)
	}
	ka, err = b.renew(ctx, sid, without(names, lost), without(groups, lostGroups))
	if err == nil && !ka.Expired {
		ka.Corrupt = lost
	}
	return ka, err
}

// without returns names less those in drop (names itself when drop is empty).
func without(names, drop []string) []string {
	if len(drop) == 0 {
		return names
	}
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(drop, n) })
}

// sessionLost reports whether sid's own record — its hash or one of its two sets — holds
// another type than Simba keeps there (one TYPE per key, pipelined), read after a call of the
// session failed on a key of another type. If so the session is over: its keys are named
// after its random id, so something other than Simba wrote over them, and no script can renew
// or use it again. The caller reports it expired (the client revokes its terms and opens a new
// session, as for any lost session); sessionLost logs why at WARN, naming the key, once per
// session (the session's other calls that meet the record log it at DEBUG), and under
// routeBySlot remembers it expired. The key is left as it is, for an operator to look at.
func (b *Backend) sessionLost(ctx context.Context, sid spi.SessionID) bool {
	s := string(sid)
	keys := []string{wire.SessionKey(s), wire.SessionLeasesKey(s), wire.SessionGroupsKey(s)}
	got, _ := b.foreignTypes(ctx, keys)
	found := foreignFound(keys, got)
	if len(found) == 0 {
		return false
	}
	// Once per session (foreignLevel: a minute apart at most): every call of the session in
	// flight meets the record (a keep-alive, acquires, a join), and each reports the session
	// expired; the first says why at WARN, the rest at DEBUG.
	b.log.Log(context.Background(), b.foreignLevel("session ", []string{s}), "simba: redis: the session's own record holds another type than Simba keeps there (written over by something else): the session is ended and reported expired, its terms revoked; the client opens a new session. The key needs an operator",
		"session", s, "record", strings.Join(found, "; "))
	if b.cluster {
		b.expiredNow(sid)
	}
	return true
}

// lostSession is sessionLost for a call of the session that failed with err: false unless err
// is Redis's WRONGTYPE.
func (b *Backend) lostSession(ctx context.Context, sid spi.SessionID, err error) bool {
	return goredis.HasErrorPrefix(err, "WRONGTYPE") && b.sessionLost(ctx, sid)
}

// foreignNames returns those of names whose key (key(name): wire.LeaseKey or wire.GroupKey)
// holds another type than Simba keeps there (one TYPE per key, pipelined): keepAlive and
// CloseSession leave them out. A failed read returns none.
func (b *Backend) foreignNames(ctx context.Context, key func(string) string, names []string) []string {
	if len(names) == 0 {
		return nil
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = key(n)
	}
	got, _ := b.foreignTypes(ctx, keys)
	var lost []string
	for i, n := range names {
		if got[i] != "" {
			lost = append(lost, n)
		}
	}
	return lost
}

// renew is keepAlive's one renewal: keep_alive (standalone) or keepAliveCluster.
func (b *Backend) renew(ctx context.Context, sid spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	if b.cluster {
		return b.keepAliveCluster(ctx, sid, names, groups)
	}
	s := string(sid)
	keys := luascripts.KeepAliveKeys{Session: wire.SessionKey(s), SessionLeases: wire.SessionLeasesKey(s), SessionGroups: wire.SessionGroupsKey(s),
		Leases: make([]string, len(names)), Groups: make([]string, len(groups))}
	for i, n := range names {
		keys.Leases[i] = wire.LeaseKey(n)
	}
	for i, g := range groups {
		keys.Groups[i] = wire.GroupKey(g)
	}
	args := luascripts.KeepAliveArgs{SessionID: s, Names: names, GroupNames: groups}
	var r luascripts.KeepAliveReply
	var err error
	if b.waitN > 0 {
		r, err = waited(ctx, b, 0, b.c, luascripts.KeepAlive.EvalSha, luascripts.KeepAlive.Eval, luascripts.KeepAlive.Decode, keys, args,
			func(r luascripts.KeepAliveReply) bool { return r.Status == luascripts.StatusOK })
	} else {
		r, err = luascripts.KeepAlive.Run(ctx, b.c, keys, args)
	}
	if err != nil {
		return spi.KeepAlive{}, b.failKeys(ctx, "keep-alive", err, scriptKeys(luascripts.KeepAlive.Build(keys, args)))
	}
	if r.Status != luascripts.StatusOK {
		return spi.KeepAlive{Expired: true}, nil
	}
	ka := spi.KeepAlive{Remaining: ms(r.RemainingMS), Held: heldList(r.Held)}
	if len(groups) > 0 {
		ka.Members = make(map[string][]spi.SessionID, len(groups))
		for i, g := range groups {
			if i < len(r.Members) {
				ka.Members[g] = b.memberIDs(g, r.Members[i])
			}
			if i < len(r.LapseMS) {
				setLapse(&ka, g, r.LapseMS[i])
			}
		}
	}
	return ka, nil
}

// setLapse records a keep-alive script's lapse_ms for group g (the time left of the first
// other member to expire; -1: no other member) in ka.MembersRemaining: the client reads the
// members then, since no message tells an expiry until a script drops the member.
func setLapse(ka *spi.KeepAlive, g string, lapseMS int64) {
	if lapseMS >= 0 {
		ka.NoteMemberRemaining(g, ms(lapseMS))
	}
}

func heldList(h []luascripts.Held) []spi.Held {
	out := make([]spi.Held, len(h))
	for i, x := range h {
		out[i] = spi.Held{Name: x.Name, Token: x.Token}
	}
	return out
}

// memberIDs converts the members of group (the scripts list them in expiry order) to sorted
// session ids, skipping (with a warning) every entry that is not a client session id: a
// hand-added zset entry with a far-future score would otherwise count as a live member forever
// and take partitions that nobody leads.
func (b *Backend) memberIDs(group string, m []string) []spi.SessionID {
	m = foreign.Members(b.foreign, group, m)
	out := make([]spi.SessionID, len(m))
	for i, s := range m {
		out[i] = spi.SessionID(s)
	}
	slices.Sort(out)
	return out
}

// Join makes the session a member of group.
func (b *Backend) Join(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	return bounded(ctx, b, "join", group, func() (spi.Status, error) { return b.joinCall(ctx, sid, group) })
}

// joinCall is Join's body, run by bounded.
func (b *Backend) joinCall(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	st, err := b.join(ctx, sid, group)
	switch {
	case err != nil:
	case st == spi.OK:
		b.hub.joined(sid, group)
	default:
		b.hub.forget(sid)
	}
	return st, err
}

func (b *Backend) join(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	if err := wire.ValidateName(group); err != nil {
		return 0, err
	}
	if err := b.checkOpen(); err != nil {
		return 0, err
	}
	if b.cluster {
		return b.joinAt(ctx, sid, group)
	}
	s := string(sid)
	keys := luascripts.JoinKeys{Session: wire.SessionKey(s), SessionGroups: wire.SessionGroupsKey(s), Group: wire.GroupKey(group)}
	args := luascripts.JoinArgs{SessionID: s, GroupName: group}
	r, err := luascripts.Join.Run(ctx, b.c, keys, args)
	if err != nil {
		if b.lostSession(ctx, sid, err) {
			return spi.Expired, nil
		}
		return 0, b.failKeys(ctx, "join "+group, err, scriptKeys(luascripts.Join.Build(keys, args)))
	}
	return status(r.Status), nil
}

// Leave removes the session from group.
func (b *Backend) Leave(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	return bounded(ctx, b, "leave", group, func() (spi.Status, error) { return b.leaveCall(ctx, sid, group) })
}

// leaveCall is Leave's body, run by bounded.
func (b *Backend) leaveCall(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	st, err := b.leave(ctx, sid, group)
	if err == nil {
		b.hub.left(sid, group)
	}
	return st, err
}

func (b *Backend) leave(ctx context.Context, sid spi.SessionID, group string) (spi.Status, error) {
	if err := wire.ValidateName(group); err != nil {
		return 0, err
	}
	if err := b.checkOpen(); err != nil {
		return 0, err
	}
	if b.cluster {
		return b.leaveAt(ctx, sid, group)
	}
	s := string(sid)
	keys := luascripts.LeaveKeys{Session: wire.SessionKey(s), SessionGroups: wire.SessionGroupsKey(s), Group: wire.GroupKey(group)}
	args := luascripts.LeaveArgs{SessionID: s, GroupName: group}
	r, err := luascripts.Leave.Run(ctx, b.c, keys, args)
	if err != nil {
		if b.lostSession(ctx, sid, err) {
			return spi.Expired, nil
		}
		return 0, b.failKeys(ctx, "leave "+group, err, scriptKeys(luascripts.Leave.Build(keys, args)))
	}
	return status(r.Status), nil
}

func status(s int64) spi.Status {
	if s == luascripts.StatusOK {
		return spi.OK
	}
	return spi.Expired
}

// Members lists the live members of group, sorted ascending. For wire.ProbeGroup (the
// client's outage probe) with WithWaitReplicas it also fails, retryably, while a master is
// short of replicas (checkReplicas).
func (b *Backend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	return bounded(ctx, b, "members", group, func() ([]spi.SessionID, error) { return b.membersCall(ctx, group) })
}

// membersCall is Members's body, run by bounded.
func (b *Backend) membersCall(ctx context.Context, group string) ([]spi.SessionID, error) {
	if err := wire.ValidateName(group); err != nil {
		return nil, err
	}
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	r, err := luascripts.Members.Run(ctx, b.c, luascripts.MembersKeys{Group: wire.GroupKey(group)}, luascripts.MembersArgs{GroupName: group})
	if err != nil {
		return nil, b.failKeys(ctx, "members "+group, err, []string{wire.GroupKey(group)})
	}
	if group == wire.ProbeGroup {
		if err := b.checkReplicas(ctx); err != nil {
			return nil, err
		}
	}
	return b.memberIDs(group, r.Members), nil
}

// checkReplicas fails, retryably, when WithWaitReplicas(n, …) is on and a master has fewer
// than n replicas that acknowledge a WAIT n within the WAIT timeout (at most half of what is
// left of ctx, so that the failure names the shortfall rather than a deadline): on a Cluster
// each master is asked (in parallel), standalone the server the backend writes to. Members
// runs it for the client's outage probe (wire.ProbeGroup): the probe's read needs no WAIT and
// succeeded on a master with no replica connected (right after a failover), so the client
// took the backend for reachable again and retried its calls at once, each failing again.
// Without WithWaitReplicas it costs nothing. A WAIT on a connection that has written nothing
// yet returns at once the number of replicas connected; one that wrote returns once that many
// acknowledged its last write (the master asks them at once), so a connected replica answers
// within a round trip.
func (b *Backend) checkReplicas(ctx context.Context) error {
	if b.waitN == 0 {
		return nil
	}
	ms := b.waitMS(ctx, 0)
	if dl, ok := ctx.Deadline(); ok && b.waitTO > 0 {
		ms = max(min(ms, (time.Until(dl)/2).Milliseconds()), 1) // WAIT n 0 would block for ever
	}
	check := func(ctx context.Context, c doer, where string) error {
		if err := b.waitShortfall(b.wait(ctx, c, ms), ms, where); err != nil {
			return fmt.Errorf("%w (WithWaitReplicas: every grant, renewal and session open fails until %d replicas are connected)", err, b.waitN)
		}
		return nil
	}
	var err error
	if b.cc != nil {
		var mu sync.Mutex
		var errs []error
		err = b.cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
			if e := check(ctx, m, " on master "+m.Options().Addr); e != nil {
				mu.Lock()
				errs = append(errs, e)
				mu.Unlock()
			}
			return nil
		})
		if err == nil {
			err = errors.Join(errs...)
		}
	} else {
		err = check(ctx, b.c, "")
	}
	return b.fail("members (probe: replicas for WAIT)", err)
}

// CloseSession withdraws the session from the waiter queues this backend queued it in (see
// waitSet; a withdraw of a free lease's first waiter publishes, waking the next waiter),
// releases every lease the session holds and leaves its groups (publishing each), then deletes
// the session. Standalone: the session's sets are read, with the withdraws in the same
// pipeline (one round trip), then one close_session call. routeBySlot: the withdraws,
// release_leases per slot and leave_at per group (one pipelined round per master) for the
// names this backend queued for, acquired and joined, then close_session on the session's
// slot. A withdraw that fails is logged and does not fail the close (its entry lapses, up to a
// TTL). Closing a closed or expired session is not an error.
func (b *Backend) CloseSession(ctx context.Context, sid spi.SessionID) error {
	return bounded0(ctx, b, "close session", "", func() error { return b.closeSessionCall(ctx, sid) })
}

// closeSessionCall is CloseSession's body, run by bounded.
func (b *Backend) closeSessionCall(ctx context.Context, sid spi.SessionID) error {
	err := b.closeSession(ctx, sid)
	if err == nil {
		b.queued.drop(sid)
		b.hub.forget(sid)
	}
	return err
}

func (b *Backend) closeSession(ctx context.Context, sid spi.SessionID) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	if b.cluster {
		return b.closeCluster(ctx, sid)
	}
	s := string(sid)
	// The withdraws of the names the session may wait for go in the pipeline that reads its
	// sets, ahead of close_session (see waitSet); their failure does not fail the close.
	waited := b.queued.names(sid)
	pipe := b.c.Pipeline()
	lc := pipe.SMembers(ctx, wire.SessionLeasesKey(s))
	gc := pipe.SMembers(ctx, wire.SessionGroupsKey(s))
	wc := b.queueWithdraws(ctx, pipe, sid, waited, false)
	_, _ = pipe.Exec(ctx)
	for _, c := range []*goredis.StringSliceCmd{lc, gc} {
		if err := c.Err(); !wrongTypeOr(err) {
			return b.fail("close session", err)
		}
	}
	b.withdrewStandalone(ctx, sid, waited, wc)
	// A set of another type (written over by something else) names nothing to release or
	// leave: close_session deletes it with the session's other keys.
	names, groups := nonEmpty(lc.Val()), nonEmpty(gc.Val())
	err := b.closeSessionScript(ctx, s, names, groups)
	if errors.Is(err, spi.ErrCorruptRecord) {
		// A lease or group key of another type: the session holds no such lease and is no
		// member of such a group. Close without them rather than leave the session and every
		// other lease it holds to their TTL.
		lost, lostGroups := b.foreignNames(ctx, wire.LeaseKey, names), b.foreignNames(ctx, wire.GroupKey, groups)
		if len(lost)+len(lostGroups) > 0 {
			err = b.closeSessionScript(ctx, s, without(names, lost), without(groups, lostGroups))
		}
	}
	return err
}

// withdrewStandalone finishes a standalone close's withdraws of names (cmds, sent with
// EVALSHA): those that met NOSCRIPT (a server whose script cache was flushed) are sent again
// with EVAL, in one more round trip; a failure that remains is logged (warnUnwithdrawn).
func (b *Backend) withdrewStandalone(ctx context.Context, sid spi.SessionID, names []string, cmds []*goredis.Cmd) {
	var again []string
	for i, c := range cmds {
		if luascripts.IsNoScript(c.Err()) {
			again = append(again, names[i])
		}
	}
	if len(again) > 0 {
		pipe := b.c.Pipeline()
		retried := b.queueWithdraws(ctx, pipe, sid, again, true)
		_, _ = pipe.Exec(ctx)
		j := 0
		for i, c := range cmds {
			if luascripts.IsNoScript(c.Err()) {
				cmds[i] = retried[j]
				j++
			}
		}
	}
	b.warnUnwithdrawn(sid, names, func(i int) error { return cmds[i].Err() })
}

// wrongTypeOr reports a command that succeeded or failed with WRONGTYPE.
func wrongTypeOr(err error) bool { return err == nil || wrongType(err) }

// closeSessionScript is the close_session call of a standalone CloseSession.
func (b *Backend) closeSessionScript(ctx context.Context, s string, names, groups []string) error {
	keys := luascripts.CloseSessionKeys{Session: wire.SessionKey(s), SessionLeases: wire.SessionLeasesKey(s), SessionGroups: wire.SessionGroupsKey(s)}
	for _, n := range names {
		keys.Leases = append(keys.Leases, wire.LeaseKey(n))
	}
	for _, g := range groups {
		keys.Groups = append(keys.Groups, wire.GroupKey(g))
	}
	args := luascripts.CloseSessionArgs{SessionID: s, Names: names, GroupNames: groups}
	if _, err := luascripts.CloseSession.Run(ctx, b.c, keys, args); err != nil {
		return b.failKeys(ctx, "close session", err, scriptKeys(luascripts.CloseSession.Build(keys, args)))
	}
	return nil
}

// nonEmpty drops the "" placeholder of the session's sets (and anything that is not a valid
// name, which no Simba script writes).
func nonEmpty(in []string) []string {
	out := in[:0]
	for _, s := range in {
		if wire.ValidateName(s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// doer sends a command that go-redis has no method for: a client, a Cluster master or a
// pipeline.
type doer interface {
	Do(ctx context.Context, args ...any) *goredis.Cmd
}

// wait sends (or, on a pipeline, queues) WAIT b.waitN ms on c: the replicas' acknowledgement
// of what c's connection wrote before it, within ms milliseconds: at least 1, as WAIT n 0
// blocks until then (waitMS gives no less).
func (b *Backend) wait(ctx context.Context, c doer, ms int64) *goredis.Cmd {
	return c.Do(ctx, "wait", b.waitN, max(ms, 1))
}

// waitShortfall reads the reply w of a WAIT of ms milliseconds (wait): nil when b.waitN
// replicas acknowledged, else a retryable error naming the shortfall, or the WAIT's own
// error, with where (" on master <addr>", or empty) after the count.
func (b *Backend) waitShortfall(w *goredis.Cmd, ms int64, where string) error {
	if err := w.Err(); err != nil {
		return fmt.Errorf("WAIT %d%s: %w", b.waitN, where, err)
	}
	if n, _ := w.Int64(); n < int64(b.waitN) {
		return fmt.Errorf("WAIT: %d of %d replicas acknowledged within %v%s", n, b.waitN, time.Duration(ms)*time.Millisecond, where)
	}
	return nil
}

// waited runs one script call followed by WAIT on the same connection (a pipeline of two
// commands: one round trip), falling back to EVAL on NOSCRIPT, and fails with a retryable error
// when the reply is one that wrote (wrote(r)) and fewer than b.waitN replicas acknowledged it.
// ttl is the session's TTL when the call opens it, else 0 (see waitMS).
func waited[K, A, R any](ctx context.Context, b *Backend, ttl time.Duration, c goredis.Cmdable,
	evalSha, eval func(context.Context, goredis.Scripter, K, A) *goredis.Cmd, decode func(any) (R, error),
	keys K, args A, wrote func(R) bool) (R, error) {
	var zero R
	ms := b.waitMS(ctx, ttl)
	for _, send := range []func(context.Context, goredis.Scripter, K, A) *goredis.Cmd{evalSha, eval} {
		pipe := c.Pipeline()
		cmd := send(ctx, pipe, keys, args)
		w := b.wait(ctx, pipe, ms)
		_, _ = pipe.Exec(ctx)
		if luascripts.IsNoScript(cmd.Err()) {
			continue
		}
		if err := cmd.Err(); err != nil {
			return zero, err
		}
		r, err := decode(cmd.Val())
		if err != nil {
			return zero, err
		}
		if !wrote(r) {
			return r, nil
		}
		if err := b.waitShortfall(w, ms, ""); err != nil {
			return zero, err
		}
		return r, nil
	}
	return zero, errors.New("NOSCRIPT after EVAL")
}

// AdoptLogger implements spi.LoggerAdopter: a backend made without WithLogger logs its
// warnings to l from now on (simba.New hands it the client's simba.WithLogger), where it
// logged to slog.Default(); one given WithLogger keeps that logger.
func (b *Backend) AdoptLogger(l *slog.Logger) {
	b.logSink.Adopt(l)
}

package redis

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/minttl"
	"github.com/simba-go/simba/spi"
)

// hintBuffer is each subscriber's channel capacity; a subscriber that falls further behind
// loses hints (hints only save latency, never safety).
const hintBuffer = 1024

// The hub SUBSCRIBEs only to the channels a session of this backend needs (see Hints): a
// name's released channel while a session waits for it, a group's channel while a session is a
// member. When the last session stops needing a channel the subscription lingers for
// hintLinger before it is UNSUBSCRIBEd: a re-lock loop (wait, hold for a moment, wait again)
// reuses it instead of sending SUBSCRIBE, UNSUBSCRIBE and the confirmation's lease read on
// every cycle. A second bounds that churn to one round of three small commands per name per
// second or so, and the cost of a lingering channel to one second of that name's releases
// (each one message); it is far above a hand-over's milliseconds and far below a TTL.
const (
	hintLinger = time.Second
	// hintSweep is how often the hub's runner, while it has any interest, ends the waits no
	// acquire has refreshed and the lingers that are over.
	hintSweep = hintLinger / 4
	// hintDefaultTTL stands for the session TTL until this backend has opened a session.
	hintDefaultTTL = 15 * time.Second
)

// hintCallTimeout bounds the runner's SUBSCRIBE, UNSUBSCRIBE and lease reads (a variable for
// tests).
var hintCallTimeout = 5 * time.Second

// aclProbe is the lease and group name whose channels Hints subscribes to and unsubscribes from
// once, to learn that the user may subscribe to Simba's channels at all (see confirm).
const aclProbe = "simba.hints.acl-probe"

// hub fans the messages of the backend's pub/sub connections out to the Hints subscribers, and
// decides which channels they subscribe to.
type hub struct {
	b    *Backend
	mu   sync.Mutex
	subs map[chan spi.Hint]struct{}
	conn *subConn // nil while there are no subscribers

	ttl    time.Duration        // the longest session TTL the backend opened
	minTTL minttl.Shortest      // the shortest session TTL the backend opened (0: none yet); paces the probes (see probe)
	leases map[string]*interest // lease name → the sessions waiting for it
	groups map[string]*interest // group → the sessions that joined it
	checks map[string]struct{}  // lease names whose subscription was confirmed, to read

	received atomic.Int64 // messages the pub/sub connections have received (for tests)

	// Test hooks (nil in production): beforeSubscribe runs on the runner before it sends a
	// SUBSCRIBE for channels; checked after a confirmation's lease read of name (hinted: a
	// Released hint was delivered).
	beforeSubscribe func(channels []string)
	checked         func(name string, hinted bool)
	linger          time.Duration // hintLinger unless a test sets it
}

// subConn is one generation of the hub's pub/sub connections and its runner.
type subConn struct {
	// ps is the backend client's pub/sub connection: every channel's on a standalone server,
	// on a Cluster only those whose master the Cluster client could not name.
	ps   *goredis.PubSub
	kick chan struct{} // capacity 1: the runner has work (a channel to subscribe, a lease to read)
	stop chan struct{}
	done chan struct{} // closed when the runner has returned

	// On a Cluster (owned by the runner): nodes maps a master's address to a pub/sub connection
	// to that master, and where each subscribed channel to the address of the connection it is
	// subscribed on ("" for ps). See Hints.
	nodes map[string]*goredis.PubSub
	where map[string]string

	// unchecked: the first Hints could not check the channel permissions (the server did not
	// answer it); the runner checks them once the server answers (see recheck).
	unchecked bool
}

// interest is what the sessions of this backend need from one channel.
type interest struct {
	// who maps each session that waits for the lease (or is a member of the group) to its
	// wait (membership).
	who map[spi.SessionID]wait
	// idle is when who became empty (zero while it is not): the linger's start.
	idle time.Time
	// subscribed: SUBSCRIBE was sent (and UNSUBSCRIBE was not).
	subscribed bool
}

// wait is one session's wait for a lease (or membership of a group).
type wait struct {
	// until is when it ends unless renewed: a waiting session acquires again within the
	// holder's time left (at most a TTL), a member keeps alive within a TTL.
	until time.Time
	// holder is the holder the session's latest acquire found (leases only).
	holder spi.SessionID
}

// Hints delivers, until ctx is done, a Released hint for every release (or close) of a lease
// that a session of this backend waits for — one that an acquire of this backend recently
// found held by another session — and a GroupChanged hint for every change of the membership
// of a group a session of this backend joined, by any client; then it closes the channel. A
// hint may repeat, and a lease or group shortly after the wait or membership ended may still be
// hinted.
//
// While there are subscribers the backend keeps a pub/sub connection (on a Cluster, one per
// master, see below). It SUBSCRIBEs to a lease's released channel (wire.ReleasedChannel) when
// an Acquire or AcquireQueued of the backend replies HeldBy, and keeps it while a session of
// the backend waits there: until that session is granted the lease, withdraws, closes or
// expires, or makes no acquire of the name for the holder's time left plus a TTL. A release
// between that acquire and the server's confirmation of the subscription would be lost, so
// each confirmation of a released channel is followed by one read of the lease (its holder
// field and first waiter, in one MULTI): if the lease is no longer held by (nor reserved for)
// the holder the acquire saw, a Released hint is delivered. It SUBSCRIBEs to a group's channel (wire.GroupChangedChannel) when a
// session of the backend joins the group, until the last such session leaves, closes or
// expires; each confirmation delivers one GroupChanged hint (a join between the session's join
// and the confirmation would otherwise be lost). A channel no longer needed is UNSUBSCRIBEd a
// second later. So a client hears of the releases and group changes it waits for, not of every
// one in the deployment.
//
// On a Redis Cluster each channel is SUBSCRIBEd (plain, not sharded, pub/sub: the wire
// protocol's PUBLISH) on a connection to the master of the channel's slot, the node whose
// scripts PUBLISH to it, which delivers the message to its own subscribers at once. A PUBLISH
// also reaches every other node's subscribers, but over the cluster bus, whose links Redis
// (7.x and earlier) opens without TCP_NODELAY: Nagle's algorithm holds a message there until the
// receiving node's delayed ACK of the previous one, so a hint heard on another node came up to
// about 40 ms late. Every round (a quarter of a second while there is interest) the runner
// moves the channels whose slot now has another master (a failover, a resharding), as far as
// the Cluster client knows (go-redis reloads its slot map after a redirection or a connection
// error, and every minute), to that master's connection; until then they are still heard, over
// the bus, while their old node lives. go-redis reconnects each connection and subscribes to
// its channels again after a connection loss (one gone silent counts: see pump); every channel's confirmation, after a
// reconnection or a move, does what the first did (a lease read, a group hint), so releases
// and group changes published meanwhile are hinted after all (releases only while the lease
// is still free).
//
// The first Hints subscribes to and unsubscribes from the channels of one probe name, so that an
// ACL user without permission for Simba's channels gets a permanent NOPERM error here rather
// than hints that silently never come; a DSN the server cannot serve (a database it does not
// have, a Cluster DSN at a standalone server or a database at a Cluster node) fails here too.
// That wait for the server returns once ctx is done, as every call does (see bounded), with
// an error wrapping ctx's, and lasts at most the client's read timeout (go-redis's
// read_timeout: 5 s by default), never more than 5 s: a server that has not answered by then
// (it accepts connections but its process is stopped, or the network went dark) is taken as
// briefly unreachable, as one that refuses connections is, not as a refusal. Hints then
// returns without the probe's check, and go-redis connects the pub/sub connection, and
// subscribes to the channels the sessions need by then, once the server answers (it tries
// again about every 100 ms after a failed attempt, each attempt bounded by the client's dial
// and read timeouts).
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil { // ended already: nothing is sent
		return nil, b.fail("hints", err)
	}
	h := &b.hub
	// The probe runs without h.mu: held, it would hold up every call that notes its reply
	// for the hub (an acquire, a release) for as long as the server makes the probe wait.
	// Two first Hints at once may then both probe: the second to finish keeps the first's
	// connection and closes its own.
	var ps, spare *goredis.PubSub
	var checked bool
	for {
		h.mu.Lock()
		if b.closed.Load() {
			h.mu.Unlock()
			if ps != nil {
				ps.Close()
			}
			return nil, spi.ErrBackendClosed
		}
		if h.conn != nil || ps != nil {
			break // holding h.mu
		}
		h.mu.Unlock()
		var err error
		if ps, checked, err = b.probeHints(ctx); err != nil {
			return nil, err
		}
	}
	if h.conn != nil {
		spare = ps
	} else {
		c := &subConn{ps: ps, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
			nodes: map[string]*goredis.PubSub{}, where: map[string]string{}, unchecked: !checked}
		h.conn = c
		h.leases, h.groups, h.checks = map[string]*interest{}, map[string]*interest{}, map[string]struct{}{}
		go h.pump(c, ps)
		go h.run(c)
	}
	ch := make(chan spi.Hint, hintBuffer)
	if h.subs == nil {
		h.subs = map[chan spi.Hint]struct{}{}
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	if spare != nil {
		spare.Close()
	}
	go func() {
		<-ctx.Done()
		h.remove(ch)
	}()
	return ch, nil
}

// probeHints opens a pub/sub connection, SUBSCRIBEs to the probe's channels (see Hints), waits
// for the server to confirm them, and UNSUBSCRIBEs: the connection is then the hub's, and
// it reports true (checked).
//
// It waits for the server at most b.probeTimeout(): a server that accepts connections but
// does not answer by then (a stopped process, a network that went dark) is taken as down, as
// one that refuses connections is, and probeHints returns a new, unconnected pub/sub
// connection (no I/O until the hub's first SUBSCRIBE), which go-redis connects once the
// server answers; it then reports false (not checked), and the hub's runner checks once the server answers
// (see recheck). A server that answers with a refusal (NOPERM, a database it does not have, a
// Cluster client at a standalone server, ...) fails the probe with that error.
//
// go-redis watches no context while it waits for a reply (a pub/sub read takes ctx's deadline,
// but a new connection's HELLO does only where the client has ContextTimeoutEnabled), so the
// wait runs on a goroutine of its own and probeHints returns as soon as ctx is done, with
// ctx's error, or the probe's time is up; the probe's connection is then closed, which ends
// the wait (or, while the goroutine is still connecting, ends it at go-redis's read timeout or
// the probe's deadline, whichever the client honours). A confirmation cut short by ctx's
// deadline (which confirm takes for a connection failure) fails the same way.
func (b *Backend) probeHints(ctx context.Context) (*goredis.PubSub, bool, error) {
	pctx, cancel := context.WithTimeout(ctx, b.probeTimeout())
	defer cancel()
	ps := b.c.Subscribe(context.Background()) // without channels: no I/O yet
	done := make(chan error, 1)
	go func() { done <- probeOn(pctx, ps) }()
	select {
	case err := <-done:
		unprobed := errors.Is(err, errUnprobed)
		if unprobed {
			err = nil
		}
		if err == nil {
			err = ended(ctx)
		}
		if err != nil {
			ps.Close()
			return nil, false, b.fail("hints", err)
		}
		// Confirmed, or the connection failed (refused, or cut at the probe's deadline): the
		// connection, if any, is free of the probe, and go-redis reconnects it by itself.
		if unprobed && !b.closed.Load() { // Close cuts the connection: no news (Hints fails)
			b.warnUnprobed("the server is unreachable: the connection failed before it answered")
		}
		return ps, !unprobed, nil
	case <-pctx.Done():
	}
	// Close waits for a SUBSCRIBE still connecting: not the caller's to wait for.
	go ps.Close()
	if err := ended(ctx); err != nil {
		return nil, false, b.fail("hints", err)
	}
	// The server did not answer in time: it is down as far as the hub is concerned.
	b.warnUnprobed("the server is unreachable: it did not answer within " + b.probeTimeout().String())
	return b.c.Subscribe(context.Background()), false, nil
}

// probeOn SUBSCRIBEs ps to the probe's channels, waits for the server to confirm them and
// UNSUBSCRIBEs: nil once confirmed, the server's refusal (a redis.Error: NOPERM, ...), or
// errUnprobed when the connection failed first.
func probeOn(ctx context.Context, ps *goredis.PubSub) error {
	probe := []string{wire.ReleasedChannel(aclProbe), wire.GroupChangedChannel(aclProbe)}
	_ = ps.Subscribe(ctx, probe...) // a failure: confirm reconnects and subscribes again
	ok, err := confirm(ctx, ps, len(probe))
	if err == nil && !ok {
		err = errUnprobed
	}
	if err == nil {
		// It may have to reconnect (after a connection failure): on this goroutine too.
		_ = ps.Unsubscribe(ctx, probe...) // a failure: go-redis forgets them anyway
	}
	return err
}

// recheckFirst and recheckMax pace recheck's attempts: the first a second after the runner
// starts, then twice as far apart after each that found the server still not answering.
const (
	recheckFirst = time.Second
	recheckMax   = 30 * time.Second
)

// recheck is the check of the channel permissions that the first Hints could not make (the
// server did not answer it), made once the server answers: a PING first, and once one
// succeeds the probe on a pub/sub connection of its own. A refusal is logged at ERROR (an ACL
// user without the channel patterns would otherwise wait on retries for every hand-over
// without a word: the hub's SUBSCRIBEs are refused, and go-redis logs that only to its own
// logger), a confirmation at INFO (it answers the earlier warning). It returns then, or when
// ctx is done (the runner stops).
func (b *Backend) recheck(ctx context.Context) {
	timer := time.NewTimer(recheckFirst)
	defer timer.Stop()
	for delay := recheckFirst; ; {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		err := b.recheckOnce(ctx)
		var re goredis.Error
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			b.log.Info("simba: redis: checked the permission to subscribe to Simba's channels now that the server answers: granted")
			return
		case errors.As(err, &re):
			b.log.Error("simba: redis: the server refuses to let this user subscribe to Simba's channels: hints never come and waiters rely on their retries (an ACL user needs &simba:lease:{*} and &simba:group:{*})", "err", err)
			return
		}
		delay = min(2*delay, recheckMax)
		timer.Reset(delay)
	}
}

// recheckOnce is one attempt of recheck, bounded by the probe's time (probeTimeout): a PING,
// then the probe. The probe's connection is closed when ctx ends, so that the runner's stop
// does not wait for a server that went silent.
func (b *Backend) recheckOnce(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, b.probeTimeout())
	defer cancel()
	if err := b.c.Ping(pctx).Err(); err != nil {
		var re goredis.Error
		if errors.As(err, &re) {
			return err // NOAUTH, WRONGPASS, ...: the server answers, with a refusal
		}
		return errUnprobed
	}
	ps := b.c.Subscribe(context.Background()) // without channels: no I/O yet
	stop := context.AfterFunc(pctx, func() { ps.Close() })
	err := probeOn(pctx, ps)
	if stop() {
		ps.Close()
	}
	return err
}

// errUnprobed: the probe's connection failed before the server confirmed its subscriptions.
var errUnprobed = errors.New("the server did not confirm the probe's subscriptions")

// warnUnprobed says that the probe could not check channel permissions, and why: the hub's
// runner checks again once the server answers (recheck), so that an ACL user without them
// learns why no hint ever comes (the hub's SUBSCRIBEs are refused, and go-redis logs that
// only to its own logger).
func (b *Backend) warnUnprobed(why string) {
	b.log.Warn("simba: redis: " + why + "; hints start, and the permission to subscribe to Simba's channels is checked, once it answers (could not check the permission now: an ACL user needs &simba:lease:{*} and &simba:group:{*})")
}

// probeTimeout is how long Hints's probe waits for the server: the client's read timeout, the
// time go-redis gives any reply before it takes the connection as broken (5 s unless the DSN's
// read_timeout says otherwise), at most hintCallTimeout (5 s: what each of the hub's own
// SUBSCRIBEs gets, and a Simba client's call timeout at its default TTL). A healthy server
// answers the whole probe (a connection's handshake, a SUBSCRIBE and an UNSUBSCRIBE) in a few
// round trips; one that does not answer within a read timeout fails the backend's other calls
// too. A shorter bound would risk taking a slow but working server for a silent one, which
// costs the probe's point: an ACL user without channel permissions would then get no error,
// and no hints.
func (b *Backend) probeTimeout() time.Duration {
	var rt time.Duration
	switch c := b.c.(type) {
	case *goredis.Client:
		rt = c.Options().ReadTimeout
	case *goredis.ClusterClient:
		rt = c.Options().ReadTimeout
	}
	if rt <= 0 || rt > hintCallTimeout { // 0: unknown, or no timeout; -1: no deadline at all
		return hintCallTimeout
	}
	return rt
}

// ended is ctx.Err(), or context.DeadlineExceeded once ctx's deadline has passed: a read that
// the socket's deadline (ctx's) cut short can return just before ctx's timer marks ctx done.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// confirm waits for the server to confirm n subscriptions and returns the error the server
// replied with instead (NOPERM: an ACL user needs the channel patterns simba:lease:{*} and
// simba:group:{*}, or a pattern that covers them such as simba:*, or allchannels). A
// connection failure is not an error here (go-redis reconnects by itself), but confirmed is
// then false.
func confirm(ctx context.Context, ps *goredis.PubSub, n int) (confirmed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, hintCallTimeout)
	defer cancel()
	for n > 0 {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if re := goredis.Error(nil); errors.As(err, &re) {
				return false, err
			}
			return false, nil
		}
		if _, ok := msg.(*goredis.Subscription); ok {
			n--
		}
	}
	return true, nil
}

// probe returns the interval at which the pub/sub connections are probed: minttl.Probe of the
// shortest session TTL the backend opened (of hintDefaultTTL before it opened one), a sixth
// of it, at least 50 ms. A connection that has read nothing for an interval and a reply's
// allowance (minttl.Reply: two intervals, at least 500 ms) is given up (see pump): within half
// a TTL (two thirds of a TTL of 1 s), so that a waiter hears releases again well before its
// one-TTL retry, while a server or client busy for a few hundred milliseconds costs no
// reconnect.
func (h *hub) probe() time.Duration {
	ttl := h.minTTL.Get()
	if ttl <= 0 {
		ttl = hintDefaultTTL
	}
	return minttl.Probe(ttl)
}

// pump forwards the messages of ps (one of c's connections) until it is closed, and acts on
// the server's confirmations of subscriptions: a lease's is read (by the runner), a group's is
// a hint.
//
// It also keeps ps from going deaf. A connection whose link went silent (a blackhole: no byte,
// close or reset either way, for good) would otherwise stay "connected" for good: go-redis's
// own health check (ChannelWithSubscriptions's) only writes a PING, and reconnects only when
// that write fails, which it does not on a silent link; and its channel hides the Pongs, so
// the hub could not tell. Every release in that time went unheard, and each hand-over to the
// backend's waiters waited for their one-TTL retry. So pump reads ps itself: a PING goes out
// once ps has read nothing for a probe interval (and every interval after), and each read
// waits at most an interval and a reply's allowance (minttl.Reply); a read that times out makes go-redis close the connection, and
// the next read connects again and subscribes to every channel anew. Each confirmation then
// does what the first did (a lease read, a group hint), so releases missed in the silence
// are hinted after all.
func (h *hub) pump(c *subConn, ps *goredis.PubSub) {
	born := time.Now()
	var lastRead atomic.Int64 // when ps last read a reply, as time.Since(born)
	silent := func() time.Duration { return time.Since(born) - time.Duration(lastRead.Load()) }
	stop, pinged := make(chan struct{}), make(chan struct{})
	defer func() {
		close(stop)
		<-pinged
	}()
	go func() {
		defer close(pinged)
		timer := time.NewTimer(h.probe())
		defer timer.Stop()
		for {
			select {
			case <-stop:
				return
			case <-timer.C:
			}
			every := h.probe()
			wait := every - silent()
			if wait <= 0 {
				ctx, cancel := context.WithTimeout(context.Background(), every)
				_ = ps.Ping(ctx) // the reply (or a message) is read by the loop below
				cancel()
				wait = every
			}
			timer.Reset(wait)
		}
	}()
	for failed := false; ; {
		every := h.probe()
		ctx, cancel := context.WithTimeout(context.Background(), every+minttl.Reply(every))
		m, err := ps.Receive(ctx)
		cancel()
		if err != nil {
			if errors.Is(err, goredis.ErrClosed) {
				return
			}
			// A timeout or a connection failure: go-redis has closed the connection, and the
			// next Receive connects again. As go-redis's channel does, a second failure in a
			// row waits a moment before the next attempt.
			if failed {
				time.Sleep(100 * time.Millisecond)
			}
			failed = true
			continue
		}
		failed = false
		lastRead.Store(int64(time.Since(born)))
		switch m := m.(type) {
		case *goredis.Message:
			h.received.Add(1)
			if name, ok := wire.ParseLeaseKey(m.Channel); ok && m.Channel == wire.ReleasedChannel(name) {
				h.deliver(spi.Hint{Kind: spi.Released, Name: name})
			} else if name, ok := wire.ParseGroupKey(m.Channel); ok && m.Channel == wire.GroupChangedChannel(name) {
				h.deliver(spi.Hint{Kind: spi.GroupChanged, Name: name})
			}
		case *goredis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			if name, ok := wire.ParseLeaseKey(m.Channel); ok && name != aclProbe {
				h.confirmed(c, name)
			} else if name, ok := wire.ParseGroupKey(m.Channel); ok && name != aclProbe {
				h.deliver(spi.Hint{Kind: spi.GroupChanged, Name: name})
			}
		}
	}
}

// confirmed queues the confirmation of name's released channel for the runner's lease read.
func (h *hub) confirmed(c *subConn, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != c {
		return
	}
	if w := h.leases[name]; w != nil && len(w.who) > 0 {
		h.checks[name] = struct{}{}
		kick(c)
	}
}

// close closes the client's pub/sub connection of a stopped c and waits for c's runner. Not
// under the hub's lock: go-redis's Close waits for a reconnection in progress, which waits for
// the server's answer (up to a read timeout) unless the backend's Close cuts the connection.
func (c *subConn) close() {
	c.ps.Close()
	<-c.done
}

func kick(c *subConn) {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run is the runner of c: it sends the SUBSCRIBEs and UNSUBSCRIBEs the interest calls for
// (one command each per connection and round, whatever the number of channels), moves the
// channels whose slot changed master (Cluster), ends the waits and lingers that are over, and
// reads the leases whose subscriptions were confirmed.
func (h *hub) run(c *subConn) {
	defer close(c.done)
	defer func() {
		for _, ps := range c.nodes {
			ps.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if c.unchecked {
		var rechecked sync.WaitGroup
		rechecked.Add(1)
		go func() {
			defer rechecked.Done()
			h.b.recheck(ctx)
		}()
		defer rechecked.Wait() // ctx ends with c.stop, before run returns
	}
	timer := time.NewTimer(hintSweep)
	defer timer.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		case <-timer.C:
		}
		sub, unsub, checks, busy := h.sweep(c)
		if len(unsub) > 0 {
			c.unsubscribe(ctx, unsub)
		}
		sub = append(c.moved(ctx, h.b.cc), sub...)
		if len(sub) > 0 {
			if f := h.beforeSubscribe; f != nil {
				f(sub)
			}
			h.subscribe(ctx, c, sub)
		}
		if len(checks) > 0 {
			h.check(ctx, c, checks)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if busy {
			timer.Reset(hintSweep)
		}
	}
}

// master returns the address and client of the master of channel's slot on a Cluster (a
// channel is tagged like the key it is named after), or "" (ps) on a standalone server or when
// the Cluster client cannot tell.
func master(ctx context.Context, cc *goredis.ClusterClient, channel string) (string, *goredis.Client) {
	if cc == nil {
		return "", nil
	}
	n, err := cc.MasterForKey(ctx, channel)
	if err != nil {
		return "", nil
	}
	return n.Options().Addr, n
}

// subscribe SUBSCRIBEs to channels, each on the connection to its slot's master (see Hints),
// opening that connection if c has none yet.
func (h *hub) subscribe(ctx context.Context, c *subConn, channels []string) {
	on := map[*goredis.PubSub][]string{}
	for _, ch := range channels {
		ps := c.ps
		addr, n := master(ctx, h.b.cc, ch)
		if addr != "" {
			if ps = c.nodes[addr]; ps == nil {
				ps = n.Subscribe(context.Background()) // connects with its first SUBSCRIBE
				c.nodes[addr] = ps
				go h.pump(c, ps)
			}
		}
		c.where[ch] = addr
		on[ps] = append(on[ps], ch)
	}
	for ps, chs := range on {
		cctx, cancel := context.WithTimeout(ctx, hintCallTimeout)
		// On a failure go-redis still records the channels and subscribes on reconnecting.
		_ = ps.Subscribe(cctx, chs...)
		cancel()
	}
}

// unsubscribe UNSUBSCRIBEs from channels on the connections they are subscribed on; a master's
// connection left without channels is closed instead (its node may be gone: a failover).
func (c *subConn) unsubscribe(ctx context.Context, channels []string) {
	on := map[string][]string{}
	for _, ch := range channels {
		addr, ok := c.where[ch]
		if !ok {
			continue
		}
		delete(c.where, ch)
		on[addr] = append(on[addr], ch)
	}
	left := map[string]bool{}
	for _, addr := range c.where {
		left[addr] = true
	}
	for addr, chs := range on {
		ps := c.ps
		if addr != "" {
			ps = c.nodes[addr]
			if !left[addr] {
				ps.Close()
				delete(c.nodes, addr)
				continue
			}
		}
		cctx, cancel := context.WithTimeout(ctx, hintCallTimeout)
		_ = ps.Unsubscribe(cctx, chs...) // go-redis forgets them either way
		cancel()
	}
}

// moved unsubscribes from the channels whose slot's master is no longer the node of the
// connection they are on (a failover or a resharding the Cluster client has learnt of) and
// returns them, to be subscribed on their master's connection.
func (c *subConn) moved(ctx context.Context, cc *goredis.ClusterClient) []string {
	if cc == nil {
		return nil
	}
	var move []string
	for ch, addr := range c.where {
		if now, _ := master(ctx, cc, ch); now != addr && now != "" {
			move = append(move, ch)
		}
	}
	if len(move) > 0 {
		c.unsubscribe(ctx, move)
	}
	return move
}

// sweep ends the waits and memberships past their time and the lingers that are over, and
// returns the channels to subscribe to and to unsubscribe from, the lease names to read, and
// whether any interest is left (the runner then sweeps again after hintSweep).
func (h *hub) sweep(c *subConn) (sub, unsub, checks []string, busy bool) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != c {
		return nil, nil, nil, false
	}
	linger := h.linger
	if linger == 0 {
		linger = hintLinger
	}
	for _, m := range []struct {
		set     map[string]*interest
		channel func(string) string
		checks  map[string]struct{} // the set's pending lease reads (none for groups)
	}{{h.leases, wire.ReleasedChannel, h.checks}, {h.groups, wire.GroupChangedChannel, nil}} {
		for name, w := range m.set {
			for s, x := range w.who {
				if now.After(x.until) {
					delete(w.who, s)
				}
			}
			switch {
			case len(w.who) > 0:
				w.idle = time.Time{}
				if !w.subscribed {
					w.subscribed = true
					sub = append(sub, m.channel(name))
				}
			case w.idle.IsZero():
				w.idle = now
			case now.Sub(w.idle) >= linger:
				if w.subscribed {
					unsub = append(unsub, m.channel(name))
				}
				delete(m.set, name)
				delete(m.checks, name)
				continue
			}
			busy = true
		}
	}
	for name := range h.checks {
		checks = append(checks, name)
	}
	clear(h.checks)
	return sub, unsub, checks, busy
}

// check reads, in one MULTI per slot, the holder field and the first waiter of each of names
// (whose released channels were just confirmed) and delivers a Released hint for each lease
// that is no longer held by, nor reserved for, the holder a waiting session's latest acquire
// found: it was released (or handed on) before the subscription could hear of it. A lease
// still held by that holder gets no hint: the engine treats hints its acquires then prove false
// as a reason to ignore that name's hints for a while, which would delay the genuine release.
func (h *hub) check(ctx context.Context, c *subConn, names []string) {
	ctx, cancel := context.WithTimeout(ctx, hintCallTimeout)
	defer cancel()
	type read struct {
		holder *goredis.SliceCmd
		first  *goredis.StringSliceCmd
	}
	// One MULTI per slot on a Cluster (a name's lease and waiter keys share its slot): the
	// Cluster client refuses a transaction across slots (CROSSSLOT, before sending anything),
	// which failed every read of a batch that held names of two slots, and with them the hints
	// of releases the subscriptions had missed. The slots' transactions go out together.
	groups := [][]string{names}
	if h.b.cc != nil {
		groups = slices.Collect(maps.Values(namesBySlot(names)))
	}
	reads := make([][]read, len(groups))
	var wg sync.WaitGroup
	for g, ns := range groups {
		reads[g] = make([]read, len(ns))
		wg.Go(func() {
			_, _ = h.b.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				for i, n := range ns {
					reads[g][i] = read{p.HMGet(ctx, wire.LeaseKey(n), wire.LeaseFieldSession), p.ZRange(ctx, wire.WaitersKey(n), 0, 0)}
				}
				return nil
			})
		})
	}
	wg.Wait()
	for g, ns := range groups {
		for i, n := range ns {
			h.hintIfReleased(c, n, reads[g][i].holder, reads[g][i].first)
		}
	}
}

// hintIfReleased acts on check's read of lease n (holder: its holder field; first: its first
// waiter): a Released hint when the lease is no longer held by (nor reserved for) the holder
// that a waiting session's acquire saw.
func (h *hub) hintIfReleased(c *subConn, n string, holder *goredis.SliceCmd, first *goredis.StringSliceCmd) {
	if holder.Err() != nil || first.Err() != nil {
		return // a failed read hints nothing: the waiter retries on its own timing
	}
	// The lease's holder, or, while it is free, the waiter it is reserved for (spi.Queuer:
	// a HeldBy reply names that waiter).
	var now string
	if v := holder.Val(); len(v) == 1 {
		now, _ = v[0].(string)
	}
	if f := first.Val(); now == "" && len(f) > 0 {
		now = f[0]
	}
	hint := false
	h.mu.Lock()
	if w := h.leases[n]; h.conn == c && w != nil {
		for _, x := range w.who {
			hint = hint || x.holder != spi.SessionID(now)
		}
	}
	h.mu.Unlock()
	if hint {
		h.deliver(spi.Hint{Kind: spi.Released, Name: n})
	}
	if f := h.checked; f != nil {
		f(n, hint)
	}
}

// opened notes a session TTL: waits and memberships last a TTL past their latest renewal, and
// the shortest paces the probes of the pub/sub connections.
func (h *hub) opened(ttl time.Duration) {
	h.mu.Lock()
	h.ttl = max(h.ttl, ttl)
	h.mu.Unlock()
	h.minTTL.Note(ttl)
}

func (h *hub) ttlLocked() time.Duration {
	if h.ttl == 0 {
		return hintDefaultTTL
	}
	return h.ttl
}

// acquired notes the reply of an acquire of name by session sid: HeldBy makes sid a waiter
// until the holder's time left plus a TTL has passed without another acquire (the engine
// retries within the holder's time left, capped at its TTL); Granted ends sid's wait;
// SessionExpired ends every wait and membership of sid.
func (h *hub) acquired(sid spi.SessionID, name string, r spi.Acquire) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return
	}
	switch r.Kind {
	case spi.HeldBy:
		ttl := h.ttlLocked()
		h.noteLocked(h.leases, name, sid, wait{until: time.Now().Add(min(max(r.Remaining, 0), ttl) + ttl), holder: r.Holder})
	case spi.Granted:
		h.drop(h.leases, name, sid)
	case spi.SessionExpired:
		h.forgetLocked(sid)
	}
}

// withdrew notes that sid no longer waits for name.
func (h *hub) withdrew(sid spi.SessionID, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(h.leases, name, sid)
}

// joined notes that sid is a member of group (until it leaves or a TTL passes without a
// keep-alive that names the group).
func (h *hub) joined(sid spi.SessionID, group string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return
	}
	h.noteLocked(h.groups, group, sid, wait{until: time.Now().Add(2 * h.ttlLocked())})
}

// left notes that sid is no longer a member of group.
func (h *hub) left(sid spi.SessionID, group string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(h.groups, group, sid)
}

// noteLocked records x as sid's interest in name's channel (set: h.leases or h.groups) and
// wakes the runner to subscribe if the channel is not subscribed yet. h.conn must be set.
func (h *hub) noteLocked(set map[string]*interest, name string, sid spi.SessionID, x wait) {
	w := set[name]
	if w == nil {
		w = &interest{who: map[spi.SessionID]wait{}}
		set[name] = w
	}
	w.who[sid] = x
	w.idle = time.Time{}
	if !w.subscribed {
		kick(h.conn)
	}
}

// drop ends sid's interest in name's channel (the runner unsubscribes after the linger once
// nobody is left).
func (h *hub) drop(set map[string]*interest, name string, sid spi.SessionID) {
	if w := set[name]; w != nil {
		delete(w.who, sid)
	}
}

// keptAlive notes a keep-alive of sid naming groups: its memberships among them are renewed.
func (h *hub) keptAlive(sid spi.SessionID, groups []string) {
	if len(groups) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	until := time.Now().Add(2 * h.ttlLocked())
	for _, g := range groups {
		if w := h.groups[g]; w != nil {
			if _, ok := w.who[sid]; ok {
				w.who[sid] = wait{until: until}
			}
		}
	}
}

// forget ends every wait and membership of sid (closed or expired).
func (h *hub) forget(sid spi.SessionID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgetLocked(sid)
}

func (h *hub) forgetLocked(sid spi.SessionID) {
	for _, w := range h.leases {
		delete(w.who, sid)
	}
	for _, w := range h.groups {
		delete(w.who, sid)
	}
}

// deliver sends hint to every subscriber.
func (h *hub) deliver(hint spi.Hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- hint:
		default: // a slow subscriber loses the hint
		}
	}
}

// releasedLocally wakes the backend's own waiters (other clients of this process on this
// backend) at once after a release by this backend, before the server's PUBLISH comes back;
// a waiter that acts on both pays at most one more acquire (the engine damps hints that prove
// false). Without a waiting session of this backend there is nobody to wake: a client that
// locks and unlocks a name nobody else here waits for sends no hint to itself. (A waiter whose
// acquire's reply is not noted yet misses this one; the read after its subscription's
// confirmation catches the release.)
func (h *hub) releasedLocally(name string) {
	h.mu.Lock()
	w := h.leases[name]
	waited := w != nil && len(w.who) > 0
	h.mu.Unlock()
	if waited {
		h.deliver(spi.Hint{Kind: spi.Released, Name: name})
	}
}

// remove ends one subscription, and the pub/sub connections with the last one.
func (h *hub) remove(ch chan spi.Hint) {
	h.mu.Lock()
	if _, ok := h.subs[ch]; !ok {
		h.mu.Unlock()
		return
	}
	delete(h.subs, ch)
	close(ch)
	var c *subConn
	if len(h.subs) == 0 {
		c = h.stopLocked()
	}
	h.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// shutdown ends every subscription and stops the runner (Close); wait closes the pub/sub
// connection and waits for the runner, which may be in a read of the server that only closing
// the client ends at once.
func (h *hub) shutdown() (wait func()) {
	h.mu.Lock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
	c := h.stopLocked()
	h.mu.Unlock()
	return func() {
		if c != nil {
			c.close()
		}
	}
}

// stopLocked stops the runner of the client's pub/sub connection (which closes the masters'
// connections) and forgets the interest; the caller then closes the connection and waits for
// the runner outside the lock (subConn.close).
func (h *hub) stopLocked() *subConn {
	c := h.conn
	if c == nil {
		return nil
	}
	h.conn = nil
	close(c.stop)
	h.leases, h.groups, h.checks = nil, nil, nil
	return c
}

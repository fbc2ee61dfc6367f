package sql

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/minttl"
	"github.com/simba-go/simba/spi"
)

// hintBuffer is each subscriber's channel capacity; a subscriber that falls further behind loses
// hints (hints only save latency, never safety).
const hintBuffer = 1024

// Reconnection backoff of the hint listener.
const (
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// listenProbeEvery is how long the hint listener waits for a notification before it checks,
// with a round trip, that its connection is still alive: a connection the network dropped
// without a word (a NAT or firewall that forgot the flow, a server host gone) sends nothing,
// and without the check the listener waited on it forever and hints stopped for good. A
// variable for tests.
var listenProbeEvery = 15 * time.Second

// hintHub fans the hints of one background runner out to the Hints subscribers. The runner
// runs while there is at least one subscriber: it starts with the first and its context is
// cancelled when the last leaves (or the backend closes). PostgreSQL's runner LISTENs;
// SQLite's polls its change counter (sqlitewake.go).
type hintHub struct {
	mu     sync.Mutex
	subs   map[chan spi.Hint]struct{}
	cancel context.CancelFunc // stops the runner
	done   chan struct{}      // closed when the runner has exited
}

// subscribe adds a subscriber until ctx ends or stop closes, starting run with the first.
func (h *hintHub) subscribe(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup, run func(context.Context)) <-chan spi.Hint {
	ch := make(chan spi.Hint, hintBuffer)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[chan spi.Hint]struct{}{}
	}
	h.subs[ch] = struct{}{}
	if h.cancel == nil {
		rctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		wg.Add(1)
		go func(done chan struct{}) {
			defer wg.Done()
			defer close(done)
			run(rctx)
		}(h.done)
	}
	h.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-stop:
		}
		h.remove(ch)
	}()
	return ch
}

// remove ends one subscription, and the runner with the last one.
func (h *hintHub) remove(ch chan spi.Hint) {
	h.mu.Lock()
	if _, ok := h.subs[ch]; !ok {
		h.mu.Unlock()
		return
	}
	delete(h.subs, ch)
	close(ch)
	var done chan struct{}
	if len(h.subs) == 0 && h.cancel != nil {
		h.cancel()
		done = h.done
		h.cancel, h.done = nil, nil
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// deliver sends hint to every subscriber; a slow subscriber loses it (hints only save latency).
func (h *hintHub) deliver(hint spi.Hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- hint:
		default:
		}
	}
}

// pgHub is PostgreSQL's hub: its runner keeps one dedicated connection LISTENing.
type pgHub struct {
	hintHub
	// listening is signalled (non-blocking) every time the listener has (re)subscribed; tests
	// wait on it.
	listening chan struct{}
}

// hints subscribes to the hub, starting the listener with the first subscriber. (Backend.Hints
// has checked, under the lock Close takes, that the backend is open.)
func (d *pgDialect) hints(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) (<-chan spi.Hint, error) {
	return d.hub.subscribe(ctx, stop, wg, d.listen), nil
}

// localHub is the hub that Release fans a release out to at once (wake.go).
func (d *pgDialect) localHub() *hintHub { return &d.hub.hintHub }

// listen keeps one connection LISTENing on the release and group channels until ctx ends,
// reconnecting with capped exponential backoff (full jitter) after any failure.
func (d *pgDialect) listen(ctx context.Context) {
	backoff := listenBackoffMin
	for ctx.Err() == nil {
		ok := d.listenOnce(ctx)
		if ok {
			backoff = listenBackoffMin
		}
		t := time.NewTimer(rand.N(backoff) + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		// Once a session opened, the backoff stops at a third of the TTL: a listener that
		// failed through a long outage must not stay deaf for seconds after it ends.
		limit := listenBackoffMax
		if ttl := d.b.minTTL.Get(); ttl > 0 {
			limit = min(limit, max(ttl/3, listenBackoffMin))
		}
		backoff = min(2*backoff, limit)
	}
}

// probeEvery returns how long the listener waits for a notification before it pings, and how
// long that ping may take (bounded by timeout, the connect timeout): listenProbeEvery and
// timeout until a session opened, then at most the probe interval of the shortest TTL asked
// for and its reply's allowance (minttl.Probe and minttl.Reply: a sixth and a third of the
// TTL, at least 50 and 500 ms, so that a server busy for a few hundred milliseconds, a
// checkpoint's fsync, costs no reconnect). A connection gone silent (a blackhole: no byte,
// close or reset) is so given up within half a TTL (two thirds of a TTL of 1 s); with 15 s and the connect timeout it lasted 20 s, every release in that time
// went unheard, and each hand-over to the backend's waiters waited for their retry (an outside
// trial at TTL 1 s: Locks of 8 s while the waiter's link had been down for 3.6 s).
func (d *pgDialect) probeEvery(timeout time.Duration) (every, ping time.Duration) {
	every, ping = listenProbeEvery, timeout
	if ttl := d.b.minTTL.Get(); ttl > 0 {
		every = min(every, minttl.Probe(ttl))
		ping = min(ping, minttl.Reply(every))
	}
	return every, ping
}

// listenOnce connects, LISTENs and forwards notifications until the connection fails or ctx
// ends. It reports whether it got as far as listening.
//
// Connecting and LISTENing are bounded by the connect timeout (DefaultConnectTimeout when the
// pool has none), or one TTL if shorter; the wait is cut after a probe interval without a
// notification for a ping, bounded by the connect timeout or a third of the TTL (see
// probeEvery).
func (d *pgDialect) listenOnce(ctx context.Context) bool {
	cfg := d.pool.Config().ConnConfig.Copy()
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	// Connecting and LISTENing take at most one TTL once a session opened: an attempt made
	// into a blackhole would otherwise keep the listener deaf for the connect timeout after
	// the network healed.
	setup := timeout
	if ttl := d.b.minTTL.Get(); ttl > 0 {
		setup = min(setup, max(ttl, 100*time.Millisecond))
	}
	cctx, cancel := context.WithTimeout(ctx, setup)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	wd, _ := wire.SQLDialectByName(wire.SQLPostgres)
	for _, listen := range wd.Listen {
		if _, err := conn.Exec(cctx, listen); err != nil {
			return false
		}
	}
	cancel()
	select {
	case d.hub.listening <- struct{}{}:
	default:
	}
	for {
		every, pingTimeout := d.probeEvery(timeout)
		wctx, cancel := context.WithTimeout(ctx, every)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !pgconn.Timeout(err) || conn.IsClosed() {
				return true
			}
			// Nothing for a while: prove the connection still answers (a wait cut short by
			// its own deadline leaves the connection usable).
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return true
			}
			continue
		}
		switch n.Channel {
		case wire.SQLReleaseChannel:
			d.hub.deliver(spi.Hint{Kind: spi.Released, Name: n.Payload})
		case wire.SQLGroupChannel:
			d.hub.deliver(spi.Hint{Kind: spi.GroupChanged, Name: n.Payload})
		}
	}
}

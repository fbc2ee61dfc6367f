// The ensemble failover test is built without the race detector: stopping the ensemble leader
// makes go-zookeeper reconnect with watches set, and go-zookeeper v1.0.4 (the latest) reads
// Conn.lastZxid in sendSetWatches while its recvLoop writes it — an upstream data race
// (go-zookeeper/zk pull request 35, unmerged) that -race reports and that is not in our code.
// `make test` runs this test in a separate step without -race; the rest of the package runs
// under -race.

//go:build !race

package zookeeper

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// termLog records, per client, the intervals in which it held a locally valid term, on one
// monotonic clock shared by every client of the test.
type termLog struct {
	mu    sync.Mutex
	start time.Time
	terms []*termSpan
}

type termSpan struct {
	client     string
	token      int64
	from, till time.Duration // valid on [from, till): till is the local deadline, moved by renewals
}

func (l *termLog) now() time.Duration { return time.Since(l.start) }

// ensembleClient acts as Simba's engine does for one election: it keeps its session alive
// every renewal interval, computes the local deadline sentAt + remaining × (1 − drift) − margin
// from every reply, drops its term when the deadline passes, a keep-alive does not report the
// lease or the session expires, and tries to acquire whenever it holds no term.
type ensembleClient struct {
	name    string
	b       *Backend
	ttl     time.Duration
	lease   string
	log     *termLog
	session spi.SessionID
	term    *termSpan
	grants  []int64
	expired int
	errors  int
}

const (
	ensembleDrift  = 0.01
	ensembleMargin = 50 * time.Millisecond
)

func (c *ensembleClient) deadline(sentAt, remaining time.Duration) time.Duration {
	return sentAt + time.Duration(float64(remaining)*(1-ensembleDrift)) - ensembleMargin
}

// drop ends the current term at now (if it has not already run out).
func (c *ensembleClient) drop(now time.Duration) {
	if c.term == nil {
		return
	}
	c.log.mu.Lock()
	if now < c.term.till {
		c.term.till = now
	}
	c.log.mu.Unlock()
	c.term = nil
}

func (c *ensembleClient) run(ctx context.Context) {
	renew := c.ttl / 3
	var lastRenew time.Duration = -renew
	for ctx.Err() == nil {
		call, cancel := context.WithTimeout(ctx, renew)
		now := c.log.now()
		if c.term != nil && now >= c.term.till {
			c.drop(now) // the local deadline passed
		}
		switch {
		case c.session == "":
			s, err := c.b.OpenSession(call, c.name, c.ttl)
			if err == nil {
				c.session, lastRenew = s.ID, now
			} else {
				c.errors++
			}
		case now-lastRenew >= renew:
			sentAt := c.log.now()
			ka, err := c.b.KeepAlive(call, c.session, []string{c.lease}, nil)
			switch {
			case err != nil:
				c.errors++
			case ka.Expired:
				c.expired++
				c.drop(c.log.now())
				c.session = ""
			default:
				lastRenew = sentAt
				if c.term != nil {
					held := len(ka.Held) == 1 && ka.Held[0].Token == c.term.token
					if !held {
						c.drop(c.log.now()) // TAKEN_OVER
					} else {
						c.log.mu.Lock()
						if d := c.deadline(sentAt, ka.Remaining); d > c.term.till && c.term.till > sentAt {
							c.term.till = d
						}
						c.log.mu.Unlock()
					}
				}
			}
		case c.term == nil:
			sentAt := c.log.now()
			r, err := c.b.Acquire(call, c.session, c.lease)
			switch {
			case err != nil:
				c.errors++
			case r.Kind == spi.SessionExpired:
				c.expired++
				c.session = ""
			case r.Kind == spi.Granted:
				if d := c.deadline(sentAt, r.Remaining); d > c.log.now() {
					span := &termSpan{client: c.name, token: r.Token, from: c.log.now(), till: d}
					c.log.mu.Lock()
					c.log.terms = append(c.log.terms, span)
					c.log.mu.Unlock()
					c.term = span
					c.grants = append(c.grants, r.Token)
				}
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestEnsembleLeaderFailover stops the leader of a 3-server ensemble while two clients
// contend for one lease, then brings it back. Whatever the timing, every term a client
// considers valid must be the only one at that instant (never two holders), tokens of
// successive holders must increase, and after the failover both clients work again, one
// holding the lease. The ensemble is the test's own (startPrivateEnsemble, on spare ports):
// the shared servers are never stopped.
func TestEnsembleLeaderFailover(t *testing.T) {
	testenv.Short(t, "starts a private ensemble and restarts its servers")
	e := startPrivateEnsemble(t, 3)
	// A TTL the election fits in (the holder normally keeps its term), and one it does not
	// (the holder's local deadline passes while the servers elect a leader).
	for _, ttl := range []time.Duration{2 * time.Second, 500 * time.Millisecond} {
		t.Run("TTL="+ttl.String(), func(t *testing.T) { ensembleFailover(t, e, ttl) })
	}
}

func ensembleFailover(t *testing.T, e *privateEnsemble, ttl time.Duration) {
	e.startStopped(t) // a server an earlier subtest stopped, if it failed before starting it again
	leader := e.leader(t)
	dsn := fmt.Sprintf("zk://%s/ensemble-%d", strings.Join(e.addrs(), ","), time.Now().UnixNano())
	log := &termLog{start: time.Now()}
	lease := "leader-failover"
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var clients []*ensembleClient
	for _, name := range []string{"a", "b"} {
		c := &ensembleClient{name: name, b: openBackend(t, dsn), ttl: ttl, lease: lease, log: log}
		clients = append(clients, c)
	}
	for _, c := range clients {
		wg.Go(func() { c.run(ctx) })
	}
	defer func() { cancel(); wg.Wait() }() // also when a helper below fails the test
	time.Sleep(3 * time.Second)
	t.Logf("stopping the ensemble leader, server %d", leader+1)
	e.servers[leader].stop()
	time.Sleep(8 * time.Second)
	t.Logf("starting server %d again", leader+1)
	e.startStopped(t) // and wait until it follows
	time.Sleep(3 * time.Second)
	cancel()
	wg.Wait()

	for _, c := range clients {
		t.Logf("client %s: grants %v, expiries %d, failed calls %d, holds at end: %v", c.name, c.grants, c.expired, c.errors, c.term != nil)
	}
	// Never two holders: the valid intervals of different terms are disjoint.
	log.mu.Lock()
	terms := append([]*termSpan(nil), log.terms...)
	log.mu.Unlock()
	if len(terms) == 0 {
		t.Fatal("no client was ever granted the lease")
	}
	for i, x := range terms {
		for _, y := range terms[i+1:] {
			if x.token == y.token && x.client == y.client {
				continue // the same tenure re-adopted after a local deadline
			}
			if x.from < y.till && y.from < x.till {
				t.Errorf("two holders: %s token %d valid [%v, %v) and %s token %d valid [%v, %v)",
					x.client, x.token, x.from, x.till, y.client, y.token, y.from, y.till)
			}
		}
	}
	// Tokens grow from holder to holder (a holder may re-adopt its own token).
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		if cur.token < prev.token || (cur.token == prev.token && cur.client != prev.client) {
			t.Errorf("token went from %d (%s) to %d (%s)", prev.token, prev.client, cur.token, cur.client)
		}
	}
	// After the failover the ensemble serves both clients again and exactly one holds the lease.
	holders := 0
	for _, c := range clients {
		if c.session == "" {
			t.Errorf("client %s has no session at the end", c.name)
			continue
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		ka, err := c.b.KeepAlive(cctx, c.session, []string{lease}, nil)
		ccancel()
		if err != nil || ka.Expired {
			t.Errorf("client %s: KeepAlive after the failover = %+v, %v", c.name, ka, err)
		}
		holders += len(ka.Held)
	}
	if holders != 1 {
		t.Errorf("%d clients hold the lease after the failover, want 1", holders)
	}
}

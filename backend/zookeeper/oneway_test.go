package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/spi"
)

// TestOneWayStallCloseFreesLease: when the server's replies stop coming back while the
// client's requests still reach it (a one-way partition), a holder that gives up on its
// session and closes it (as Simba's engine does at its deadline) must free its lease at
// once, whatever go-zookeeper's connection is doing: a second session then acquires the lease
// well within 1.5 session timeouts of the stall, and before the server could have expired the
// holder's session on its own (so only the close can have freed it).
//
// Three moments of the close: while the stalled connection is still up (go-zookeeper's own
// close request goes out on it); after go-zookeeper gave up on it (2/3 of the session timeout
// after the first unanswered request) and before it reconnects (the pacer redials after
// 25–50 ms; the test holds it back): go-zookeeper sent nothing then and, once closed, never reconnected; and while its
// reconnect's handshake awaits the answer that never comes: the connect request reached the
// server and renewed the session, and go-zookeeper's close request waited behind the
// handshake. Before the fix the last two left the lease to the server's expiry, up to a
// session timeout after the last request that reached it. In the last the close must go on
// the reconnect's connection, right behind its connect request: sent on a connection of the
// backend's own it raced with that connect request at the server, and lost now and then.
func TestOneWayStallCloseFreesLease(t *testing.T) {
	z := startPrivateZK(t)
	const ttl = 3 * time.Second
	chroot := "/simba-oneway"
	waiterB := openBackend(t, "zk://"+z.addr+chroot)
	ctx := context.Background()
	ws, err := waiterB.OpenSession(ctx, "waiter", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		// closeAt waits for the moment to close the holder's session, and returns the earliest
		// time the server could expire the session on its own (a lower bound of when the last
		// request that reached it was sent, plus the session timeout).
		closeAt func(t *testing.T, p *faultproxy.Proxy, b *Backend, sid spi.SessionID) time.Time
		// conns is how many connections the holder has made through the proxy once the lease
		// is free: go-zookeeper's, then its reconnect's if any, then the backend's own one that
		// carried the close if go-zookeeper's could not.
		conns int
	}{
		{"connection up", func(t *testing.T, p *faultproxy.Proxy, b *Backend, sid spi.SessionID) time.Time {
			sent := keepAliveUnanswered(t, b, sid, ttl)
			return sent.Add(ttl)
		}, 1},
		{"reconnect pending", func(t *testing.T, p *faultproxy.Proxy, b *Backend, sid spi.SessionID) time.Time {
			// The pacer redials 25–50 ms after go-zookeeper gives up: hold the redial back
			// (as go-zookeeper's own one-second wait did) so that the close falls before it.
			testPacerHold.Store(int64(time.Minute))
			t.Cleanup(func() { testPacerHold.Store(0) })
			keepAliveUnanswered(t, b, sid, ttl)
			// The engine retries an unanswered keep-alive inside its remaining time.
			last := keepAliveUnanswered(t, b, sid, ttl)
			waitFor(t, "go-zookeeper to give up on the stalled connection", p.Conns()[0].ClientClosed)
			if len(p.Conns()) > 1 {
				t.Fatal("go-zookeeper reconnected while the pacer held the redial back")
			}
			return last.Add(ttl)
		}, 2},
		{"handshake unanswered", func(t *testing.T, p *faultproxy.Proxy, b *Backend, sid spi.SessionID) time.Time {
			keepAliveUnanswered(t, b, sid, ttl)
			keepAliveUnanswered(t, b, sid, ttl) // so that the reconnect finds the session alive
			waitFor(t, "go-zookeeper to give up on the stalled connection", p.Conns()[0].ClientClosed)
			gaveUp := time.Now() // the reconnect's connect request comes later
			waitFor(t, "the reconnect's connect request to reach the server", func() bool {
				cs := p.Conns()
				return len(cs) > 1 && cs[1].BytesUp() > 0
			})
			return gaveUp.Add(ttl)
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := faultproxy.StartTest(t, z.addr)
			holderB := openBackend(t, "zk://"+p.Addr()+chroot)
			hs, err := holderB.OpenSession(ctx, "holder", ttl)
			if err != nil {
				t.Fatal(err)
			}
			name := "lease-" + tc.name[:4]
			if a, err := holderB.Acquire(ctx, hs.ID, name); err != nil || a.Kind != spi.Granted {
				t.Fatalf("holder's acquire: %+v, %v", a, err)
			}
			if a, err := waiterB.Acquire(ctx, ws.ID, name); err != nil || a.Kind != spi.HeldBy || a.Holder != hs.ID {
				t.Fatalf("waiter's acquire before the stall: %+v, %v", a, err)
			}

			// A one-way partition: the server's bytes are held back (as TCP holds them in
			// retransmission), the client's reach it. It never heals: the proxy's close at the
			// test's end drops every connection with what it holds.
			p.Set(faultproxy.Fault{Down: faultproxy.Stall})
			stalled := time.Now()
			expiry := tc.closeAt(t, p, holderB, hs.ID)
			// As the engine's, the close is a call of its own that gives up after ttl/3 (its
			// reply cannot come back); the waiter does not wait for it.
			closed := time.Now()
			closeErr := make(chan error, 1)
			go func() {
				cctx, cancel := context.WithTimeout(ctx, ttl/3)
				defer cancel()
				closeErr <- holderB.CloseSession(cctx, hs.ID)
			}()
			defer func() {
				if err := <-closeErr; err != nil && !errors.Is(err, spi.ErrUnavailable) {
					t.Errorf("CloseSession: %v", err)
				}
			}()

			limit := stalled.Add(ttl * 3 / 2)
			if expiry.Before(limit) {
				limit = expiry
			}
			for {
				a, err := waiterB.Acquire(ctx, ws.ID, name)
				if err != nil {
					t.Fatalf("waiter's acquire: %v", err)
				}
				if a.Kind == spi.Granted {
					t.Logf("acquired %.2f×TTL after the stall began, %v after the close (limit: %.2f×TTL)",
						time.Since(stalled).Seconds()/ttl.Seconds(), time.Since(closed).Round(time.Millisecond),
						limit.Sub(stalled).Seconds()/ttl.Seconds())
					if err := waiterB.Release(ctx, ws.ID, name, a.Token); err != nil {
						t.Fatal(err)
					}
					if len(p.Conns()) != tc.conns {
						t.Errorf("the holder made other than %d connections", tc.conns)
					}
					return
				}
				if time.Now().After(limit) {
					t.Fatalf("the closed holder's lease was still held %.2f×TTL after the stall began: the close did not reach the server (held by %s; the holder was %s)",
						time.Since(stalled).Seconds()/ttl.Seconds(), a.Holder, hs.ID)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// keepAliveUnanswered sends a keep-alive of session sid, whose reply the stall holds back, and
// returns when it was sent; the call gives up after ttl/3, as the engine's calls do, but by a
// cancellation rather than a deadline: a keep-alive that times out closes a connection still
// silent (tap.dropIfTimedOut), and go-zookeeper reconnects at once, which would pass the
// moments these cases hold the close at (the stalled connection still up, or given up at the
// reply timeout). Under the engine the same states come, sooner: the stalled connection given
// up TTL/3 after a keep-alive, then reconnects whose connect requests reach the server and
// whose handshakes go unanswered.
func keepAliveUnanswered(t *testing.T, b *Backend, sid spi.SessionID, ttl time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer time.AfterFunc(ttl/3, cancel).Stop()
	defer cancel()
	sent := time.Now()
	if _, err := b.KeepAlive(ctx, sid, nil, nil); err == nil {
		t.Fatal("a keep-alive was answered through the stall")
	}
	return sent
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

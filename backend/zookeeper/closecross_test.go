package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
	"github.com/simba-go/simba/spi"
)

// TestKeepAliveCrossingCloseSessionIsNotExpiry: a keep-alive still waiting for its reply when
// CloseSession closes the session (the network stalled; the engine closes its session when
// the client is closed) fails with a retryable error, not with SessionExpired: the server did
// not expire the session, and may not even have heard of the close yet. It answered Expired
// (CloseSession's close of the connection failed the request, and the session counted as
// gone), so an outside trial's Client.Close at a blackholed ZooKeeper returned nil in 1 ms, its
// session's close cut short, and the closed client's lease stayed held at the server for the
// session timeout (the engine took the session for expired and finished the close). After the
// stall heals, the close completes and frees the lease.
func TestKeepAliveCrossingCloseSessionIsNotExpiry(t *testing.T) {
	errExpired := errors.New("the keep-alive answered SessionExpired")
	px := faultproxy.StartTest(t, testenv.ZooKeeper(t)[0])
	chroot := zktest.New(t, testenv.ZooKeeper(t), "simba-closecross").Path
	b := openBackend(t, "zk://"+px.Addr()+chroot)
	other := openBackend(t, "zk://"+testenv.ZooKeeper(t)[0]+chroot)
	ctx := context.Background()
	const ttl = 30 * time.Second // the server cannot expire it during the test
	s, err := b.OpenSession(ctx, "closing", ttl)
	if err != nil {
		t.Fatal(err)
	}
	name := "closecross-" + time.Now().Format("150405.000000")
	mustGrant(t, b, s.ID, name)

	conns := px.Conns()
	if len(conns) != 1 {
		t.Fatalf("%d connections through the proxy, want the session's one", len(conns))
	}
	sentBefore := conns[0].BytesUp()
	px.Set(faultproxy.Fault{Down: faultproxy.Stall}) // requests arrive, replies are held
	kaCtx, cancel := context.WithCancel(ctx)         // no deadline: the keep-alive does not give up on its own
	defer cancel()
	ka := make(chan error, 1)
	go func() {
		r, err := b.KeepAlive(kaCtx, s.ID, []string{name}, nil)
		if err == nil && r.Expired {
			err = errExpired
		} else if err == nil {
			err = errors.New("renewed through a stall")
		}
		ka <- err
	}()
	waitFor(t, "the keep-alive's request at the proxy", func() bool { return conns[0].BytesUp() > sentBefore })
	closed := make(chan error, 1)
	go func() {
		cctx, cc := context.WithTimeout(ctx, 20*time.Second)
		defer cc()
		closed <- b.CloseSession(cctx, s.ID)
	}()
	err = <-ka
	if errors.Is(err, errExpired) {
		t.Fatalf("a keep-alive that crossed CloseSession reported SessionExpired")
	}
	if spi.Classify(err) != spi.Retryable {
		t.Fatalf("a keep-alive that crossed CloseSession: %v (class %v), want a retryable error", err, spi.Classify(err))
	}
	px.Heal()
	if err := <-closed; err != nil {
		t.Logf("CloseSession: %v", err)
	}
	o, err := other.OpenSession(ctx, "other", ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer other.CloseSession(ctx, o.ID)
	waitFor(t, "the closed session's lease to be free", func() bool {
		r, err := other.Acquire(ctx, o.ID, name)
		return err == nil && r.Kind == spi.Granted
	})
}

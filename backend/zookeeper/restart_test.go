package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"

	"github.com/simba-go/simba/internal/testenv"
)

// TestFencingSpecAcrossServerRestarts runs the fencing suite on a private server that the
// suite restarts: ZooKeeper persists its zxid counter, so czxid tokens keep growing.
func TestFencingSpecAcrossServerRestarts(t *testing.T) {
	testenv.Short(t, "starts its own ZooKeeper")
	z := startPrivateZK(t)
	dsn := "zk://" + z.addr + "/fencing"
	rec := newRecorder()
	tck.FencingSpec(t, tck.Factory{
		NewBackend: func(t testing.TB, _ tck.BackendConfig) spi.Backend {
			b, err := New(dsn)
			if err != nil {
				t.Fatal(err)
			}
			return recorded{Backend: b, r: rec}
		},
		ExpireSession:  rec.expire,
		Restart:        z.restart,
		PersistsTokens: true,
		MinTTL:         time.Second, // above the private server's minSessionTimeout (400 ms): room for a loaded machine (see factory)
		MaxTTL:         60 * time.Second,
		ExpiryLag:      400 * time.Millisecond,
		Hints:          true,
	})
}

// TestTokensIncreaseAcrossExpiryAndRestart follows one lease through a forced session expiry
// and two server restarts (one while it is held, one while it is free): every grant has a
// greater token, and a session that survives the restart keeps its lease and token.
func TestTokensIncreaseAcrossExpiryAndRestart(t *testing.T) {
	testenv.Short(t, "starts its own ZooKeeper")
	z := startPrivateZK(t)
	dsn := "zk://" + z.addr
	rec := newRecorder()
	b := recorded{Backend: openBackend(t, dsn), r: rec}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func() spi.SessionID {
		t.Helper()
		s, err := b.OpenSession(ctx, "restart-test", 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	grant := func(s spi.SessionID, last int64, how string) int64 {
		t.Helper()
		r, err := b.Acquire(ctx, s, "fenced")
		if err != nil || r.Kind != spi.Granted {
			t.Fatalf("%s: Acquire = %+v, %v; want granted", how, r, err)
		}
		if r.Token <= last {
			t.Fatalf("%s: token %d, want > %d", how, r.Token, last)
		}
		return r.Token
	}
	s1 := open()
	t1 := grant(s1, 0, "first grant")

	rec.expire(t, s1)
	if ka, err := b.KeepAlive(ctx, s1, []string{"fenced"}, nil); err != nil || !ka.Expired {
		t.Fatalf("KeepAlive after the forced expiry = %+v, %v; want expired", ka, err)
	}
	if r, err := b.Acquire(ctx, s1, "fenced"); err != nil || r.Kind != spi.SessionExpired {
		t.Fatalf("Acquire by the expired session = %+v, %v; want session-expired", r, err)
	}
	s2 := open()
	t2 := grant(s2, t1, "grant after the holder's session expired")

	// Restart while held: the ZooKeeper session survives (the server persists sessions), the
	// backend reconnects to it, and the lease is still held with the same token.
	z.restart(t)
	var ka spi.KeepAlive
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		ka, err = b.KeepAlive(ctx, s2, []string{"fenced"}, nil)
		if err == nil {
			break
		}
		if spi.Classify(err) != spi.Retryable || time.Now().After(deadline) {
			t.Fatalf("KeepAlive after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ka.Expired || len(ka.Held) != 1 || ka.Held[0].Token != t2 {
		t.Fatalf("KeepAlive after a restart = %+v; want live, holding fenced with token %d", ka, t2)
	}
	if again := grant(s2, t2-1, "re-acquire after the restart"); again != t2 {
		t.Fatalf("re-acquire after the restart: token %d, want the same %d", again, t2)
	}
	if err := b.Release(ctx, s2, "fenced", t2); err != nil {
		t.Fatal(err)
	}

	// Restart while free: the next grant still has a greater token.
	z.restart(t)
	var t3 int64
	deadline = time.Now().Add(30 * time.Second)
	for {
		s3, err := b.OpenSession(ctx, "restart-test", 20*time.Second)
		if err == nil {
			t3 = grant(s3.ID, t2, "grant after a restart while free")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("OpenSession after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("tokens: %d (first) < %d (after expiry) < %d (after restarts)", t1, t2, t3)
}

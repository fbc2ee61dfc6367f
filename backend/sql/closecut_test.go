package sql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
)

// TestPostgresCloseCutsCleanups: the Close of a backend Open made does not wait for the
// cleanups of the connections a silent link broke. A statement cut short by its context makes
// pgconn send a cancel request on a new connection and wait for the server to close it, then
// Terminate and wait again, each for up to the connect timeout (60 s here; 5 s by default,
// more than a short TTL), and pgxpool's Close waits for all of it: `simba run` at TTL 3 s
// exited 2 to 3 s after its term's validity on a blackholed PostgreSQL. The old code's Close
// returned only once the proxy closed the silenced connections or pgconn's own 15 s cleanup
// deadline passed; the test closes the proxy only after Close returned (or, failing, after
// 10 s, short of that deadline: the fixed Close takes milliseconds).
func TestPostgresCloseCutsCleanups(t *testing.T) {
	dsn, p := proxiedPgDSN(t, map[string]string{"pool_max_conns": "1", "connect_timeout": "60"})
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	// Opened without a deadline: the pool's connection gets the whole connect timeout as its
	// bound (scaledConnectTimeout scales only a connect a call with a deadline started).
	sid, err := b.OpenSession(context.Background(), "closecut", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := len(p.Conns())
	p.Set(faultproxy.Fault{Blackhole: true})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = b.KeepAlive(ctx, sid.ID, nil, nil)
	cancel()
	if err == nil {
		t.Fatal("keep-alive through a blackhole succeeded")
	}
	// The broken connection's cleanup has begun once its cancel request reached the proxy.
	for len(p.Conns()) == before {
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() {
		b.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("Close waited for the cleanups of connections a silent link broke")
		p.Close() // ends them: the sockets close
		<-done
	}
}

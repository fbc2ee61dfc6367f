package sql

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/locktest"
)

// TestMySQLChurnReusesConnections: three backends on MySQLConnector pools (one client each,
// three goroutines per client) lock and unlock two names until 300 grants, the waiters woken by
// the wakers' named-lock waits; every connection either pool of a backend dials is counted at
// its dial. A wait that its own session's grant overtook while it blocked in GET_LOCK was
// cancelled mid-statement, and go-sql-driver closes such a connection: the next wait dialled
// a new one, at about one grant in seven. The calls' pools keep 32 idle connections here (a
// pool of the test's own), so that only the wakers' dials can add up.
func TestMySQLChurnReusesConnections(t *testing.T) {
	const backends, workers, names, grants = 3, 3, 2, 300
	_, cfg := myDatabase(t, "simba_sqlbe_")
	var dials atomic.Int64
	var d net.Dialer
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	bs := make([]*Backend, backends)
	for i := range bs {
		conn, err := MySQLConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(conn)
		db.SetMaxIdleConns(32)
		t.Cleanup(func() { db.Close() })
		bs[i], _ = migratedMySQL(t, db)
	}
	clients := locktest.Clients(t, 3*time.Second, bs[0], bs[1], bs[2])
	ctx := testCtx(t)
	prefix := "churnconns-" + unique(t)
	for _, c := range clients { // sessions and first connections
		h, err := c.Lock(ctx, prefix+"-warm")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := dials.Load()
	var granted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, backends*workers)
	for ci, c := range clients {
		for wi := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := ci*workers + wi; granted.Load() < grants; i++ {
					h, err := c.Lock(ctx, fmt.Sprintf("%s-%d", prefix, i%names))
					if err != nil {
						errs <- err
						return
					}
					granted.Add(1)
					if err := h.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := dials.Load() - before
	t.Logf("%d grants, %d new connections (every pool of %d backends)", granted.Load(), n, backends)
	// Each waker may dial up to its places (a marker, blocking waits, the watch, reap) once,
	// and a few more for connections closed by the server or the driver; not one per handful
	// of grants.
	if limit := int64(backends * (mysqlMaxWaits + 3)); n > limit {
		t.Errorf("%d new connections for %d grants, want at most %d", n, granted.Load(), limit)
	}
}

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

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/internal/locktest"
	"github.com/simba-go/simba/spi"
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
	bs := make([]*Backend, backends)
	for i := range bs {
		bs[i], _ = migratedMySQL(t, countingPool(t, cfg, &dials))
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

// TestMySQLWakerKeepsItsConnections: a holder's backend holds eight names (and marks them), a
// waiter's client waits for the eight at once (a blocking wait each, on a connection of its
// waker's own pool), the holder releases them, the waiter takes and unlocks them; three
// rounds. The waiter's connections are counted at their dial (its calls' pool keeps 32 idle, a
// pool of the test's own): from the second round on, the waker's pool had to dial again
// each wait's connection past database/sql's default of 2 idle ones.
func TestMySQLWakerKeepsItsConnections(t *testing.T) {
	const rounds = 3
	dsn, cfg := myDatabase(t, "simba_sqlbe_")
	holder := migrated(t, dsn)
	var dials atomic.Int64
	waiterB, ctx := migratedMySQL(t, countingPool(t, cfg, &dials))
	w := waiterB.waker.(*mysqlWaker)
	if _, err := holder.Hints(ctx); err != nil {
		t.Fatal(err)
	}
	hs, err := holder.OpenSession(ctx, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := locktest.Clients(t, time.Minute, waiterB)[0]
	prefix := "wakerconns-" + unique(t) + "-"
	var perRound []int64
	for round := range rounds {
		before := dials.Load()
		tokens := make([]int64, mysqlMaxWaits)
		for i := range tokens {
			r, err := holder.Acquire(ctx, hs.ID, fmt.Sprintf("%s%d", prefix, i))
			if err != nil || r.Kind != spi.Granted {
				t.Fatalf("holder's acquire: %+v %v", r, err)
			}
			tokens[i] = r.Token
		}
		blocks := w.snapshot().blocks
		errs := make(chan error, len(tokens))
		for i := range tokens {
			go func() {
				h, err := c.Lock(ctx, fmt.Sprintf("%s%d", prefix, i))
				if err == nil {
					err = h.Unlock(ctx)
				}
				errs <- err
			}()
		}
		waitUntil(t, "a blocking wait per name", func() bool { return w.snapshot().blocks >= blocks+int64(len(tokens)) })
		for i, tok := range tokens {
			if err := holder.Release(ctx, hs.ID, fmt.Sprintf("%s%d", prefix, i), tok); err != nil {
				t.Fatal(err)
			}
		}
		for range tokens {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		// The waits end once their names are granted.
		waitUntil(t, "the waits ended", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.waits) == 0
		})
		perRound = append(perRound, dials.Load()-before)
	}
	t.Logf("new connections per round: %v", perRound)
	for r, n := range perRound[1:] {
		if n > 1 {
			t.Errorf("round %d dialled %d connections; the waker's pool should have kept the last round's (per round: %v)", r+2, n, perRound)
		}
	}
}

// TestMySQLOpenPoolKeepsBurstConnections: a backend Open made runs rounds of 8 acquires at
// once (as 8 goroutines of a client do); its calls' pool then closes none of their connections
// for its idle limit. It kept database/sql's default of 2: every connection past the second
// was closed as its call ended, and the next round dialled it again.
func TestMySQLOpenPoolKeepsBurstConnections(t *testing.T) {
	const rounds, burst = 5, 8
	b := migrated(t, myDSN(t))
	ctx := testCtx(t)
	s, err := b.OpenSession(ctx, "burst", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "burst-" + unique(t) + "-"
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, burst)
		for i := range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("%s%d-%d", prefix, round, i)
				r, err := b.Acquire(ctx, s.ID, name)
				if err == nil {
					err = b.Release(ctx, s.ID, name, r.Token)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	st := b.d.(*stdDialect).db.Stats()
	t.Logf("calls' pool: %d open, %d closed for the idle limit", st.OpenConnections, st.MaxIdleClosed)
	if st.MaxIdleClosed != 0 {
		t.Errorf("Open's pool closed %d connections for its idle limit after %d rounds of %d calls at once", st.MaxIdleClosed, rounds, burst)
	}
}

// countingPool is a pool of the test's own on cfg (a MySQLConnector, as NewMySQL's doc says)
// that keeps 32 idle connections, so that only the waker's dials add up, and counts every
// connection it dials in dials.
func countingPool(t testing.TB, cfg *mysqldriver.Config, dials *atomic.Int64) *sql.DB {
	t.Helper()
	var d net.Dialer
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	conn, err := MySQLConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(32)
	t.Cleanup(func() { db.Close() })
	return db
}

package sqlcheck

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// heldTerm is one tenure as its holder saw it: granted by a reply received at recv to a request
// sent at sent, valid from then until end (sent + remaining of the latest reply that confirmed
// it, cut short when the holder released it).
type heldTerm struct {
	name, sid  string
	token      int64
	sent, recv time.Time
	end        time.Time
}

// roundingSlack covers the rounding of the database clock to whole milliseconds.
const roundingSlack = 2 * time.Millisecond

// contend runs workers that open short sessions, acquire, keep alive (or pause past their
// expiry), release, close or abandon sessions, all against the same few names, and then checks
// the fencing guarantees on what every holder observed: a token is never granted to two
// sessions, tokens follow real time, and a term's validity ends before the reply granting any
// later token is received.
func contend(t *testing.T, newOps func(t *testing.T) ops, workers int, dur time.Duration) {
	ctx := testCtx(t)
	p := unique(t)
	names := []string{"sqlcheck-" + p + ".x", "sqlcheck-" + p + ".y"}
	const ttl = 250 // ms
	var (
		mu      sync.Mutex
		terms   []*heldTerm
		errs    []error
		grants  int
		retried int
	)
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		o := newOps(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			fail := func(err error) {
				mu.Lock()
				defer mu.Unlock()
				if transient(err) {
					// The transaction was rolled back and changed nothing; the backend
					// reports these as retryable and the engine retries.
					retried++
					return
				}
				errs = append(errs, err)
			}
			for s := 0; time.Now().Before(stop); s++ {
				sid := fmt.Sprintf("%s%02d%04d", p, w, s)
				if err := o.open(ctx, sid, "worker", ttl); err != nil {
					fail(err)
					return
				}
				held := map[string]*heldTerm{}
				for i := 0; i < 40 && time.Now().Before(stop); i++ {
					switch k := rnd.IntN(10); {
					case k < 5: // acquire
						n := names[rnd.IntN(len(names))]
						if held[n] != nil {
							continue
						}
						sent := time.Now()
						r, err := o.acquire(ctx, sid, n)
						recv := time.Now()
						if err != nil {
							fail(fmt.Errorf("acquire: %w", err))
							continue
						}
						if r.Kind == "granted" {
							h := &heldTerm{name: n, sid: sid, token: r.Token, sent: sent, recv: recv,
								end: sent.Add(time.Duration(r.Remaining) * time.Millisecond)}
							held[n] = h
							mu.Lock()
							terms = append(terms, h)
							grants++
							mu.Unlock()
						}
					case k < 8: // keep-alive
						sent := time.Now()
						r, err := o.keepAlive(ctx, sid, nil)
						if err != nil {
							fail(fmt.Errorf("keep-alive: %w", err))
							continue
						}
						if r.Expired {
							held = map[string]*heldTerm{}
							continue
						}
						for n, h := range held {
							if tok, ok := r.Held[n]; ok && tok == h.token {
								mu.Lock()
								if e := sent.Add(time.Duration(r.Remaining) * time.Millisecond); e.After(h.end) {
									h.end = e
								}
								mu.Unlock()
							} else {
								delete(held, n) // taken over: its validity already ended
							}
						}
					default: // release one
						for n, h := range held {
							mu.Lock()
							if now := time.Now(); now.Before(h.end) {
								h.end = now
							}
							mu.Unlock()
							if err := o.release(ctx, sid, n, h.token); err != nil {
								fail(fmt.Errorf("release: %w", err))
							}
							delete(held, n)
							break
						}
					}
					// Mostly short pauses; now and then one that may outlast the session, so that
					// others take over while its keep-alive races with them.
					if rnd.IntN(8) == 0 {
						time.Sleep(time.Duration(100+rnd.IntN(250)) * time.Millisecond)
					} else {
						time.Sleep(time.Duration(rnd.IntN(15)) * time.Millisecond)
					}
				}
				if rnd.IntN(2) == 0 { // close; otherwise abandon (crash)
					mu.Lock()
					for _, h := range held {
						if now := time.Now(); now.Before(h.end) {
							h.end = now
						}
					}
					mu.Unlock()
					if err := o.closeSession(ctx, sid); err != nil {
						fail(fmt.Errorf("close: %w", err))
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("worker error: %v", err)
	}
	byName := map[string][]*heldTerm{}
	for _, h := range terms {
		byName[h.name] = append(byName[h.name], h)
	}
	takeovers := 0
	for n, ts := range byName {
		sort.Slice(ts, func(i, j int) bool { return ts[i].token < ts[j].token })
		owner := map[int64]string{}
		for _, h := range ts {
			if o, ok := owner[h.token]; ok && o != h.sid {
				t.Errorf("%s: token %d granted to %s and %s", n, h.token, o, h.sid)
			}
			owner[h.token] = h.sid
		}
		for i, a := range ts {
			for _, b := range ts[i+1:] {
				if a.token == b.token {
					continue
				}
				// a.token < b.token.
				if a.end.After(b.recv.Add(roundingSlack)) {
					t.Errorf("%s: token %d (session %s) valid until %v after token %d (session %s) was granted by %v",
						n, a.token, a.sid, a.end.Format("15:04:05.000"), b.token, b.sid, b.recv.Format("15:04:05.000"))
				}
				if b.recv.Before(a.sent) {
					t.Errorf("%s: token %d granted before token %d was asked for", n, b.token, a.token)
				}
			}
			if i > 0 && ts[i-1].sid != a.sid {
				takeovers++
			}
		}
	}
	t.Logf("%d grants, %d changes of holder, %d worker errors, %d transient errors (deadlock, lock timeout) retried", grants, takeovers, len(errs), retried)
	if takeovers < 5 {
		t.Errorf("only %d changes of holder: the test exercised too little", takeovers)
	}
}

// transient reports a deadlock or lock-wait timeout: the database rolled the statement's
// transaction back, so it changed nothing and may be retried (the backend classifies these as
// retryable).
func transient(err error) bool {
	var my *mysqldrv.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1213 || my.Number == 1205
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40P01" || pg.Code == "40001"
	}
	return false
}

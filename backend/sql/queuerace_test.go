package sql

import (
	"fmt"
	"sync"
	"testing"

	"github.com/simba-go/simba/spi"
)

// TestTryLockNeverPassesAQueuedWaiter: many rounds of a waiter queueing (AcquireQueued), the
// holder releasing and a third session acquiring (TryLock's plain Acquire), all at once, on
// each dialect. Whenever the waiter's reply says it queued behind the holder, its entry was
// committed before the release, so the free lease is the waiter's: the third session must not
// be granted. (On PostgreSQL a plain acquire whose snapshot predates the entry's commit, and
// which then waited on the lease row's lock, used to miss the entry.)
func TestTryLockNeverPassesAQueuedWaiter(t *testing.T) {
	rounds := map[string]int{"postgres": 1000, "mysql": 300, "sqlite": 100}
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			holder, waiter, third := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
			queued, passed := 0, 0
			for i := range rounds[d.name] {
				name := fmt.Sprintf("race-%d", i)
				tok := grant(t, b, holder, name)
				var (
					wg         sync.WaitGroup
					start      = make(chan struct{})
					wr, tr     spi.Acquire
					werr, rerr error
					terr       error
				)
				wg.Add(3)
				go func() {
					defer wg.Done()
					<-start
					wr, werr = b.AcquireQueued(ctx, waiter, name)
				}()
				go func() {
					defer wg.Done()
					<-start
					rerr = b.Release(ctx, holder, name, tok)
				}()
				go func() {
					defer wg.Done()
					<-start
					tr, terr = b.Acquire(ctx, third, name)
				}()
				close(start)
				wg.Wait()
				for _, err := range []error{werr, rerr, terr} {
					if err != nil {
						t.Fatalf("round %d: %v", i, err)
					}
				}
				if wr.Kind == spi.HeldBy && wr.Holder == holder {
					queued++
					if tr.Kind == spi.Granted {
						passed++
						t.Errorf("round %d: the waiter queued behind the holder, yet the third session was granted the released lease (token %d)", i, tr.Token)
					}
				}
			}
			t.Logf("%s: the waiter queued behind the holder in %d of %d rounds; the third session passed it %d times", d.name, queued, rounds[d.name], passed)
			if queued == 0 {
				t.Fatalf("the waiter never queued behind the holder: the race was not exercised")
			}
		})
	}
}

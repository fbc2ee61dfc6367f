package simba_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// TestCleanCloseLeavesLeasesFree: when a clean Close returns, every lease the client held is
// free at the backend, also the ones whose Unlock was still in flight when Close began (Close
// may cut those releases; its session's close releases every lease the session holds), so the
// next process gets them at once instead of after the TTL. PostgreSQL and Redis, 32 locks a
// round: half unlocked concurrently with Close, half still held. It counts the leases found
// held (by anyone) right after Close returned (0 of 160 on each), and logs how many Unlocks
// Close cut (about half of the concurrent ones, each matching ErrClosed, as Unlock says).
func TestCleanCloseLeavesLeasesFree(t *testing.T) {
	for _, bc := range []struct{ name, dsn string }{
		{"postgres", testenv.Postgres(t)},
		{"redis", "redis://" + testenv.Redis(t) + "/0"},
	} {
		t.Run(bc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			quiet := slog.New(slog.DiscardHandler)
			inspect, err := open.Open(ctx, bc.dsn, open.WithAutoMigrate(), open.WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			defer inspect.Close()
			li, ok := inspect.(spi.LeaseInspector)
			if !ok {
				t.Fatalf("%s: no LeaseInspector", bc.name)
			}
			prefix := fmt.Sprintf("small-closefree-%d", time.Now().UnixNano())
			const rounds, locks = 5, 32
			held, cut, other := 0, 0, 0
			for r := range rounds {
				b, err := open.Open(ctx, bc.dsn, open.WithLogger(quiet))
				if err != nil {
					t.Fatal(err)
				}
				c, err := simba.New(b, simba.WithOwner("closefree"), simba.WithLogger(quiet))
				if err != nil {
					t.Fatal(err)
				}
				var hs []*simba.Held
				for i := range locks {
					h, err := c.Lock(ctx, fmt.Sprintf("%s-%d-%d", prefix, r, i))
					if err != nil {
						t.Fatal(err)
					}
					hs = append(hs, h)
				}
				var wg sync.WaitGroup
				var mu sync.Mutex
				for _, h := range hs[:locks/2] {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := h.Unlock(ctx); err != nil {
							mu.Lock()
							cut++
							if !errors.Is(err, simba.ErrClosed) {
								other++
								t.Logf("Unlock cut by Close: %v", err)
							}
							mu.Unlock()
						}
					}()
				}
				if err := c.Close(ctx); err != nil {
					t.Fatalf("Close: %v", err)
				}
				for i := range locks {
					info, found, err := li.InspectLease(ctx, fmt.Sprintf("%s-%d-%d", prefix, r, i))
					if err != nil {
						t.Fatal(err)
					}
					if found && info.Holder != "" {
						held++
					}
				}
				wg.Wait()
				b.Close()
			}
			t.Logf("%s: %d of %d leases held right after a clean Close; %d of %d concurrent Unlocks returned an error (cut by Close)",
				bc.name, held, rounds*locks, cut, rounds*locks/2)
			if other != 0 {
				t.Errorf("%s: %d Unlocks cut by Close returned an error not matching ErrClosed", bc.name, other)
			}
			if held != 0 {
				t.Errorf("%s: %d of %d leases still held right after a clean Close returned", bc.name, held, rounds*locks)
			}
		})
	}
}

package sql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// BenchmarkLockCycleSQL measures the public Lock + Unlock cycle of one goroutine with no
// waiter on MySQL/MariaDB and SQLite, in SPI cycles (Acquire + Release on another backend of
// the same database) timed alternately in the same run: what the client, and the wake-up
// machinery (the holder's named lock on MySQL/MariaDB), add to the backend's own cost.
func BenchmarkLockCycleSQL(b *testing.B) {
	for _, d := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"mysql", myDSN}, {"sqlite", liteDSN}} {
		b.Run(d.name, func(b *testing.B) {
			dsn := d.dsn(b)
			raw := migrated(b, dsn)
			ctx := context.Background()
			sess, err := raw.OpenSession(ctx, "raw", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			spiCycle := func() {
				a, err := raw.Acquire(ctx, sess.ID, "bench-raw")
				if err != nil || a.Kind != spi.Granted {
					b.Fatalf("acquire: %+v %v", a, err)
				}
				if err := raw.Release(ctx, sess.ID, "bench-raw", a.Token); err != nil {
					b.Fatal(err)
				}
			}
			c, err := simba.New(open(b, dsn), simba.WithOwner("bench"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			lockCycle := func() {
				h, err := c.Lock(ctx, "bench-lock")
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			lockCycle() // the session
			var spiTime, lockTime time.Duration
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				if i%2 == 0 {
					spiCycle()
					spiTime += time.Since(start)
				} else {
					lockCycle()
					lockTime += time.Since(start)
				}
			}
			b.StopTimer()
			if spiTime > 0 && lockTime > 0 {
				b.ReportMetric(float64(lockTime)/float64(spiTime), "spi-cycles/lock-cycle")
			}
		})
	}
}

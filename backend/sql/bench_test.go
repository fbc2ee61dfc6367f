package sql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// baseline measures, on the backend's own pool, the server's raw rate of two single statements:
// a one-row autocommit UPDATE (a durable write: one commit, one WAL/redo-log flush where the
// server flushes) and SELECT 1 (one round trip, no write). Each runs n times; the results are
// nanoseconds per statement.
func baseline(b *testing.B, be *Backend, n int) (update, select1 float64) {
	b.Helper()
	ctx := context.Background()
	table := "simba_bench_" + unique(b)
	exec(b, be, "CREATE TABLE "+table+" (id INTEGER PRIMARY KEY, v BIGINT NOT NULL)")
	b.Cleanup(func() { exec(b, be, "DROP TABLE "+table) })
	exec(b, be, "INSERT INTO "+table+" (id, v) VALUES (1, 0)")
	upd := "UPDATE " + table + " SET v = v + 1 WHERE id = 1"
	run := func(f func() error) float64 {
		start := time.Now()
		for range n {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(n)
	}
	switch d := be.d.(type) {
	case *pgDialect:
		update = run(func() error { _, err := d.pool.Exec(ctx, upd); return err })
		select1 = run(func() error { var one int; return d.pool.QueryRow(ctx, "SELECT 1").Scan(&one) })
	case *stdDialect:
		update = run(func() error { _, err := d.db.ExecContext(ctx, upd); return err })
		select1 = run(func() error { var one int; return d.db.QueryRowContext(ctx, "SELECT 1").Scan(&one) })
	}
	return update, select1
}

// report prints the cost of one operation in baseline statements.
func report(b *testing.B, update, select1 float64) {
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/update, "update-stmts/op")
	b.ReportMetric(perOp/select1, "select1-stmts/op")
	b.ReportMetric(update/1e3, "update-µs")
	b.ReportMetric(select1/1e3, "select1-µs")
}

// BenchmarkAcquireRelease measures one acquire+release cycle of a free lease by one session, and,
// in the same run and on the same pool, the server's raw single-statement rate as the baseline.
// It reports the cycle's cost in baseline statements against both baselines:
//
//   - update-stmts/op: against a one-row autocommit UPDATE, a durable write (one commit). This
//     is the baseline the "pglock measured 4.33" compares with: a cycle costs that many
//     durable single-row writes. Target on PostgreSQL: ≤ 2.5 (acquire and release are one
//     statement, one commit each, so about 2).
//   - select1-stmts/op: against SELECT 1 (a round trip with no write).
//
// It also reports stmts/op (statements sent per cycle) and the two baselines in µs. Run with
// -benchtime=2000x or so; the baselines run b.N times each before the timed loop.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			c := &counter{}
			be := countedBackend(b, d.name, d.dsn(b), c)
			ctx := context.Background()
			s, err := be.OpenSession(ctx, "bench", time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			name := "bench-" + unique(b)
			update, select1 := baseline(b, be, max(b.N, 50))
			c.reset()
			b.ResetTimer()
			for range b.N {
				r, err := be.Acquire(ctx, s.ID, name)
				if err != nil || r.Kind != spi.Granted {
					b.Fatalf("Acquire = %+v, %v", r, err)
				}
				if err := be.Release(ctx, s.ID, name, r.Token); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stmts, trips, _ := c.reset()
			b.ReportMetric(float64(stmts)/float64(b.N), "stmts/op")
			b.ReportMetric(float64(trips)/float64(b.N), "trips/op")
			report(b, update, select1)
		})
	}
}

// BenchmarkKeepAlive10000 measures a keep-alive (with one group) of a session holding 10,000
// leases: a fixed number of statements (stmts/op: 4 on PostgreSQL in one round trip, 4 on
// MySQL/MariaDB, 3 on SQLite), whose cost is dominated by listing the 10,000 held leases. The
// baselines are as in BenchmarkAcquireRelease.
func BenchmarkKeepAlive10000(b *testing.B) {
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			c := &counter{}
			be := countedBackend(b, d.name, d.dsn(b), c)
			ctx := context.Background()
			s, err := be.OpenSession(ctx, "bench", time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			names := holdMany(b, be, s.ID, "ka", 10_000)
			if _, err := be.Join(ctx, s.ID, "bench-group"); err != nil {
				b.Fatal(err)
			}
			update, select1 := baseline(b, be, max(b.N, 50))
			c.reset()
			b.ResetTimer()
			for range b.N {
				ka, err := be.KeepAlive(ctx, s.ID, names, []string{"bench-group"})
				if err != nil || ka.Expired || len(ka.Held) != len(names) {
					b.Fatalf("KeepAlive: expired %v, %d held, %v", ka.Expired, len(ka.Held), err)
				}
			}
			b.StopTimer()
			stmts, trips, _ := c.reset()
			b.ReportMetric(float64(stmts)/float64(b.N), "stmts/op")
			b.ReportMetric(float64(trips)/float64(b.N), "trips/op")
			report(b, update, select1)
		})
	}
}

// BenchmarkKeepAliveQueued measures the keep-alive of a session that waits in queues (entries:
// 1 or 100 waiter entries, whose expiry each keep-alive moves: spi.SessionQueue) against, in
// the same run and on the same backend, the keep-alive of a session that waits for nothing
// (entries=0 times it too, as a check), which sends exactly the statements the keep-alive sent
// before waiter entries lived with their session. It reports x-unqueued (the time of one
// keep-alive over the unqueued one's), stmts/op and trips/op, and the baselines as in
// BenchmarkAcquireRelease. Neither session holds a lease or names a group.
func BenchmarkKeepAliveQueued(b *testing.B) {
	for _, d := range dialects {
		for _, entries := range []int{0, 1, 100} {
			b.Run(fmt.Sprintf("%s/entries=%d", d.name, entries), func(b *testing.B) {
				c := &counter{}
				be := countedBackend(b, d.name, d.dsn(b), c)
				ctx := context.Background()
				open := func() spi.SessionID {
					s, err := be.OpenSession(ctx, "bench", time.Hour)
					if err != nil {
						b.Fatal(err)
					}
					return s.ID
				}
				holder, idle, waiter := open(), open(), open()
				for i := range entries {
					name := fmt.Sprintf("kaq-%d-%s", i, unique(b))
					if r, err := be.Acquire(ctx, holder, name); err != nil || r.Kind != spi.Granted {
						b.Fatalf("Acquire(%s) = %+v, %v", name, r, err)
					}
					if r, err := be.AcquireQueued(ctx, waiter, name); err != nil || r.Kind != spi.HeldBy {
						b.Fatalf("AcquireQueued(%s) = %+v, %v", name, r, err)
					}
				}
				keepAlive := func(s spi.SessionID) {
					if ka, err := be.KeepAlive(ctx, s, nil, nil); err != nil || ka.Expired {
						b.Fatalf("KeepAlive = %+v, %v", ka, err)
					}
				}
				update, select1 := baseline(b, be, max(b.N, 50))
				for range 20 { // warm-up: connections, prepared statements
					keepAlive(idle)
					keepAlive(waiter)
				}
				// Interleaved, so that both see the same server and machine load; only the
				// queued session's keep-alives are timed by the benchmark and counted.
				var queued, unqueued time.Duration
				var stmts, trips int64
				b.ResetTimer()
				for range b.N {
					c.reset()
					t0 := time.Now()
					keepAlive(waiter)
					queued += time.Since(t0)
					n, k, _ := c.reset()
					stmts, trips = stmts+n, trips+k
					b.StopTimer()
					t1 := time.Now()
					keepAlive(idle)
					unqueued += time.Since(t1)
					b.StartTimer()
				}
				b.StopTimer()
				b.ReportMetric(float64(stmts)/float64(b.N), "stmts/op")
				b.ReportMetric(float64(trips)/float64(b.N), "trips/op")
				b.ReportMetric(float64(queued)/float64(unqueued), "x-unqueued")
				b.ReportMetric(float64(unqueued.Nanoseconds())/float64(b.N)/1e3, "unqueued-µs")
				report(b, update, select1)
			})
		}
	}
}

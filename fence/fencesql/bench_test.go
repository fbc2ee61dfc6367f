package fencesql_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/simba-go/simba/fence/fencesql"
)

// BenchmarkWrite: a fenced write (the check and an UPDATE in one transaction) against the same
// UPDATE in a plain transaction, timed alternately in rounds of the same run, on each real
// database. plain-tx/op is the fenced write's time in plain transactions: the cost of fencing.
func BenchmarkWrite(b *testing.B) {
	for _, dl := range dialects {
		b.Run(dl.name, func(b *testing.B) {
			d := dl.open(b)
			backend(b, d)
			ledger(b, d)
			f, err := fencesql.New(d.db, d.dialect)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			update := d.bind("UPDATE ledger SET value = ? WHERE resource = ?")
			if _, err := d.db.ExecContext(ctx, d.bind("INSERT INTO ledger (resource, value) VALUES (?, '')"), "bench"); err != nil {
				b.Fatal(err)
			}
			// Both write a new value each time, so that both commit a change.
			seq := 0
			plain := func() {
				seq++
				tx, err := d.db.BeginTx(ctx, nil)
				if err == nil {
					if _, err = tx.ExecContext(ctx, update, strconv.Itoa(seq), "bench"); err == nil {
						err = tx.Commit()
					} else {
						_ = tx.Rollback()
					}
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			token := int64(1)
			fenced := func() {
				token++
				seq++
				err := f.Write(ctx, "bench", token, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, update, strconv.Itoa(seq), "bench")
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			var plainTime, fencedTime time.Duration
			b.ResetTimer()
			for n := 0; n < b.N; {
				k := min(32, b.N-n)
				start := time.Now()
				for range k {
					plain()
				}
				plainTime += time.Since(start)
				start = time.Now()
				for range k {
					fenced()
				}
				fencedTime += time.Since(start)
				n += k
			}
			b.StopTimer()
			b.ReportMetric(float64(fencedTime)/float64(plainTime), "plain-tx/op")
		})
	}
}

// BenchmarkWriteVerified: a holder's fenced writes with Verify set (one verifier call for the
// tenure, then one SELECT of the highest token per write) against the same writes without
// Verify, timed alternately in rounds of the same run, on each real database.
// unverified/op is the verified write's time in unverified ones: the cost of Verify.
func BenchmarkWriteVerified(b *testing.B) {
	for _, dl := range dialects {
		b.Run(dl.name, func(b *testing.B) {
			d := dl.open(b)
			backend(b, d)
			ledger(b, d)
			ctx := context.Background()
			update := d.bind("UPDATE ledger SET value = ? WHERE resource = ?")
			var fences [2]*fencesql.Fence
			for i := range fences {
				f, err := fencesql.New(d.db, d.dialect)
				if err != nil {
					b.Fatal(err)
				}
				fences[i] = f
				if _, err := d.db.ExecContext(ctx, d.bind("INSERT INTO ledger (resource, value) VALUES (?, '')"), "bench-"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			calls := 0
			fences[1].Verify = func(context.Context, string, int64) error { calls++; return nil }
			seq := 0
			write := func(i int) {
				seq++
				resource := "bench-" + strconv.Itoa(i)
				err := fences[i].Write(ctx, resource, 7, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, update, strconv.Itoa(seq), resource)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			var times [2]time.Duration
			b.ResetTimer()
			for n := 0; n < b.N; {
				k := min(32, b.N-n)
				for i := range fences {
					start := time.Now()
					for range k {
						write(i)
					}
					times[i] += time.Since(start)
				}
				n += k
			}
			b.StopTimer()
			if calls != 1 {
				b.Fatalf("Verify called %d times for one tenure, want 1", calls)
			}
			b.ReportMetric(float64(times[1])/float64(times[0]), "unverified/op")
		})
	}
}

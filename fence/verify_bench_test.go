package fence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// snapshotOnly hides a backend's spi.LeaseInspector, so that LeaseVerifier reads its whole
// snapshot (Inspect) for each check, as it did before LeaseInspector.
type snapshotOnly struct{ in spi.Inspector }

func (s snapshotOnly) Inspect(ctx context.Context) (spi.Snapshot, error) { return s.in.Inspect(ctx) }

// benchLeases is how many leases the backend holds while LeaseVerifier checks one of them.
const benchLeases = 10_000

// BenchmarkLeaseVerifier10000: one LeaseVerifier check (the holder's token, admitted) of one
// lease among 10,000 held ones, read alone (spi.LeaseInspector: lease-ns/check) and out of the
// whole snapshot (Inspect: snapshot-ns/check), timed alternately in the same run;
// snapshot/lease is how many times longer the snapshot's check takes. PostgreSQL runs in a
// schema of its own and Redis on a private server, both dropped at the end, so that the shared
// servers never carry the 10,000 leases.
func BenchmarkLeaseVerifier10000(b *testing.B) {
	servers := []struct {
		name string
		dsn  func(b *testing.B) string
	}{
		{"postgres", privatePostgres},
		{"redis", func(b *testing.B) string { return "redis://" + testenv.PrivateRedis(b) }},
		{"sqlite", func(b *testing.B) string { return "sqlite://" + filepath.Join(b.TempDir(), "simba.db") }},
	}
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			ctx := context.Background()
			be, err := open.Open(ctx, srv.dsn(b), open.WithAutoMigrate())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { be.Close() })
			s, err := be.OpenSession(ctx, "bench", time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { be.CloseSession(context.Background(), s.ID) })
			var tokens [benchLeases]int64
			for i := range benchLeases {
				r, err := be.Acquire(ctx, s.ID, fmt.Sprintf("bench-%05d", i))
				if err != nil || r.Kind != spi.Granted {
					b.Fatalf("acquire %d: %v %v", i, r.Kind, err)
				}
				tokens[i] = r.Token
			}
			in := be.(spi.Inspector)
			if _, ok := in.(spi.LeaseInspector); !ok {
				b.Fatalf("%T is not an spi.LeaseInspector", be)
			}
			one := fence.LeaseVerifier(in, nil)
			whole := fence.LeaseVerifier(snapshotOnly{in}, nil)
			check := func(v fence.Verifier, i int) {
				if err := v(ctx, fmt.Sprintf("bench-%05d", i), tokens[i]); err != nil {
					b.Fatal(err)
				}
			}
			// Each round: one check through the snapshot, then perRound through the lease alone
			// (a snapshot check costs thousands of single reads).
			const perRound = 16
			var oneTime, wholeTime time.Duration
			rounds := 0
			for b.Loop() {
				i := rounds % benchLeases
				start := time.Now()
				check(whole, i)
				wholeTime += time.Since(start)
				start = time.Now()
				for k := range perRound {
					check(one, (i+k)%benchLeases)
				}
				oneTime += time.Since(start)
				rounds++
			}
			lease := float64(oneTime) / float64(rounds*perRound)
			snapshot := float64(wholeTime) / float64(rounds)
			b.ReportMetric(lease, "lease-ns/check")
			b.ReportMetric(snapshot, "snapshot-ns/check")
			b.ReportMetric(snapshot/lease, "snapshot/lease")
		})
	}
}

// privatePostgres makes a schema of its own in the PostgreSQL test database, dropped when b
// ends, and returns a DSN whose search_path is that schema.
func privatePostgres(b *testing.B) string {
	dsn := testenv.Postgres(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema := "bench_verify_" + hex.EncodeToString(r[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			b.Error(err)
		}
	})
	return dsn + "&search_path=" + schema
}

package sql

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/sqlq"
)

// probeQueries records statements and fails DatabaseNow while fail is set.
type probeQueries struct {
	*sqlq.Recorder
	fail atomic.Bool
}

func (p *probeQueries) DatabaseNow(ctx context.Context) (int64, error) {
	if p.fail.Load() {
		_, _ = p.Recorder.DatabaseNow(ctx) // recorded, as a probe whose reply never came back
		return 0, errors.New("probe: no reply")
	}
	return p.Recorder.DatabaseNow(ctx)
}

// TestKeepAliveAfterFailureProvesRoundTripFirst: after a keep-alive fails, the next one reads
// the database clock before renewing, and renews nothing if that read fails. A one-way
// partition (chaos harness, MariaDB, one-way faults, failover up to 1.71 × TTL) let a retried
// renewal reach the server on a pooled connection while its reply could not come back, so the
// session outlived the client's deadline by up to a TTL.
func TestKeepAliveAfterFailureProvesRoundTripFirst(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t), WithHousekeepingInterval(-1))
			q := &probeQueries{Recorder: &sqlq.Recorder{}}
			b.wrap = func(inner sqlq.Queries) sqlq.Queries {
				q.Q = inner
				return q
			}
			ctx := testCtx(t)
			s, err := b.OpenSession(ctx, "probe", longTTL)
			if err != nil {
				t.Fatal(err)
			}
			renews := func(stmts []string) bool {
				return slices.Contains(stmts, sqlq.StmtKeepAliveRenew.String()) ||
					slices.Contains(stmts, sqlq.StmtKeepAliveRenewNoReturn.String())
			}
			probes := func(stmts []string) bool { return slices.Contains(stmts, sqlq.StmtDatabaseNow.String()) }
			if _, err := b.KeepAlive(ctx, s.ID, nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := q.Take(); probes(got) || !renews(got) {
				t.Fatalf("first keep-alive ran %q: want a renewal and no probe", got)
			}
			// A keep-alive whose deadline has passed fails (its outcome unknown).
			dead, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel()
			if _, err := b.KeepAlive(dead, s.ID, nil, nil); err == nil {
				t.Fatal("keep-alive with a passed deadline succeeded")
			}
			q.Take()
			// The probe gets no reply: nothing is renewed.
			q.fail.Store(true)
			if _, err := b.KeepAlive(ctx, s.ID, nil, nil); err == nil {
				t.Fatal("keep-alive succeeded although its probe failed")
			}
			if got := q.Take(); !probes(got) || renews(got) {
				t.Fatalf("keep-alive after a failure, probe failing, ran %q: want the probe and no renewal", got)
			}
			// The probe answers: probe, then renewal; after that success, no probe again.
			q.fail.Store(false)
			if _, err := b.KeepAlive(ctx, s.ID, nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := q.Take(); !probes(got) || !renews(got) || got[0] != sqlq.StmtDatabaseNow.String() {
				t.Fatalf("keep-alive after a failure ran %q: want the probe first, then the renewal", got)
			}
			if _, err := b.KeepAlive(ctx, s.ID, nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := q.Take(); probes(got) || !renews(got) {
				t.Fatalf("keep-alive after a success ran %q: want a renewal and no probe", got)
			}
		})
	}
}

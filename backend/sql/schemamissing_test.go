package sql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"
)

// TestMissingSchemaIsReported runs an election and a lock on a SQLite database without the
// schema (no WithAutoMigrate): the lock fails at once with ErrSchemaMissing, and the election,
// whose Start succeeds, reports ErrSchemaMissing through its Err and an EventBackendError
// instead of silently never leading.
func TestMissingSchemaIsReported(t *testing.T) {
	b := open(t, liteDSN(t))
	c, err := simba.New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	start := time.Now()
	if _, err := c.Lock(ctx, "l"); !errors.Is(err, simba.ErrSchemaMissing) || ctx.Err() != nil {
		t.Fatalf("Lock = %v, want ErrSchemaMissing at once", err)
	}
	t.Logf("Lock failed after %v", time.Since(start))

	e, _ := c.NewElection("x")
	events := e.Events(ctx)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for !errors.Is(e.Err(), simba.ErrSchemaMissing) {
		select {
		case <-ctx.Done():
			t.Fatalf("the election's Err is %v, want ErrSchemaMissing", e.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case ev := <-events:
		if ev.Kind != simba.EventBackendError || ev.Class != spi.Permanent || !errors.Is(ev.Err, simba.ErrSchemaMissing) {
			t.Errorf("event %v, want a permanent EventBackendError matching ErrSchemaMissing", ev)
		}
	case <-ctx.Done():
		t.Error("no event on the election's channel")
	}
	if e.IsLeader() {
		t.Error("leading without a schema")
	}
}

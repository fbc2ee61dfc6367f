package sql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba"
)

// TestTryLockWithoutSchemaIsPermanent: on a PostgreSQL database without Simba's schema (no
// migration applied), a TryLock that comes while the session's refused open waits for its
// retry returns the refusal as itself: ErrSchemaMissing, permanent, not ErrUnavailable. It
// returned ErrUnavailable wrapping it, which says "retry later" to a caller who can do nothing
// but apply the migration. Lock, TryLock, Election.Err and the client's Err agree.
func TestTryLockWithoutSchemaIsPermanent(t *testing.T) {
	b := open(t, pgDSN(t))
	c, err := simba.New(b) // the default TTL: the open is retried 2.5 to 5 s after a refusal
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("Close of a client whose session never opened = %v, want nil", err)
		}
	}()
	ctx := testCtx(t)
	for !errors.Is(c.Err(), simba.ErrSchemaMissing) {
		select {
		case <-ctx.Done():
			t.Fatalf("client Err = %v, want ErrSchemaMissing", c.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, simba.ErrSchemaMissing) || errors.Is(err, simba.ErrUnavailable) || !simba.IsPermanent(err) {
			t.Errorf("%s = %v, want ErrSchemaMissing as itself (permanent, not ErrUnavailable)", what, err)
		}
	}
	_, err = c.TryLock(ctx, "t")
	check("TryLock", err)
	_, err = c.Lock(ctx, "l")
	check("Lock", err)
	e, err := c.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatalf("Start = %v, want nil (the election runs in the background)", err)
	}
	check("Election.Err", e.Err())
	check("Client.Err", c.Err())
}

// TestCloseReportsADroppedSchema: a client whose PostgreSQL schema was dropped under its live
// session cannot close the session (the backend answers ErrSchemaMissing): Close returns a
// *SessionCloseError naming the session and matching ErrSchemaMissing. It returned nil, as if
// the session had been closed.
func TestCloseReportsADroppedSchema(t *testing.T) {
	b := migrated(t, pgDSN(t))
	c, err := simba.New(b, simba.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	h, err := c.Lock(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	sid := c.Session()
	exec(t, b, "DROP TABLE simba_session CASCADE")
	err = c.Close(ctx)
	var ce *simba.SessionCloseError
	if !errors.As(err, &ce) || ce.Session != sid || !errors.Is(err, simba.ErrSchemaMissing) || !simba.IsPermanent(err) {
		t.Fatalf("Close = %v, want a *SessionCloseError of session %s matching ErrSchemaMissing", err, sid)
	}
	t.Logf("Close: %v", err)
	if h.Term.IsValid() {
		t.Error("the lock's term is valid after Close")
	}
	if again := c.Close(ctx); !errors.Is(again, simba.ErrSchemaMissing) {
		t.Errorf("second Close = %v, want the same error", again)
	}
}

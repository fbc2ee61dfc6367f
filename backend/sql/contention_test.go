package sql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/locktest"
)

// TestLockContentionSQLite: 8 goroutines of one client and 8 of another, each client on its
// own backend of one SQLite file, take one lock in turns for 10 s: never two valid terms at
// once, tokens strictly increase, and every goroutine gets the lock. The other client learns
// of a release from its waker (sqlitewake.go); each goroutine pauses between turns (as real
// work does), which leaves gaps for the other client. Every turn is two write transactions on
// the one file: before the backends of a process took turns at the file (fileGate), SQLite's
// busy handler kept a release waiting past its call's timeout now and then under -race on a
// loaded machine, and the release ended "outcome unknown".
func TestLockContentionSQLite(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	clients := locktest.Clients(t, time.Second, open(t, dsn), open(t, dsn))
	r := locktest.Contend(t, clients, locktest.Eight8("contended"))
	t.Logf("%d turns; per goroutine %v", r.Total, r.Turns)
}

// TestSQLiteBackendsTakeTurnsAtTheFile checks that the SQLite backends of a process on one
// file run their operations one at a time (fileGate), while a backend on another file does not
// wait for them: an operation waits while another backend of the file is inside the gate (and
// ends with its ctx), and runs once the gate is left.
func TestSQLiteBackendsTakeTurnsAtTheFile(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	a, b := open(t, dsn), open(t, dsn)
	other := migrated(t, liteDSN(t))
	ctx := testCtx(t)
	leave, err := a.d.(*stdDialect).gate.enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.OpenSession(ctx, "other file", time.Minute); err != nil {
		t.Fatalf("a backend on another file waited for the gate: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = b.OpenSession(short, "same file", time.Minute)
	cancel()
	if err == nil {
		t.Fatal("an operation of another backend on the file ran while the gate was taken")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for the gate ended with %v, want the ctx's deadline", err)
	}
	leave()
	if _, err := b.OpenSession(ctx, "same file", time.Minute); err != nil {
		t.Fatalf("after the gate was left: %v", err)
	}
}

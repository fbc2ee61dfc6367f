package sql

import (
	"context"
	"errors"
	"slices"
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

// TestTurnsUrgentFirst checks the file gate's turns: waiting takers get the turn in the order
// they came, the urgent (keep-alives) before the others, and a taker whose ctx ends leaves
// the queue.
func TestTurnsUrgentFirst(t *testing.T) {
	var tr turns
	leave, err := tr.take(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	queued := func(urgent, other int) {
		for {
			tr.mu.Lock()
			u, o := len(tr.urgent), len(tr.other)
			tr.mu.Unlock()
			if u == urgent && o == other {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	takeAs := func(name string, urgent bool) {
		go func() {
			l, err := tr.take(context.Background(), urgent)
			if err != nil {
				got <- err.Error()
				return
			}
			got <- name
			l()
		}()
	}
	takeAs("first", false)
	queued(0, 1)
	gone, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() {
		_, err := tr.take(gone, false)
		ended <- err
	}()
	queued(0, 2)
	takeAs("second", false)
	queued(0, 3)
	takeAs("keep-alive", true)
	queued(1, 3)
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled take: %v", err)
	}
	queued(1, 2)
	leave()
	var order []string
	for range 3 {
		order = append(order, <-got)
	}
	if want := []string{"keep-alive", "first", "second"}; !slices.Equal(order, want) {
		t.Errorf("turns went %v, want %v", order, want)
	}
	// The last taker sends its name before it leaves: wait for its leave.
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		tr.mu.Lock()
		held, waiting := tr.held, len(tr.urgent)+len(tr.other)
		tr.mu.Unlock()
		if !held && waiting == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("turns left held=%v with %d waiting", held, waiting)
		}
	}
}

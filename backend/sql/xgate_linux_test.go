package sql

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/simba-go/simba/spi"
)

// holdGate starts a process holding byte off of file's cross-process gate and returns once it
// holds it; the returned func makes it let go and waits for it to exit.
func holdGate(t *testing.T, file string, off int64) (release func()) {
	t.Helper()
	cmd, stdin, stdout := startChild(t, fmt.Sprintf("%s=%d:%s", gateChildEnv, off, file))
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "held" {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("gate child said %q (%v)", sc.Text(), sc.Err())
	}
	done := false
	release = func() {
		if !done {
			done = true
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("gate child: %v", err)
			}
		}
	}
	t.Cleanup(release)
	return release
}

// gateFree reports whether byte off of file's cross-process gate is free, taking it and
// letting it go at once on a descriptor of its own (open file description locks exclude the
// descriptors of one process too).
func gateFree(t *testing.T, file string, off int64) bool {
	t.Helper()
	fd, err := unix.Open(file+gateSuffix, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: off, Len: 1}
	err = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	lk.Type = unix.F_UNLCK
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	return true
}

// liteFile returns the database file of a SQLite DSN made by liteDSN.
func liteFile(dsn string) string { return strings.TrimPrefix(dsn, "sqlite://") }

// waitAtGate waits until an operation of this process waits at file's cross-process gate, and
// fails if the Acquire reporting to done returns first.
func waitAtGate(t *testing.T, ctx context.Context, file string, done chan acquireResult) {
	t.Helper()
	x := crossGateOf(t, file)
	for {
		x.mu.Lock()
		waiting := x.attempt != nil && x.attempt.waiter
		x.mu.Unlock()
		if waiting {
			return
		}
		select {
		case res := <-done:
			t.Fatalf("Acquire returned %+v, %v while another process held the gate", res.r, res.err)
		case <-ctx.Done():
			t.Fatalf("no operation came to the gate: %v", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

type acquireResult struct {
	r   spi.Acquire
	err error
}

func goAcquire(ctx context.Context, b *Backend, s spi.SessionID, name string) chan acquireResult {
	done := make(chan acquireResult, 1)
	go func() {
		r, err := b.Acquire(ctx, s, name)
		done <- acquireResult{r, err}
	}()
	return done
}

// TestSQLiteCrossProcessGate: while another process holds the file's cross-process gate, an
// operation of this process waits for it; its ctx's end ends the wait (and nothing was
// written); the next operation waits in its place and runs once the other process lets go;
// afterwards the gate is free.
func TestSQLiteCrossProcessGate(t *testing.T) {
	dsn := liteDSN(t)
	file := liteFile(dsn)
	b := migrated(t, dsn)
	ctx := testCtx(t)
	s := openSession(t, b, longTTL) // finds the file and opens its gate
	release := holdGate(t, file, gateByte)

	cctx, cancel := context.WithCancel(ctx)
	first := goAcquire(cctx, b, s, "gated")
	waitAtGate(t, ctx, file, first)
	select {
	case res := <-first:
		t.Fatalf("Acquire returned %+v, %v while another process held the gate", res.r, res.err)
	default:
	}
	cancel()
	if res := <-first; !errors.Is(res.err, context.Canceled) {
		t.Fatalf("Acquire whose ctx ended at the gate = %+v, %v; want context.Canceled", res.r, res.err)
	}

	second := goAcquire(ctx, b, s, "gated")
	waitAtGate(t, ctx, file, second)
	select {
	case res := <-second:
		t.Fatalf("Acquire returned %+v, %v while another process held the gate", res.r, res.err)
	default:
	}
	release()
	res := <-second
	if res.err != nil || res.r.Kind != spi.Granted {
		t.Fatalf("Acquire after the other process let the gate go = %+v, %v; want granted", res.r, res.err)
	}
	if !gateFree(t, file, gateByte) || !gateFree(t, file, gateEntryByte) {
		t.Fatal("the gate stays held after the operations ended")
	}
}

// TestSQLiteCrossProcessGateAbandoned: an attempt at the gate left behind by an operation whose
// ctx ended, with no operation after it, lets the gate go as soon as it gets it.
func TestSQLiteCrossProcessGateAbandoned(t *testing.T) {
	dsn := liteDSN(t)
	file := liteFile(dsn)
	b := migrated(t, dsn)
	ctx := testCtx(t)
	s := openSession(t, b, longTTL)
	release := holdGate(t, file, gateByte)

	cctx, cancel := context.WithCancel(ctx)
	acq := goAcquire(cctx, b, s, "abandoned")
	waitAtGate(t, ctx, file, acq)
	cancel()
	if res := <-acq; !errors.Is(res.err, context.Canceled) {
		t.Fatalf("Acquire whose ctx ended at the gate = %+v, %v; want context.Canceled", res.r, res.err)
	}
	release()
	waitAttemptEnded(t, ctx, crossGateOf(t, file))
	if !gateFree(t, file, gateByte) || !gateFree(t, file, gateEntryByte) {
		t.Fatal("the attempt left behind kept the gate")
	}
}

// waitAttemptEnded waits until no attempt at x is in flight: one left behind has taken the
// gate and, with no operation waiting for it, let it go (take does both under x.mu).
func waitAttemptEnded(t *testing.T, ctx context.Context, x *crossGate) {
	t.Helper()
	for {
		x.mu.Lock()
		a := x.attempt
		x.mu.Unlock()
		if a == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the attempt left behind never took the gate")
		case <-time.After(time.Millisecond):
		}
	}
}

// crossGateOf returns this process's cross-process gate of file.
func crossGateOf(t *testing.T, file string) *crossGate {
	t.Helper()
	v, ok := sqliteGates.Load(file)
	if !ok || v.(*fileLock).cross == nil {
		t.Fatalf("no cross-process gate for %s", file)
	}
	return v.(*fileLock).cross
}

// TestSQLiteCrossProcessGateKeepAliveFirst: a keep-alive goes straight to the gate, past
// another process's operation waiting at the entry, while an ordinary operation waits at the
// entry behind it.
func TestSQLiteCrossProcessGateKeepAliveFirst(t *testing.T) {
	dsn := liteDSN(t)
	file := liteFile(dsn)
	b := migrated(t, dsn)
	ctx := testCtx(t)
	s := openSession(t, b, longTTL)
	release := holdGate(t, file, gateEntryByte)

	if _, err := b.KeepAlive(ctx, s, nil, nil); err != nil {
		t.Fatalf("KeepAlive while another process held the entry: %v", err)
	}
	acq := goAcquire(ctx, b, s, "behind-entry")
	waitAtGate(t, ctx, file, acq)
	select {
	case res := <-acq:
		t.Fatalf("Acquire returned %+v, %v while another process held the entry", res.r, res.err)
	default:
	}
	release()
	if res := <-acq; res.err != nil || res.r.Kind != spi.Granted {
		t.Fatalf("Acquire after the entry was let go = %+v, %v; want granted", res.r, res.err)
	}
}

// TestSQLiteCrossProcessGateStuckHolder: another process that keeps the gate (or its entry) and
// never lets go, as one stopped by SIGSTOP would, holds no operation of this process past half
// of its ctx's time (a second without a deadline): each goes on without the gate, and the
// operations after it do so at once while the attempt left behind still waits. Once the other
// process lets go, the attempt takes the gate and lets it go, and the gate works as before.
func TestSQLiteCrossProcessGateStuckHolder(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int64
	}{{"gate", gateByte}, {"entry", gateEntryByte}} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := liteDSN(t)
			file := liteFile(dsn)
			b := migrated(t, dsn)
			ctx := testCtx(t)
			s := openSession(t, b, longTTL)
			release := holdGate(t, file, tc.off)
			x := crossGateOf(t, file)

			const callTimeout = 800 * time.Millisecond
			for i := range 3 {
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				start := time.Now()
				r, err := b.Acquire(cctx, s, fmt.Sprintf("stuck-%d", i))
				cancel()
				t.Logf("Acquire %d: %v", i, time.Since(start))
				if err != nil || r.Kind != spi.Granted {
					t.Fatalf("Acquire %d with a %v deadline while another process kept the %s = %+v, %v; want granted",
						i, callTimeout, tc.name, r, err)
				}
			}
			kctx, cancel := context.WithTimeout(ctx, callTimeout)
			_, err := b.KeepAlive(kctx, s, nil, nil)
			cancel()
			if err != nil {
				t.Fatalf("KeepAlive while another process kept the %s: %v", tc.name, err)
			}
			// Without a deadline: a second at the gate at most.
			if r, err := b.Acquire(context.Background(), s, "stuck-nodeadline"); err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire without a deadline while another process kept the %s = %+v, %v; want granted", tc.name, r, err)
			}
			if tc.off == gateByte {
				x.mu.Lock()
				inFlight := x.attempt != nil
				x.mu.Unlock()
				if !inFlight {
					t.Fatal("no attempt waits for the gate the other process keeps: the operations did not go through the gate")
				}
			}

			release()
			waitAttemptEnded(t, ctx, x)
			if !gateFree(t, file, gateByte) || !gateFree(t, file, gateEntryByte) {
				t.Fatal("the attempt left behind kept the gate")
			}
			// The gate works again: an operation waits for another process's hold.
			release = holdGate(t, file, gateByte)
			acq := goAcquire(ctx, b, s, "after")
			waitAtGate(t, ctx, file, acq)
			release()
			if res := <-acq; res.err != nil || res.r.Kind != spi.Granted {
				t.Fatalf("Acquire after the gate came back = %+v, %v; want granted", res.r, res.err)
			}
		})
	}
}

// TestSQLiteInspectCreatesNoGate: Inspect, which only reads, leaves no file behind (simba
// status must not): it does not take the cross-process gate of writers, whose sidecar the
// first operation that may write then creates. The database is a copy of a migrated one, at a
// path no backend of this process has opened (the gate of a file is opened once per process).
func TestSQLiteInspectCreatesNoGate(t *testing.T) {
	src := liteDSN(t)
	m := migrated(t, src)
	if err := m.Close(); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	data, err := os.ReadFile(liteFile(src))
	if err != nil {
		t.Fatal(err)
	}
	dsn := liteDSN(t)
	file := liteFile(dsn)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b := open(t, dsn)
	if _, err := b.Inspect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file + gateSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Inspect, %s%s: %v; want none", file, gateSuffix, err)
	}
	openSession(t, b, longTTL)
	if _, err := os.Stat(file + gateSuffix); err != nil {
		t.Fatalf("after OpenSession, the gate's sidecar: %v", err)
	}
}

// TestSQLiteCrossProcessGateFreeNoAttempt counts the attempts at the cross-process gate taken
// on a goroutine of their own over uncontended acquire and release cycles (no other process
// on the file, one operation at a time): none, since each finds the gate free and takes it on
// its own goroutine. Every operation used to start one, which cost an uncontended Lock and
// Unlock two goroutines and their hand-offs (go test -trace of BenchmarkLockCycle/sqlite).
// The gate still orders the operations: TestSQLiteCrossProcessGate and the others above.
func TestSQLiteCrossProcessGateFreeNoAttempt(t *testing.T) {
	ctx := testCtx(t)
	dsn := liteDSN(t)
	b := migrated(t, dsn)
	s, err := b.OpenSession(ctx, "gate", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	x := crossGateOf(t, liteFile(dsn))
	const cycles = 20
	before := x.attempts.Load()
	for range cycles {
		a, err := b.Acquire(ctx, s.ID, "free")
		if err != nil || a.Kind != spi.Granted {
			t.Fatalf("Acquire: %+v, %v", a, err)
		}
		if err := b.Release(ctx, s.ID, "free", a.Token); err != nil {
			t.Fatal(err)
		}
	}
	if got := x.attempts.Load() - before; got != 0 {
		t.Errorf("%d uncontended acquire and release cycles took %d attempts at the gate on goroutines of their own, want 0", cycles, got)
	}
	for _, off := range []int64{gateEntryByte, gateByte} {
		if !gateFree(t, liteFile(dsn), off) {
			t.Errorf("byte %d of the gate is held after the operations ended", off)
		}
	}
}

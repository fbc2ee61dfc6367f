package sql

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/locktest"
	"github.com/simba-go/simba/spi"
)

// Environment of the holder process of TestWakeAcrossProcesses (the test binary re-executed).
const (
	wakeChildEnv = "SIMBA_SQL_WAKE_CHILD_DSN"
	wakeNameEnv  = "SIMBA_SQL_WAKE_NAME"
	// wakeTTL is long, so a waiter that was not woken would wait for it.
	wakeTTL = 10 * time.Second
)

// wakeChild runs the holder's part when the binary was started as the holder, and reports
// whether it did: it takes the lock, prints "locked <token>", unlocks on a line of stdin,
// prints "unlocked", then closes on stdin's end.
func wakeChild() bool {
	dsn := os.Getenv(wakeChildEnv)
	if dsn == "" {
		return false
	}
	if err := runWakeChild(dsn, os.Getenv(wakeNameEnv), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wake child:", err)
		os.Exit(2)
	}
	os.Exit(0)
	return true
}

func runWakeChild(dsn, name string, in io.Reader, out io.Writer) error {
	ctx := context.Background()
	b, err := Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithOwner("holder"), simba.WithTTL(wakeTTL))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	h, err := c.Lock(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "locked %d\n", h.Token())
	sc := bufio.NewScanner(in)
	if !sc.Scan() {
		return fmt.Errorf("stdin ended before unlock: %v", sc.Err())
	}
	if err := h.Unlock(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "unlocked")
	for sc.Scan() {
	}
	return nil
}

// TestWakeAcrossProcesses: on MySQL/MariaDB and SQLite, a client waiting for a lock that a client
// of another process holds (TTL 10 s) gets it within a fraction of a second of the holder's
// Unlock: the waker (named locks, the change counter) wakes it; without it the waiter would
// retry only when the 10 s lease ran out. It logs the hand-over time and, on MySQL/MariaDB, the
// statements the waiting backend's waker ran while it waited.
func TestWakeAcrossProcesses(t *testing.T) {
	for _, d := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"mysql", myDSN}, {"sqlite", liteDSN}} {
		t.Run(d.name, func(t *testing.T) {
			dsn := d.dsn(t)
			b := migrated(t, dsn)
			name := "wake-" + unique(t)
			cmd, stdin, stdout := startChild(t, wakeChildEnv+"="+dsn, wakeNameEnv+"="+name)
			defer func() {
				stdin.Close()
				if err := cmd.Wait(); err != nil {
					t.Errorf("holder process: %v", err)
				}
			}()
			lines := bufio.NewScanner(stdout)
			expect := func(word string) string {
				t.Helper()
				if !lines.Scan() {
					t.Fatalf("holder process ended before %q: %v", word, lines.Err())
				}
				f := strings.Fields(lines.Text())
				if len(f) == 0 || f[0] != word {
					t.Fatalf("holder process said %q, want %q", lines.Text(), word)
				}
				return lines.Text()
			}
			held, err := strconv.ParseInt(strings.TrimPrefix(expect("locked"), "locked "), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			waiter := newHeldWaiter(b)
			c := locktest.Clients(t, wakeTTL, waiter)[0]
			ctx := testCtx(t)
			got := make(chan *simba.Held, 1)
			errs := make(chan error, 1)
			waitStart := time.Now()
			go func() {
				h, err := c.Lock(ctx, name)
				if err != nil {
					errs <- err
					return
				}
				got <- h
			}()
			// The waiter finds the lock held and waits (on MySQL, its waker blocks on the
			// holder's named lock).
			waiter.waitHeld(t)
			var before mysqlStats
			if w, ok := b.waker.(*mysqlWaker); ok {
				for end := time.Now().Add(10 * time.Second); w.snapshot().blocks == 0; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(end) {
						t.Fatalf("the waker did not wait on the named lock: %+v", w.snapshot())
					}
				}
				before = w.snapshot()
			}
			unlocked := time.Now()
			fmt.Fprintln(stdin, "unlock")
			expect("unlocked")
			select {
			case h := <-got:
				took := time.Since(unlocked)
				t.Logf("the waiter got the lock %v after the holder process was told to unlock (TTL %v)", took, wakeTTL)
				if h.Token() <= held {
					t.Fatalf("token %d after %d", h.Token(), held)
				}
				if w, ok := b.waker.(*mysqlWaker); ok {
					s := w.snapshot()
					t.Logf("waker statements while waiting %v: %d probes, %d blocking waits, %d hints", unlocked.Sub(waitStart), before.probes, before.blocks, before.hints)
					t.Logf("waker statements in all: %+v", s)
					if s.blocks == 0 || s.hints == 0 {
						t.Errorf("the waiter was not woken through the named lock: %+v", s)
					}
				}
				if err := h.Unlock(context.Background()); err != nil {
					t.Fatal(err)
				}
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(wakeTTL - time.Second):
				t.Fatalf("the waiter was not woken by the release (it would retry only when the %v lease ran out)", wakeTTL)
			}
		})
	}
}

// TestMySQLNamedLockFollowsTenure: the holder's backend keeps the lease's named lock while it
// holds the lease and lets it go after Unlock and Close: nothing is left on the server.
func TestMySQLNamedLockFollowsTenure(t *testing.T) {
	dsn := myDSN(t)
	b := migrated(t, dsn)
	c := locktest.Clients(t, wakeTTL, b)[0]
	ctx := testCtx(t)
	name := "tenure-" + unique(t)
	wd := b.waker.(*mysqlWaker)
	used := func() bool {
		var id sql.NullInt64
		q := strings.Replace(wd.unlock, "RELEASE_LOCK", "IS_USED_LOCK", 1)
		if err := b.d.(*stdDialect).db.QueryRowContext(ctx, q, name).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id.Valid
	}
	eventually := func(want bool, what string) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); used() != want; {
			if time.Now().After(end) {
				t.Fatalf("the named lock is not %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	h, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	eventually(true, "taken while the lease is held")
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(false, "released after Unlock")
	if _, err := c.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	eventually(true, "taken again")
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(false, "released after Close")
}

// TestLocalReleaseWakesSameBackend: two clients of one process on one backend hand a lock over
// without the server's help: on a MySQL pool too small for the waker (no named locks, no
// hints from the server) the waiter still gets the lock at once, from the backend's own
// fan-out of the release; on PostgreSQL the fan-out comes before the NOTIFY.
func TestLocalReleaseWakesSameBackend(t *testing.T) {
	for _, d := range []struct {
		name string
		open func(t *testing.T) *Backend
	}{
		{"mysql-small-pool", func(t *testing.T) *Backend {
			_, cfg := myDatabase(t, "simba_sqlbe_")
			conn, err := mysqldriver.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(conn)
			db.SetMaxOpenConns(3) // a quarter of it is no connection: the waker stays off
			t.Cleanup(func() { db.Close() })
			b, err := NewMySQL(db, WithAutoMigrate())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			if err := b.Migrate(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"postgres", func(t *testing.T) *Backend { return migrated(t, pgDSN(t)) }},
	} {
		t.Run(d.name, func(t *testing.T) {
			b := d.open(t)
			waiter := newHeldWaiter(b)
			clients := locktest.Clients(t, wakeTTL, b, waiter)
			ctx := testCtx(t)
			name := "local-" + unique(t)
			h, err := clients[0].Lock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				h2, err := clients[1].Lock(ctx, name)
				if err == nil {
					err = h2.Unlock(context.Background())
				}
				got <- err
			}()
			waiter.waitHeld(t)
			released := time.Now()
			if err := h.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("hand-over within one backend: %v (TTL %v)", time.Since(released), wakeTTL)
			case <-time.After(wakeTTL - time.Second):
				t.Fatal("the waiter of the same backend was not woken by the release")
			}
		})
	}
}

// heldWaiter is a backend (b's methods promoted, its Hints included) whose found is closed the
// first time one of its acquires finds the lease held: a test's waiter has then made the
// attempt that only a release (its hint, or the waker's) can end before the holder's lease
// runs out. A test that released before that would not test the wake.
type heldWaiter struct {
	*Backend
	once  sync.Once
	found chan struct{}
}

func newHeldWaiter(b *Backend) *heldWaiter {
	return &heldWaiter{Backend: b, found: make(chan struct{})}
}

func (w *heldWaiter) saw(a spi.Acquire, err error) (spi.Acquire, error) {
	if err == nil && a.Kind == spi.HeldBy {
		w.once.Do(func() { close(w.found) })
	}
	return a, err
}

func (w *heldWaiter) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	return w.saw(w.Backend.Acquire(ctx, s, name))
}

func (w *heldWaiter) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	return w.saw(w.Backend.AcquireQueued(ctx, s, name))
}

// waitHeld waits (10 s at most) until w's client has found the lease held.
func (w *heldWaiter) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-w.found:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never found the lease held")
	}
}

// callCounter counts a backend's SPI calls (it keeps the backend's Hints: the method is
// promoted).
type callCounter struct {
	*Backend
	mu              sync.Mutex
	acquires, calls int64
}

func (c *callCounter) note(acquire bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if acquire {
		c.acquires++
	}
}

func (c *callCounter) reset() (acquires, calls int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	acquires, calls = c.acquires, c.calls
	c.acquires, c.calls = 0, 0
	return
}

func (c *callCounter) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	c.note(true)
	return c.Backend.Acquire(ctx, s, name)
}

func (c *callCounter) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	c.note(true)
	return c.Backend.AcquireQueued(ctx, s, name)
}

func (c *callCounter) KeepAlive(ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	c.note(false)
	return c.Backend.KeepAlive(ctx, s, names, groups)
}

func (c *callCounter) Release(ctx context.Context, s spi.SessionID, name string, token int64) error {
	c.note(false)
	return c.Backend.Release(ctx, s, name, token)
}

func (c *callCounter) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	c.note(false)
	return c.Backend.OpenSession(ctx, owner, ttl)
}

// TestMySQLCrashWakesNobody: when the holder process is SIGKILLed, the server lets its named
// locks go with its connection, and the waiter's waker gets the lock it blocked on. That is no
// release — the crashed holder's lease lives on until its session expires (TTL 10 s) — so the
// waker sends no hint and the waiting client makes no acquire for it; the waker goes back to
// probing the lock and reading the lease row.
func TestMySQLCrashWakesNobody(t *testing.T) {
	dsn := myDSN(t)
	migrated(t, dsn)
	name := "crash-" + unique(t)
	cmd, stdin, stdout := startChild(t, wakeChildEnv+"="+dsn, wakeNameEnv+"="+name)
	defer stdin.Close()
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	if lines := bufio.NewScanner(stdout); !lines.Scan() || !strings.HasPrefix(lines.Text(), "locked ") {
		t.Fatalf("holder process said %q (%v), want locked", lines.Text(), lines.Err())
	}
	waiter := &callCounter{Backend: open(t, dsn)}
	c := locktest.Clients(t, wakeTTL, waiter)[0]
	wctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.Lock(wctx, name)
		done <- err
	}()
	defer func() {
		cancel()
		<-done
	}()
	mw := waiter.waker.(*mysqlWaker)
	// The waiter finds the lock held and its waker blocks on the holder's named lock.
	for end := time.Now().Add(5 * time.Second); mw.snapshot().blocks == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the waker did not wait on the named lock: %+v", mw.snapshot())
		}
	}
	time.Sleep(100 * time.Millisecond)
	before := mw.snapshot()
	waiter.reset()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()
	time.Sleep(time.Second) // well within the crashed holder's 10 s lease
	after := mw.snapshot()
	acquires, _ := waiter.reset()
	select {
	case err := <-done:
		t.Fatalf("the waiter's Lock returned while the crashed holder's lease lives: %v", err)
	default:
	}
	t.Logf("waker statements in the second after the kill: %d probes, %d lease reads, %d blocking waits, %d hints; the waiter's acquires: %d",
		after.probes-before.probes, after.reads-before.reads, after.blocks-before.blocks, after.hints-before.hints, acquires)
	if after.hints != before.hints || acquires != 0 {
		t.Errorf("the crash woke the waiter: %d hints, %d acquires; want none while the lease lives", after.hints-before.hints, acquires)
	}
	if after.reads == before.reads {
		t.Errorf("the waker did not read the lease row after the named lock came free: %+v", after)
	}
}

// TestWaitCost reports what one client waiting for a held lock (session TTL 1 s) costs per TTL,
// on MySQL/MariaDB and SQLite: the waiting client's backend calls (acquires / all) and, on
// MySQL/MariaDB, the statements its waker ran (probes and blocking GET_LOCKs, each counted when
// it starts). It checks that the waiter kept waiting and, on MySQL/MariaDB, that the waker
// waited on the named lock; the numbers are for the report.
func TestWaitCost(t *testing.T) {
	const ttl, window = time.Second, 4 * time.Second
	for _, d := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"mysql", myDSN}, {"sqlite", liteDSN}} {
		t.Run(d.name, func(t *testing.T) {
			dsn := d.dsn(t)
			migrated(t, dsn)
			waiter := &callCounter{Backend: open(t, dsn)}
			clients := locktest.Clients(t, ttl, open(t, dsn), waiter)
			ctx := testCtx(t)
			name := "cost-" + unique(t)
			h, err := clients[0].Lock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = clients[1].Lock(wctx, name)
			}()
			time.Sleep(300 * time.Millisecond)
			waiter.reset()
			mw, isMySQL := waiter.waker.(*mysqlWaker)
			var w0 mysqlStats
			if isMySQL {
				w0 = mw.snapshot()
			}
			start := time.Now()
			time.Sleep(window)
			elapsed := time.Since(start)
			acquires, calls := waiter.reset()
			select {
			case <-done:
				t.Fatal("the waiter's Lock returned while the lock was held")
			default:
			}
			cancel()
			<-done
			perTTL := func(n int64) float64 { return float64(n) * ttl.Seconds() / elapsed.Seconds() }
			t.Logf("%s waiter: %.2f acquires / %.2f backend calls per TTL", d.name, perTTL(acquires), perTTL(calls))
			if isMySQL {
				w1 := mw.snapshot()
				t.Logf("MySQL/MariaDB waker: %.2f statements per TTL (%d probes, %d blocking GET_LOCKs, %d hints in %v)",
					perTTL((w1.probes-w0.probes)+(w1.reads-w0.reads)+(w1.blocks-w0.blocks)), w1.probes-w0.probes, w1.blocks-w0.blocks, w1.hints-w0.hints, elapsed.Round(time.Millisecond))
				if w1.blocks == 0 {
					t.Error("the waker never waited on the named lock")
				}
			}
			if calls == 0 {
				t.Error("the waiting client made no backend call in four TTLs (no keep-alive)")
			}
			if err := h.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWakerWakesOnlyTheOwedBackend checks the wakers' read of a lease row (MySQL/MariaDB and
// SQLite): a free lease wakes a backend's waiters only when the waiter queue owes it to none of
// another backend's sessions (an empty queue, or a first live waiter of its own); on MySQL, the
// tenure the read reports changes with every grant and release. Waking the other backends'
// waiters for a lease owed to one session cost each an acquire that found it held and contended
// for the lease row with the session it was owed to: 18 goroutines of three processes locking
// three names took 30-60 locks/s on MariaDB and ~50 on SQLite, against ~200 with the check
// (/tmp trial, 2026-12-03; BenchmarkLockContention in the root package has the same shape).
func TestWakerWakesOnlyTheOwedBackend(t *testing.T) {
	for _, dialect := range []string{"mysql", "sqlite"} {
		t.Run(dialect, func(t *testing.T) {
			dsn := liteDSN(t)
			if dialect == "mysql" {
				dsn = myDSN(t)
			}
			migrated(t, dsn)
			testWakesOnlyTheOwed(t, dsn)
		})
	}
}

func testWakesOnlyTheOwed(t *testing.T, dsn string) {
	ctx := testCtx(t)
	a, b, c := open(t, dsn), open(t, dsn), open(t, dsn)
	session := func(be *Backend) spi.SessionID {
		s, err := be.OpenSession(ctx, "owed", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	sa, sb, sc := session(a), session(b), session(c)
	name, alone := "owed-"+unique(t), "alone-"+unique(t)
	// read is the waker's read of name: whether it wakes be's waiters, and (MySQL) the tenure.
	read := func(be *Backend, name string) leaseState {
		t.Helper()
		switch w := be.waker.(type) {
		case *mysqlWaker:
			conn, err := w.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			return w.leaseState(ctx, conn, name)
		case *sqliteWaker:
			db, conn, err := w.open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			defer conn.close()
			return leaseState{wake: len(w.free(ctx, conn, []string{name})) == 1}
		}
		t.Fatalf("no waker on %T", be.waker)
		return leaseState{}
	}
	_, tenures := a.waker.(*mysqlWaker)
	grant, err := c.Acquire(ctx, sc, name)
	if err != nil || grant.Kind != spi.Granted {
		t.Fatalf("c acquire: %+v %v", grant, err)
	}
	for _, q := range []struct {
		be *Backend
		s  spi.SessionID
	}{{b, sb}, {a, sa}} { // b queues first, then a
		if r, err := q.be.AcquireQueued(ctx, q.s, name); err != nil || r.Kind != spi.HeldBy {
			t.Fatalf("queued acquire: %+v %v", r, err)
		}
	}
	held := read(a, name)
	if held.wake || read(b, name).wake {
		t.Fatalf("a held lease woke a waiter: %+v", held)
	}
	if err := c.Release(ctx, sc, name, grant.Token); err != nil {
		t.Fatal(err)
	}
	if st := read(a, name); st.wake {
		t.Errorf("a lease owed to b's session woke a's waiters: %+v", st)
	}
	freed := read(b, name)
	if !freed.wake {
		t.Errorf("a lease owed to b's session did not wake b's waiters: %+v", freed)
	}
	if tenures && freed.tenure == held.tenure {
		t.Errorf("the release left the tenure %q as it was", held.tenure)
	}
	if r, err := b.AcquireQueued(ctx, sb, name); err != nil || r.Kind != spi.Granted {
		t.Fatalf("b's acquire of the lease owed to it: %+v %v", r, err)
	}
	if st := read(a, name); st.wake || tenures && (st.tenure == freed.tenure || st.tenure == held.tenure) {
		t.Errorf("b's tenure: %+v, want no wake and a new tenure (after %q, %q)", st, held.tenure, freed.tenure)
	}
	if r, err := c.Acquire(ctx, sc, alone); err != nil || r.Kind != spi.Granted {
		t.Fatalf("c acquire: %+v %v", r, err)
	}
	if st := read(a, alone); st.wake {
		t.Errorf("a lease c holds woke a's waiters: %+v", st)
	}
	if err := c.CloseSession(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if st := read(a, alone); !st.wake {
		t.Errorf("a free lease nobody waits for did not wake a's waiters: %+v", st)
	}
}

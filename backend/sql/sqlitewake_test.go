package sql

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/locktest"
	"github.com/simba-go/simba/spi"
)

// TestSQLiteWaiterWakesOnRelease: on one SQLite file, a client waiting for a lock that another
// client (another connection, as another process would be) releases gets it within the
// waker's polling, not when the holder's 10 s lease would have run out.
func TestSQLiteWaiterWakesOnRelease(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	waiter := newHeldWaiter(open(t, dsn))
	clients := locktest.Clients(t, 10*time.Second, open(t, dsn), waiter)
	ctx := testCtx(t)
	held, err := clients[0].Lock(ctx, "handover")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *simba.Held, 1)
	errs := make(chan error, 1)
	go func() {
		h, err := clients[1].Lock(ctx, "handover")
		if err != nil {
			errs <- err
			return
		}
		got <- h
	}()
	// Let the waiter's acquire find the lease held (its next retry is ~10 s away).
	waiter.waitHeld(t)
	released := time.Now()
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-got:
		took := time.Since(released)
		t.Logf("the waiter got the lock %v after the release (TTL 10s)", took)
		if h.Token() <= held.Token() {
			t.Fatalf("token %d after %d", h.Token(), held.Token())
		}
		if took > 3*time.Second {
			t.Fatalf("the waiter took %v: it was not woken", took)
		}
		_ = h.Unlock(context.Background())
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(8 * time.Second):
		t.Fatal("the waiter was not woken by the release (it would retry only when the 10 s lease ran out)")
	}
	for _, c := range clients {
		_ = c.Close(context.Background())
	}
}

// TestSQLiteWakerReadsPerCommit: commits by another connection that free nothing (here a
// holder's keep-alives) cost the waiting backend's waker reads of the change counter, and no
// hint; a release after them reaches the waiter as a Released hint. How many reads a commit
// costs depends on the scheduler (readSeries: two when the waker's read at the write comes
// before the commit is published, seven when it wakes late, as on a loaded CPU): it is logged
// here, and TestSQLiteReadSeries checks, read by read, that the reads stop once a read after
// the event's own sees the commit.
func TestSQLiteWakerReadsPerCommit(t *testing.T) {
	dsn := liteDSN(t)
	holder := migrated(t, dsn)
	waiter := open(t, dsn)
	ctx := testCtx(t)
	const name = "reads-per-commit"
	hs, err := holder.OpenSession(ctx, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, err := holder.Acquire(ctx, hs.ID, name)
	if err != nil || a.Kind != spi.Granted {
		t.Fatalf("holder's acquire: %+v %v", a, err)
	}
	hints, err := waiter.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := waiter.OpenSession(ctx, "waiter", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := waiter.Acquire(ctx, ws.ID, name); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("waiter's acquire: %+v %v", r, err)
	}
	w := waiter.waker.(*sqliteWaker)
	// The waker's own writes are over (the waiter's session and acquire): let their reads end.
	time.Sleep(300 * time.Millisecond)
	const commits = 5
	perCommit := make([]int, commits)
	for i := range perCommit {
		r0 := w.followUps.Load()
		if _, err := holder.KeepAlive(ctx, hs.ID, nil, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		perCommit[i] = int(w.followUps.Load() - r0)
	}
	t.Logf("change-counter reads after the writes, per commit (6 when the waker woke after the commit was published): %v", perCommit)
	// The lease is held all along (its holder's TTL is a minute): the keep-alives' commits,
	// which the waker read after, free nothing and deliver no hint.
	for drained := false; !drained; {
		select {
		case h := <-hints:
			if h.Kind == spi.Released && h.Name == name {
				t.Fatalf("a Released hint for %s while its holder held it and only kept its session alive: %+v", name, h)
			}
		default:
			drained = true
		}
	}
	if err := holder.Release(ctx, hs.ID, name, a.Token); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case h := <-hints:
			if h.Kind == spi.Released && h.Name == name {
				return
			}
		case <-ctx.Done():
			t.Fatal("no Released hint after the holder's release")
		}
	}
}

// runSeries steps a readSeries through one file event whose reads see the change counter at
// vals in turn (vals[0] at the event's own read; the read before the event saw it at before),
// and returns the delays of the reads after the event's own. It fails if the series ends with
// values left, or goes on after the last.
func runSeries(t *testing.T, s *readSeries, before int64, vals ...int64) []time.Duration {
	t.Helper()
	if !s.woke(true) {
		t.Fatal("a file event's read is not one of a series")
	}
	s.read(true, before, vals[0])
	last := vals[0]
	var delays []time.Duration
	for i, v := range vals[1:] {
		d := s.delay()
		if d == 0 {
			t.Fatalf("the series ended after %d reads after the event's own; %d values left", i, len(vals)-1-i)
		}
		delays = append(delays, d)
		if !s.woke(false) {
			t.Fatalf("the read %v later is not one of the series", d)
		}
		s.read(false, last, v)
		last = v
	}
	if d := s.delay(); d != 0 {
		t.Fatalf("the series goes on after %d reads after the event's own (%v): next in %v", len(delays), vals, d)
	}
	return delays
}

func ms(ds ...int) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d) * time.Millisecond
	}
	return out
}

// TestSQLiteReadSeries: after a file event the waker reads the change counter at the event
// and then 2, 4 … 64 ms later, but stops at the first read after the event's own that sees the
// counter change (one writer at a time: that was the only commit in flight); the event's own
// read, which may see a commit published just before another one wrote, ends nothing. Which
// of these a commit on a real file gets depends on the scheduler
// (TestSQLiteWakerReadsPerCommit); here each read's value is given.
func TestSQLiteReadSeries(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals []int64 // the reads' values from the event's own on; 5 before the event
		want []time.Duration
	}{
		{"the commit seen at the first read after the event's", []int64{5, 6}, ms(2)},
		{"a slow sync: seen at the third", []int64{5, 5, 5, 6}, ms(2, 4, 8)},
		{"a waker woken late: the commit seen at the event's own read", []int64{6, 6, 6, 6, 6, 6, 6}, ms(2, 4, 8, 16, 32, 64)},
		{"a second commit syncing at the event: seen at the second read", []int64{6, 6, 7}, ms(2, 4)},
		{"no commit seen at all", []int64{5, 5, 5, 5, 5, 5, 5}, ms(2, 4, 8, 16, 32, 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s readSeries
			if got := runSeries(t, &s, 5, tc.vals...); !slices.Equal(got, tc.want) {
				t.Fatalf("reads after the event's own at delays %v, want %v", got, tc.want)
			}
			// The series over, a wake-up without an event is poll's own (its safety net).
			if s.woke(false) {
				t.Fatal("a timer's wake-up after the series counts as one of it")
			}
			// The next event starts a series afresh, its own read ending nothing again.
			if got := runSeries(t, &s, tc.vals[len(tc.vals)-1], 9, 9, 10); !slices.Equal(got, ms(2, 4)) {
				t.Fatalf("the next event's reads at delays %v, want [2ms 4ms]", got)
			}
		})
	}
	// An event during a series starts it over: its own read ends nothing, the read after does.
	var s readSeries
	s.woke(true)
	s.read(true, 5, 5)
	s.woke(false) // 2 ms later: nothing yet
	s.read(false, 5, 5)
	if got := runSeries(t, &s, 5, 6, 6, 7); !slices.Equal(got, ms(2, 4)) {
		t.Fatalf("an event during a series: reads after its own at delays %v, want [2ms 4ms]", got)
	}
}

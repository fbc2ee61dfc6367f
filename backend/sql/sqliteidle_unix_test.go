//go:build unix

package sql

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// The waiting-CPU benchmark's child process: the test binary re-executed with idleChildEnv
// set to a SQLite DSN. With idleNameEnv set it waits for that name (a Lock another process
// holds); without, it is the idle process beside it, holding a name of its own (its session
// kept alive, nothing waited for).
const (
	idleChildEnv = "SIMBA_SQL_IDLE_DSN"
	idleNameEnv  = "SIMBA_SQL_IDLE_NAME"
	// idleTTL is the children's session TTL: the outside trial's.
	idleTTL = 3 * time.Second
)

// idleChild runs the child's part when the binary was started as one, and reports whether it
// did.
func idleChild() bool {
	dsn := os.Getenv(idleChildEnv)
	if dsn == "" {
		return false
	}
	if err := runIdleChild(dsn, os.Getenv(idleNameEnv), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "idle child:", err)
		os.Exit(2)
	}
	os.Exit(0)
	return true
}

// idleSnap is a child's cumulative account: its CPU time (user + system) and its waker's
// counters.
type idleSnap struct {
	cpu                                time.Duration
	events, reads, followUps, watchHit int64
}

func (s idleSnap) sub(o idleSnap) idleSnap {
	return idleSnap{s.cpu - o.cpu, s.events - o.events, s.reads - o.reads, s.followUps - o.followUps, s.watchHit - o.watchHit}
}

// runIdleChild waits for name (or holds a name of its own if name is ""), then answers each
// line on in with its cumulative account ("snap <CPU ns> <events> <reads> <follow-ups>
// <watch wake-ups>"), until in ends.
func runIdleChild(dsn, name string, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithOwner("idle"), simba.WithTTL(idleTTL))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	ended := make(chan error, 1)
	if name != "" {
		go func() {
			_, err := c.Lock(ctx, name)
			ended <- fmt.Errorf("the waiter's Lock returned while the lock was held: %v", err)
		}()
	} else if _, err := c.Lock(ctx, fmt.Sprintf("idle-own-%d", os.Getpid())); err != nil {
		return err
	}
	w := b.waker.(*sqliteWaker)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		select {
		case err := <-ended:
			return err
		default:
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return err
		}
		fmt.Fprintf(out, "snap %d %d %d %d %d\n", ru.Utime.Nano()+ru.Stime.Nano(),
			w.events.Load(), w.reads.Load(), w.followUps.Load(), w.watchWakes.Load())
	}
	return nil
}

// idleProc is a running child of the benchmark.
type idleProc struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func (p *idleProc) snap(b *testing.B) idleSnap {
	b.Helper()
	if _, err := fmt.Fprintln(p.in, "snap"); err != nil {
		b.Fatal(err)
	}
	if !p.out.Scan() {
		b.Fatalf("the child ended: %v", p.out.Err())
	}
	f := strings.Fields(p.out.Text())
	if len(f) != 6 || f[0] != "snap" {
		b.Fatalf("the child said %q", p.out.Text())
	}
	var v [5]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			b.Fatalf("the child said %q", p.out.Text())
		}
		v[i] = n
	}
	return idleSnap{time.Duration(v[0]), v[1], v[2], v[3], v[4]}
}

// BenchmarkSQLiteWaiterCPU measures the CPU a process pays while its client waits for a
// SQLite lock that another process holds, with `writers` other connections committing (each a
// keep-alive every 100 ms: what other processes' keep-alives and acquires do to the file), as
// CPU milliseconds per second of wall time, beside an idle process on the same file in the
// same run (its client's session open and kept alive, waiting for nothing): the ratio is what
// waiting costs. Each iteration is a one-second window; the breakdown is the waiting
// process's waker: file events it woke for, change-counter reads per event (the event's own
// and the recheck series'), and the file watch's wake-ups, per second.
func BenchmarkSQLiteWaiterCPU(b *testing.B) {
	const window = time.Second
	for _, writers := range []int{0, 5} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			dsn := liteDSN(b)
			holder := migrated(b, dsn)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const name = "idle-cpu"
			hs, err := holder.OpenSession(ctx, "holder", time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			if a, err := holder.Acquire(ctx, hs.ID, name); err != nil || a.Kind != spi.Granted {
				b.Fatalf("holder's acquire: %+v %v", a, err)
			}
			var commits atomic.Int64
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			for i := range writers {
				wb := open(b, dsn)
				ws, err := wb.OpenSession(ctx, fmt.Sprintf("writer-%d", i), time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					t := time.NewTicker(100 * time.Millisecond)
					defer t.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-t.C:
						}
						if _, err := wb.KeepAlive(ctx, ws.ID, nil, nil); err == nil {
							commits.Add(1)
						}
					}
				}()
			}
			start := func(env ...string) *idleProc {
				cmd, in, out := startChild(b, env...)
				b.Cleanup(func() {
					in.Close()
					_ = cmd.Wait()
				})
				return &idleProc{in: in, out: bufio.NewScanner(out)}
			}
			waiter := start(idleChildEnv+"="+dsn, idleNameEnv+"="+name)
			idle := start(idleChildEnv + "=" + dsn)
			time.Sleep(time.Second) // both clients opened, the waiter's acquire answered HeldBy
			var wsum, isum idleSnap
			var wall time.Duration
			c0 := commits.Load()
			b.ResetTimer()
			for range b.N {
				w0, i0, t0 := waiter.snap(b), idle.snap(b), time.Now()
				time.Sleep(window)
				w1, i1 := waiter.snap(b), idle.snap(b)
				wall += time.Since(t0)
				d := w1.sub(w0)
				wsum = idleSnap{wsum.cpu + d.cpu, wsum.events + d.events, wsum.reads + d.reads, wsum.followUps + d.followUps, wsum.watchHit + d.watchHit}
				isum.cpu += i1.sub(i0).cpu
			}
			b.StopTimer()
			sec := wall.Seconds()
			b.ReportMetric(wsum.cpu.Seconds()*1000/sec, "waiter-cpu-ms/s")
			b.ReportMetric(isum.cpu.Seconds()*1000/sec, "idle-cpu-ms/s")
			if isum.cpu > 0 {
				b.ReportMetric(float64(wsum.cpu)/float64(isum.cpu), "waiter/idle")
			}
			b.ReportMetric(float64(commits.Load()-c0)/sec, "writer-commits/s")
			b.ReportMetric(float64(wsum.events)/sec, "events/s")
			b.ReportMetric(float64(wsum.reads)/sec, "reads/s")
			if wsum.events > 0 {
				b.ReportMetric(float64(wsum.reads)/float64(wsum.events), "reads/event")
			}
			b.ReportMetric(float64(wsum.watchHit)/sec, "watch-wakes/s")
		})
	}
}

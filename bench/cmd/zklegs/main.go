// Command zklegs times a ZooKeeper graceful hand-over between two processes leg by leg: the
// holder's unlock → its release request on the wire → the waiter's watch event → the waiter's
// acquire request → its reply → the waiter's Lock returning. Both processes dial through a
// connection that notes the time of every ZooKeeper frame it writes or reads (and which
// connection is Simba's watcher), so the client's own legs are told from the server's.
//
// It runs three modes, one run of each in turn (-runs times), each run a pair of processes
// (this one and a child, this binary re-executed) passing one lock back and forth -n times
// each way, the waiter waiting 30 ms before the holder lets go (as benchpeers' hand-over rows):
//
//   - simba: Simba's Lock and Unlock (backend/zookeeper, TTL 2 s, tickTime=200ms);
//   - bare: go-zookeeper alone sending the requests Simba's hand-over sends (the release's
//     multi[setData, delete] of the lease node; the waiter's queue entry, a child watch, and
//     the acquire's multi[create lease, setData queue, delete waiter]): the server's part of
//     Simba's hand-over without Simba's client;
//   - zklock: go-zookeeper's zk.Lock (a delete, then the next waiter's getChildren).
//
// It prints, per mode, each leg's median over the runs of the runs' p50 and p99 (nearest rank),
// and each run's garbage collections. A hand-over whose waiter was not waiting yet when the
// holder let go (no watch event between) is left out. The server is ZooKeeper at -server; the
// nodes live under /zklegs-<pid>, removed at the end.
//
//	go -C bench run ./cmd/zklegs -runs 5 -n 150
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"time"
)

// settle is how long the waiter waits before the holder lets go (benchpeers' waiterSettle).
const settle = 30 * time.Millisecond

func main() {
	var (
		modes  = flag.String("modes", "simba,bare,zklock", "comma-separated modes: simba, bare, zklock")
		runs   = flag.Int("runs", 3, "runs of each mode, in turn")
		n      = flag.Int("n", 150, "hand-overs each way per run")
		server = flag.String("server", "127.0.0.1:2181", "ZooKeeper address")
		child  = flag.String("child", "", "internal: run as the child of a pair in this mode")
		root   = flag.String("root", "", "internal: the pair's root node")
		trace  = flag.String("trace", "", "internal: the child's trace file")
	)
	flag.Parse()
	if *child != "" {
		if err := runChild(*child, *server, *root, *trace); err != nil {
			fmt.Fprintln(os.Stderr, "zklegs child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(strings.Split(*modes, ","), *runs, *n, *server); err != nil {
		fmt.Fprintln(os.Stderr, "zklegs:", err)
		os.Exit(1)
	}
}

func run(modes []string, runs, n int, server string) error {
	for _, m := range modes {
		if _, ok := shapes[m]; !ok {
			return fmt.Errorf("unknown mode %q", m)
		}
	}
	root := fmt.Sprintf("/zklegs-%d", os.Getpid())
	defer removeTree(server, root)
	dir, err := os.MkdirTemp("", "zklegs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var all []runStats
	for r := 1; r <= runs; r++ {
		for _, m := range modes {
			s, gcs, err := pair(m, server, root, filepath.Join(dir, fmt.Sprintf("%s-%d", m, r)), n)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", m, r, err)
			}
			load, _ := os.ReadFile("/proc/loadavg")
			fmt.Printf("%s run %d: %d hand-overs, total p50 %.2f p99 %.2f ms; GC cycles %s; load %s\n",
				m, r, s.n, ms(s.p50[8]), ms(s.p99[8]), gcs, strings.Join(strings.Fields(string(load))[:1], ""))
			all = append(all, s)
		}
	}
	report(os.Stdout, modes, all)
	return nil
}

// warmups are the first hand-overs each way of a pair, left out.
const warmups = 5

// pair runs one pair of mode: this process and a child pass the lock n+warmups times each way.
func pair(mode, server, root, traceFile string, n int) (runStats, string, error) {
	rec := &recorder{}
	l, err := open(mode, server, root, rec)
	if err != nil {
		return runStats{}, "", err
	}
	defer l.close()
	exe, err := os.Executable()
	if err != nil {
		return runStats{}, "", err
	}
	cmd := exec.Command(exe, "-child", mode, "-server", server, "-root", root, "-trace", traceFile)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return runStats{}, "", err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return runStats{}, "", err
	}
	if err := cmd.Start(); err != nil {
		return runStats{}, "", err
	}
	waited := false
	defer func() {
		if !waited {
			in.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	out := bufio.NewScanner(outPipe)
	expect := func(want string) error {
		if !out.Scan() {
			return errors.New("the child's output ended")
		}
		if out.Text() != want {
			return fmt.Errorf("the child said %q, want %q", out.Text(), want)
		}
		return nil
	}
	say := func(s string) error { _, err := io.WriteString(in, s+"\n"); return err }
	if err := expect("ready"); err != nil {
		return runStats{}, "", err
	}
	ctx := context.Background()
	if err := l.lock(ctx); err != nil {
		return runStats{}, "", err
	}
	gc0 := gcCycles()
	for i := 0; i < n+warmups; i++ {
		if i == warmups {
			rec.take() // not analysed: the warm-up hand-overs
			gc0 = gcCycles()
		}
		// This process → the child.
		if err := say("lock"); err != nil {
			return runStats{}, "", err
		}
		time.Sleep(settle)
		rec.mark(kindUnlock)
		if err := l.unlock(ctx); err != nil {
			return runStats{}, "", err
		}
		if err := expect("held"); err != nil {
			return runStats{}, "", err
		}
		// The child → this process.
		got := make(chan error, 1)
		go func() {
			err := l.lock(ctx)
			rec.mark(kindGranted)
			got <- err
		}()
		time.Sleep(settle)
		if err := say("unlock"); err != nil {
			return runStats{}, "", err
		}
		if err := errors.Join(expect("unlocked"), <-got); err != nil {
			return runStats{}, "", err
		}
	}
	gcs := gcCycles() - gc0
	parentEvs := rec.take()
	if err := l.unlock(ctx); err != nil {
		return runStats{}, "", err
	}
	in.Close()
	waited = true
	if err := cmd.Wait(); err != nil {
		return runStats{}, "", fmt.Errorf("child: %w", err)
	}
	childEvs, childGCs, err := readTrace(traceFile)
	if err != nil {
		return runStats{}, "", err
	}
	// The child's warm-up events end before the parent's first analysed unlock mark, so
	// legs, which starts at unlock marks, skips them.
	var from int64
	if len(parentEvs) > 0 {
		from = parentEvs[0].T
	}
	kept := childEvs[:0]
	for _, e := range childEvs {
		if e.T >= from {
			kept = append(kept, e)
		}
	}
	return stats(mode, legs(merge(parentEvs, kept), shapes[mode])), fmt.Sprintf("%d here, %d in the child (its whole run)", gcs, childGCs), nil
}

// gcCycles is how many garbage collections this process has run.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

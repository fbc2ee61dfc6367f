package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// rebal is scenario 1: 4 workers on 64 partitions; a 5th joins, one gets SIGTERM, one SIGKILL,
// one SIGSTOP for longer than the TTL and then SIGCONT.
func rebal(args []string) error {
	fs := flag.NewFlagSet("rebal", flag.ExitOnError)
	kind := fs.String("b", "sqlite", "backend: sqlite, pg, mysql, redis, zk, etcd")
	private := fs.Bool("private", false, "a private PostgreSQL or MariaDB instead of the shared one")
	parts := fs.Int("p", 64, "partitions")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	step := fs.Duration("step", 8*time.Second, "time between changes")
	every := fs.Duration("every", 300*time.Millisecond, "write interval per partition")
	lag := fs.Duration("lag", 0, "workers' time between IsValid and the write")
	fs.Parse(args)
	ctx := context.Background()
	root, err := os.MkdirTemp("", "trial29-rebal-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	dsn, srv, err := backendDSN(ctx, *kind, root, *private)
	if err != nil {
		return err
	}
	if srv != nil {
		defer srv.Close()
	}
	logDir := filepath.Join(os.TempDir(), fmt.Sprintf("trial29-rebal-%s-%d", *kind, os.Getpid()))
	os.MkdirAll(logDir, 0o755)
	group := fmt.Sprintf("t29-jobs-%d", os.Getpid())
	f, err := newFleet(ctx, dsn, group, logDir, *ttl, *parts, "-every", every.String(), "-stats", "5s", "-lag", lag.String())
	if err != nil {
		return err
	}
	fmt.Printf("rebal on %s: %d partitions, TTL %s, group %s, logs %s\n", dsn, *parts, *ttl, group, logDir)
	for range 4 {
		f.start()
	}
	at := func(k int) { time.Sleep(time.Until(f.t0.Add(time.Duration(k) * *step))) }
	at(1)
	f.note("join", f.start())
	at(2)
	f.signal("w1", syscall.SIGTERM)
	at(3)
	f.signal("w2", syscall.SIGKILL)
	at(4)
	f.signal("w3", syscall.SIGSTOP)
	stopAt := time.Now()
	time.Sleep(*ttl + 3*time.Second)
	f.signal("w3", syscall.SIGCONT)
	contAt := time.Now()
	at(7)
	end := time.Now()
	owners := ownersAt(f.sk.snapshot(), end.Add(-2*time.Second), end)
	f.stop()

	recs := f.sk.snapshot()
	v := analyse(recs)
	v.print(os.Stdout)
	codes := map[int]int{}
	for _, r := range recs {
		if !r.OK {
			codes[r.Code]++
		}
	}
	fmt.Printf("refused by status: %v\n", codes)
	// Per change: how long the partitions concerned went without an owner's write.
	for _, c := range f.notes {
		switch c.what {
		case "join":
			var gaps []float64
			for _, ss := range spans(recs) {
				for i := 1; i < len(ss); i++ {
					if ss[i].Who == c.who && ss[i].First.After(c.at) && ss[i].First.Before(c.at.Add(*step)) {
						gaps = append(gaps, ss[i].First.Sub(ss[i-1].Last).Seconds())
					}
				}
			}
			sort.Float64s(gaps)
			if len(gaps) > 0 {
				fmt.Printf("%6.1fs join %s: %d partitions moved to it, unowned median %.2fs max %.2fs\n", c.at.Sub(f.t0).Seconds(), c.who, len(gaps), gaps[len(gaps)/2], gaps[len(gaps)-1])
			} else {
				fmt.Printf("%6.1fs join %s: no partition moved to it\n", c.at.Sub(f.t0).Seconds(), c.who)
			}
		case "terminated", "killed", "stopped (signal)":
			fmt.Printf("%6.1fs %s %s: %s (bound 2×TTL = %s)\n", c.at.Sub(f.t0).Seconds(), c.what, c.who, summary(unownedAfter(recs, c.who, c.at)), 2**ttl)
		}
	}
	// The paused worker after SIGCONT.
	late, lateRefused := 0, 0
	for _, r := range recs {
		if r.Who == "w3" && r.At.After(contAt) && r.At.Before(contAt.Add(2*time.Second)) {
			late++
			if !r.OK {
				lateRefused++
			}
		}
	}
	pausedN, pausedLine := f.grepLog("w3", "process paused")
	staleN, staleLine := f.grepLog("w3", "STALE")
	fmt.Printf("w3 stopped %.1fs: writes reaching the sink in the 2 s after SIGCONT: %d (%d refused); 'process paused' lines %d: %s\n  STALE lines %d: %s\n",
		contAt.Sub(stopAt).Seconds(), late, lateRefused, pausedN, pausedLine, staleN, staleLine)
	// Largest stretch any partition went without an owner's write, after the first 5 s.
	type stretch struct {
		gap        float64
		p          string
		prev, next span
	}
	var st []stretch
	for p, ss := range spans(recs) {
		for i := 1; i < len(ss); i++ {
			if ss[i-1].Last.After(f.t0.Add(5 * time.Second)) {
				st = append(st, stretch{ss[i].First.Sub(ss[i-1].Last).Seconds(), p, ss[i-1], ss[i]})
			}
		}
	}
	sort.Slice(st, func(i, j int) bool { return st[i].gap > st[j].gap })
	for i, s := range st[:min(3, len(st))] {
		fmt.Printf("unowned stretch #%d: %.2fs (%.2f×TTL), partition %s: %s#%d last at %.2fs, %s#%d first at %.2fs\n", i+1, s.gap, s.gap/ttl.Seconds(), s.p,
			s.prev.Who, s.prev.Token, s.prev.Last.Sub(f.t0).Seconds(), s.next.Who, s.next.Token, s.next.First.Sub(f.t0).Seconds())
	}
	fmt.Println("at the end:", balance(owners, *parts))
	for _, id := range f.ids {
		st := f.statsOf(id)
		left, leftLine := f.grepLog(id, "LEFT ")
		if len(st) > 0 {
			l := st[len(st)-1]
			fmt.Printf("  %s: last STATS t=%s gor=%s heap=%s held=%s writes=%s stale=%s stale_valid=%s log info/warn/error=%s/%s/%s; %d %s\n", id, l["t"], l["gor"], l["heap"], l["held"], l["writes"], l["stale"], l["stale_valid"], l["log_info"], l["log_warn"], l["log_error"], left, leftLine)
		}
	}
	return nil
}

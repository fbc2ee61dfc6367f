package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// soak is scenario 2: 3 workers on 256 partitions for -dur, the private server killed (SIGKILL)
// in the middle and started again after -down; per worker, goroutines and heap over time, log
// lines per minute and backend calls per renewal interval.
func soak(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	kind := fs.String("b", "pg", "backend: pg, mysql, redis, zk, etcd (private), sqlite")
	parts := fs.Int("p", 256, "partitions")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	dur := fs.Duration("dur", 3*time.Minute, "run length")
	down := fs.Duration("down", 2*time.Second, "server down time")
	every := fs.Duration("every", time.Second, "write interval per partition")
	fs.Parse(args)
	ctx := context.Background()
	root, err := os.MkdirTemp("", "trial29-soak-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	dsn, srv, err := backendDSN(ctx, *kind, root, true)
	if err != nil {
		return err
	}
	if srv != nil {
		defer srv.Close()
	}
	logDir := filepath.Join(os.TempDir(), fmt.Sprintf("trial29-soak-%s-%d", *kind, os.Getpid()))
	os.MkdirAll(logDir, 0o755)
	group := fmt.Sprintf("t29-soak-%d", os.Getpid())
	f, err := newFleet(ctx, dsn, group, logDir, *ttl, *parts, "-every", every.String(), "-stats", "10s")
	if err != nil {
		return err
	}
	fmt.Printf("soak on %s: %d partitions, TTL %s, %s, logs %s\n", dsn, *parts, *ttl, *dur, logDir)
	for range 3 {
		f.start()
	}
	var killAt, upAt time.Time
	time.Sleep(time.Until(f.t0.Add(*dur / 2)))
	if srv != nil {
		f.note("server kill -9", srv.Kind)
		killAt = time.Now()
		srv.Kill()
		time.Sleep(*down)
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := srv.Start(sctx)
		cancel()
		upAt = time.Now()
		f.note(fmt.Sprintf("server started (%v)", err), srv.Kind)
	}
	time.Sleep(time.Until(f.t0.Add(*dur)))
	end := time.Now()
	owners := ownersAt(f.sk.snapshot(), end.Add(3**every).Add(-5*time.Second), end)
	f.stop()

	recs := f.sk.snapshot()
	v := analyse(recs)
	v.print(os.Stdout)
	if !killAt.IsZero() {
		before, after := gapAround(recs, killAt, nil)
		fmt.Printf("restart: last write before the kill %.2fs before it, first write after %.2fs after the kill (%.2fs after the start); first new tenure %.2fs after the kill\n",
			killAt.Sub(before).Seconds(), after.Sub(killAt).Seconds(), after.Sub(upAt).Seconds(), firstNewTenure(recs, killAt).Sub(killAt).Seconds())
		// Partitions with no accepted write from 10 s after the start until the end.
		seen := map[string]bool{}
		for _, r := range recs {
			if r.OK && r.At.After(upAt.Add(10*time.Second)) {
				seen[r.Res] = true
			}
		}
		fmt.Printf("partitions written from 10 s after the restart to the end: %d of %d\n", len(seen), *parts)
	}
	fmt.Println("at the end (last 5 s):", balance(owners, *parts))
	renew := *ttl / 3
	for _, id := range f.ids {
		st := f.statsOf(id)
		if len(st) == 0 {
			continue
		}
		fmt.Printf("  %s: t gor heap(KiB) held | calls in the 10 s (keepalive per renewal interval) | log lines info/warn/error so far\n", id)
		for _, s := range st {
			heap, _ := strconv.Atoi(s["heap"])
			ka, _ := strconv.Atoi(s["keep-alive"])
			fmt.Printf("    %4s %4s %7d %4s | acq=%s rel=%s ka=%s (%.2f/interval) other: %v | %s/%s/%s\n", s["t"], s["gor"], heap/1024, s["held"],
				s["acquire"], s["release"], s["keep-alive"], float64(ka)/(10*time.Second.Seconds()/renew.Seconds()), othersOf(s), s["log_info"], s["log_warn"], s["log_error"])
		}
		n, line := f.grepLog(id, "LEFT ")
		fmt.Printf("    %d %s\n", n, line)
	}
	return nil
}

func othersOf(s map[string]string) map[string]string {
	o := map[string]string{}
	for k, v := range s {
		switch k {
		case "t", "gor", "heap", "held", "members", "writes", "stale", "stale_valid", "failed", "callerrs", "log_info", "log_warn", "log_error", "acquire", "release", "keep-alive":
		default:
			o[k] = v
		}
	}
	return o
}

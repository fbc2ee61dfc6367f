package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/open"
)

// team 2, from client-go's leaderelection: controller HA on a private PostgreSQL that is shut
// down (fast: SIGINT to the postmaster; immediate: SIGQUIT, a crash) and started again while a
// leader runs.
func pgTeam(args []string) error {
	fs := flag.NewFlagSet("pg", flag.ExitOnError)
	faults := fs.String("fault", "fast,immediate", "shutdowns in order: fast, immediate, smart")
	clients := fs.Int("clients", 3, "controller replicas (each its own backend and session)")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL (client-go: LeaseDuration)")
	down := fs.Duration("down", 2*time.Second, "time between the shutdown and the start")
	every := fs.Duration("every", 14*time.Second, "time between faults")
	fs.Parse(args)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp("", "trial28-pg-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	_ = os.Chmod(root, 0o755)
	pg, err := servers.Postgres(ctx, root)
	if err != nil {
		return err
	}
	defer pg.Close()
	lb, err := newLogbook(filepath.Join(os.TempDir(), "trial28-pg.log"))
	if err != nil {
		return err
	}
	dsn := "postgres://postgres@" + pg.Addr() + "/test"
	fmt.Printf("team pg: %s, %d replicas, TTL %s, faults %s (down %s); log %s\n", dsn, *clients, *ttl, *faults, *down, lb.f.Name())

	sk := newSink()
	var evs events
	var mu sync.Mutex
	var leaderLog []string
	note := func(format string, a ...any) {
		mu.Lock()
		leaderLog = append(leaderLog, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	var cls []*simba.Client
	var els []*simba.Election
	for i := range *clients {
		who := fmt.Sprintf("ctrl-%d", i+1)
		b, err := open.Open(ctx, dsn, open.WithAutoMigrate(), open.WithLogger(lb.logger(who+"-backend")))
		if err != nil {
			return err
		}
		defer b.Close()
		c, err := simba.New(b, simba.WithTTL(*ttl), simba.WithOwner(who), simba.WithLogger(lb.logger(who)), simba.WithListener(evs.listener()))
		if err != nil {
			return err
		}
		cls = append(cls, c)
		e, err := c.NewElection("controller",
			simba.OnElected(func(ctx context.Context, t simba.Term) { note("%s OnElected #%d", who, t.Token()) }),
			simba.OnRevoked(func(ctx context.Context, t simba.Term, r simba.RevokeReason) {
				note("%s OnRevoked #%d %s", who, t.Token(), r)
			}),
			simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
				for t.IsValid() {
					sk.write("controller", who, t.Token())
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(50 * time.Millisecond):
					}
				}
				return nil
			}))
		if err != nil {
			return err
		}
		if err := e.Start(ctx); err != nil {
			return err
		}
		els = append(els, e)
	}
	t0 := time.Now()
	type faultAt struct {
		what          string
		kill, restart time.Time
	}
	var done []faultAt
	for i, f := range strings.Split(*faults, ",") {
		time.Sleep(time.Until(t0.Add(time.Duration(i)*(*every) + 5*time.Second)))
		sig := map[string]syscall.Signal{"smart": syscall.SIGTERM, "fast": syscall.SIGINT, "immediate": syscall.SIGQUIT}[f]
		if sig == 0 {
			return fmt.Errorf("unknown shutdown %q", f)
		}
		pid, err := postmaster(pg)
		if err != nil {
			return err
		}
		lb.reset()
		evs.reset()
		fa := faultAt{what: f + " shutdown", kill: time.Now()}
		lb.mark("%s shutdown (signal %d to %d)", f, sig, pid)
		note("--- %s shutdown", f)
		if err := syscall.Kill(pid, sig); err != nil {
			return err
		}
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Printf("%s shutdown: the postmaster exited %.2fs after the signal\n", f, time.Since(fa.kill).Seconds())
		time.Sleep(*down)
		if err := pg.Start(ctx); err != nil {
			return err
		}
		fa.restart = time.Now()
		lb.mark("postgres serving again")
		note("--- postgres serving again")
		done = append(done, fa)
		time.Sleep(*every - 5*time.Second)
		fmt.Printf("  log lines (from the shutdown to %.1fs after the start):\n", time.Since(fa.restart).Seconds())
		printCounts(os.Stdout, lb.reset())
		fmt.Println("  events:")
		printCounts(os.Stdout, evs.reset())
	}
	time.Sleep(3 * time.Second)
	// Everyone recovered without a restart of the program?
	leaders := 0
	for i, e := range els {
		l, ok := e.Leader()
		if e.IsLeader() {
			leaders++
		}
		fmt.Printf("ctrl-%d: session %s, client Err %v, election Err %v, leader %v (%v)\n", i+1, short(cls[i].Session()), cls[i].Err(), e.Err(), l.Owner, ok)
	}
	fmt.Printf("leaders at the end: %d\n", leaders)
	for _, e := range els {
		_ = e.Stop(context.Background())
	}
	for _, c := range cls {
		_ = c.Close(context.Background())
	}
	recs := sk.snapshot()
	ss := spans(recs)["controller"]
	for _, f := range done {
		for i := 1; i < len(ss); i++ {
			if ss[i-1].Last.After(f.kill) && ss[i].First.After(f.restart) && (i < 2 || !ss[i-2].Last.After(f.kill)) {
				fmt.Printf("%s: the leader (%s) last wrote %.3fs after the signal (its term ran to its deadline); no leader for %.3fs; the next tenure (%s) wrote first %.3fs after PostgreSQL served again\n",
					f.what, ss[i-1].Who, ss[i-1].Last.Sub(f.kill).Seconds(), ss[i].First.Sub(ss[i-1].Last).Seconds(), ss[i].Who, ss[i].First.Sub(f.restart).Seconds())
			}
		}
	}
	fmt.Printf("tenures: %d\n", len(ss))
	for _, sp := range ss {
		fmt.Printf("  %s #%d %s..%s (%d writes)\n", sp.Who, sp.Token, sp.First.Format("15:04:05.000"), sp.Last.Format("15:04:05.000"), sp.N)
	}
	fmt.Println("callbacks:")
	for _, l := range leaderLog {
		fmt.Println("  " + l)
	}
	analyse(recs).print(os.Stdout)
	return nil
}

func short(s simba.SessionID) string {
	if len(s) > 8 {
		return string(s[:8])
	}
	return string(s)
}

// postmaster reads the postmaster's pid from its data directory.
func postmaster(s *servers.Server) (int, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir(), "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

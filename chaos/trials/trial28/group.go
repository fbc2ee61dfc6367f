package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/open"
)

// team 3, from etcd's concurrency / pglock: sharded workers in a PartitionGroup of 128+
// partitions over 5-8 member processes on one SQLite file, members joining and leaving every few
// seconds and one kill -9.
func groupTeam(args []string) error {
	fs := flag.NewFlagSet("group", flag.ExitOnError)
	parts := fs.Int("p", 128, "partitions")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	churn := fs.Duration("churn", 4*time.Second, "time between membership changes")
	dur := fs.Duration("dur", 60*time.Second, "run length (the last 12 s without changes)")
	killAt := fs.Duration("kill", 30*time.Second, "when to kill -9 a member")
	dsnFlag := fs.String("dsn", "", "backend DSN (default: a new SQLite file)")
	group := fs.String("group", fmt.Sprintf("t28-shards-%d", os.Getpid()), "group name (unique per run on a shared server)")
	fs.Parse(args)

	dir, err := os.MkdirTemp("", "trial28-group-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dsn := *dsnFlag
	if dsn == "" {
		dsn = "sqlite://" + filepath.Join(dir, "simba.db")
	}
	ctx := context.Background()
	b, err := open.Open(ctx, dsn, open.WithAutoMigrate())
	if err != nil {
		return err
	}
	b.Close()

	// The sink: fenced per partition, every write recorded.
	sk := newSink()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strconv.ParseInt(r.FormValue("t"), 10, 64)
		if sk.write(r.FormValue("p"), r.FormValue("who"), tok) {
			w.WriteHeader(204)
		} else {
			w.WriteHeader(409)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	sinkURL := "http://" + ln.Addr().String() + "/w"
	self, _ := os.Executable()

	type proc struct {
		id    string
		cmd   *exec.Cmd
		start time.Time
	}
	var mu sync.Mutex
	live := map[string]*proc{}
	var order []string
	n := 0
	startMember := func() {
		n++
		id := fmt.Sprintf("m%d", n)
		cmd := exec.Command(self, "member", "-dsn", dsn, "-id", id, "-sink", sinkURL, "-ttl", ttl.String(), "-p", strconv.Itoa(*parts), "-group", *group)
		cmd.Stderr = nil
		out, _ := os.Create(filepath.Join(os.TempDir(), "trial28-group-"+id+".log"))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			fmt.Println("start:", err)
			return
		}
		mu.Lock()
		live[id] = &proc{id: id, cmd: cmd, start: time.Now()}
		order = append(order, id)
		mu.Unlock()
		go cmd.Wait()
	}
	type change struct {
		at   time.Time
		what string
		who  string
	}
	var changes []change
	pick := func() string {
		mu.Lock()
		defer mu.Unlock()
		var ids []string
		for id := range live {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return ids[rand.IntN(len(ids))]
	}
	for range 6 {
		startMember()
	}
	fmt.Printf("team group: %s, %d partitions, TTL %s, 6 members, a change every %s, kill -9 at %s, %s in all\n", dsn, *parts, *ttl, *churn, *killAt, *dur)
	t0 := time.Now()
	killed := false
	steady := *dur - 12*time.Second
	for t := *churn; t < steady && *churn < *dur; t += *churn {
		time.Sleep(time.Until(t0.Add(t)))
		mu.Lock()
		count := len(live)
		mu.Unlock()
		if !killed && t >= *killAt {
			mu.Lock()
			id := ""
			for _, o := range order { // the oldest live member
				if _, ok := live[o]; ok {
					id = o
					break
				}
			}
			mu.Unlock()
			mu.Lock()
			p := live[id]
			delete(live, id)
			mu.Unlock()
			p.cmd.Process.Signal(syscall.SIGKILL)
			changes = append(changes, change{time.Now(), "kill -9", id})
			killed = true
			continue
		}
		if count > 5 && (count >= 8 || rand.IntN(2) == 0) {
			id := pick()
			mu.Lock()
			p := live[id]
			delete(live, id)
			mu.Unlock()
			p.cmd.Process.Signal(syscall.SIGTERM)
			changes = append(changes, change{time.Now(), "leave (SIGTERM)", id})
		} else {
			startMember()
			changes = append(changes, change{time.Now(), "join", fmt.Sprintf("m%d", n)})
		}
	}
	time.Sleep(time.Until(t0.Add(*dur)))
	endAt := time.Now()
	mu.Lock()
	for _, p := range live {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	mu.Unlock()
	time.Sleep(3 * time.Second)

	recs := sk.snapshot()
	v := analyse(recs)
	v.print(os.Stdout)
	all := spans(recs)
	// Per change: the partitions whose tenure ended around it, and how long each was unowned.
	for _, c := range changes {
		var gaps []float64
		moved := 0
		for _, ss := range all {
			for i := 1; i < len(ss); i++ {
				prev, next := ss[i-1], ss[i]
				if prev.Who == c.who && prev.Last.After(c.at.Add(-400*time.Millisecond)) && prev.Last.Before(c.at.Add(*churn)) {
					moved++
					gaps = append(gaps, next.First.Sub(prev.Last).Seconds())
				}
			}
		}
		// Partitions moved to a joining member: its first tenures.
		if c.what == "join" {
			for _, ss := range all {
				for i := 1; i < len(ss); i++ {
					if ss[i].Who == c.who && ss[i].First.After(c.at) && ss[i].First.Before(c.at.Add(*churn)) {
						moved++
						gaps = append(gaps, ss[i].First.Sub(ss[i-1].Last).Seconds())
					}
				}
			}
		}
		sort.Float64s(gaps)
		if len(gaps) == 0 {
			fmt.Printf("%6.1fs %-16s %s: no partition moved\n", c.at.Sub(t0).Seconds(), c.what, c.who)
			continue
		}
		fmt.Printf("%6.1fs %-16s %s: %d partitions moved, unowned median %.2fs max %.2fs (%.2f×TTL)\n", c.at.Sub(t0).Seconds(), c.what, c.who,
			moved, gaps[len(gaps)/2], gaps[len(gaps)-1], gaps[len(gaps)-1]/ttl.Seconds())
	}
	// Every partition owned at the end? Balance over the last 2 s before the end.
	owner := map[string]string{}
	for _, r := range recs {
		if r.OK && r.At.After(endAt.Add(-2*time.Second)) && r.At.Before(endAt) {
			owner[r.Res] = r.Who
		}
	}
	per := map[string]int{}
	for _, w := range owner {
		per[w]++
	}
	var ids []string
	for id := range per {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	mean := float64(*parts) / float64(len(per))
	mx, mn := 0, math.MaxInt
	for _, id := range ids {
		mx, mn = max(mx, per[id]), min(mn, per[id])
	}
	fmt.Printf("at the end: %d of %d partitions written in the last 2 s, by %d members: %v; busiest %.2f× the mean (%.1f), least %.2f×\n",
		len(owner), *parts, len(per), per, float64(mx)/mean, mean, float64(mn)/mean)
	// Largest unowned stretch of any partition over the run (after its first owner).
	type stretch struct {
		gap        float64
		p          string
		prev, next span
	}
	var st []stretch
	for p, ss := range all {
		for i := 1; i < len(ss); i++ {
			st = append(st, stretch{ss[i].First.Sub(ss[i-1].Last).Seconds(), p, ss[i-1], ss[i]})
		}
	}
	sort.Slice(st, func(i, j int) bool { return st[i].gap > st[j].gap })
	for i, s := range st {
		if i == 3 {
			break
		}
		fmt.Printf("unowned stretch #%d: %.2fs (%.2f×TTL), partition %s: %s#%d last wrote at %.2fs, %s#%d first at %.2fs\n", i+1, s.gap, s.gap/ttl.Seconds(), s.p,
			s.prev.Who, s.prev.Token, s.prev.Last.Sub(t0).Seconds(), s.next.Who, s.next.Token, s.next.First.Sub(t0).Seconds())
	}
	return nil
}

// member is one group member process: it joins, writes each partition it leads to the sink every
// 300 ms while its term is valid, and leaves on SIGTERM.
func member(args []string) error {
	fs := flag.NewFlagSet("member", flag.ExitOnError)
	dsn := fs.String("dsn", "", "DSN")
	id := fs.String("id", "m", "owner")
	sinkURL := fs.String("sink", "", "sink")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	parts := fs.Int("p", 128, "partitions")
	group := fs.String("group", "shards", "group")
	fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	b, err := open.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	level := slog.LevelInfo
	if os.Getenv("T28_DEBUG") != "" { // every failed call and engine step, for a post-mortem
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	c, err := simba.New(b, simba.WithTTL(*ttl), simba.WithOwner(*id), simba.WithLogger(logger))
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	g, err := c.JoinGroup(ctx, *group, *parts, simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
		for t.IsValid() {
			resp, err := hc.PostForm(*sinkURL, map[string][]string{"p": {strconv.Itoa(p)}, "who": {*id}, "t": {strconv.FormatInt(t.Token(), 10)}})
			if err == nil {
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(300 * time.Millisecond):
			}
		}
		return nil
	}))
	if err != nil {
		return err
	}
	<-ctx.Done()
	start := time.Now()
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = g.Leave(lctx)
	fmt.Printf("%s left in %.3fs: %v\n", *id, time.Since(start).Seconds(), err)
	return c.Close(lctx)
}

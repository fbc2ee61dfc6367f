// Command groupstart measures how long a new partition group takes to start: N member
// processes (this binary re-executed with -child) join a group of P partitions at once, and
// the time from the join to every partition held by exactly the member hashing assigns it to
// is measured, with each member's backend calls counted (acquires granted, found held, failed;
// releases and withdrawals). It runs on SQLite (a file in a temporary directory, shared by the
// processes) or on the backend -dsn names (any scheme of package open: PostgreSQL, Redis, …;
// -trace needs a SQL DSN). With -trace DIR each member writes DIR/<group>-<pid>.log:
// its acquires' replies (with the holder a HeldBy names and its time left), withdrawals,
// releases, hints and state changes, in milliseconds since its join.
//
//	go run ./cmd/groupstart -members 3 -partitions 128 -rounds 5
//	go run ./cmd/groupstart -dsn postgres://127.0.0.1:5432/test -members 3
//	go run ./cmd/groupstart -dsn redis://127.0.0.1:6379 -ttl 5s -rounds 16
//	go run ./cmd/groupstart -dsn postgres://127.0.0.1:5432/test -ttl 5s -rounds 24 -trace /tmp/gs
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// cpu is the CPU time of the last round's member processes, start to exit.
var cpu time.Duration

func main() {
	child := flag.Bool("child", false, "run as a member process (internal)")
	dsn := flag.String("dsn", "", "backend DSN (default: a new SQLite file per round)")
	members := flag.Int("members", 3, "member processes")
	partitions := flag.Int("partitions", 128, "partitions of the group")
	rounds := flag.Int("rounds", 5, "group starts to measure")
	ttl := flag.Duration("ttl", 3*time.Second, "TTL")
	group := flag.String("group", "", "group name (internal)")
	trace := flag.String("trace", "", "a directory for each member's call trace (none by default)")
	flag.Parse()
	if *child {
		os.Exit(runChild(*dsn, *group, *partitions, *members, *ttl, *trace))
	}
	var took, cpus []time.Duration
	var total [7]int64
	for r := range *rounds {
		d := *dsn
		if d == "" {
			dir, err := os.MkdirTemp("", "groupstart")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			defer os.RemoveAll(dir)
			d = "sqlite://" + filepath.Join(dir, "g.db")
		}
		t, counts, err := round(d, fmt.Sprintf("gs-%d-%d", time.Now().UnixNano(), r), *members, *partitions, *ttl, *trace)
		if err != nil {
			fmt.Fprintln(os.Stderr, "round:", err)
			os.Exit(1)
		}
		took = append(took, t)
		for i := range total {
			total[i] += counts[i]
		}
		cpus = append(cpus, cpu)
		fmt.Printf("round %d: %v (members' CPU %v)  acquires %d (granted %d, held %d, failed %d) releases %d withdrawals %d members reads %d\n",
			r, t.Round(time.Millisecond), cpu.Round(time.Millisecond), counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6])
	}
	slices.Sort(took)
	slices.Sort(cpus)
	n := int64(*rounds)
	fmt.Printf("members' CPU per round: median %v\n", cpus[len(cpus)/2].Round(time.Millisecond))
	fmt.Printf("members %d partitions %d: median %v min %v max %v; per start: acquires %d granted %d held %d failed %d releases %d withdrawals %d members reads %d\n",
		*members, *partitions, took[len(took)/2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond),
		total[0]/n, total[1]/n, total[2]/n, total[3]/n, total[4]/n, total[5]/n, total[6]/n)
}

// round starts the member processes, has them join group together, and returns the time from
// the join to the settled group and the members' call counts summed.
func round(dsn, group string, members, partitions int, ttl time.Duration, trace string) (time.Duration, [7]int64, error) {
	cpu = 0
	var counts [7]int64
	type member struct {
		cmd   *exec.Cmd
		in    *os.File
		lines chan string
	}
	// Migrate once, before the members start.
	be, err := open.Open(context.Background(), dsn, open.WithAutoMigrate())
	if err != nil {
		return 0, counts, err
	}
	be.Close()
	var ms []*member
	for range members {
		cmd := exec.Command(os.Args[0], "-child", "-dsn", dsn, "-group", group,
			"-partitions", strconv.Itoa(partitions), "-members", strconv.Itoa(members), "-ttl", ttl.String(), "-trace", trace)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, counts, err
		}
		r, w, err := os.Pipe()
		if err != nil {
			return 0, counts, err
		}
		cmd.Stdin = r
		if err := cmd.Start(); err != nil {
			return 0, counts, err
		}
		r.Close()
		m := &member{cmd: cmd, in: w, lines: make(chan string, 1024)}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				m.lines <- sc.Text()
			}
			close(m.lines)
		}()
		ms = append(ms, m)
	}
	for _, m := range ms {
		if l := <-m.lines; l != "ready" {
			return 0, counts, fmt.Errorf("member: %q", l)
		}
	}
	start := time.Now()
	for _, m := range ms {
		fmt.Fprintln(m.in, "join")
	}
	// Each member reports "state <settled 0/1> <held>" whenever its state changes.
	settled := make([]bool, members)
	held := make([]int, members)
	type upd struct {
		i    int
		line string
	}
	ch := make(chan upd, 1024)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			for l := range m.lines {
				ch <- upd{i, l}
				if strings.HasPrefix(l, "counts") {
					return
				}
			}
		})
	}
	var took time.Duration
	limit := time.After(2 * time.Minute)
	for took == 0 {
		var u upd
		select {
		case u = <-ch:
		case <-limit:
			for _, m := range ms {
				m.cmd.Process.Kill()
			}
			return 0, counts, fmt.Errorf("the group did not settle in 2 minutes (held %v, settled %v)", held, settled)
		}
		var ok, h int
		if _, err := fmt.Sscanf(u.line, "state %d %d", &ok, &h); err != nil {
			return 0, counts, fmt.Errorf("member: %q", u.line)
		}
		settled[u.i], held[u.i] = ok == 1, h
		all, sum := true, 0
		for i := range members {
			all = all && settled[i]
			sum += held[i]
		}
		if all && sum == partitions {
			took = time.Since(start)
		}
	}
	for _, m := range ms {
		m.in.Close()
	}
	for done := 0; done < members; {
		u := <-ch
		if !strings.HasPrefix(u.line, "counts") {
			continue
		}
		done++
		var c [7]int64
		fmt.Sscanf(u.line, "counts %d %d %d %d %d %d %d", &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6])
		for i := range c {
			counts[i] += c[i]
		}
	}
	wg.Wait()
	for _, m := range ms {
		m.cmd.Wait()
		cpu += m.cmd.ProcessState.UserTime() + m.cmd.ProcessState.SystemTime()
	}
	return took, counts, nil
}

// runChild is a member: it opens a client, says "ready", joins group on "join", reports its
// state until stdin ends, then its call counts; with trace set, it traces its calls there.
func runChild(dsn, group string, partitions, members int, ttl time.Duration, trace string) int {
	ctx := context.Background()
	tr, err := newTracer(trace, group)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer tr.close()
	var sb spi.Backend
	if tr != nil {
		be, err := simbasql.Open(ctx, dsn)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		sb = traced{be, tr}
	} else if sb, err = open.Open(ctx, dsn); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer sb.Close()
	var on atomic.Bool
	var counts [7]atomic.Int64
	c, err := simba.New(sb, simba.WithTTL(ttl), simba.WithCallObserver(func(ci simba.CallInfo) {
		if !on.Load() || ci.Closing {
			return
		}
		switch ci.Op {
		case simba.OpAcquire:
			counts[0].Add(1)
			switch {
			case ci.Err != nil:
				counts[3].Add(1)
			case ci.Token != 0:
				counts[1].Add(1)
			default:
				counts[2].Add(1)
			}
		case simba.OpRelease:
			counts[4].Add(1)
		case simba.OpWithdraw:
			counts[5].Add(1)
		case simba.OpMembers:
			counts[6].Add(1)
		}
	}))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer c.Close(ctx)
	// The session first, so that only the group's start is measured.
	h, err := c.Lock(ctx, "gs-warm-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	h.Unlock(ctx)
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	on.Store(true)
	tr.joined()
	g, err := c.JoinGroup(ctx, group, partitions)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	stop := make(chan struct{})
	go func() {
		for in.Scan() {
		}
		close(stop)
	}()
	last := ""
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		ok, held := memberState(g, members)
		s := fmt.Sprintf("state %d %d", ok, held)
		if s != last {
			tr.printf("%s", s)
			fmt.Println(s)
			last = s
		}
		select {
		case <-stop:
			on.Store(false)
			fmt.Printf("counts %d %d %d %d %d %d %d\n", counts[0].Load(), counts[1].Load(), counts[2].Load(),
				counts[3].Load(), counts[4].Load(), counts[5].Load(), counts[6].Load())
			return 0
		case <-tick.C:
		}
	}
}

// memberState reports whether g sees every member and holds exactly the partitions assigned to
// it (1) or not (0), and how many it holds.
func memberState(g *simba.PartitionGroup, members int) (int, int) {
	h, a := g.Held(), g.Assigned()
	ok := len(g.Members()) == members && len(h) == len(a)
	for _, p := range a {
		if t, held := h[p]; !held || !t.IsValid() {
			ok = false
		}
	}
	if ok {
		return 1, len(h)
	}
	return 0, len(h)
}

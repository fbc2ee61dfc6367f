package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/chaos/trials/netproxy"
)

const ledgerDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// proc is one writer process and what it printed.
type proc struct {
	id    string
	cmd   *exec.Cmd
	px    *netproxy.Proxy
	http  string
	ready chan struct{}
}

// fleet runs the writers and collects their JSON lines.
type fleet struct {
	mu    sync.Mutex
	lines []map[string]any
	procs map[string]*proc
	bin   string
	dir   string
	args  []string
	t0    time.Time
}

func (fl *fleet) since() string { return fmt.Sprintf("%6.2fs", time.Since(fl.t0).Seconds()) }

func (fl *fleet) start(id string, px *netproxy.Proxy, dsn string) error {
	p := &proc{id: id, px: px, ready: make(chan struct{})}
	args := append([]string{"writer", "-id", id, "-dsn", dsn}, fl.args...)
	p.cmd = exec.Command(fl.bin, args...)
	ef, err := os.OpenFile(filepath.Join(fl.dir, id+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p.cmd.Stderr = ef
	so, _ := p.cmd.StdoutPipe()
	if err := p.cmd.Start(); err != nil {
		return err
	}
	fl.mu.Lock()
	fl.procs[id] = p
	fl.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(so)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			m["rel"] = time.Since(fl.t0).Seconds()
			fl.mu.Lock()
			fl.lines = append(fl.lines, m)
			fl.mu.Unlock()
			switch m["kind"] {
			case "ready":
				p.http = m["http"].(string)
				close(p.ready)
			case "elected", "revoked", "stale", "unverified", "write-error", "event", "closed":
				fmt.Printf("%s  %s %s %v\n", fl.since(), id, m["kind"], brief(m))
			}
		}
		p.cmd.Wait()
		ef.Close()
	}()
	select {
	case <-p.ready:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s not ready", id)
	}
	return nil
}

func brief(m map[string]any) string {
	var b []string
	for _, k := range []string{"token", "reason", "err", "ev", "valid", "took_ms", "stop_err", "close_err"} {
		if v, ok := m[k]; ok {
			if f, isf := v.(float64); isf {
				v = int64(f)
			}
			b = append(b, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(b, " ")
}

// scrape reads one writer's /metrics and /simba/healthz (300 ms bound: a stopped process
// answers nothing).
func scrape(p *proc) (metrics map[string]string, health string) {
	cl := &http.Client{Timeout: 300 * time.Millisecond}
	metrics = map[string]string{}
	if r, err := cl.Get("http://" + p.http + "/metrics"); err == nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "simba_") && !strings.Contains(l, "_bucket") {
				if i := strings.LastIndexByte(l, ' '); i > 0 {
					metrics[l[:i]] = l[i+1:]
				}
			}
		}
	} else {
		return nil, "unreachable"
	}
	if r, err := cl.Get("http://" + p.http + "/simba/healthz"); err == nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		health = fmt.Sprintf("%d %s", r.StatusCode, strings.TrimSpace(string(b)))
	}
	return
}

// leader is a writer whose simba_term_held is 1 (by its own metrics) other than not, or "".
func (fl *fleet) leader(name, not string) string {
	fl.mu.Lock()
	ps := make([]*proc, 0, len(fl.procs))
	for _, p := range fl.procs {
		ps = append(ps, p)
	}
	fl.mu.Unlock()
	for _, p := range ps {
		m, _ := scrape(p)
		if p.id != not && m[`simba_term_held{name="`+name+`"}`] == "1" {
			return p.id
		}
	}
	return ""
}

// poll records the on-call view: every change of each writer's health line and chosen metrics.
func (fl *fleet) poll(ctx context.Context, name string, w io.Writer) {
	last := map[string]string{}
	keys := []string{"simba_session_up", `simba_term_held{name="` + name + `"}`, `simba_term_token{name="` + name + `"}`,
		"simba_pauses_total", `simba_sessions_lost_total{reason="deadline"}`, `simba_sessions_lost_total{reason="session-expired"}`}
	for ctx.Err() == nil {
		fl.mu.Lock()
		ps := make([]*proc, 0, len(fl.procs))
		for _, p := range fl.procs {
			ps = append(ps, p)
		}
		fl.mu.Unlock()
		sort.Slice(ps, func(i, j int) bool { return ps[i].id < ps[j].id })
		for _, p := range ps {
			m, h := scrape(p)
			var errs int
			for k, v := range m {
				if strings.HasPrefix(k, "simba_backend_errors_total") {
					var n int
					fmt.Sscan(v, &n)
					errs += n
				}
			}
			s := "health=" + h
			if m != nil {
				for _, k := range keys {
					s += " " + strings.TrimPrefix(k, "simba_") + "=" + m[k]
				}
				s += fmt.Sprintf(" backend_errors=%d", errs)
			}
			if last[p.id] != s {
				last[p.id] = s
				fmt.Fprintf(w, "%s %s %s\n", fl.since(), p.id, s)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// run is scenario 1 and 2 on one backend.
func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	kind := fs.String("b", "pg", "pg|redis|etcd")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	lag := fs.Duration("lag", 100*time.Millisecond, "writer's lag between IsValid and the write")
	faults := fs.String("faults", "stop,kill,partition,restart", "faults in order")
	mode := fs.String("mode", "elect", "elect or lock (settlement batches under Lock)")
	bump := fs.Bool("bump", false, "writers raise the fence first thing in each term")
	simbaBin := fs.String("simba", "/tmp/t30simba", "the simba CLI binary (go build -o /tmp/t30simba ./cmd/simba)")
	fs.Parse(args)
	ctx := context.Background()
	stamp := time.Now().Format("150405")
	dir, _ := os.MkdirTemp("", "trial30-"+*kind+"-")
	os.Chmod(dir, 0o755)
	fmt.Println("run directory", dir)
	name := "t30-ledger-" + *kind + "-" + stamp
	lease := name
	if *mode == "lock" {
		lease += "-settle"
	}
	table := "t30_ledger_" + *kind + "_" + stamp

	srv, dsnFor, err := private(ctx, *kind, dir)
	if err != nil {
		return err
	}
	defer srv.Close()
	// The schema (PostgreSQL): the CLI, as README "Migrations (SQL)" says.
	if *kind == "pg" {
		out, err := exec.Command(*simbaBin, "migrate", "-dsn", dsnFor(srv.Addr())).CombinedOutput()
		fmt.Printf("simba migrate: %s (err %v)\n", strings.TrimSpace(string(out)), err)
	}
	db, err := sql.Open("pgx", ledgerDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE " + table + " (id bigserial PRIMARY KEY, writer text NOT NULL, token bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"); err != nil {
		return err
	}
	defer db.Exec("DROP TABLE " + table)
	defer db.Exec("DELETE FROM simba_fence WHERE resource IN ($1, $2)", name, name+"-settle")

	self, _ := os.Executable()
	fl := &fleet{procs: map[string]*proc{}, bin: self, dir: dir, t0: time.Now(),
		args: []string{"-ttl", ttl.String(), "-election", name, "-table", table, "-lag", lag.String(), "-bump=" + fmt.Sprint(*bump), "-mode", *mode}}
	pxs := map[string]*netproxy.Proxy{}
	for _, id := range []string{"w1", "w2", "w3"} {
		px, err := netproxy.New(srv.Addr())
		if err != nil {
			return err
		}
		defer px.Close()
		pxs[id] = px
		if err := fl.start(id, px, dsnFor(px.Addr())); err != nil {
			return err
		}
	}
	pf, _ := os.Create(filepath.Join(dir, "oncall.txt"))
	defer pf.Close()
	pctx, pcancel := context.WithCancel(ctx)
	go fl.poll(pctx, lease, pf)
	defer pcancel()

	waitLeader := func(not string, within time.Duration) (string, time.Duration) {
		t := time.Now()
		for time.Since(t) < within {
			if l := fl.leader(lease, not); l != "" {
				return l, time.Since(t)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return "", time.Since(t)
	}
	l, d := waitLeader("", 20*time.Second)
	fmt.Printf("%s  first leader %s after %v\n", fl.since(), l, d.Round(time.Millisecond))
	time.Sleep(2 * time.Second)

	type faultRes struct {
		Fault, Old, New    string
		At, NewLeaderAfter float64
	}
	var res []faultRes
	for _, fault := range strings.Split(*faults, ",") {
		old, _ := waitLeader("", 10*time.Second)
		p := fl.procs[old]
		at := time.Since(fl.t0).Seconds()
		fmt.Printf("%s  FAULT %s on leader %s\n", fl.since(), fault, old)
		t := time.Now()
		var nl string
		var wait time.Duration
		switch fault {
		case "stop":
			p.cmd.Process.Signal(syscall.SIGSTOP)
			nl, wait = waitLeader(old, 2**ttl)
			time.Sleep(time.Until(t.Add(2 * *ttl)))
			p.cmd.Process.Signal(syscall.SIGCONT)
			fmt.Printf("%s  SIGCONT %s\n", fl.since(), old)
		case "kill":
			p.cmd.Process.Signal(syscall.SIGKILL)
			fl.mu.Lock()
			delete(fl.procs, old)
			fl.mu.Unlock()
			nl, wait = waitLeader(old, 4**ttl)
			fmt.Printf("%s  restarting %s\n", fl.since(), old)
			if err := fl.start(old, pxs[old], dsnFor(pxs[old].Addr())); err != nil {
				return err
			}
		case "partition":
			pxs[old].Cut()
			nl, wait = waitLeader(old, 2**ttl)
			time.Sleep(time.Until(t.Add(2 * *ttl)))
			pxs[old].Heal()
			fmt.Printf("%s  healed %s\n", fl.since(), old)
		case "restart":
			srv.Kill()
			time.Sleep(2 * time.Second)
			if err := srv.Start(ctx); err != nil {
				return fmt.Errorf("restart: %w", err)
			}
			fmt.Printf("%s  server up again\n", fl.since())
			nl, wait = waitLeader("", 6**ttl)
		}
		took := wait.Seconds()
		if fault == "restart" {
			took = time.Since(t).Seconds() // from the kill
		}
		if nl == "" {
			took = -1
		}
		fmt.Printf("%s  new leader %q %.2fs after the fault\n", fl.since(), nl, took)
		res = append(res, faultRes{fault, old, nl, at, took})
		time.Sleep(3 * *ttl)
	}

	// Scenario 2: the CLI against the same backend, as on call.
	cli(*simbaBin, *kind, dsnFor(srv.Addr()), name, dir)
	for _, p := range fl.procs {
		if p.http != "" {
			if r, err := http.Get("http://" + p.http + "/simba/status"); err == nil {
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				os.WriteFile(filepath.Join(dir, p.id+"-status.json"), b, 0o644)
			}
			if r, err := http.Get("http://" + p.http + "/metrics"); err == nil {
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				os.WriteFile(filepath.Join(dir, p.id+"-metrics.txt"), b, 0o644)
			}
		}
	}
	pcancel()
	for _, p := range fl.procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	time.Sleep(3 * time.Second)

	// The audit.
	rows, err := db.Query("SELECT id, writer, token, at FROM " + table + " ORDER BY id")
	if err != nil {
		return err
	}
	var n, viol int
	var high int64
	type tenure struct {
		who         string
		tok         int64
		first, last time.Time
		n           int
	}
	var ten []*tenure
	for rows.Next() {
		var id int64
		var who string
		var tok int64
		var at time.Time
		rows.Scan(&id, &who, &tok, &at)
		n++
		if tok < high {
			viol++
			fmt.Printf("VIOLATION row %d by %s token %d below %d\n", id, who, tok, high)
		}
		if tok > high {
			high = tok
		}
		if len(ten) == 0 || ten[len(ten)-1].tok != tok || ten[len(ten)-1].who != who {
			ten = append(ten, &tenure{who: who, tok: tok, first: at})
		}
		ten[len(ten)-1].last, ten[len(ten)-1].n = at, ten[len(ten)-1].n+1
	}
	rows.Close()
	fmt.Printf("\nledger %s: %d rows, %d tenures, %d rows below an earlier token\n", table, n, len(ten), viol)
	for i, t := range ten {
		gap := ""
		if i > 0 {
			gap = fmt.Sprintf(" (gap after previous %.2fs)", t.first.Sub(ten[i-1].last).Seconds())
		}
		fmt.Printf("  %s token %d: %d rows %s..%s%s\n", t.who, t.tok, t.n, t.first.Format("15:04:05.000"), t.last.Format("15:04:05.000"), gap)
	}
	// Rows an old leader wrote after a newer leader was elected (its OnElected, the writer's
	// clock; one host): admitted, since the newer leader had not written yet.
	fl.mu.Lock()
	for _, m := range fl.lines {
		if m["kind"] != "elected" {
			continue
		}
		tok, at := int64(m["token"].(float64)), time.Unix(0, int64(m["t"].(float64)))
		var late int
		var last time.Time
		db.QueryRow("SELECT count(*), coalesce(max(at), 'epoch') FROM "+table+" WHERE token < $1 AND at > $2", tok, at).Scan(&late, &last)
		if late > 0 {
			fmt.Printf("AFTER-GRANT: %d rows with a token below %d written after %s's OnElected (last %.3fs after it)\n", late, tok, m["who"], last.Sub(at).Seconds())
		}
	}
	fl.mu.Unlock()
	for _, r := range res {
		fmt.Printf("fault %-9s at %6.2fs: leader %s -> %s after %.2fs (TTL %v)\n", r.Fault, r.At, r.Old, r.New, r.NewLeaderAfter, *ttl)
	}
	fl.mu.Lock()
	counts := map[string]map[string]int{}
	for _, m := range fl.lines {
		who, k := m["who"].(string), m["kind"].(string)
		if counts[who] == nil {
			counts[who] = map[string]int{}
		}
		counts[who][k]++
		if k == "stats" && (m["when"] == "start" || m["when"] == "end") {
			fmt.Printf("stats %s %s: goroutines %v heap %v KiB ok %v stale %v unverified %v errors %v\n", who, m["when"], m["goroutines"], m["heap_kib"], m["ok"], m["stale"], m["unverified"], m["errors"])
		}
	}
	fl.mu.Unlock()
	for who, c := range counts {
		fmt.Printf("lines %s: %v\n", who, c)
	}
	for _, id := range []string{"w1", "w2", "w3"} {
		b, _ := os.ReadFile(filepath.Join(dir, id+".log"))
		lv := map[string]int{}
		for _, l := range strings.Split(string(b), "\n") {
			for _, x := range []string{"INFO", "WARN", "ERROR", "DEBUG"} {
				if strings.Contains(l, "level="+x) {
					lv[x]++
				}
			}
			if !strings.Contains(l, "level=") && l != "" {
				lv["other"]++
			}
		}
		fmt.Printf("log %s: %v\n", id, lv)
	}
	return nil
}

// private starts the lock backend's private server; dsnFor makes the DSN for an address (the
// server's, or a writer's proxy).
func private(ctx context.Context, kind, dir string) (*servers.Server, func(addr string) string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch kind {
	case "pg":
		s, err := servers.PostgresPassword(ctx, filepath.Join(dir, "srv"), "t30pw")
		return s, func(a string) string {
			return "postgres://postgres:t30pw@" + a + "/test?sslmode=disable"
		}, err
	case "redis":
		s, err := servers.Redis(ctx, filepath.Join(dir, "srv"), true)
		return s, func(a string) string { return "redis://" + a + "/0" }, err
	case "etcd":
		s, err := servers.Etcd(ctx, filepath.Join(dir, "srv"))
		return s, func(a string) string { return "etcd://" + a + "/t30" }, err
	}
	return nil, nil, fmt.Errorf("unknown backend %q", kind)
}

// cli runs the simba CLI as on call: status of the election, then with a wrong password and
// with DSN typos; each result is one line with the exit status.
func cli(bin, kind, dsn, name, dir string) {
	cases := [][]string{{"status", "-dsn", dsn, "-prefix", name}}
	switch kind {
	case "pg":
		cases = append(cases,
			[]string{"status", "-dsn", strings.Replace(dsn, "t30pw", "wrong", 1), "-prefix", name},
			[]string{"status", "-dsn", strings.Replace(dsn, "postgres://", "postgress://", 1)},
			[]string{"status", "-dsn", strings.Replace(dsn, "/test?", "/tset?", 1)},
			[]string{"status", "-dsn", strings.Replace(dsn, "sslmode=disable", "sslmode=disabled", 1)})
	case "redis":
		cases = append(cases,
			[]string{"status", "-dsn", strings.Replace(dsn, "redis://", "redis://:wrong@", 1), "-prefix", name},
			[]string{"status", "-dsn", strings.Replace(dsn, "/0", "/99", 1)},
			[]string{"status", "-dsn", strings.Replace(dsn, "redis://", "redis:/", 1)})
	case "etcd":
		cases = append(cases,
			[]string{"status", "-dsn", strings.Replace(dsn, "etcd://", "etcd://root:wrong@", 1), "-prefix", name},
			[]string{"status", "-dsn", strings.Replace(dsn, "etcd://", "etc://", 1)})
	}
	cases = append(cases, []string{"status", "-dsn", strings.Replace(dsn, "127.0.0.1:", "127.0.0.1:1", 1)})
	f, _ := os.Create(filepath.Join(dir, "cli.txt"))
	defer f.Close()
	for _, c := range cases {
		t := time.Now()
		cmd := exec.Command(bin, c...)
		out, err := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		fmt.Fprintf(f, "$ simba %s\n%s(exit %d, %v, %.2fs)\n\n", strings.Join(c, " "), out, code, err, time.Since(t).Seconds())
		fmt.Printf("CLI %q: exit %d in %.2fs, %d lines; first: %s\n", strings.Join(c, " "), code, time.Since(t).Seconds(),
			strings.Count(string(out), "\n"), strings.SplitN(string(out), "\n", 2)[0])
	}
}

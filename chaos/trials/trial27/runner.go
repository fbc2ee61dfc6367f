package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/simba-go/simba/chaos/trials/netproxy"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba/open"
)

// sink is the fenced resource: per resource it admits a write whose token is at least the
// highest seen and refuses (409) a lower one. It also checks what fencing alone does not: two
// processes writing one resource with one token, and two lock holders inside their critical
// sections at once.
type sink struct {
	mu       sync.Mutex
	max      map[string]int64
	owner    map[string]string
	last     map[string]time.Time // last accepted write per resource
	active   map[string]write     // lock critical sections open
	dead     map[string]bool      // procs killed or stopped: their open sections do not count
	accepted int
	refused  int
	dupToken int
	overlap  int
	events   []string
	handover []handover
}

type handover struct {
	Res      string
	From, To string
	Gap      time.Duration // last write of the old term to the first of the new
	At       time.Time
}

func newSink() *sink {
	return &sink{max: map[string]int64{}, owner: map[string]string{}, last: map[string]time.Time{},
		active: map[string]write{}, dead: map[string]bool{}}
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var wr write
	if err := json.NewDecoder(r.Body).Decode(&wr); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if wr.Phase == "end" {
		if a, ok := s.active[wr.Res]; ok && a.Proc == wr.Proc && a.Token == wr.Token {
			delete(s.active, wr.Res)
		}
		return
	}
	m, seen := s.max[wr.Res]
	switch {
	case seen && wr.Token < m:
		s.refused++
		s.events = append(s.events, fmt.Sprintf("%s refused %s token %d < %d (owner %s)", now.Format("15:04:05.000"), wr.Proc, wr.Token, m, s.owner[wr.Res]))
		w.WriteHeader(http.StatusConflict)
		return
	case seen && wr.Token == m && s.owner[wr.Res] != wr.Proc:
		s.dupToken++
		s.events = append(s.events, fmt.Sprintf("%s DUP token %d on %s by %s and %s", now.Format("15:04:05.000"), m, wr.Res, s.owner[wr.Res], wr.Proc))
	case !seen || wr.Token > m:
		if seen {
			s.handover = append(s.handover, handover{Res: wr.Res, From: s.owner[wr.Res], To: wr.Proc, Gap: now.Sub(s.last[wr.Res]), At: now})
		}
		s.max[wr.Res], s.owner[wr.Res] = wr.Token, wr.Proc
	}
	if wr.Phase == "start" {
		if a, ok := s.active[wr.Res]; ok && !s.dead[a.Proc] {
			s.overlap++
			s.events = append(s.events, fmt.Sprintf("%s OVERLAP on %s: %s#%d inside, %s#%d enters", now.Format("15:04:05.000"), wr.Res, a.Proc, a.Token, wr.Proc, wr.Token))
		}
		s.active[wr.Res] = wr
	}
	s.last[wr.Res] = now
	s.accepted++
}

func (s *sink) leader(res string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owner[res]
}

func (s *sink) setDead(proc string, dead bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead[proc] = dead
}

// proc is one worker process.
type proc struct {
	id    string
	cmd   *exec.Cmd
	px    *netproxy.Proxy
	errf  string
	outf  string
	start time.Time
}

type runner struct {
	bin, dsn, mode, dir string
	ttl                 time.Duration
	target              string // host:port behind the proxies; "" for no proxy (SQLite)
	sinkURL             string
	sink                *sink
	procs               map[string]*proc
	extra               []string
	log                 []string
	t0                  time.Time
}

func (r *runner) note(format string, args ...any) {
	l := fmt.Sprintf("%6.2fs ", time.Since(r.t0).Seconds()) + fmt.Sprintf(format, args...)
	fmt.Println(l)
	r.log = append(r.log, l)
}

func (r *runner) startProc(id string) error {
	p := r.procs[id]
	if p == nil {
		p = &proc{id: id, errf: filepath.Join(r.dir, id+".err"), outf: filepath.Join(r.dir, id+".out")}
		if r.target != "" {
			px, err := netproxy.New(r.target)
			if err != nil {
				return err
			}
			p.px = px
		}
		r.procs[id] = p
	}
	dsn := r.dsn
	if p.px != nil {
		dsn = strings.Replace(dsn, r.target, p.px.Addr(), 1)
	}
	ef, err := os.OpenFile(p.errf, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	of, err := os.OpenFile(p.outf, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"worker", "-dsn", dsn, "-id", id, "-mode", r.mode, "-ttl", r.ttl.String(), "-sink", r.sinkURL}, r.extra...)
	p.cmd = exec.Command(r.bin, args...)
	p.cmd.Stderr, p.cmd.Stdout = ef, of
	p.start = time.Now()
	r.sink.setDead(id, false)
	return p.cmd.Start()
}

func (r *runner) signal(id string, sig syscall.Signal) {
	p := r.procs[id]
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		_, _ = p.cmd.Process.Wait()
	}
}

// waitNewOwner waits up to d for res to have an owner other than old, and returns the time.
func (r *runner) waitNewOwner(res, old string, d time.Duration) (string, time.Duration) {
	t := time.Now()
	for time.Since(t) < d {
		if o := r.sink.leader(res); o != "" && o != old {
			return o, time.Since(t)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "", -1
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	backend := fs.String("backend", "sqlite", "mariadb, sqlite, zk, zkens, or a DSN with -target")
	mode := fs.String("mode", "elect", "elect, lock or group")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	scen := fs.String("faults", "kill,stop,bh0.5,bh1,bh3,delay,flap", "faults, in order")
	dur := fs.Duration("dur", 20*time.Second, "lock/group: how long to run before the faults")
	dsnFlag := fs.String("dsn", "", "DSN (overrides -backend)")
	target := fs.String("target", "", "host:port in -dsn the proxies stand in for")
	_ = fs.Parse(args)

	bin, _ := os.Executable()
	dir, err := os.MkdirTemp("", "trial27-*")
	if err != nil {
		return err
	}
	r := &runner{bin: bin, mode: *mode, ttl: *ttl, dir: dir, procs: map[string]*proc{}, sink: newSink(), t0: time.Now()}
	switch *backend {
	case "mariadb":
		r.dsn, r.target = "mysql://root@127.0.0.1:3306/t27", "127.0.0.1:3306"
	case "sqlite":
		r.dsn = "sqlite://" + filepath.Join(dir, "simba.db")
	case "zk":
		r.dsn, r.target = "zk://127.0.0.1:2181/t27?tickTime=200ms", "127.0.0.1:2181"
	case "zkens":
		r.dsn = "zk://127.0.0.1:2191,127.0.0.1:2192,127.0.0.1:2193/t27?tickTime=200ms"
	}
	if *dsnFlag != "" {
		r.dsn, r.target = *dsnFlag, *target
	}
	if strings.HasPrefix(r.dsn, "sqlite") || strings.HasPrefix(r.dsn, "mysql") || strings.HasPrefix(r.dsn, "postgres") {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		be, err := open.Open(ctx, r.dsn, open.WithAutoMigrate())
		cancel()
		if err != nil {
			return err
		}
		be.Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, r.sink) }()
	r.sinkURL = "http://" + ln.Addr().String()
	r.note("dir %s dsn %s mode %s ttl %s", dir, r.dsn, r.mode, r.ttl)
	ids := []string{"w1", "w2", "w3"}
	for _, id := range ids {
		if err := r.startProc(id); err != nil {
			return err
		}
	}
	res := "elect"
	if r.mode == "group" {
		res = "p00"
	}
	if r.mode != "elect" {
		time.Sleep(*dur)
	} else {
		time.Sleep(2 * time.Second)
	}
	for _, f := range strings.Split(*scen, ",") {
		if f == "" || f == "none" {
			continue
		}
		time.Sleep(2 * time.Second)
		lead := r.sink.leader(res)
		if r.mode == "lock" {
			lead = "w1" // the faults hit w1; the others' locks go on
		}
		p := r.procs[lead]
		if lead == "" && f != "delay" && !strings.HasPrefix(f, "exec:") && !strings.HasPrefix(f, "sleep") {
			r.note("fault %s skipped: no owner of %s yet", f, res)
			continue
		}
		switch {
		case f == "kill":
			r.note("kill -9 %s (leads %s)", lead, res)
			r.sink.setDead(lead, true)
			r.signal(lead, syscall.SIGKILL)
			nl, d := r.waitNewOwner(res, lead, 5**ttl)
			r.note("  %s: new owner %s after %v", f, nl, d.Round(time.Millisecond))
			_ = r.startProc(lead)
		case f == "stop":
			r.note("SIGSTOP %s for 3×TTL", lead)
			r.sink.setDead(lead, true)
			r.signal(lead, syscall.SIGSTOP)
			nl, d := r.waitNewOwner(res, lead, 3**ttl)
			r.note("  %s: new owner %s after %v", f, nl, d.Round(time.Millisecond))
			time.Sleep(3**ttl - d)
			r.signal(lead, syscall.SIGCONT)
			r.sink.setDead(lead, false)
			r.note("SIGCONT %s", lead)
		case strings.HasPrefix(f, "bh") && p != nil && p.px != nil:
			var k float64
			fmt.Sscan(f[2:], &k)
			d := time.Duration(k * float64(*ttl))
			r.note("blackhole %s's link for %v", lead, d)
			p.px.Cut()
			nl, w := r.waitNewOwner(res, lead, d)
			if nl != "" {
				r.note("  %s: new owner %s after %v", f, nl, w.Round(time.Millisecond))
				time.Sleep(d - w)
			}
			p.px.Heal()
			r.note("heal %s", lead)
		case f == "delay":
			r.note("+50ms per chunk on every link for 10s")
			for _, q := range r.procs {
				if q.px != nil {
					q.px.SetDelay(50 * time.Millisecond)
				}
			}
			time.Sleep(10 * time.Second)
			for _, q := range r.procs {
				if q.px != nil {
					q.px.SetDelay(0)
				}
			}
			r.note("delay off; owner %s", r.sink.leader(res))
		case f == "flap" && p != nil && p.px != nil:
			r.note("flap %s's link 1s down/1s up ×8", lead)
			for i := 0; i < 8; i++ {
				p.px.Cut()
				time.Sleep(time.Second)
				p.px.Heal()
				time.Sleep(time.Second)
			}
			r.note("flap done; owner %s", r.sink.leader(res))
		case f == "zkleader":
			zkLeaderKill(r, 5*time.Second)
			nl, d := r.waitNewOwner(res, lead, 3**ttl)
			r.note("  owner now %s (%s changed after %v)", r.sink.leader(res), nl, d)
		case f == "dbrestart":
			dbRestart(r, 5*time.Second)
			time.Sleep(2 * *ttl)
			r.note("  owner now %s", r.sink.leader(res))
		case f == "rofile":
			// chmod does not stop root; an immutable file and directory do (ext4).
			files := []string{r.dir, filepath.Join(r.dir, "simba.db"), filepath.Join(r.dir, "simba.db-wal"), filepath.Join(r.dir, "simba.db-shm")}
			out, err := exec.Command("chattr", append([]string{"+i"}, files...)...).CombinedOutput()
			r.note("chattr +i the SQLite file, its WAL and directory: %v %s", err, out)
			nl, d := r.waitNewOwner(res, lead, 3**ttl)
			r.note("  owner %s (changed to %q after %v)", r.sink.leader(res), nl, d)
			out, err = exec.Command("chattr", append([]string{"-i"}, files...)...).CombinedOutput()
			r.note("chattr -i: %v %s", err, out)
			time.Sleep(2 * *ttl)
			r.note("  owner now %s", r.sink.leader(res))
		case strings.HasPrefix(f, "sleep"):
			d, _ := time.ParseDuration(f[5:])
			time.Sleep(d)
		case strings.HasPrefix(f, "exec:"):
			// exec:CMD runs a shell command (a server fault done from outside).
			out, err := exec.Command("sh", "-c", f[5:]).CombinedOutput()
			r.note("exec %q: %v %s", f[5:], err, strings.TrimSpace(string(out)))
		default:
			r.note("fault %s skipped (no proxy)", f)
		}
	}
	time.Sleep(2 * time.Second)
	for _, id := range ids {
		r.signal(id, syscall.SIGTERM)
	}
	for _, id := range ids {
		if p := r.procs[id]; p.cmd != nil {
			_ = p.cmd.Wait()
		}
	}
	r.report()
	return nil
}

func (r *runner) report() {
	s := r.sink
	s.mu.Lock()
	defer s.mu.Unlock()
	r.note("SINK accepted=%d refused(stale)=%d dup_token=%d overlap=%d handovers=%d", s.accepted, s.refused, s.dupToken, s.overlap, len(s.handover))
	for _, e := range s.events {
		if len(e) > 0 {
			r.note("  %s", e)
		}
	}
	if r.mode != "lock" {
		for _, h := range s.handover {
			r.note("  handover %s %s→%s gap %v", h.Res, h.From, h.To, h.Gap.Round(time.Millisecond))
		}
	}
	ids := make([]string, 0, len(r.procs))
	for id := range r.procs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := r.procs[id]
		levels := map[string]int{}
		var warns []string
		if f, err := os.Open(p.errf); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				l := sc.Text()
				lv := "other"
				if i := strings.Index(l, "level="); i >= 0 {
					lv = strings.Fields(l[i+6:])[0]
				}
				levels[lv]++
				if lv == "WARN" || lv == "ERROR" {
					if len(l) > 260 {
						l = l[:260]
					}
					warns = append(warns, l)
				}
			}
			f.Close()
		}
		var first, last map[string]any
		maxG, maxFD := 0.0, 0.0
		if f, err := os.Open(p.outf); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var m map[string]any
				if json.Unmarshal(sc.Bytes(), &m) == nil {
					if first == nil {
						first = m
					}
					last = m
					if m["final"] != true {
						maxG = max(maxG, m["goroutines"].(float64))
						maxFD = max(maxFD, m["fds"].(float64))
					}
				}
			}
			f.Close()
		}
		r.note("PROC %s log lines %v", id, levels)
		for _, w := range warns {
			r.note("    %s", w)
		}
		r.note("    first stats %v", first)
		r.note("    last  stats %v", last)
		r.note("    max goroutines %v max fds %v (before the final close)", maxG, maxFD)
	}
	_ = os.WriteFile(filepath.Join(r.dir, "summary.txt"), []byte(strings.Join(r.log, "\n")+"\n"), 0o644)
}

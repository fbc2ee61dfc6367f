package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// fleet is the controller's side of a run: the fenced sink (fencehttp.Guard, verified with
// fence.LeaseVerifier on the controller's own backend) and the worker processes.
type fleet struct {
	dsn, group, logDir string
	ttl                time.Duration
	parts              int
	workerArgs         []string
	sk                 *sink
	srv                *http.Server
	url                string
	verifyBackend      spi.Backend

	mu    sync.Mutex
	procs map[string]*exec.Cmd
	ids   []string
	n     int
	t0    time.Time
	notes []change
}

type change struct {
	at        time.Time
	what, who string
}

func newFleet(ctx context.Context, dsn, group, logDir string, ttl time.Duration, parts int, workerArgs ...string) (*fleet, error) {
	vb, err := open.Open(ctx, dsn, open.WithAutoMigrate())
	if err != nil {
		return nil, err
	}
	f := &fleet{dsn: dsn, group: group, logDir: logDir, ttl: ttl, parts: parts, workerArgs: workerArgs,
		sk: newSink(), procs: map[string]*exec.Cmd{}, verifyBackend: vb, t0: time.Now()}
	verify := fence.LeaseVerifier(vb.(spi.Inspector), nil)
	guard := &fencehttp.Guard{
		Resource: func(r *http.Request) string { return group + "." + r.URL.Query().Get("p") },
		Verify: func(ctx context.Context, resource string, token int64) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return verify(ctx, resource, token)
		},
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fencehttp.Token(r.Context())
		f.sk.mu.Lock()
		f.sk.recs = append(f.sk.recs, rec{At: time.Now(), Res: r.URL.Query().Get("p"), Who: r.URL.Query().Get("who"), Token: tok, OK: true, Code: 204})
		f.sk.mu.Unlock()
		w.WriteHeader(204)
	})
	wrapped := guard.Wrap(inner)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sr := &statusRec{ResponseWriter: w}
		wrapped.ServeHTTP(sr, r)
		if sr.code != 204 {
			tok, _ := strconv.ParseInt(r.Header.Get("Simba-Fencing-Token"), 10, 64)
			f.sk.mu.Lock()
			f.sk.recs = append(f.sk.recs, rec{At: time.Now(), Res: r.URL.Query().Get("p"), Who: r.URL.Query().Get("who"), Token: tok, Code: sr.code})
			f.sk.mu.Unlock()
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.srv = &http.Server{Handler: outer}
	go f.srv.Serve(ln)
	f.url = "http://" + ln.Addr().String() + "/w"
	return f, nil
}

type statusRec struct {
	http.ResponseWriter
	code int
}

func (s *statusRec) WriteHeader(c int) { s.code = c; s.ResponseWriter.WriteHeader(c) }

func (f *fleet) note(what, who string) {
	f.mu.Lock()
	f.notes = append(f.notes, change{time.Now(), what, who})
	f.mu.Unlock()
	fmt.Printf("%6.1fs %s %s\n", time.Since(f.t0).Seconds(), what, who)
}

// start starts worker w<n+1>.
func (f *fleet) start() string {
	self, _ := os.Executable()
	f.mu.Lock()
	f.n++
	id := fmt.Sprintf("w%d", f.n)
	f.mu.Unlock()
	args := append([]string{"worker", "-dsn", f.dsn, "-id", id, "-sink", f.url, "-ttl", f.ttl.String(), "-p", strconv.Itoa(f.parts), "-group", f.group}, f.workerArgs...)
	cmd := exec.Command(self, args...)
	out, _ := os.Create(filepath.Join(f.logDir, id+".log"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		fmt.Println("start:", err)
		return id
	}
	f.mu.Lock()
	f.procs[id] = cmd
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	go func() { cmd.Wait(); out.Close() }()
	return id
}

func (f *fleet) signal(id string, sig syscall.Signal) {
	f.mu.Lock()
	cmd := f.procs[id]
	f.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(sig)
	}
	f.note(sig.String(), id)
}

// stop sends SIGCONT and SIGTERM to every worker and waits up to 15 s for them.
func (f *fleet) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.procs {
		c.Process.Signal(syscall.SIGCONT)
		c.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, c := range f.procs {
		for time.Now().Before(deadline) && syscall.Kill(c.Process.Pid, 0) == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	f.srv.Close()
	f.verifyBackend.Close()
}

// statsOf reads a worker's STATS lines: per line, the fields by key.
func (f *fleet) statsOf(id string) []map[string]string {
	fh, err := os.Open(filepath.Join(f.logDir, id+".log"))
	if err != nil {
		return nil
	}
	defer fh.Close()
	var out []map[string]string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "STATS ") {
			continue
		}
		m := map[string]string{}
		for _, kv := range strings.Fields(line)[2:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				m[k] = v
			}
		}
		out = append(out, m)
	}
	return out
}

// grepLog counts lines of a worker's log containing s.
func (f *fleet) grepLog(id, s string) (n int, first string) {
	b, _ := os.ReadFile(filepath.Join(f.logDir, id+".log"))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			if n == 0 {
				first = l
			}
			n++
		}
	}
	return n, first
}

// ownersAt is, per partition, the worker whose accepted write came last in (from, to].
func ownersAt(recs []rec, from, to time.Time) map[string]string {
	owner := map[string]string{}
	for _, r := range recs {
		if r.OK && r.At.After(from) && !r.At.After(to) {
			owner[r.Res] = r.Who
		}
	}
	return owner
}

func balance(owner map[string]string, parts int) string {
	per := map[string]int{}
	for _, w := range owner {
		per[w]++
	}
	var ids []string
	for id := range per {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return "no owner"
	}
	mean := float64(parts) / float64(len(ids))
	mx, mn := 0, parts
	var parts2 []string
	for _, id := range ids {
		mx, mn = max(mx, per[id]), min(mn, per[id])
		parts2 = append(parts2, fmt.Sprintf("%s:%d", id, per[id]))
	}
	return fmt.Sprintf("%d of %d partitions written, %s; busiest %.2f× the mean %.1f, least %.2f×", len(owner), parts, strings.Join(parts2, " "), float64(mx)/mean, mean, float64(mn)/mean)
}

// unownedAfter is, for the partitions whose tenure by who was the current one at t, the time
// from t to the first accepted write of a later tenure (by anyone); -1 when none came.
func unownedAfter(recs []rec, who string, t time.Time) []float64 {
	var out []float64
	for _, ss := range spans(recs) {
		for i, sp := range ss {
			if sp.Who != who || sp.First.After(t) || (i+1 < len(ss) && ss[i+1].First.Before(t)) {
				continue
			}
			if sp.Last.Before(t.Add(-2 * time.Second)) { // not written around t: not current
				continue
			}
			if i+1 < len(ss) {
				out = append(out, ss[i+1].First.Sub(t).Seconds())
			} else {
				out = append(out, -1)
			}
		}
	}
	sort.Float64s(out)
	return out
}

func summary(xs []float64) string {
	if len(xs) == 0 {
		return "none"
	}
	none := 0
	for _, x := range xs {
		if x < 0 {
			none++
		}
	}
	ys := xs[none:]
	if len(ys) == 0 {
		return fmt.Sprintf("%d partitions, none owned again", none)
	}
	return fmt.Sprintf("%d partitions, owned again after median %.2fs, max %.2fs; never: %d", len(xs), ys[len(ys)/2], ys[len(ys)-1], none)
}

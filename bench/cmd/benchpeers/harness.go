package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// waiterSettle is how long a handover waits after the waiter's first attempt before the
// holder lets go, so that the waiter is really waiting (not racing) when the clock starts.
const waiterSettle = 30 * time.Millisecond

// resources collects cleanups, run in reverse order.
type resources struct {
	mu  sync.Mutex
	fns []func()
}

func (r *resources) add(f func()) {
	r.mu.Lock()
	r.fns = append(r.fns, f)
	r.mu.Unlock()
}

func (r *resources) close() {
	r.mu.Lock()
	fns := r.fns
	r.fns = nil
	r.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// cycleRow is one line of the cycle table: op is one acquire + release (or one baseline
// operation); prep runs untimed before each slice.
// cmds, if set, reads the Redis commands the row's client has sent so far.
type cycleRow struct {
	group, name string
	baseline    bool
	prep, op    func(context.Context) error
	cmds        func() int64
}

// side is one contender of a lock handover pair.
type side interface {
	acquire(ctx context.Context) error
	release(ctx context.Context) error
}

// pair alternates a lock between two sides: sample times the holder's release to the
// waiter's grant.
type pair struct {
	s      [2]side
	holder int
	held   bool
}

func (p *pair) sample(ctx context.Context) (time.Duration, error) {
	if !p.held {
		if err := p.s[p.holder].acquire(ctx); err != nil {
			return 0, err
		}
		p.held = true
	}
	h, w := p.s[p.holder], p.s[1-p.holder]
	got := make(chan grant, 1)
	go func() {
		err := w.acquire(ctx)
		got <- grant{time.Now(), err}
	}()
	time.Sleep(waiterSettle)
	t0 := time.Now()
	if err := h.release(ctx); err != nil {
		p.held = false
		return 0, err
	}
	g := <-got
	if g.err != nil {
		p.held = false // the holder let go; nobody holds it now
		return 0, g.err
	}
	p.holder = 1 - p.holder
	return g.at.Sub(t0), nil
}

// finish releases the lock at the end of a round's samples (not every library renews a lock
// by itself, and the next round comes long after one TTL).
func (p *pair) finish(ctx context.Context) {
	if p.held {
		_ = p.s[p.holder].release(ctx)
		p.held = false
	}
}

// handRow is one line of the handover table; finish, if set, runs after a round's samples.
type handRow struct {
	group, name string
	sample      func(context.Context) (time.Duration, error)
	finish      func(context.Context)
}

// pairRow is the handover row of a lock pair.
func pairRow(group, name string, s [2]side) handRow {
	p := &pair{s: s}
	return handRow{group: group, name: name, sample: p.sample, finish: p.finish}
}

// grant is when a waiter got the lock, or why it did not.
type grant struct {
	at  time.Time
	err error
}

// waiter waits for a lock in this process while a holder process holds it.
type waiter struct {
	granted chan grant
	// count returns the waiter's acquire calls and all backend calls so far; ok is false when
	// the library gives no way to count them.
	count   func() (acquire, all int64, ok bool)
	cleanup func()
}

// failRow is one line of the crash-failover table: holder names the holder process's role;
// wait starts a waiter for name in this process.
type failRow struct {
	group, name string
	holder      string
	wait        func(ctx context.Context, name string) (*waiter, error)
}

// holdRole is what a holder process runs: take name and return once held.
type holdRole func(ctx context.Context, name string) error

// startSelf re-executes this binary as a helper process (flag -holder or -waiter) for role and
// name, with env added; the first line it prints comes on the returned channel.
func startSelf(env []string, flag, role, name string) (*exec.Cmd, <-chan string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe, flag, role, "-name", name)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	return cmd, line, nil
}

// spawnHolder re-executes this binary as a holder process for role and name and returns
// once it holds the lock.
func spawnHolder(ctx context.Context, env []string, role, name string) (*exec.Cmd, error) {
	cmd, line, err := startSelf(env, "-holder", role, name)
	if err != nil {
		return nil, err
	}
	select {
	case s := <-line:
		if s == "held" {
			return cmd, nil
		}
		err = fmt.Errorf("holder %s said %q", role, s)
	case <-ctx.Done():
		err = fmt.Errorf("holder %s: %w", role, ctx.Err())
	case <-time.After(20 * time.Second):
		err = fmt.Errorf("holder %s: not held after 20 s", role)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, err
}

// failSample is one crash failover: a holder process takes the lock, a waiter waits, the
// holder is SIGKILLed after delay and the waiter's grant is timed from the kill.
type failSample struct {
	ttlRatio             float64
	acqPerTTL, allPerTTL float64
	counted              bool
}

func runFailover(ctx context.Context, env []string, row failRow, name string, ttl, delay time.Duration) (failSample, error) {
	cmd, err := spawnHolder(ctx, env, row.holder, name)
	if err != nil {
		return failSample{}, err
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	w, err := row.wait(ctx, name)
	if err != nil {
		return failSample{}, err
	}
	defer w.cleanup()
	select {
	case g := <-w.granted:
		return failSample{}, fmt.Errorf("waiter granted while the holder lives (err %v)", g.err)
	case <-time.After(delay):
	}
	var a0, all0 int64
	if w.count != nil {
		a0, all0, _ = w.count()
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return failSample{}, err
	}
	killed = true
	var g grant
	select {
	case g = <-w.granted:
	case <-ctx.Done():
		return failSample{}, fmt.Errorf("no grant: %w", ctx.Err())
	}
	if g.err != nil {
		return failSample{}, g.err
	}
	d := g.at.Sub(t0)
	s := failSample{ttlRatio: float64(d) / float64(ttl)}
	if w.count != nil {
		a1, all1, ok := w.count()
		if ok && d > 0 {
			s.counted = true
			s.acqPerTTL = float64(a1-a0) / s.ttlRatio
			s.allPerTTL = float64(all1-all0) / s.ttlRatio
		}
	}
	return s, nil
}

// waitWatch is how long the waiting-cost measure watches a waiting process.
func waitWatch(ttl time.Duration) time.Duration { return 2 * ttl }

// waitSettle is how long a waiting process runs before it is watched: its client starts, opens
// its session and finds the lock held.
const waitSettle = time.Second

// runWaiter is the waiting process of the waiting-cost measure: it waits for name (which a
// holder process holds) and, after waitSettle, reports its CPU time and backend calls over
// waitWatch on stdout as "waited <µs watched> <CPU µs> <acquire calls> <calls>", then exits.
// With wait false it is the idle process beside it: the same client, TTL and report, its
// session open, waiting for nothing.
func runWaiter(role, name string, wait bool) int {
	c, open, ok := helperConf(role)
	if !ok {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitSettle+waitWatch(c.ttl)+20*time.Second)
	defer cancel()
	n := new(calls)
	cl, _, err := newClient(ctx, open, c.ttl, n)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	granted := make(chan error, 1)
	if wait {
		go func() {
			_, err := cl.Lock(ctx, name)
			granted <- err
		}()
	}
	time.Sleep(waitSettle)
	if !wait && cl.Session() == "" {
		fmt.Println("error: no session open after", waitSettle)
		return 1
	}
	a0, _, all0 := n.snapshot()
	cpu0, t0 := cpuTime(), time.Now()
	select {
	case err := <-granted:
		fmt.Println("error: the waiter got the lock from a live holder, or failed:", err)
		return 1
	case <-time.After(waitWatch(c.ttl)):
	}
	cpu1, d := cpuTime(), time.Since(t0)
	a1, _, all1 := n.snapshot()
	fmt.Printf("waited %d %d %d %d\n", d.Microseconds(), (cpu1 - cpu0).Microseconds(), a1-a0, all1-all0)
	return 0
}

// helperConf is a helper process's settings (from its environment) and the opener of role's
// Simba backend; on failure it prints the error line the parent reads and ok is false.
func helperConf(role string) (c conf, open opener, ok bool) {
	c, err := confFromEnv()
	if err != nil {
		fmt.Println("error:", err)
		return conf{}, nil, false
	}
	if open = c.openerOf(role); open == nil {
		fmt.Println("error: unknown role", role)
		return conf{}, nil, false
	}
	return c, open, true
}

// measureWaiting runs the waiting-cost measure of one Simba backend: a holder process takes
// name, a waiting process waits for it and reports its CPU time and calls; an idle process
// started with it (with idleEnv: on SQLite a file of its own) reports its own, waiting for
// nothing.
func measureWaiting(ctx context.Context, env, idleEnv []string, role, name string, ttl time.Duration) (*waitRes, error) {
	holder, err := spawnHolder(ctx, env, role, name)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	}()
	cmd, line, err := startSelf(env, "-waiter", role, name)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	icmd, iline, ierr := startSelf(idleEnv, "-idle", role, "")
	if ierr == nil {
		defer func() {
			_ = icmd.Process.Kill()
			_ = icmd.Wait()
		}()
	}
	us, cpu, acq, all, err := waitedReport(ctx, line, "waiting", ttl)
	if err != nil {
		return nil, err
	}
	ttls := float64(us) / float64(ttl.Microseconds())
	w := &waitRes{
		Seconds:   float64(us) / 1e6,
		CPUShare:  float64(cpu) / float64(us),
		AcqPerTTL: float64(acq) / ttls,
		AllPerTTL: float64(all) / ttls,
	}
	if ierr == nil {
		var ius, icpu int64
		if ius, icpu, _, _, ierr = waitedReport(ctx, iline, "idle", ttl); ierr == nil {
			w.IdleCPUShare = float64(icpu) / float64(ius)
		}
	}
	if ierr != nil {
		w.IdleError = ierr.Error()
	}
	return w, nil
}

// waitedReport reads the "waited" line of a waiting or idle process (what names it).
func waitedReport(ctx context.Context, line <-chan string, what string, ttl time.Duration) (us, cpu, acq, all int64, err error) {
	var s string
	select {
	case s = <-line:
	case <-ctx.Done():
		return 0, 0, 0, 0, fmt.Errorf("%s process: %w", what, ctx.Err())
	case <-time.After(waitSettle + waitWatch(ttl) + 30*time.Second):
		return 0, 0, 0, 0, fmt.Errorf("%s process: no report after %v", what, waitSettle+waitWatch(ttl)+30*time.Second)
	}
	if _, err := fmt.Sscanf(s, "waited %d %d %d %d", &us, &cpu, &acq, &all); err != nil || us <= 0 {
		return 0, 0, 0, 0, fmt.Errorf("%s process said %q", what, s)
	}
	return us, cpu, acq, all, nil
}

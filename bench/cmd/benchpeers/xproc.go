package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba"
)

// rowLockXProc is the hand-over row whose two clients live in two processes: the harness and
// a child process (this binary re-executed with -alternate), as two programs on one machine
// would, each with its own scheduler, garbage collector and connections. Issue 16 asks for
// the hand-over between processes.
const rowLockXProc = "Simba `Lock`, two processes"

// The lines of the -alternate protocol. The parent writes a command per line; the child
// answers each with one line: "held <unix ns>" (when Lock returned), "unlocked <unix ns>"
// (when Unlock was called), or "error: …".
const (
	altLock   = "lock"
	altUnlock = "unlock"
	altReady  = "ready"
)

// runAlternate is the child process of a between-processes hand-over pair: a Simba client of
// role that takes and lets go of name as the parent says on stdin, and reports on stdout when,
// on the wall clock both processes read. It ends when stdin does.
func runAlternate(role, name string) int {
	c, open, ok := helperConf(role)
	if !ok {
		return 2
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cl, done, err := newClient(sctx, open, c.ttl, nil)
	cancel()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer done()
	fmt.Println(altReady)
	var h *simba.Held
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*c.ttl+10*time.Second)
		switch in.Text() {
		case altLock:
			h, err = cl.Lock(ctx, name)
			if err == nil {
				fmt.Println("held", time.Now().UnixNano())
			}
		case altUnlock:
			if h == nil {
				err = errors.New("unlock without a held lock")
				break
			}
			t0 := time.Now()
			err = h.Unlock(ctx)
			h = nil
			if err == nil {
				fmt.Println("unlocked", t0.UnixNano())
			}
		default:
			err = fmt.Errorf("unknown command %q", in.Text())
		}
		cancel()
		if err != nil {
			fmt.Println("error:", strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	return 0
}

// xprocPair alternates a lock between a client in this process and one in a child process.
// A sample times the holder's Unlock to the waiter's Lock returning, on the wall clock (both
// processes read CLOCK_REALTIME), so the pipe between them is not in the time.
type xprocPair struct {
	local      *simba.Client
	name       string
	held       *simba.Held // the local client's, while it holds
	remoteHeld bool
	child      *exec.Cmd
	in         io.WriteCloser
	lines      chan string
}

// newXProcRow starts the child process and the local client of a between-processes pair for
// name on backend sb; r closes both.
func newXProcRow(ctx context.Context, c conf, sb simbaBackend, name string, r *resources) (handRow, error) {
	cl, done, err := newClient(ctx, sb.open, c.ttl, nil)
	if err != nil {
		return handRow{}, err
	}
	r.add(done)
	exe, err := os.Executable()
	if err != nil {
		return handRow{}, err
	}
	cmd := exec.Command(exe, "-alternate", sb.role, "-name", name)
	cmd.Env = append(os.Environ(), c.env()...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return handRow{}, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return handRow{}, err
	}
	if err := cmd.Start(); err != nil {
		return handRow{}, err
	}
	p := &xprocPair{local: cl, name: name, child: cmd, in: in, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	r.add(p.stop)
	if l, err := p.line(ctx); err != nil || l != altReady {
		return handRow{}, errors.Join(fmt.Errorf("%s child process: said %q", sb.group, l), err)
	}
	return handRow{group: sb.group, name: rowLockXProc, sample: p.sample, finish: p.finish}, nil
}

// stop ends the child: its stdin closes, it closes its client and exits (killed after 10 s).
func (p *xprocPair) stop() {
	_ = p.in.Close()
	exited := make(chan struct{})
	go func() {
		for range p.lines { // drain, so the child never blocks on a full pipe
		}
		_ = p.child.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = p.child.Process.Kill()
		<-exited
	}
}

// line is the child's next line.
func (p *xprocPair) line(ctx context.Context) (string, error) {
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", errors.New("child process: its output ended")
		}
		return l, nil
	case <-ctx.Done():
		return "", fmt.Errorf("child process: %w", ctx.Err())
	}
}

// ask sends cmd to the child and reads its answer, "<want> <unix ns>", as a wall-clock time.
func (p *xprocPair) ask(ctx context.Context, cmd, want string) (time.Time, error) {
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		return time.Time{}, fmt.Errorf("child process: %w", err)
	}
	return p.answer(ctx, want)
}

// answer reads the child's answer to its last command.
func (p *xprocPair) answer(ctx context.Context, want string) (time.Time, error) {
	l, err := p.line(ctx)
	if err != nil {
		return time.Time{}, err
	}
	word, ns, _ := strings.Cut(l, " ")
	if word != want {
		return time.Time{}, fmt.Errorf("child process: %s", l)
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("child process: %q: %w", l, err)
	}
	return time.Unix(0, n), nil
}

// sample hands the lock over once, from whichever side holds it to the other.
func (p *xprocPair) sample(ctx context.Context) (time.Duration, error) {
	if p.held == nil && !p.remoteHeld {
		h, err := p.local.Lock(ctx, p.name)
		if err != nil {
			return 0, err
		}
		p.held = h
	}
	if p.held != nil {
		// Local → child: the child waits in Lock; the local client lets go.
		if _, err := io.WriteString(p.in, altLock+"\n"); err != nil {
			return 0, fmt.Errorf("child process: %w", err)
		}
		time.Sleep(waiterSettle)
		t0 := time.Now().Round(0) // wall clock, as the child's
		err := p.held.Unlock(ctx)
		p.held = nil
		at, aerr := p.answer(ctx, "held")
		if err := errors.Join(err, aerr); err != nil {
			return 0, err
		}
		p.remoteHeld = true
		return at.Sub(t0), nil
	}
	// Child → local: the local client waits in Lock; the child lets go.
	got := make(chan grant, 1)
	go func() {
		h, err := p.local.Lock(ctx, p.name)
		p.held = h
		got <- grant{time.Now().Round(0), err}
	}()
	time.Sleep(waiterSettle)
	t0, err := p.ask(ctx, altUnlock, "unlocked")
	p.remoteHeld = false
	g := <-got
	if err := errors.Join(err, g.err); err != nil {
		return 0, err
	}
	return g.at.Sub(t0), nil
}

// finish lets go of the lock at the end of a slice, on whichever side holds it.
func (p *xprocPair) finish(ctx context.Context) {
	switch {
	case p.held != nil:
		_ = p.held.Unlock(ctx)
		p.held = nil
	case p.remoteHeld:
		_, _ = p.ask(ctx, altUnlock, "unlocked")
		p.remoteHeld = false
	}
}

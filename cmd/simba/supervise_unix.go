//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/simba-go/simba"
)

// `simba run` and `simba lock` do not start the command themselves: they start this binary as
// `simba run-supervisor`, which starts the command in a process group of its own and stops the
// whole group (SIGTERM, then SIGKILL) when it is told to, when the term's validity runs out,
// or when simba goes away. simba talks to it over a pipe (the supervisor's fd 3), one line per
// message:
//
//	deadline <ns>   the term is valid for <ns> more nanoseconds (sent at every tick while valid)
//	stop <ns>       the term ended: SIGTERM the group now and SIGKILL it after <ns>
//
// End of file on the pipe means simba is gone (killed, even by SIGKILL, or crashed): the
// supervisor then stops the group as for "stop" with the -grace it was started with. In every
// case the SIGKILL comes no later than the last deadline simba sent: past it, another process
// may hold the lease. A simba paused (SIGSTOP) past that deadline therefore finds its command
// killed. On Linux the command also gets SIGKILL if the supervisor itself dies
// (PR_SET_PDEATHSIG), though the rest of its group then survives.

// supervisorFD is the supervisor's end of the pipe from simba.
const supervisorFD = 3

// runTerm runs argv under the supervisor for the term t and returns its exit status: the
// command's, or 128 plus the number of the signal that ended it. When ctx ends, the command
// is stopped with a grace of at most grace and the term's remaining validity. tick is how
// often the supervisor is told the term's validity.
func runTerm(ctx context.Context, t simba.Term, argv []string, grace, tick time.Duration) (int, error) {
	rem := t.Remaining()
	if rem <= 0 {
		return 0, fmt.Errorf("term %s ended before its command started", t)
	}
	self, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("finding the simba binary to supervise the command: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer w.Close()
	args := append([]string{supervisorCommand, "-grace", grace.String(), "-deadline", rem.String(), "--"}, argv...)
	cmd := exec.Command(self, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = termEnv(t)
	cmd.ExtraFiles = []*os.File{r} // fd 3 (supervisorFD)
	lastDeadline := time.Now().Add(rem)
	err = cmd.Start()
	r.Close()
	if err != nil {
		return 0, fmt.Errorf("starting the command's supervisor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	send := func(format string, args ...any) {
		// The supervisor reads at once; a deadline keeps a stopped one from blocking simba.
		_ = w.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = fmt.Fprintf(w, format, args...)
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	done := ctx.Done()
	for {
		select {
		case <-ticker.C:
			if rem := t.Remaining(); rem > 0 {
				lastDeadline = time.Now().Add(rem)
				send("deadline %d\n", rem)
			}
		case <-done:
			done = nil
			ticker.Stop()
			g := min(grace, time.Until(lastDeadline))
			send("stop %d\n", max(g, 0))
		case err := <-exited:
			var exit *exec.ExitError
			if err == nil || errors.As(err, &exit) {
				return cmd.ProcessState.ExitCode(), nil
			}
			return 0, err
		}
	}
}

// supervise is `simba run-supervisor [-grace G] [-deadline D] -- CMD [ARGS]`; it returns the
// exit status (see runTerm).
func supervise(args []string) int {
	fs := flag.NewFlagSet(supervisorCommand, flag.ContinueOnError)
	grace := fs.Duration("grace", 5*time.Second, "time the command has after SIGTERM when simba goes away")
	deadline := fs.Duration("deadline", 0, "the term's validity at the start")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 || *deadline <= 0 {
		fmt.Fprintf(os.Stderr, "simba: %s is started by simba run and simba lock, not by hand\n", supervisorCommand)
		return 2
	}
	argv := fs.Args()
	validUntil := time.Now().Add(*deadline)

	// Ctrl-C reaches simba's process group, which this process shares: simba handles it and
	// sends "stop". A SIGTERM or SIGHUP for this process alone stops the command as well.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)

	// Pdeathsig is tied to the thread that starts the child: keep this goroutine on its
	// thread, which then never exits before the process does.
	runtime.LockOSThread()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = commandSysProcAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		return 127
	}
	group := -cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	msgs := make(chan string)
	go readSupervisorPipe(os.NewFile(supervisorFD, "simba-pipe"), msgs)

	stopping, killed := false, false
	var killAt time.Time
	stop := func(g time.Duration) {
		at := time.Now().Add(max(g, 0))
		if at.After(validUntil) {
			at = validUntil
		}
		if !stopping {
			stopping = true
			killAt = at
			_ = syscall.Kill(group, syscall.SIGTERM)
		} else if at.Before(killAt) {
			killAt = at
		}
	}
	timer := time.NewTimer(time.Until(validUntil))
	defer timer.Stop()
	for {
		next := validUntil
		if stopping && killAt.Before(next) {
			next = killAt
		}
		fire := timer.C
		if killed {
			fire = nil // SIGKILL sent: only the command's exit is left to wait for
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-exited:
			// What the command left behind in its group must not outlive the term either.
			_ = syscall.Kill(group, syscall.SIGKILL)
			return exitStatus(cmd.ProcessState)
		case <-fire:
			if !time.Now().Before(next) {
				_ = syscall.Kill(group, syscall.SIGKILL)
				killed = true
			}
		case sig := <-sigs:
			if sig != syscall.SIGINT {
				stop(*grace)
			}
		case m, ok := <-msgs:
			if !ok { // simba is gone
				msgs = nil
				stop(*grace)
				continue
			}
			verb, arg, _ := strings.Cut(m, " ")
			ns, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				continue
			}
			switch verb {
			case "deadline":
				if !stopping {
					validUntil = time.Now().Add(time.Duration(ns))
				}
			case "stop":
				stop(time.Duration(ns))
			}
		}
	}
}

// readSupervisorPipe sends each line of f to msgs and closes msgs at end of file (or on any
// read error: simba is gone either way).
func readSupervisorPipe(f io.ReadCloser, msgs chan<- string) {
	defer close(msgs)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		msgs <- sc.Text()
	}
}

// exitStatus is the status a shell would report for a finished process: its exit code, or 128
// plus the signal that killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

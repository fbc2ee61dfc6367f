//go:build unix

package main

import (
	"bufio"
	"bytes"
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
//	deadline <t>   the term is valid until <t> (sent at every tick while it is valid)
//	stop <t>       the term ended: SIGTERM the group now and SIGKILL it at <t>
//
// Times are readings of a clock both processes share (monoNow: CLOCK_MONOTONIC on Linux), so
// that a message read late — the supervisor still starting, or descheduled — still means the
// instant simba meant; the supervisor starts the command only if -deadline has not passed.
//
// End of file on the pipe means simba is gone (killed, even by SIGKILL, or crashed): the
// supervisor then stops the group as for "stop" with the -grace it was started with. In every
// case the SIGKILL comes no later than the last deadline simba sent: past it, another process
// may hold the lease. A simba paused (SIGSTOP, a frozen VM, a long stall) gets no say in that,
// so the supervisor makes the early stop itself (-early E, the early stop of runTerm): silent
// for two ticks (-tick) when the last deadline it heard is E away, it sends the group SIGTERM
// then, SIGKILL at the deadline, says so on stderr, and tells simba over a second pipe (its
// fd 4, "early") that the command was stopped early, so that a resumed simba ends as after
// its own early stop. A -early of 0 (no early stop) leaves SIGTERM and SIGKILL both at the
// deadline. A deadline is a reading of the shared clock taken before the validity it adds
// (monoNow, then Term.Remaining), so a pause of simba between the two, or before the message
// is read, makes it earlier, never later. On Linux the command also gets SIGKILL if the
// supervisor itself dies (PR_SET_PDEATHSIG), though the rest of its group then survives.
//
// On Linux the supervisor is also its descendants' subreaper (PR_SET_CHILD_SUBREAPER), and
// each signal it sends the group goes to every process descended from it as well: what the
// command starts in a group or session of its own (setsid, a daemon's double fork) is stopped
// with the command and does not outlive the term.

// supervisorFD is the supervisor's end of the pipe from simba; reportFD its end of the pipe
// to simba, on which it writes "early" when it stopped the command early itself.
const (
	supervisorFD = 3
	reportFD     = 4
)

// runTerm runs argv under the supervisor for the term t and returns its exit status: the
// command's, or 128 plus the number of the signal that ended it. When ctx ends, the command
// is stopped with a grace of at most grace and the term's remaining validity. When the term's
// remaining validity falls to early.at first (its renewals failing), runTerm stops the command
// then, with the rest of the validity as its grace, says so on early.stderr and reports
// stoppedEarly; so does the supervisor when simba itself is paused then (see supervise), and
// runTerm reports stoppedEarly as well. tick is how often the supervisor is told the term's
// validity.
func runTerm(ctx context.Context, t simba.Term, argv []string, grace, tick time.Duration, early earlyStop) (status int, stoppedEarly bool, err error) {
	lastDeadline := monoNow() + int64(t.Remaining())
	if !t.IsValid() {
		return 0, false, fmt.Errorf("term %s ended before its command started", t)
	}
	self, err := os.Executable()
	if err != nil {
		return 0, false, fmt.Errorf("finding the simba binary to supervise the command: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, false, err
	}
	defer w.Close()
	reports, report, err := os.Pipe()
	if err != nil {
		r.Close()
		return 0, false, err
	}
	defer reports.Close()
	args := append([]string{supervisorCommand, "-grace", grace.String(), "-deadline", strconv.FormatInt(lastDeadline, 10),
		"-early", early.at.String(), "-tick", tick.String(), "-report", "--"}, argv...)
	cmd := exec.Command(self, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = termEnv(t)
	cmd.ExtraFiles = []*os.File{r, report} // fd 3 (supervisorFD), fd 4 (reportFD)
	err = cmd.Start()
	r.Close()
	report.Close()
	if err != nil {
		return 0, false, fmt.Errorf("starting the command's supervisor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// supervisorStoppedEarly reads what the supervisor reported within wait (up to its exit:
	// fd 4 is close-on-exec, no one else holds it) and says whether it made the early stop
	// itself (simba paused then).
	var reported []byte
	supervisorStoppedEarly := func(wait time.Duration) bool {
		_ = reports.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 64)
		for {
			n, err := reports.Read(buf)
			reported = append(reported, buf[:n]...)
			if err != nil {
				break
			}
		}
		return bytes.Contains(reported, []byte("early"))
	}
	send := func(format string, args ...any) {
		// The supervisor reads at once; a deadline keeps a stopped one from blocking simba.
		_ = w.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = fmt.Fprintf(w, format, args...)
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	// The early stop is due when the validity is down to early.at: the timer is armed for
	// then as the validity stands, and armed again when it fires early (a renewal moved the
	// term's end) and at each tick.
	var earlyDue <-chan time.Time
	var earlyTimer *time.Timer
	if early.at > 0 {
		earlyTimer = time.NewTimer(max(t.Remaining()-early.at, 0))
		defer earlyTimer.Stop()
		earlyDue = earlyTimer.C
	}
	done := ctx.Done()
	early.errs.watch(t)
	finish := func(err error) (int, bool, error) {
		stoppedEarly = supervisorStoppedEarly(time.Second) || stoppedEarly
		var exit *exec.ExitError
		if err == nil || errors.As(err, &exit) {
			return exitStatus(cmd.ProcessState), stoppedEarly, nil // 128+n if the supervisor itself was killed
		}
		return 0, stoppedEarly, err
	}
	for {
		// A supervisor that exited (it stopped the command early while simba was paused, say)
		// goes first: a simba just resumed has nothing more to tell it, nor to say.
		select {
		case err := <-exited:
			return finish(err)
		default:
		}
		select {
		case <-ticker.C:
			now := monoNow()
			if rem := t.Remaining(); rem > 0 {
				lastDeadline = now + int64(rem)
				send("deadline %d\n", lastDeadline)
				if earlyDue != nil {
					earlyTimer.Reset(max(rem-early.at, 0))
				}
			}
		case <-earlyDue:
			rem := t.Remaining()
			if rem > early.at { // renewed meanwhile
				earlyTimer.Reset(rem - early.at)
				continue
			}
			earlyDue = nil
			if supervisorStoppedEarly(time.Millisecond) {
				// The supervisor made the early stop while simba was paused: the command has
				// its SIGTERM, and the supervisor has said why.
				done, stoppedEarly = nil, true
				ticker.Stop()
				continue
			}
			if rem <= 0 {
				// Past the validity: the supervisor kills the command at the deadline it
				// has, and the term's revocation ends ctx.
				continue
			}
			done, stoppedEarly = nil, true
			ticker.Stop()
			lastDeadline = monoNow() + int64(rem)
			send("stop %d\n", lastDeadline)
			fmt.Fprintln(early.stderr, early.line(t, rem))
		case <-done:
			done, earlyDue = nil, nil
			ticker.Stop()
			send("stop %d\n", min(monoNow()+int64(grace), lastDeadline))
		case err := <-exited:
			return finish(err)
		}
	}
}

// supervise is `simba run-supervisor [-grace G] [-deadline D] [-early E -tick T] [-report] --
// CMD [ARGS]`; it returns the exit status (see runTerm).
func supervise(args []string) int {
	fs := flag.NewFlagSet(supervisorCommand, flag.ContinueOnError)
	grace := fs.Duration("grace", 5*time.Second, "time the command has after SIGTERM when simba goes away")
	deadline := fs.Int64("deadline", 0, "the end of the term's validity (monoNow)")
	earlyAt := fs.Duration("early", 0, "the validity left when simba, silent, has the command stopped early (0: none)")
	tick := fs.Duration("tick", time.Second, "how often simba sends the term's deadline")
	reports := fs.Bool("report", false, "fd 4 is the pipe to simba on which to report an early stop")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 || *deadline <= 0 || *earlyAt < 0 || *tick <= 0 {
		fmt.Fprintf(os.Stderr, "simba: %s is started by simba run and simba lock, not by hand\n", supervisorCommand)
		return 2
	}
	argv := fs.Args()
	// at converts a monoNow reading into a time.Time of this process (whose timers run on
	// the monotonic clock). time.Now is read first: descheduled between the two readings, the
	// supervisor gets an earlier time, never a later one.
	at := func(mono int64) time.Time { return time.Now().Add(time.Duration(mono - monoNow())) }
	validUntil := at(*deadline)
	heard := time.Now()  // when simba last said anything: its silence is what a pause looks like
	silence := 2 * *tick // how long simba must have been silent for the supervisor to stop early
	var report io.Writer = io.Discard
	if *reports {
		report = os.NewFile(reportFD, "simba-report")
		syscall.CloseOnExec(reportFD)
	}
	if !time.Now().Before(validUntil) {
		fmt.Fprintf(os.Stderr, "simba: the term ended before its command could start: %s not run\n", argv[0])
		return 1
	}

	// Ctrl-C reaches simba's process group, which this process shares: simba handles it and
	// sends "stop". A SIGTERM or SIGHUP for this process alone stops the command as well.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// An orphan the supervisor adopted (adoptOrphans) that exits is reaped (reapOrphans).
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)

	// Pdeathsig is tied to the thread that starts the child: keep this goroutine on its
	// thread, which then never exits before the process does.
	runtime.LockOSThread()
	syscall.CloseOnExec(supervisorFD) // the pipes are the supervisor's, not the command's
	// On Linux what the command starts outside its group (setsid, a daemon's double fork) is
	// stopped with it: as their subreaper the supervisor still finds them once their parent
	// has exited. Without it (a kernel before 3.4) they are found while their parent lives.
	_ = adoptOrphans()
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
	stop := func(kill time.Time) {
		if kill.After(validUntil) {
			kill = validUntil
		}
		if !stopping {
			stopping = true
			killAt = kill
			signalAll(group, syscall.SIGTERM)
		} else if kill.Before(killAt) {
			killAt = kill
		}
	}
	// earlyDue is when the supervisor makes the early stop itself: E before the last deadline
	// heard, once simba has been silent for two ticks (zero: never).
	earlyDue := func() time.Time {
		if *earlyAt == 0 || stopping {
			return time.Time{}
		}
		due := validUntil.Add(-*earlyAt)
		if quiet := heard.Add(silence); quiet.After(due) {
			due = quiet
		}
		return due
	}
	timer := time.NewTimer(time.Until(validUntil))
	defer timer.Stop()
	for {
		next := validUntil
		if stopping && killAt.Before(next) {
			next = killAt
		}
		early := earlyDue()
		if !early.IsZero() && early.Before(next) {
			next = early
		}
		fire := timer.C
		if killed {
			fire = nil // SIGKILL sent: only the command's exit is left to wait for
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-exited:
			// What the command left behind, in its group or not, must not outlive the term
			// either.
			killAll(group)
			return exitStatus(cmd.ProcessState)
		case <-fire:
			now := time.Now()
			if !early.IsZero() && !now.Before(early) && now.Before(validUntil) {
				// simba paused (or starved) with the term's validity down to the early stop: stop
				// the command as simba would have (SIGTERM now, SIGKILL at the deadline), so that
				// its TERM trap runs within the term.
				fmt.Fprintf(os.Stderr, "simba: no word from simba for %v (paused or starved) and %v of the term's validity left (early stop at %v): sending %s SIGTERM now, SIGKILL when the validity runs out\n",
					now.Sub(heard).Round(time.Millisecond), validUntil.Sub(now).Round(time.Millisecond), *earlyAt, argv[0])
				_, _ = io.WriteString(report, "early\n")
				stop(validUntil)
				continue
			}
			if !now.Before(next) {
				if !stopping {
					// No word from simba since the last deadline it sent (paused, starved, or a
					// -ttl too short for this host): say why CMD dies, which 137 alone did not.
					fmt.Fprintf(os.Stderr, "simba: the term's validity ran out with no word from simba (paused or starved past it): %s killed\n", argv[0])
				}
				killAll(group)
				killed = true
			}
		case <-chld:
			reapOrphans(cmd.Process.Pid)
		case sig := <-sigs:
			if sig != syscall.SIGINT {
				stop(time.Now().Add(*grace))
			}
		case m, ok := <-msgs:
			if !ok { // simba is gone
				msgs = nil
				stop(time.Now().Add(*grace))
				continue
			}
			heard = time.Now()
			verb, arg, _ := strings.Cut(m, " ")
			mono, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				continue
			}
			switch verb {
			case "deadline":
				if !stopping {
					validUntil = at(mono)
				}
			case "stop":
				stop(at(mono))
			}
		}
	}
}

// signalAll sends sig to the command's process group (group is its negated id) and to every
// process descended from the supervisor outside that group (see adoptOrphans), once each.
func signalAll(group int, sig syscall.Signal) {
	_ = syscall.Kill(group, sig)
	signalDescendants(sig, -group)
}

// killRounds bounds killAll's rounds.
const killRounds = 100

// killAll SIGKILLs the command's process group and every process descended from the
// supervisor, round after round until none is left alive (the children of a process killed in
// one round are the supervisor's to kill in the next), for killRounds rounds at most.
func killAll(group int) {
	_ = syscall.Kill(group, syscall.SIGKILL)
	for range killRounds {
		if signalDescendants(syscall.SIGKILL, 0) == 0 {
			return
		}
		time.Sleep(time.Millisecond)
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

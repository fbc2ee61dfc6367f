package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// earlyJobScript is the command of the early-stop test: it records its pid in <dir>/started
// and runs until SIGTERM, whose trap takes 300 ms to clean up, records that in <dir>/cleaned
// and exits 7.
const earlyJobScript = `trap 'sleep 0.3; echo cleaned > "$0/cleaned"; exit 7' TERM
echo $$ > "$0/started.tmp" && mv "$0/started.tmp" "$0/started"
while :; do sleep 0.05; done`

// earlyNextScript is the next holder's command: it records in <dir>/next whether the first
// command had cleaned up and exited when it started ("after") or not ("before").
const earlyNextScript = `if [ -e "$0/cleaned" ] && ! kill -0 "$(cat "$0/started")" 2>/dev/null; then echo after; else echo before; fi > "$0/next"`

// TestOutageStopsTheCommandWithinTheTerm: simba lock and simba run at a Redis server they
// lose (a proxy between them cuts every connection) send the command SIGTERM while the term
// still holds, when its validity is down to the early stop (-ttl 3s -grace 2s: 750 ms), so
// that the command's SIGTERM trap (300 ms) runs to its end before the SIGKILL; simba says why
// on stderr and exits 1, and the next holder's command starts after the command exited. A
// cut of 300 ms before that stops nothing. Old code: the term ended when its validity had run
// out, and the SIGKILL came right after the SIGTERM: the trap never finished (no cleaned
// file, the next holder started with no trace of it).
func TestOutageStopsTheCommandWithinTheTerm(t *testing.T) {
	for _, cmd := range []string{"lock", "run"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			addr := testenv.PrivateRedis(t)
			proxy := faultproxy.StartTest(t, addr)
			dir := t.TempDir()
			first := startSimba(t, cmd, "-dsn", "redis://"+proxy.Addr(), "-name", "job", "-ttl", "3s", "-grace", "2s",
				"--", "sh", "-c", earlyJobScript, dir)
			if !waitFor(30*time.Second, func() bool { return exists(filepath.Join(dir, "started")) }) {
				t.Fatalf("simba %s never ran its command:\n%s", cmd, first.out)
			}

			// A short cut: the keep-alives that fail are retried, the term goes on.
			proxy.Set(faultproxy.Fault{Cut: true, Reset: true})
			time.Sleep(300 * time.Millisecond)
			proxy.Heal()
			time.Sleep(6 * time.Second) // two TTLs
			select {
			case <-first.exited:
				t.Fatalf("simba %s exited after a cut of 300 ms:\n%s", cmd, first.out)
			default:
			}
			if exists(filepath.Join(dir, "cleaned")) {
				t.Fatalf("the command got SIGTERM after a cut of 300 ms:\n%s", first.out)
			}

			// The backend lost for good.
			proxy.Set(faultproxy.Fault{Cut: true, Reset: true})
			next := startSimba(t, cmd, "-dsn", "redis://"+addr, "-name", "job", "-ttl", "3s",
				"--", "sh", "-c", earlyNextScript, dir)
			if got := first.status(t); got != 1 {
				t.Errorf("simba %s exited %d after losing its backend, want 1:\n%s", cmd, got, first.out)
			}
			out := first.out.String()
			var missing []string
			for _, want := range []string{
				"not renewed (last error: ", "sending the command SIGTERM now, SIGKILL when the validity runs out",
				"given up (token ", "the command was stopped (exit status 7)",
			} {
				if !strings.Contains(out, want) {
					missing = append(missing, want)
				}
			}
			if len(missing) > 0 {
				t.Errorf("simba %s's stderr lacks %q:\n%s", cmd, missing, out)
			}
			if !exists(filepath.Join(dir, "cleaned")) {
				t.Errorf("the command's SIGTERM trap did not finish before the SIGKILL")
			}
			if got := next.status(t); got != 0 {
				t.Fatalf("the next simba %s exited %d:\n%s", cmd, got, next.out)
			}
			b, err := os.ReadFile(filepath.Join(dir, "next"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != "after" {
				t.Errorf("the next holder's command started %s the first command had cleaned up and exited", got)
			}
			t.Logf("simba %s's stderr:\n%s", cmd, out)
		})
	}
}

// TestEarlyStopAt: the early stop is -grace, capped at TTL/4 and under TTL/3 - 100 ms (what
// one keep-alive failing at its timeout leaves), and none at all for a -grace of 0 or a TTL of
// 300 ms or less.
func TestEarlyStopAt(t *testing.T) {
	for _, tc := range []struct{ ttl, grace, want time.Duration }{
		{15 * time.Second, 5 * time.Second, 3750 * time.Millisecond},
		{15 * time.Second, time.Second, time.Second},
		{3 * time.Second, 5 * time.Second, 750 * time.Millisecond},
		{600 * time.Millisecond, 5 * time.Second, 100 * time.Millisecond},
		{300 * time.Millisecond, 5 * time.Second, 0},
		{150 * time.Millisecond, 5 * time.Second, 0},
		{15 * time.Second, 0, 0},
	} {
		if got := earlyStopAt(tc.ttl, tc.grace); got != tc.want {
			t.Errorf("earlyStopAt(%v, %v) = %v, want %v", tc.ttl, tc.grace, got, tc.want)
		}
	}
}

// TestSupervisorSaysWhyItKillsAtTheDeadline: a supervisor that hears nothing from simba after
// the deadline it was started with (simba paused or starved, or a -ttl too short for the host:
// trial 32's -ttl 150ms ended with exit status 137 and no message) kills the command when the
// deadline passes and says so on stderr. Old code: 137 without a word.
func TestSupervisorSaysWhyItKillsAtTheDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close() // simba, silent but alive
	// Two seconds: a -race test binary started as the supervisor on a loaded host took over
	// 300 ms to start, and said the term had ended before its command could start.
	deadline := monoNow() + int64(2*time.Second)
	cmd := exec.Command(os.Args[0], supervisorCommand, "-grace", "1s", "-deadline", strconv.FormatInt(deadline, 10),
		"--", "sleep", "30")
	var stderr testenv.LogBuffer
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{r}
	err = cmd.Run()
	r.Close()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 137 {
		t.Fatalf("the supervisor: %v, want exit status 137 (the command killed); stderr: %q", err, stderr.String())
	}
	if want := "simba: the term's validity ran out with no word from simba (paused or starved past it): sleep killed"; !strings.Contains(stderr.String(), want) {
		t.Errorf("the supervisor's stderr %q lacks %q", stderr.String(), want)
	}
}

// TestPausedSimbaStillStopsTheCommandEarly: simba lock paused (SIGSTOP) while its command runs
// no longer renews the term, nor tells its supervisor anything; the supervisor, silent simba or
// not, makes the early stop itself (-ttl 3s -grace 2s: SIGTERM with 750 ms of the last
// validity it heard left, SIGKILL at its end), so the command's TERM trap (300 ms) runs to its
// end, and says why on stderr. Resumed, simba ends as after its own early stop: exit status 1,
// "given up". Old code: the supervisor SIGKILLed the command at the deadline, and the trap
// never ran (no cleaned file).
func TestPausedSimbaStillStopsTheCommandEarly(t *testing.T) {
	_, dsn := waitDB(t)
	dir := t.TempDir()
	p := startSimba(t, "lock", "-dsn", dsn, "-name", "job", "-ttl", "3s", "-grace", "2s",
		"--", "sh", "-c", earlyJobScript, dir)
	started := filepath.Join(dir, "started")
	if !waitFor(30*time.Second, func() bool { return exists(started) }) {
		t.Fatalf("simba lock never ran its command:\n%s", p.out)
	}
	b, err := os.ReadFile(started)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }) // before startSimba's SIGTERM
	if !waitFor(30*time.Second, func() bool { return !alive(pid) }) {
		t.Fatalf("the command of a simba paused for 30 s still runs:\n%s", p.out)
	}
	cleaned := exists(filepath.Join(dir, "cleaned"))
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	status := p.status(t)
	out := p.out.String()
	t.Logf("simba lock's stderr:\n%s", out)
	if !cleaned {
		t.Errorf("the command's TERM trap did not finish before the SIGKILL (simba paused)")
	}
	if status != 1 {
		t.Errorf("simba lock resumed after its supervisor stopped the command early exited %d, want 1", status)
	}
	var missing []string
	for _, want := range []string{
		"simba: no word from simba for ", "(paused or starved) and ", "(early stop at 750ms): sending sh SIGTERM now, SIGKILL when the validity runs out",
		"given up (token ", "the command was stopped (exit status 7)",
	} {
		if !strings.Contains(out, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		t.Errorf("simba lock's stderr lacks %q", missing)
	}
}

// TestEarlyStopLineForgetsARecoveredError: the early stop's line names the last backend error
// only if the term has not been renewed since: a keep-alive that succeeded after it ended
// that outage (the client publishes no event for it, but the term's validity moves), and the
// line then says "no keep-alive reply" rather than an error that no longer holds. Old code:
// the line named the last error ever noted, one from an outage long over.
func TestEarlyStopLineForgetsARecoveredError(t *testing.T) {
	ctx, _, b := sqliteStatusBackend(t)
	errs := &backendErrors{}
	// A TTL of 3 s: renewals every second, and room for a loaded host's slow keep-alive.
	c, err := simba.New(b, simba.WithTTL(3*time.Second), simba.WithListener(errs.event))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	h, err := c.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	errs.watch(h.Term)
	early := earlyStop{at: 100 * time.Millisecond, what: "lock", errs: errs}
	const refused = "keep-alive: connection refused (an outage)"

	before := h.Term.Remaining()
	errs.event(simba.Event{Kind: simba.EventBackendError, Op: simba.OpKeepAlive, Class: spi.Retryable, Err: errors.New(refused)})
	line := early.line(h.Term, 100*time.Millisecond)
	if h.Term.Remaining() <= before && !strings.Contains(line, "(last error: "+refused+")") { // no renewal in between
		t.Errorf("right after the error, the early stop's line does not name it: %s", line)
	}

	if !waitFor(30*time.Second, func() bool { return h.Term.Remaining() > before || !h.Term.IsValid() }) || !h.Term.IsValid() {
		t.Fatalf("the term was lost, or never renewed, within 30 s (%v left)", h.Term.Remaining())
	}
	line = early.line(h.Term, 100*time.Millisecond)
	if strings.Contains(line, "connection refused") || !strings.Contains(line, "(no keep-alive reply)") {
		t.Errorf("after a renewal, the early stop's line names the error of an outage that is over: %s", line)
	}
}

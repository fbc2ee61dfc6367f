//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonScripts are commands that leave a `sleep 600` running outside their process group and
// write its pid to "$0/daemon" before they exit or wait: started with setsid (a session and
// group of its own, its parent still alive when the command exits), and through a double fork
// (its parent gone at once, so it is an orphan).
var daemonScripts = map[string]string{
	"setsid": `setsid sh -c 'echo $$ > "$0/daemon.tmp"; mv "$0/daemon.tmp" "$0/daemon"; exec sleep 600' "$0" &
while [ ! -e "$0/daemon" ]; do sleep 0.01; done`,
	"double fork": `( setsid sh -c 'sleep 600 & echo $! > "$0/daemon.tmp"; mv "$0/daemon.tmp" "$0/daemon"' "$0" & )
while [ ! -e "$0/daemon" ]; do sleep 0.01; done`,
}

// readDaemon returns the pid in dir/daemon.
func readDaemon(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "daemon"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestLockKillsWhatTheCommandDaemonized: what a command starts in a session of its own (setsid,
// a daemon's double fork) is killed when the command exits, as what it leaves in its group is:
// the lock is free once simba lock exits, and a process of the command's still running would
// overlap the next holder's. Before, the supervisor killed the command's process group only,
// and the daemon outlived simba (trial 32).
func TestLockKillsWhatTheCommandDaemonized(t *testing.T) {
	bin := simbaBinary(t)
	for how, script := range daemonScripts {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(bin, "lock", "-dsn", "sqlite://"+filepath.Join(dir, "simba.db"), "-name", "job", "-ttl", "2s",
				"--", "sh", "-c", script, dir)
			// A file, not a pipe: a daemon that kept the pipe would hold cmd.Wait too.
			log, err := os.Create(filepath.Join(dir, "simba.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			cmd.Stdout, cmd.Stderr = log, log
			if err := cmd.Run(); err != nil {
				out, _ := os.ReadFile(log.Name())
				t.Fatalf("simba lock: %v\n%s", err, out)
			}
			pid := readDaemon(t, dir)
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("the command's daemon (%s, pid %d) outlives simba lock, which exited 0 and freed the lock", how, pid)
			}
		})
	}
}

// TestKilledSimbaStopsWhatTheCommandDaemonized: simba killed by SIGKILL while its command runs
// has the supervisor stop the command's group and what the command started outside it.
func TestKilledSimbaStopsWhatTheCommandDaemonized(t *testing.T) {
	bin := simbaBinary(t)
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "simba.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, "lock", "-dsn", "sqlite://"+filepath.Join(dir, "simba.db"), "-name", "job", "-ttl", "2s",
		"-grace", "1s", "--", "sh", "-c", daemonScripts["setsid"]+"\nsleep 600", dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitFor(30*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "daemon")); return err == nil }) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out, _ := os.ReadFile(log.Name())
		t.Fatalf("the command started no daemon within 30 s; simba printed:\n%s", out)
	}
	pid := readDaemon(t, dir)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if !waitFor(30*time.Second, func() bool { return !alive(pid) }) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the command's daemon (pid %d) outlives a SIGKILLed simba by 30 s", pid)
	}
}

// TestAdoptedOrphansAreReaped: what the command's descendants leave behind is reparented to
// the supervisor (its subreaper), and each of those that exits while the command runs is
// reaped: a long `simba run` whose command daemonizes helpers again and again would otherwise
// hold their zombies, and their pids, until it ends.
func TestAdoptedOrphansAreReaped(t *testing.T) {
	bin := simbaBinary(t)
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "simba.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	const orphans = 20
	script := `for i in $(seq ` + strconv.Itoa(orphans) + `); do ( setsid sh -c 'sleep 0.1' & ); done
sleep 1; touch "$0/spawned"; exec sleep 600`
	cmd := exec.Command(bin, "lock", "-dsn", "sqlite://"+filepath.Join(dir, "simba.db"), "-name", "job", "-ttl", "2s",
		"--", "sh", "-c", script, dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if !waitFor(30*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "spawned")); return err == nil }) {
		out, _ := os.ReadFile(log.Name())
		t.Fatalf("the command did not start its orphans within 30 s; simba printed:\n%s", out)
	}
	// The supervisor is simba's child; its zombies are its children in state Z.
	zombies := func() (supervisor, n int) {
		kids, state := procTable()
		for _, s := range kids[cmd.Process.Pid] {
			supervisor = s
			for _, k := range kids[s] {
				if state[k] == 'Z' {
					n++
				}
			}
		}
		return supervisor, n
	}
	var sup, n int
	if !waitFor(30*time.Second, func() bool { sup, n = zombies(); return sup != 0 && n == 0 }) {
		t.Fatalf("the supervisor (pid %d) holds %d zombies of the %d orphans its command left behind", sup, n, orphans)
	}
}

// TestTermTrapRunsOnce: simba stopped by SIGTERM gives its command one SIGTERM, so a shell's
// TERM trap runs once. Since the supervisor signals what the command daemonized as well
// (signalAll), it sent the command's own processes a second SIGTERM right after the group's:
// a cleanup trap that took any time ran twice.
func TestTermTrapRunsOnce(t *testing.T) {
	bin := simbaBinary(t)
	dir := t.TempDir()
	script := `trap 'echo trap >> "$0/traps"; sleep 0.2; exit 7' TERM
echo ready > "$0/ready.tmp"; mv "$0/ready.tmp" "$0/ready"
sleep 600 & wait`
	cmd := exec.Command(bin, "lock", "-dsn", "sqlite://"+filepath.Join(dir, "simba.db"), "-name", "job", "-ttl", "2s",
		"--", "sh", "-c", script, dir)
	log, err := os.Create(filepath.Join(dir, "simba.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("the command did not start within 30 s:\n%s", out)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	out, _ := os.ReadFile(log.Name())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Errorf("simba lock after SIGTERM: %v; want the command's exit status 7\n%s", err, out)
	}
	traps, err := os.ReadFile(filepath.Join(dir, "traps"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(traps), "trap\n"); n != 1 {
		t.Errorf("the command's TERM trap ran %d times; want once\n%s", n, out)
	}
}

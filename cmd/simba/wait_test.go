//go:build unix

package main

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
)

// waitHolderScript is the command of the simba that holds the name in the -wait tests: it
// records its token in <dir>/holder.<tag> and runs until simba stops it.
const waitHolderScript = `echo "$SIMBA_TOKEN" > "$0/holder.$1.tmp" && mv "$0/holder.$1.tmp" "$0/holder.$1"; exec sleep 600`

// waitJobScript is the job of the -wait tests: it appends its pid to <dir>/ran, then runs until
// <dir>/release exists, and exits 5.
const waitJobScript = `echo $$ >> "$0/ran"; while [ ! -e "$0/release" ]; do sleep 0.05; done; exit 5`

// simbaProc is a simba process started by a -wait test.
type simbaProc struct {
	cmd    *exec.Cmd
	out    *testenv.LogBuffer
	exited chan struct{}
}

// startSimba starts the simba binary with args and no $SIMBA_DSN; the test's cleanup stops it
// (SIGTERM) if it still runs.
func startSimba(t *testing.T, args ...string) *simbaProc {
	t.Helper()
	p := &simbaProc{cmd: exec.Command(simbaBinary(t), args...), out: &testenv.LogBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "SIMBA_DSN=")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.exited
		}
	})
	return p
}

// status waits for p to exit and returns its exit status.
func (p *simbaProc) status(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("simba %q still runs after a minute:\n%s", p.cmd.Args[1:], p.out)
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitDB makes a SQLite database with Simba's schema in a new directory and returns the
// directory and its DSN.
func waitDB(t *testing.T) (dir, dsn string) {
	t.Helper()
	dir = t.TempDir()
	dsn = "sqlite://" + filepath.Join(dir, "simba.db")
	if _, stderr, status := runSimba(t, "migrate", "-dsn", dsn); status != 0 {
		t.Fatalf("simba migrate: exit status %d: %s", status, stderr)
	}
	return dir, dsn
}

// countRows returns the number of rows of table in the SQLite database dir/simba.db.
func countRows(t *testing.T, dir, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "simba.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ranCount returns the number of times waitJobScript ran in dir.
func ranCount(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "ran"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// holdName starts `simba cmd -name job -- waitHolderScript` and waits until its command runs.
func holdName(t *testing.T, cmd, dir, dsn, tag string) *simbaProc {
	t.Helper()
	p := startSimba(t, cmd, "-dsn", dsn, "-name", "job", "-ttl", "2s", "--", "sh", "-c", waitHolderScript, dir, tag)
	if !waitFor(30*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "holder."+tag)); return err == nil }) {
		t.Fatalf("simba %s never ran its command:\n%s", cmd, p.out)
	}
	return p
}

// TestWaitZeroWhileHeld: lock -wait 0 and run -wait 0 while another simba holds the name exit
// 75 without running CMD, naming the holder on stderr (one line), and leave no session or
// waiter behind. Old code: -wait is an unknown flag (exit 2).
func TestWaitZeroWhileHeld(t *testing.T) {
	for _, cmd := range []string{"lock", "run"} {
		t.Run(cmd, func(t *testing.T) {
			dir, dsn := waitDB(t)
			holdName(t, cmd, dir, dsn, "a")
			_, stderr, status := runSimba(t, cmd, "-dsn", dsn, "-name", "job", "-wait", "0", "--", "sh", "-c", waitJobScript, dir)
			if status != exitNotAcquired || ranCount(t, dir) != 0 {
				t.Fatalf("simba %s -wait 0 while held: exit status %d, job ran %d times, stderr %q; want %d, 0 runs",
					cmd, status, ranCount(t, dir), stderr, exitNotAcquired)
			}
			if !strings.HasPrefix(stderr, "simba: lock job held by ") || !strings.Contains(stderr, "sh not run (-wait 0)") ||
				strings.Count(stderr, "\n") != 1 {
				t.Errorf("simba %s -wait 0 while held: stderr %q, want one line naming the holder", cmd, stderr)
			}
			if n, w := countRows(t, dir, "simba_session"), countRows(t, dir, "simba_waiter"); n != 1 || w != 0 {
				t.Errorf("after simba %s -wait 0: %d sessions and %d waiters, want the holder's session only", cmd, n, w)
			}
		})
	}
}

// TestWaitRunsOutWhileHeld: lock -wait 300ms and run -wait 300ms while the name is held for
// longer exit 75 without running CMD and leave no waiter behind: the holder's next waiter,
// queued before them, takes the name when the holder stops. Old code: exit 2 (unknown flag).
func TestWaitRunsOutWhileHeld(t *testing.T) {
	for _, cmd := range []string{"lock", "run"} {
		t.Run(cmd, func(t *testing.T) {
			dir, dsn := waitDB(t)
			holder := holdName(t, cmd, dir, dsn, "a")
			next := startSimba(t, cmd, "-dsn", dsn, "-name", "job", "-ttl", "2s", "--", "sh", "-c", waitHolderScript, dir, "b")
			if !waitFor(30*time.Second, func() bool { return countRows(t, dir, "simba_waiter") == 1 }) {
				t.Fatalf("the second simba %s never queued:\n%s", cmd, next.out)
			}
			_, stderr, status := runSimba(t, cmd, "-dsn", dsn, "-name", "job", "-wait", "300ms", "--", "sh", "-c", waitJobScript, dir)
			if status != exitNotAcquired || ranCount(t, dir) != 0 {
				t.Fatalf("simba %s -wait 300ms while held: exit status %d, job ran %d times, stderr %q; want %d, 0 runs",
					cmd, status, ranCount(t, dir), stderr, exitNotAcquired)
			}
			if !strings.Contains(stderr, "job not taken within -wait 300ms (held by ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("simba %s -wait 300ms while held: stderr %q, want one line naming the holder", cmd, stderr)
			}
			if n, w := countRows(t, dir, "simba_session"), countRows(t, dir, "simba_waiter"); n != 2 || w != 1 {
				t.Errorf("after simba %s -wait 300ms: %d sessions and %d waiters, want 2 and 1 (the holder and its next waiter)", cmd, n, w)
			}
			holder.cmd.Process.Signal(syscall.SIGTERM)
			if s := holder.status(t); s != 143 {
				t.Errorf("holder stopped by SIGTERM: exit status %d, want 143:\n%s", s, holder.out)
			}
			if !waitFor(30*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "holder.b")); return err == nil }) {
				t.Fatalf("the next waiter never ran its command after the holder stopped:\n%s", next.out)
			}
			a, _ := os.ReadFile(filepath.Join(dir, "holder.a"))
			b, _ := os.ReadFile(filepath.Join(dir, "holder.b"))
			var ta, tb int64
			fmt.Sscan(string(a), &ta)
			fmt.Sscan(string(b), &tb)
			if tb <= ta {
				t.Errorf("tokens: holder %d, next waiter %d; want the waiter's greater", ta, tb)
			}
		})
	}
}

// TestWaitZeroWhenFree: lock -wait 0 and run -wait 0 on a free name run CMD and exit with its
// status. Old code: exit 2 (unknown flag), CMD not run.
func TestWaitZeroWhenFree(t *testing.T) {
	for _, cmd := range []string{"lock", "run"} {
		t.Run(cmd, func(t *testing.T) {
			dir, dsn := waitDB(t)
			if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			_, stderr, status := runSimba(t, cmd, "-dsn", dsn, "-name", "job", "-wait", "0", "--", "sh", "-c", waitJobScript, dir)
			if status != 5 || ranCount(t, dir) != 1 {
				t.Errorf("simba %s -wait 0 on a free name: exit status %d, job ran %d times, stderr %q; want CMD's 5, one run",
					cmd, status, ranCount(t, dir), stderr)
			}
		})
	}
}

// TestWaitZeroCronSingleton: N simba lock -wait 0 (and run -wait 0) started at once, as N cron
// hosts fire, run the job exactly once; the others exit 75. Old code: exit 2 for all (unknown
// flag); without -wait, each would run the job in its turn.
func TestWaitZeroCronSingleton(t *testing.T) {
	const n = 4
	for _, cmd := range []string{"lock", "run"} {
		t.Run(cmd, func(t *testing.T) {
			dir, dsn := waitDB(t)
			procs := make([]*simbaProc, n)
			for i := range procs {
				procs[i] = startSimba(t, cmd, "-dsn", dsn, "-name", "job", "-wait", "0", "--", "sh", "-c", waitJobScript, dir)
			}
			exited := func() (k int) {
				for _, p := range procs {
					select {
					case <-p.exited:
						k++
					default:
					}
				}
				return k
			}
			// The job runs until released: the others have all tried while it held the name.
			waitFor(60*time.Second, func() bool { return exited() == n || (exited() == n-1 && ranCount(t, dir) == 1) })
			if exited() != n-1 || ranCount(t, dir) != 1 {
				t.Fatalf("%d of %d exited, job ran %d times; want %d exited and one run", exited(), n, ranCount(t, dir), n-1)
			}
			if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			statuses := map[int]int{}
			for _, p := range procs {
				s := p.status(t)
				statuses[s]++
				if s != 5 && s != exitNotAcquired {
					t.Errorf("simba %s -wait 0: exit status %d:\n%s", cmd, s, p.out)
				}
			}
			if ranCount(t, dir) != 1 || statuses[5] != 1 || statuses[exitNotAcquired] != n-1 {
				t.Errorf("job ran %d times, exit statuses %v; want one run, one 5 and %d times %d", ranCount(t, dir), statuses, n-1, exitNotAcquired)
			}
		})
	}
}

// TestWaitInterrupted: SIGINT during lock -wait 10m keeps exit status 130, without running CMD.
func TestWaitInterrupted(t *testing.T) {
	dir, dsn := waitDB(t)
	holdName(t, "lock", dir, dsn, "a")
	p := startSimba(t, "lock", "-dsn", dsn, "-name", "job", "-wait", "10m", "--", "sh", "-c", waitJobScript, dir)
	queued := func() bool { return countRows(t, dir, "simba_waiter") == 1 }
	if !waitFor(30*time.Second, func() bool {
		select {
		case <-p.exited:
			return true
		default:
			return queued()
		}
	}) || !queued() {
		t.Fatalf("simba lock -wait 10m never queued:\n%s", p.out)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if s := p.status(t); s != 130 || ranCount(t, dir) != 0 {
		t.Errorf("simba lock -wait 10m after SIGINT: exit status %d, job ran %d times; want 130, 0:\n%s", s, ranCount(t, dir), p.out)
	}
	if w := countRows(t, dir, "simba_waiter"); w != 0 {
		t.Errorf("after SIGINT: %d waiters left", w)
	}
}

// TestWaitBadValue: a negative or malformed -wait is a usage error (exit 2).
func TestWaitBadValue(t *testing.T) {
	for _, v := range []string{"-1s", "soon"} {
		_, stderr, status := runSimba(t, "lock", "-dsn", "sqlite://"+filepath.Join(t.TempDir(), "x.db"), "-name", "job", "-wait", v, "--", "true")
		if status != 2 || !strings.Contains(stderr, "-wait") {
			t.Errorf("simba lock -wait %s: exit status %d, stderr %q; want 2 naming -wait", v, status, stderr)
		}
	}
}

// TestWaitUnreachableIsAnError: with no server to reach (a port nothing listens on), -wait 0
// and -wait 300ms exit 1, an error, not 75: nobody was found holding the name.
func TestWaitUnreachableIsAnError(t *testing.T) {
	for _, cmd := range []string{"lock", "run"} {
		for _, w := range []string{"0", "300ms"} {
			_, stderr, status := runSimba(t, cmd, "-dsn", "redis://127.0.0.1:1/0", "-name", "job", "-wait", w, "--", "true")
			if status != 1 {
				t.Errorf("simba %s -wait %s at an unreachable backend: exit status %d, want 1:\n%s", cmd, w, status, stderr)
			}
		}
	}
}

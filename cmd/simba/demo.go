//go:build unix

package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	sqlbackend "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencesql"
	"github.com/simba-go/simba/internal/sqlitebusy"
	"github.com/simba-go/simba/spi"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

// The demo runs real worker processes (this binary, as `simba demo-worker`) that elect a
// leader on the backend. The leader appends to a ledger table in a SQLite file, the fenced
// resource, through fencesql: a write whose token is lower than the highest the ledger has seen
// is rolled back with fence.ErrStaleToken. The demo kills the first leader with SIGKILL, then
// pauses the next one with SIGSTOP past its TTL and resumes it, and shows the failovers and the
// stale write the fence rejects; at the end it reads the ledger back to show that its tokens
// never went back.

const demoElection = "demo-leader"

func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dsn := fs.String("dsn", "", "backend DSN (default: sqlite:// on a file in a temporary directory)")
	workers := fs.Int("workers", 3, "worker processes")
	ttl := fs.Duration("ttl", 2*time.Second, "session TTL of the workers ("+ttlRange+")")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *workers < 3 {
		return badUsage("-workers must be at least 3 (one is killed, one paused)")
	}
	if err := checkTTL(*ttl, false); err != nil {
		return err
	}
	if *dsn != "" {
		if err := checkSQLiteFile(*dsn, false); err != nil {
			return err
		}
		// A DSN that cannot work is a usage error before the demo says what it runs on
		// (opening does no I/O: the backend only parses the DSN), and so is a -ttl the
		// backend can never serve (a ZooKeeper tickTime of half the TTL or more, an etcd TTL
		// under 1s), which every worker's simba.New would refuse.
		b, err := openDSN(ctx, *dsn)
		if err != nil {
			return err
		}
		err = spi.CheckTTL(b, *ttl)
		b.Close()
		if err != nil {
			return usageError{err}
		}
	}
	dir, err := os.MkdirTemp("", "simba-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *dsn == "" {
		*dsn = "sqlite://" + filepath.Join(dir, "simba.db")
	}
	resource := filepath.Join(dir, "ledger.db")
	fmt.Printf("simba demo: %d worker processes electing %q on %s (TTL %v)\n", *workers, demoElection, dsnutil.Redact(*dsn), *ttl)
	if err := prepare(ctx, *dsn, func(b spi.Backend) error { return checkSession(ctx, b, *dsn, "simba-demo-check", *ttl) }); err != nil {
		return err
	}
	if err := prepareLedger(ctx, resource); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	lines := make(chan workerLine, 256)
	procs := map[string]*exec.Cmd{}
	defer func() {
		for _, p := range procs {
			if p.ProcessState == nil {
				_ = p.Process.Signal(syscall.SIGCONT)
				_ = p.Process.Kill()
				_ = p.Wait()
			}
		}
	}()
	for i := 1; i <= *workers; i++ {
		owner := fmt.Sprintf("worker-%d", i)
		cmd := exec.Command(self, "demo-worker", "-dsn", *dsn, "-owner", owner, "-ttl", ttl.String(), "-ledger", resource)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", owner, err)
		}
		procs[owner] = cmd
		go readLines(owner, out, lines)
	}

	d := &demoRun{lines: lines, procs: procs, ttl: *ttl}
	start := time.Now()
	limit := 10**ttl + 10*time.Second
	// 1. A first leader.
	first, err := d.waitElected(ctx, 0, "", limit)
	if err != nil {
		return err
	}
	fmt.Printf("%6.2fs  %s leads with token %d\n", time.Since(start).Seconds(), first.owner, first.token)
	d.waitWrites(ctx, first.owner, 3, limit)

	// 2. SIGKILL it: no release, no goodbye. Its session expires after the TTL.
	fmt.Printf("%6.2fs  SIGKILL %s\n", time.Since(start).Seconds(), first.owner)
	killedAt := time.Now()
	_ = procs[first.owner].Process.Kill()
	second, err := d.waitElected(ctx, first.token, first.owner, limit)
	if err != nil {
		return err
	}
	fmt.Printf("%6.2fs  %s leads with token %d (failover in %v after the kill; TTL %v)\n",
		time.Since(start).Seconds(), second.owner, second.token, time.Since(killedAt).Round(time.Millisecond), *ttl)
	d.waitWrites(ctx, second.owner, 3, limit)

	// 3. SIGSTOP the new leader past its TTL (a long GC pause, a frozen VM), then resume it.
	if err := d.pauseInGap(ctx, *dsn, second.owner, limit); err != nil {
		return err
	}
	fmt.Printf("%6.2fs  SIGSTOP %s\n", time.Since(start).Seconds(), second.owner)
	// Another worker: the paused one may have taken the lease again while it was resumed
	// to finish a write (see pausedOutsideWrite); it loses it past its TTL like any.
	third, err := d.waitElected(ctx, second.token, second.owner, limit)
	if err != nil {
		return err
	}
	fmt.Printf("%6.2fs  %s leads with token %d while %s is paused\n", time.Since(start).Seconds(), third.owner, third.token, second.owner)
	d.waitWrites(ctx, third.owner, 3, limit)
	fmt.Printf("%6.2fs  SIGCONT %s\n", time.Since(start).Seconds(), second.owner)
	_ = procs[second.owner].Process.Signal(syscall.SIGCONT)
	d.drain(ctx, 2**ttl)

	// 4. Stop everyone gracefully.
	for owner, p := range procs {
		if owner != first.owner {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
	d.drain(ctx, 2*time.Second)
	for owner, p := range procs {
		if owner != first.owner {
			_ = p.Wait()
		}
	}

	fmt.Printf("\nleaders (token order): ")
	for i, e := range d.elected {
		if i > 0 {
			fmt.Print(" → ")
		}
		fmt.Printf("%s#%d", e.owner, e.token)
	}
	fmt.Printf("\nfenced resource (fencesql on %s): %s accepted, %s rejected\n", resource, plural(d.accepted, "write"), plural(len(d.rejected), "stale write"))
	for _, r := range d.rejected {
		fmt.Printf("  rejected: %s\n", r)
	}
	for i := 1; i < len(d.elected); i++ {
		if d.elected[i].token <= d.elected[i-1].token {
			return fmt.Errorf("fencing tokens did not increase: %v", d.elected)
		}
	}
	rows, err := checkLedger(ctx, resource)
	if err != nil {
		return err
	}
	fmt.Println("tokens strictly increased across every failover.")
	fmt.Printf("the ledger read back: %s (a killed worker's last write may have gone unreported), tokens never going back: no stale write reached the resource.\n", plural(rows, "row"))
	return nil
}

// pausedOutsideWrite makes sure, on a SQLite backend, that the worker p just stopped with
// SIGSTOP does not keep SQLite's write lock on the file: a process stopped inside one of its
// writes keeps it (see package backend/sql), so no other worker could write — keep-alives and
// the next leader's acquire included — until it runs again, and the demo would wait for a new
// leader in vain. It takes the write lock itself (BEGIN IMMEDIATE, rolled back at once),
// waiting up to writeLockWait: the running workers hold it for a statement's time, the stopped
// one for good. If it cannot, it lets p finish its write (SIGCONT), stops it again and looks
// again. A running worker slow enough to hold the lock that long costs p a short resume, well
// inside its TTL. Other backends have no such lock.
//
// It waits until p has stopped, on every backend.
func pausedOutsideWrite(ctx context.Context, dsn, owner string, p *exec.Cmd) error {
	if !strings.HasPrefix(dsn, "sqlite://") && !strings.HasPrefix(dsn, "sqlite3://") {
		return waitStopped(p)
	}
	name, err := sqlbackend.SQLiteDSN(dsn)
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return err
	}
	defer db.Close()
	const writeLockWait = 200 * time.Millisecond
	for {
		// kill(2) returns before every thread of p has stopped: one inside a system call (a
		// file lock's, say) finishes it first. Look only once p is stopped for good.
		if err := waitStopped(p); err != nil {
			return err
		}
		free, err := writeLockFree(ctx, db, writeLockWait)
		if err != nil || free {
			return err
		}
		fmt.Printf("          %s stopped inside a write to the SQLite file, keeping its write lock: SIGCONT, SIGSTOP again\n", owner)
		_ = p.Process.Signal(syscall.SIGCONT)
		time.Sleep(20 * time.Millisecond)
		_ = p.Process.Signal(syscall.SIGSTOP)
	}
}

// pauseInGap stops the leading worker owner with SIGSTOP inside the gap between its check of its
// term and its next write (demoGap; the worker reports each gap's start as a "gap" line), the
// moment a real pause does its harm: resumed past its TTL, the worker writes with the term it
// checked before the pause, and the fence must refuse that write. A SIGSTOP sent at a line of
// the worker's lands in that gap only most of the time (the parent may read the line late, on
// a loaded machine), so once the worker has stopped, the gap is checked to be still open: the
// worker's sleep began after the gap's start and lasts demoGap, so a worker stopped within
// demoGap of the start (with a margin) has not written yet. Otherwise it goes on (SIGCONT) and
// the next gap is tried.
func (d *demoRun) pauseInGap(ctx context.Context, dsn, owner string, limit time.Duration) error {
	p := d.procs[owner]
	deadline := time.Now().Add(limit)
	for {
		seen := d.gaps[owner]
		var at time.Time
		if !d.pump(ctx, time.Until(deadline), func(election, bool) bool { at = d.gaps[owner]; return at.After(seen) }) {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%s reported no check of its term in time", owner)
		}
		_ = p.Process.Signal(syscall.SIGSTOP)
		if err := pausedOutsideWrite(ctx, dsn, owner, p); err != nil {
			return err
		}
		if time.Since(at) < demoGap*3/4 {
			return nil
		}
		_ = p.Process.Signal(syscall.SIGCONT)
	}
}

// waitStopped waits until the child p has stopped (every thread of it: the kernel reports
// the stop to the parent once the group stop is complete).
func waitStopped(p *exec.Cmd) error {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(p.Process.Pid, &ws, syscall.WUNTRACED, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("waiting for %d to stop: %w", p.Process.Pid, err)
		case ws.Stopped():
			return nil
		default:
			return fmt.Errorf("worker %d ended instead of stopping: %v", p.Process.Pid, ws)
		}
	}
}

// writeLockFree reports whether a write transaction on db can begin within wait.
func writeLockFree(ctx context.Context, db *sql.DB, wait time.Duration) (bool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", wait.Milliseconds())); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		if sqlitebusy.Is(err) {
			return false, nil
		}
		return false, err
	}
	_, err = conn.ExecContext(ctx, "ROLLBACK")
	return true, err
}

// demoLedgerResource is the fenced resource's name in the ledger's simba_fence table.
const demoLedgerResource = "demo-ledger"

// openLedger opens the SQLite file that plays the fenced resource.
func openLedger(path string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
}

// prepareLedger creates the fenced resource: Simba's migrations (0002_fence brings the
// simba_fence table fencesql needs) and the ledger table the leaders append to.
func prepareLedger(ctx context.Context, path string) error {
	if err := prepare(ctx, "sqlite://"+path, nil); err != nil {
		return err
	}
	db, err := openLedger(path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE TABLE demo_ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, writer TEXT NOT NULL, token INTEGER NOT NULL)")
	return err
}

// checkLedger reads the ledger back in the order the rows were written and fails if a token
// ever went back; it returns the number of rows.
func checkLedger(ctx context.Context, path string) (int, error) {
	db, err := openLedger(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT writer, token FROM demo_ledger ORDER BY id")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n, last := 0, int64(0)
	for rows.Next() {
		var writer string
		var token int64
		if err := rows.Scan(&writer, &token); err != nil {
			return 0, err
		}
		if token < last {
			return 0, fmt.Errorf("the ledger's row %d, by %s, has token %d after token %d: a stale write got through", n+1, writer, token, last)
		}
		n, last = n+1, token
	}
	return n, rows.Err()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// prepare applies the schema when dsn's backend has one, then runs check (if not nil) on the
// same backend before closing it.
func prepare(ctx context.Context, dsn string, check func(spi.Backend) error) error {
	b, err := openDSN(ctx, dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	if m, ok := b.(interface{ Migrate(context.Context) error }); ok {
		if err := m.Migrate(ctx); err != nil {
			return fmt.Errorf("migrating %s: %w", dsnutil.Redact(dsn), err)
		}
	}
	if check != nil {
		return check(b)
	}
	return nil
}

type workerLine struct {
	owner string
	text  string
}

func readLines(owner string, r io.Reader, out chan<- workerLine) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		out <- workerLine{owner, sc.Text()}
	}
}

type election struct {
	owner string
	token int64
}

// demoRun is the parent's view: the elections seen, and the writes the workers report.
type demoRun struct {
	lines    <-chan workerLine
	procs    map[string]*exec.Cmd
	ttl      time.Duration
	elected  []election
	writes   map[string]int
	accepted int
	rejected []string
	gaps     map[string]time.Time // the start of each worker's last gap between check and write
}

// demoGap is how long a leading worker waits between checking its term and writing: the
// "check, then act" gap where a pause lands in the demo (pauseInGap).
const demoGap = 100 * time.Millisecond

// handle applies one worker line: `elected TOKEN`, `revoked TOKEN REASON`, `write TOKEN SEQ`
// (the ledger took it), `fenced TOKEN HIGHEST` (the ledger refused it), `gap TOKEN UNIXNANO`
// (the worker found its term valid at that time and waits demoGap before its write).
func (d *demoRun) handle(l workerLine) (election, bool) {
	f := strings.Fields(l.text)
	if len(f) < 2 {
		return election{}, false
	}
	token, _ := strconv.ParseInt(f[1], 10, 64)
	switch f[0] {
	case "elected":
		e := election{l.owner, token}
		d.elected = append(d.elected, e)
		return e, true
	case "revoked":
		fmt.Printf("          %s lost token %d (%s)\n", l.owner, token, strings.Join(f[2:], " "))
	case "fenced":
		highest := "?"
		if len(f) > 2 {
			highest = f[2]
		}
		msg := fmt.Sprintf("write from %s with token %d; the resource has seen token %s", l.owner, token, highest)
		fmt.Printf("          FENCED: %s\n", msg)
		d.rejected = append(d.rejected, msg)
	case "gap":
		if len(f) > 2 {
			if ns, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				if d.gaps == nil {
					d.gaps = map[string]time.Time{}
				}
				d.gaps[l.owner] = time.Unix(0, ns)
			}
		}
	case "write":
		d.accepted++
		if d.writes == nil {
			d.writes = map[string]int{}
		}
		d.writes[l.owner]++
	}
	return election{}, false
}

// pump handles worker lines until stop, given each line's election (if it reported one),
// says so, ctx ends or dur passes. It reports whether stop said so.
func (d *demoRun) pump(ctx context.Context, dur time.Duration, stop func(e election, elected bool) bool) bool {
	timeout := time.After(dur)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timeout:
			return false
		case l := <-d.lines:
			if stop(d.handle(l)) {
				return true
			}
		}
	}
}

// waitElected waits for an election with a token above after, of a worker other than not.
func (d *demoRun) waitElected(ctx context.Context, after int64, not string, limit time.Duration) (election, error) {
	var won election
	if !d.pump(ctx, limit, func(e election, ok bool) bool { won = e; return ok && e.token > after && e.owner != not }) {
		if err := ctx.Err(); err != nil {
			return election{}, err
		}
		return election{}, errors.New("no new leader in time")
	}
	return won, nil
}

// waitWrites waits until owner has made n more accepted writes.
func (d *demoRun) waitWrites(ctx context.Context, owner string, n int, limit time.Duration) {
	want := d.writes[owner] + n
	d.pump(ctx, limit, func(election, bool) bool { return d.writes[owner] >= want })
}

// drain handles lines for a while.
func (d *demoRun) drain(ctx context.Context, dur time.Duration) {
	d.pump(ctx, dur, func(election, bool) bool { return false })
}

// demoWorker is one worker process: it campaigns and, while it leads, appends to the fenced
// ledger every 100 ms, reporting each write (or its refusal) on stdout.
func demoWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo-worker", flag.ContinueOnError)
	dsn := fs.String("dsn", "", "backend DSN")
	owner := fs.String("owner", "", "owner string")
	ttl := fs.Duration("ttl", 2*time.Second, "session TTL")
	ledgerPath := fs.String("ledger", "", "the fenced resource: a SQLite file with the ledger table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ledger, err := openLedger(*ledgerPath)
	if err != nil {
		return err
	}
	defer ledger.Close()
	fenced, err := fencesql.New(ledger, "sqlite")
	if err != nil {
		return err
	}
	b, err := openBackend(ctx, *dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithTTL(*ttl), simba.WithOwner(*owner))
	if err != nil {
		return err
	}
	out := make(chan string, 64)
	e, err := c.NewElection(demoElection,
		simba.OnElected(func(_ context.Context, t simba.Term) { out <- fmt.Sprintf("elected %d", t.Token()) }),
		simba.OnRevoked(func(_ context.Context, t simba.Term, r simba.RevokeReason) {
			out <- fmt.Sprintf("revoked %d %v", t.Token(), r)
		}),
		simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
			for seq := 1; ; seq++ {
				// Check, then act: the gap between the two is where a pause (SIGSTOP, GC)
				// lands, and why the resource checks the token itself.
				valid := t.IsValid()
				if !valid {
					return nil
				}
				out <- fmt.Sprintf("gap %d %d", t.Token(), time.Now().UnixNano())
				time.Sleep(demoGap)
				// The write ignores ctx on purpose: a process that was paused does not know
				// its term ended. The ledger decides, by the token.
				wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := fenced.Write(wctx, demoLedgerResource, t.Token(), func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO demo_ledger (writer, token) VALUES (?, ?)", *owner, t.Token())
					return err
				})
				cancel()
				var stale *fence.StaleTokenError
				switch {
				case errors.As(err, &stale):
					out <- fmt.Sprintf("fenced %d %d", t.Token(), stale.Highest)
				case err != nil:
					fmt.Fprintf(os.Stderr, "%s: ledger: %v\n", *owner, err)
				default:
					out <- fmt.Sprintf("write %d %d", t.Token(), seq)
				}
				if ctx.Err() != nil {
					return nil
				}
			}
		}))
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	for {
		select {
		case line := <-out:
			fmt.Println(line)
		case <-ctx.Done():
			closeCtx, cancel := context.WithTimeout(context.Background(), 2**ttl)
			defer cancel()
			return c.Close(closeCtx)
		}
	}
}

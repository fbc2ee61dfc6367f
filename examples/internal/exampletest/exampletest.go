// Package exampletest runs the examples' programs in tests: each program's run function runs in
// the background, its output goes to a shared Output, and the test waits for the lines it
// expects (event-driven: Expect returns as soon as the line is printed).
package exampletest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/internal/testenv"
)

// Patience bounds every wait of a test on an example's output: far longer than any failover
// takes (a few TTLs), so that reaching it means the example is broken, not slow.
const Patience = 90 * time.Second

// RunFunc is an example's program: it runs until ctx ends or its -for duration has passed.
type RunFunc func(ctx context.Context, args []string, stdout io.Writer) error

// Output collects the lines the programs of one test print, in the order they print them.
type Output struct {
	t      testing.TB
	mu     sync.Mutex
	lines  []string
	part   []byte
	next   int // the first line Expect has not consumed
	notify chan struct{}
}

// NewOutput returns an empty Output; the test's log gets every line when it fails.
func NewOutput(t testing.TB) *Output {
	o := &Output{t: t, notify: make(chan struct{}, 1)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output:\n%s", strings.Join(o.Lines(), "\n"))
		}
	})
	return o
}

// Write implements io.Writer, safe for concurrent use.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	o.part = append(o.part, p...)
	for {
		i := strings.IndexByte(string(o.part), '\n')
		if i < 0 {
			break
		}
		o.lines = append(o.lines, string(o.part[:i]))
		o.part = o.part[i+1:]
	}
	o.mu.Unlock()
	o.wake()
	return len(p), nil
}

func (o *Output) wake() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// Lines returns every complete line printed so far.
func (o *Output) Lines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lines...)
}

// Await waits until cond holds for the lines printed so far (checked after every write), and
// fails the test after Patience or when a program has failed.
func (o *Output) Await(what string, cond func(lines []string) bool) {
	o.t.Helper()
	deadline := time.After(Patience)
	for {
		if cond(o.Lines()) {
			return
		}
		if o.t.Failed() {
			o.t.FailNow()
		}
		select {
		case <-o.notify:
		case <-deadline:
			o.t.Fatalf("no %s after %v", what, Patience)
		}
	}
}

// Expect waits for the next line (after those earlier Expects consumed) that matches pattern,
// and returns its submatches.
func (o *Output) Expect(pattern string) []string {
	o.t.Helper()
	re := regexp.MustCompile(pattern)
	var m []string
	o.Await(fmt.Sprintf("line matching %q", pattern), func(lines []string) bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		for ; o.next < len(lines); o.next++ {
			if m = re.FindStringSubmatch(lines[o.next]); m != nil {
				o.next++
				return true
			}
		}
		return false
	})
	return m
}

// Program is one run of an example in the background.
type Program struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan error
}

// Start runs run with args in the background, printing to o. A run that returns an error fails
// the test; one still running when the test ends is stopped.
func (o *Output) Start(run RunFunc, args ...string) *Program {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Program{t: o.t, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := run(ctx, args, o)
		if err != nil {
			o.t.Errorf("run %q: %v", args, err)
		}
		p.done <- err
		o.wake()
	}()
	o.t.Cleanup(func() { p.Stop() })
	return p
}

// Stop cancels the program's context, as Ctrl-C does, and waits for it to return.
func (p *Program) Stop() {
	p.t.Helper()
	p.cancel()
	p.Wait()
}

// Wait waits for the program to return on its own (its -for has passed), failing the test if
// it returned an error.
func (p *Program) Wait() {
	p.t.Helper()
	select {
	case err, ok := <-p.done:
		if ok {
			close(p.done)
			if err != nil {
				p.t.Fatalf("run: %v", err)
			}
		}
	case <-time.After(Patience):
		p.t.Fatalf("the program did not return within %v", Patience)
	}
}

// Name returns a lease or group name of its own for this test run, so that concurrent runs of
// the same test on one server do not meet.
func Name(t testing.TB, prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// Token parses a fencing token an Expect matched, failing unless it is positive.
func Token(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("token %q is not a positive integer (%v)", s, err)
	}
	return n
}

// MySQL returns the MySQL/MariaDB test database as a mysql:// DSN (testenv gives it in
// go-sql-driver's form), skipping or failing as testenv.MySQL does when it is absent.
func MySQL(t testing.TB) string {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.User
	if cfg.Passwd != "" {
		user += ":" + cfg.Passwd
	}
	return fmt.Sprintf("mysql://%s@%s/%s", user, cfg.Addr, cfg.DBName)
}

// Failover is the test of a backend example: a program "a" leads with a positive token; a
// second program "b" becomes a candidate; when a stops (as on Ctrl-C), b leads with a greater
// token; a third program "c", run with a short -for while b leads, stays a candidate and
// returns on its own.
func Failover(t *testing.T, run RunFunc, dsn string) {
	name := Name(t, "example-leader")
	out := NewOutput(t)
	args := func(owner, runFor string) []string {
		return []string{"-dsn", dsn, "-name", name, "-owner", owner, "-for", runFor}
	}

	a := out.Start(run, args("a", "5m")...)
	tokA := Token(t, out.Expect(`^a leads ` + regexp.QuoteMeta(name) + ` with token (\d+)$`)[1])

	b := out.Start(run, args("b", "5m")...)
	out.Expect(`^b is a candidate for ` + regexp.QuoteMeta(name) + `$`)
	a.Stop()
	out.Expect(`^a stops leading ` + regexp.QuoteMeta(name))
	tokB := Token(t, out.Expect(`^b leads ` + regexp.QuoteMeta(name) + ` with token (\d+)$`)[1])
	if tokB <= tokA {
		t.Fatalf("b's token %d is not greater than a's %d", tokB, tokA)
	}

	c := out.Start(run, args("c", "2s")...)
	c.Wait()
	for _, l := range out.Lines() {
		if strings.HasPrefix(l, "c leads") {
			t.Fatalf("c led while b held the lease: %q", l)
		}
	}
	out.Expect(`^c is a candidate for `)
	b.Stop()
}
